// LayerNormForward / LayerNormBackward / LayerNorm against a naive float64 composition on the CPU
// (mean and biased variance by ATen reductions, gradients by autograd), on the device of the
// test binary (kernel_test.bzl).
#include "varuna/kernels/layer_norm.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/varuna/kernels/kernel_test_util.h"

namespace varuna::kernels {
namespace {

using testing::AllClose;
using testing::Magnitude;
using testing::RandomTensor;
using testing::ToleranceFor;
using testing::Unaligned;

constexpr double kEpsilon = 1e-5;

// Odd sizes and tails, the GPT-2 hidden sizes (1024, 1600, 3072), a row longer than the
// backward keeps in registers (8193, 16390: odd, scalar accesses), one longer than the forward
// keeps in registers (20000, 16390), h = 1, and more rows than one wave of blocks (20000 x 24).
// The longest register rows, 8192 (backward) and 16384 (forward), take blocks of 1024 threads.
const std::vector<std::vector<int64_t>>& Shapes() {
  static const std::vector<std::vector<int64_t>> shapes = {
      {3, 5, 7},  {2, 13, 1024}, {64, 1600}, {5, 3072},  {2, 8193}, {1, 1},
      {4096, 96}, {20000, 24},   {3, 20000}, {2, 16390}, {3, 8192}, {2, 16384}};
  return shapes;
}

struct Naive {
  at::Tensor output, mean, rstd, grad_input, grad_weight, grad_bias;
};

// The float64 composition: y = (x - mean) * rsqrt(var + eps) * w + b, backward by autograd.
Naive NaiveLayerNorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     const at::Tensor& grad_output) {
  const auto leaf = [](const at::Tensor& t) {
    return t.detach().to(at::kCPU, at::kDouble).clone().requires_grad_(true);
  };
  const at::Tensor x64 = leaf(x);
  const at::Tensor w64 = leaf(weight);
  const at::Tensor b64 = leaf(bias);
  const at::Tensor mean = x64.mean(/*dim=*/-1, /*keepdim=*/true);
  const at::Tensor var = (x64 - mean).pow(2).mean(/*dim=*/-1, /*keepdim=*/true);
  const at::Tensor rstd = at::rsqrt(var + kEpsilon);
  const at::Tensor y = (x64 - mean) * rstd * w64 + b64;
  y.backward(grad_output.to(at::kCPU, at::kDouble));
  return {
      y.detach(), mean.detach().reshape({-1}), rstd.detach().reshape({-1}), x64.grad(), w64.grad(),
      b64.grad()};
}

at::ScalarType StatisticsType(at::ScalarType dtype) {
  return dtype == at::kDouble ? at::kDouble : at::kFloat;
}

struct Inputs {
  at::Tensor x, weight, bias, grad_output;
};

// Fresh values, rounded to the dtypes under test on the CPU so both sides see the same numbers.
// x has a non-zero mean so that centering matters.
Inputs MakeInputs(const std::vector<int64_t>& shape, at::ScalarType dtype,
                  at::ScalarType weight_dtype, uint64_t seed) {
  const int64_t h = shape.back();
  return {RandomTensor(shape, seed, 2.0, 0.5).to(dtype),
          RandomTensor({h}, seed + 1, 0.5, 1.0).to(weight_dtype),
          RandomTensor({h}, seed + 2, 0.5).to(weight_dtype),
          RandomTensor(shape, seed + 3).to(dtype)};
}

class LayerNormTest : public testing::KernelTest {
 protected:
  // The explicit forward and backward on `device` against the naive composition, every shape.
  void CheckAgainstNaive(const c10::Device& device, at::ScalarType dtype,
                         at::ScalarType weight_dtype) {
    uint64_t seed = 100;
    for (const std::vector<int64_t>& shape : Shapes()) {
      std::ostringstream what;
      what << "x " << at::IntArrayRef(shape) << " " << dtype << ", weight " << weight_dtype;
      SCOPED_TRACE(what.str());
      const Inputs in = MakeInputs(shape, dtype, weight_dtype, seed += 10);
      ExpectMatchesNaive(in, {in.x.to(device), in.weight.to(device), in.bias.to(device),
                              in.grad_output.to(device)});
    }
  }

  // The op on `on_device` (the values of `in`, placed on the device under test) against the
  // naive composition of `in`.
  static void ExpectMatchesNaive(const Inputs& in, const Inputs& on_device) {
    const at::ScalarType dtype = in.x.scalar_type();
    const Naive naive = NaiveLayerNorm(in.x, in.weight, in.bias, in.grad_output);
    const LayerNormForwardResult forward =
        LayerNormForward(on_device.x, on_device.weight, on_device.bias, kEpsilon);
    ASSERT_EQ(forward.output.scalar_type(), dtype);
    ASSERT_EQ(forward.output.device(), on_device.x.device());
    ASSERT_EQ(forward.mean.scalar_type(), StatisticsType(dtype));
    ASSERT_EQ(forward.rstd.scalar_type(), StatisticsType(dtype));
    const testing::Tolerance stats = ToleranceFor(StatisticsType(dtype), 1.0);
    EXPECT_TRUE(AllClose(forward.output, naive.output, ToleranceFor(dtype, Magnitude(naive.output)),
                         "output"));
    EXPECT_TRUE(AllClose(forward.mean, naive.mean, {stats.rtol, stats.atol * Magnitude(naive.mean)},
                         "mean"));
    EXPECT_TRUE(AllClose(forward.rstd, naive.rstd, stats, "rstd"));

    const LayerNormGrads grads = LayerNormBackward(on_device.grad_output, on_device.x, forward.mean,
                                                   forward.rstd, on_device.weight);
    ASSERT_EQ(grads.input.scalar_type(), dtype);
    ASSERT_EQ(grads.weight.scalar_type(), in.weight.scalar_type());
    ASSERT_EQ(grads.bias.scalar_type(), in.weight.scalar_type());
    EXPECT_TRUE(AllClose(grads.input, naive.grad_input,
                         ToleranceFor(dtype, Magnitude(naive.grad_input)), "grad_input"));
    EXPECT_TRUE(AllClose(grads.weight, naive.grad_weight,
                         ToleranceFor(dtype, Magnitude(naive.grad_weight)), "grad_weight"));
    EXPECT_TRUE(AllClose(grads.bias, naive.grad_bias,
                         ToleranceFor(dtype, Magnitude(naive.grad_bias)), "grad_bias"));
  }
};

TEST_F(LayerNormTest, Float32MatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kFloat, at::kFloat);
}

TEST_F(LayerNormTest, Float64MatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kDouble, at::kDouble);
}

TEST_F(LayerNormTest, Float16MatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kHalf, at::kHalf);
}

TEST_F(LayerNormTest, BFloat16MatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kBFloat16, at::kBFloat16);
}

// Megatron's MixedFusedLayerNorm: half-precision activations, fp32 parameters and gradients.
TEST_F(LayerNormTest, Float16WithFloat32ParametersMatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kHalf, at::kFloat);
}

TEST_F(LayerNormTest, BFloat16WithFloat32ParametersMatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kBFloat16, at::kFloat);
}

TEST_F(LayerNormTest, AutogradOpMatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  uint64_t seed = 7;
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{3, 5, 7}, {4, 1600}, {2, 8193}}) {
      SCOPED_TRACE(::testing::Message() << "x " << at::IntArrayRef(shape) << " " << dtype);
      const at::ScalarType weight_dtype = at::kFloat;
      const Inputs in = MakeInputs(shape, dtype, weight_dtype, seed += 10);
      const Naive naive = NaiveLayerNorm(in.x, in.weight, in.bias, in.grad_output);
      const at::Tensor x = in.x.to(device).requires_grad_(true);
      const at::Tensor weight = in.weight.to(device).requires_grad_(true);
      const at::Tensor bias = in.bias.to(device).requires_grad_(true);
      const at::Tensor y = LayerNorm(x, weight, bias, kEpsilon);
      y.backward(in.grad_output.to(device));
      EXPECT_TRUE(
          AllClose(y, naive.output, ToleranceFor(dtype, Magnitude(naive.output)), "output"));
      EXPECT_TRUE(AllClose(x.grad(), naive.grad_input,
                           ToleranceFor(dtype, Magnitude(naive.grad_input)), "x.grad"));
      ASSERT_EQ(weight.grad().scalar_type(), weight_dtype);
      EXPECT_TRUE(AllClose(weight.grad(), naive.grad_weight,
                           ToleranceFor(dtype, Magnitude(naive.grad_weight)), "weight.grad"));
      EXPECT_TRUE(AllClose(bias.grad(), naive.grad_bias,
                           ToleranceFor(dtype, Magnitude(naive.grad_bias)), "bias.grad"));
    }
  }
}

TEST_F(LayerNormTest, NonContiguousInputsGiveTheSameResults) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  // [9, 40] as the transpose of a [40, 9] tensor: a non-contiguous x and grad_output.
  const at::Tensor x = RandomTensor({40, 9}, 1, 2.0, 0.5).to(device, at::kFloat).t();
  const at::Tensor grad_output = RandomTensor({40, 9}, 2).to(device, at::kFloat).t();
  const at::Tensor weight = RandomTensor({40}, 3, 0.5, 1.0).to(device, at::kFloat);
  const at::Tensor bias = RandomTensor({40}, 4).to(device, at::kFloat);
  ASSERT_FALSE(x.is_contiguous());
  const Naive naive = NaiveLayerNorm(x, weight, bias, grad_output);
  const LayerNormForwardResult forward = LayerNormForward(x, weight, bias, kEpsilon);
  EXPECT_TRUE(forward.output.is_contiguous());
  EXPECT_TRUE(AllClose(forward.output, naive.output,
                       ToleranceFor(at::kFloat, Magnitude(naive.output)), "output"));
  const LayerNormGrads grads =
      LayerNormBackward(grad_output, x, forward.mean, forward.rstd, weight);
  EXPECT_TRUE(grads.input.is_contiguous());
  EXPECT_TRUE(AllClose(grads.input, naive.grad_input,
                       ToleranceFor(at::kFloat, Magnitude(naive.grad_input)), "grad_input"));
  EXPECT_TRUE(AllClose(grads.weight, naive.grad_weight,
                       ToleranceFor(at::kFloat, Magnitude(naive.grad_weight)), "grad_weight"));
}

// h = 1024 allows vector accesses in every dtype, but one of the tensors the kernels read starts
// off a 16-byte boundary: the op must see it and take the scalar kernels (a vector access there
// is a misaligned-address fault on the GPU). Each tensor in turn, so no alignment check is missed.
TEST_F(LayerNormTest, UnalignedInputsMatchNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const std::pair<at::ScalarType, at::ScalarType> types[] = {
      {at::kFloat, at::kFloat}, {at::kHalf, at::kFloat}, {at::kBFloat16, at::kBFloat16}};
  for (const auto& [dtype, weight_dtype] : types) {
    for (const std::string which : {"x", "weight", "bias", "grad_output"}) {
      SCOPED_TRACE(::testing::Message()
                   << dtype << ", weight " << weight_dtype << ", " << which << " unaligned");
      const Inputs in = MakeInputs({5, 1024}, dtype, weight_dtype, 40);
      const auto place = [&](const at::Tensor& t, const char* name) {
        return which == name ? Unaligned(t.to(device)) : t.to(device);
      };
      const Inputs on_device = {place(in.x, "x"), place(in.weight, "weight"),
                                place(in.bias, "bias"), place(in.grad_output, "grad_output")};
      ExpectMatchesNaive(in, on_device);
    }
  }
}

// More rows than the backward has partial-sum rows (two per SM) and rows longer than it keeps in
// registers: each block of the streaming backward adds several rows into its workspace row.
TEST_F(LayerNormTest, StreamingBackwardAddsSeveralRowsPerBlock) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  if (device.is_cpu()) GTEST_SKIP() << "a CUDA launch-shape case; runs in the _gpu target";
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    SCOPED_TRACE(::testing::Message() << "x [300, 8200] " << dtype);
    const Inputs in = MakeInputs({300, 8200}, dtype, at::kFloat, 60);
    ExpectMatchesNaive(
        in, {in.x.to(device), in.weight.to(device), in.bias.to(device), in.grad_output.to(device)});
  }
}

TEST_F(LayerNormTest, RepeatedCallsAreBitwiseEqual) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{20000, 24}, {64, 1600}, {2, 8193}}) {
    SCOPED_TRACE(::testing::Message() << "x " << at::IntArrayRef(shape));
    const Inputs in = MakeInputs(shape, at::kFloat, at::kFloat, 5);
    const at::Tensor x = in.x.to(device);
    const at::Tensor weight = in.weight.to(device);
    const at::Tensor dy = in.grad_output.to(device);
    const LayerNormForwardResult f = LayerNormForward(x, weight, in.bias.to(device), kEpsilon);
    const LayerNormGrads a = LayerNormBackward(dy, x, f.mean, f.rstd, weight);
    const LayerNormGrads b = LayerNormBackward(dy, x, f.mean, f.rstd, weight);
    EXPECT_TRUE(at::equal(a.input, b.input));
    EXPECT_TRUE(at::equal(a.weight, b.weight));
    EXPECT_TRUE(at::equal(a.bias, b.bias));
  }
}

TEST_F(LayerNormTest, EmptyInputGivesEmptyResultsAndZeroParameterGradients) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::Tensor x = at::empty({0, 3, 8}, at::TensorOptions(device).dtype(at::kFloat));
  const at::Tensor weight = RandomTensor({8}, 1).to(device, at::kFloat);
  const at::Tensor bias = RandomTensor({8}, 2).to(device, at::kFloat);
  const LayerNormForwardResult forward = LayerNormForward(x, weight, bias, kEpsilon);
  EXPECT_EQ(forward.output.sizes(), x.sizes());
  EXPECT_EQ(forward.mean.sizes(), at::IntArrayRef({0}));
  EXPECT_EQ(forward.rstd.sizes(), at::IntArrayRef({0}));
  const LayerNormGrads grads = LayerNormBackward(x, x, forward.mean, forward.rstd, weight);
  EXPECT_EQ(grads.input.sizes(), x.sizes());
  EXPECT_TRUE(at::equal(grads.weight.cpu(), at::zeros({8}, at::kFloat)));
  EXPECT_TRUE(at::equal(grads.bias.cpu(), at::zeros({8}, at::kFloat)));
}

TEST_F(LayerNormTest, ForwardMisuseIsRejectedWithAClearMessage) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::TensorOptions f32 = at::TensorOptions(device).dtype(at::kFloat);
  const at::Tensor x = at::ones({3, 5}, f32);
  const at::Tensor w = at::ones({5}, f32);
  EXPECT_KERNEL_ERROR(
      LayerNormForward(x, at::ones({6}, f32), w, kEpsilon),
      "LayerNormForward: weight has shape [6] but x has shape [3, 5]; weight must be "
      "[h] = [5]");
  EXPECT_KERNEL_ERROR(LayerNormForward(x, w, at::ones({5, 1}, f32), kEpsilon),
                      "bias must be [h] = [5]");
  EXPECT_KERNEL_ERROR(LayerNormForward(x, at::ones({5}, f32.dtype(at::kHalf)), w, kEpsilon),
                      "weight is Half but x is Float; weight must be x's dtype or float32");
  EXPECT_KERNEL_ERROR(LayerNormForward(x.to(at::kHalf), w.to(at::kHalf), w, kEpsilon),
                      "bias is Float but weight is Half; they must have the same dtype");
  EXPECT_KERNEL_ERROR(LayerNormForward(x.to(at::kLong), w, w, kEpsilon),
                      "x must be float32, float16, bfloat16 or float64, got Long");
  EXPECT_KERNEL_ERROR(LayerNormForward(at::ones({}, f32), w, w, kEpsilon), "got a 0-dim tensor");
  EXPECT_KERNEL_ERROR(
      LayerNormForward(at::ones({3, 0}, f32), at::ones({0}, f32), at::ones({0}, f32), kEpsilon),
      "its last dim (the normalised one) must be at least 1");
  EXPECT_KERNEL_ERROR(LayerNormForward(x, w, w, -1.0), "epsilon is -1; it must be >= 0");
  EXPECT_KERNEL_ERROR(LayerNormForward(x, at::Tensor(), w, kEpsilon),
                      "weight is an undefined tensor");
}

TEST_F(LayerNormTest, BackwardMisuseIsRejectedWithAClearMessage) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::TensorOptions f32 = at::TensorOptions(device).dtype(at::kFloat);
  const at::Tensor x = at::ones({3, 5}, f32);
  const at::Tensor w = at::ones({5}, f32);
  const at::Tensor stat = at::ones({3}, f32);
  EXPECT_KERNEL_ERROR(LayerNormBackward(at::ones({3, 4}, f32), x, stat, stat, w),
                      "LayerNormBackward: grad_output has shape [3, 4] but x has shape [3, 5]");
  EXPECT_KERNEL_ERROR(LayerNormBackward(x.to(at::kHalf), x, stat, stat, w),
                      "grad_output is Half but x is Float");
  EXPECT_KERNEL_ERROR(LayerNormBackward(x, x, at::ones({15}, f32), stat, w),
                      "mean has shape [15] but x has 3 rows");
  EXPECT_KERNEL_ERROR(LayerNormBackward(x, x, stat, stat.to(at::kDouble), w),
                      "rstd is Double but must be Float");
  EXPECT_KERNEL_ERROR(LayerNormBackward(x, x, stat, stat, at::ones({4}, f32)),
                      "weight must be [h] = [5]");
}

}  // namespace
}  // namespace varuna::kernels
