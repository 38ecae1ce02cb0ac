// BiasGeluForward / BiasGeluBackward / BiasGelu against a naive float64 composition on the CPU
// (the tanh formula written out, gradients by autograd), on the device of the test binary
// (kernel_test.bzl).
#include "varuna/kernels/bias_gelu.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tests/varuna/kernels/kernel_test_util.h"

namespace varuna::kernels {
namespace {

using testing::AllClose;
using testing::Magnitude;
using testing::RandomTensor;
using testing::ToleranceFor;
using testing::Unaligned;

// Odd sizes and tails (n not a multiple of the vector width), the GPT-2 MLP widths (4h for
// h = 1024: 4096; 1600 and 3072 themselves), n = 1, and many rows (more than one wave of blocks).
const std::vector<std::vector<int64_t>>& Shapes() {
  static const std::vector<std::vector<int64_t>> shapes = {
      {3, 5, 7}, {2, 13, 1024}, {64, 1600}, {5, 3072},   {2, 8193},
      {1, 1},    {4096, 96},    {8, 4096},  {20000, 24}, {3000, 1}};
  return shapes;
}

struct Naive {
  at::Tensor output, grad_input, grad_bias;
};

// gelu(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))) in float64, backward by autograd.
Naive NaiveBiasGelu(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& grad_output) {
  const auto leaf = [](const at::Tensor& t) {
    return t.detach().to(at::kCPU, at::kDouble).clone().requires_grad_(true);
  };
  const at::Tensor x64 = leaf(x);
  const at::Tensor b64 = leaf(bias);
  const at::Tensor u = x64 + b64;
  const at::Tensor y =
      0.5 * u * (1.0 + at::tanh(std::sqrt(2.0 / std::acos(-1.0)) * (u + 0.044715 * u.pow(3))));
  y.backward(grad_output.to(at::kCPU, at::kDouble));
  return {y.detach(), x64.grad(), b64.grad()};
}

struct Inputs {
  at::Tensor x, bias, grad_output;
};

// Fresh values over GeLU's interesting range (about -6..6), rounded to `dtype` on the CPU so
// both sides see the same numbers.
Inputs MakeInputs(const std::vector<int64_t>& shape, at::ScalarType dtype, uint64_t seed) {
  return {RandomTensor(shape, seed, 2.0).to(dtype),
          RandomTensor({shape.back()}, seed + 1, 0.5, 0.1).to(dtype),
          RandomTensor(shape, seed + 2).to(dtype)};
}

class BiasGeluTest : public testing::KernelTest {
 protected:
  void CheckAgainstNaive(const c10::Device& device, at::ScalarType dtype) {
    uint64_t seed = 300;
    for (const std::vector<int64_t>& shape : Shapes()) {
      std::ostringstream what;
      what << "x " << at::IntArrayRef(shape) << " " << dtype;
      SCOPED_TRACE(what.str());
      const Inputs in = MakeInputs(shape, dtype, seed += 10);
      ExpectMatchesNaive(in, {in.x.to(device), in.bias.to(device), in.grad_output.to(device)});
    }
  }

  // The op on `on_device` (the values of `in`, placed on the device under test) against the
  // naive composition of `in`.
  static void ExpectMatchesNaive(const Inputs& in, const Inputs& on_device) {
    const at::ScalarType dtype = in.x.scalar_type();
    const Naive naive = NaiveBiasGelu(in.x, in.bias, in.grad_output);
    const at::Tensor output = BiasGeluForward(on_device.x, on_device.bias);
    ASSERT_EQ(output.scalar_type(), dtype);
    ASSERT_EQ(output.device(), on_device.x.device());
    EXPECT_TRUE(
        AllClose(output, naive.output, ToleranceFor(dtype, Magnitude(naive.output)), "output"));

    const BiasGeluGrads grads =
        BiasGeluBackward(on_device.grad_output, on_device.x, on_device.bias);
    ASSERT_EQ(grads.input.scalar_type(), dtype);
    ASSERT_EQ(grads.bias.scalar_type(), dtype);
    EXPECT_TRUE(AllClose(grads.input, naive.grad_input,
                         ToleranceFor(dtype, Magnitude(naive.grad_input)), "grad_input"));
    EXPECT_TRUE(AllClose(grads.bias, naive.grad_bias,
                         ToleranceFor(dtype, Magnitude(naive.grad_bias)), "grad_bias"));
  }
};

TEST_F(BiasGeluTest, Float32MatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kFloat);
}

TEST_F(BiasGeluTest, Float64MatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kDouble);
}

TEST_F(BiasGeluTest, Float16MatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kHalf);
}

TEST_F(BiasGeluTest, BFloat16MatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kBFloat16);
}

TEST_F(BiasGeluTest, MatchesLibTorchTanhGelu) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Inputs in = MakeInputs({6, 40}, at::kFloat, 11);
  const at::Tensor expected =
      at::gelu(in.x.to(at::kDouble) + in.bias.to(at::kDouble), /*approximate=*/"tanh");
  EXPECT_TRUE(AllClose(BiasGeluForward(in.x.to(device), in.bias.to(device)), expected,
                       ToleranceFor(at::kFloat, Magnitude(expected)), "output"));
}

TEST_F(BiasGeluTest, AutogradOpMatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  uint64_t seed = 9;
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{3, 5, 7}, {4, 2, 4096}}) {
      SCOPED_TRACE(::testing::Message() << "x " << at::IntArrayRef(shape) << " " << dtype);
      const Inputs in = MakeInputs(shape, dtype, seed += 10);
      const Naive naive = NaiveBiasGelu(in.x, in.bias, in.grad_output);
      const at::Tensor x = in.x.to(device).requires_grad_(true);
      const at::Tensor bias = in.bias.to(device).requires_grad_(true);
      const at::Tensor y = BiasGelu(x, bias);
      y.backward(in.grad_output.to(device));
      EXPECT_TRUE(
          AllClose(y, naive.output, ToleranceFor(dtype, Magnitude(naive.output)), "output"));
      EXPECT_TRUE(AllClose(x.grad(), naive.grad_input,
                           ToleranceFor(dtype, Magnitude(naive.grad_input)), "x.grad"));
      EXPECT_TRUE(AllClose(bias.grad(), naive.grad_bias,
                           ToleranceFor(dtype, Magnitude(naive.grad_bias)), "bias.grad"));
    }
  }
}

TEST_F(BiasGeluTest, NonContiguousInputsGiveTheSameResults) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::Tensor x = RandomTensor({40, 9}, 1, 2.0).to(device, at::kFloat).t();
  const at::Tensor grad_output = RandomTensor({40, 9}, 2).to(device, at::kFloat).t();
  const at::Tensor bias = RandomTensor({40}, 3).to(device, at::kFloat);
  ASSERT_FALSE(x.is_contiguous());
  const Naive naive = NaiveBiasGelu(x, bias, grad_output);
  const at::Tensor output = BiasGeluForward(x, bias);
  EXPECT_TRUE(output.is_contiguous());
  EXPECT_TRUE(
      AllClose(output, naive.output, ToleranceFor(at::kFloat, Magnitude(naive.output)), "output"));
  const BiasGeluGrads grads = BiasGeluBackward(grad_output, x, bias);
  EXPECT_TRUE(grads.input.is_contiguous());
  EXPECT_TRUE(AllClose(grads.input, naive.grad_input,
                       ToleranceFor(at::kFloat, Magnitude(naive.grad_input)), "grad_input"));
  EXPECT_TRUE(AllClose(grads.bias, naive.grad_bias,
                       ToleranceFor(at::kFloat, Magnitude(naive.grad_bias)), "grad_bias"));
}

// n = 1024 allows vector accesses in every dtype, but one of the tensors the kernels read starts
// off a 16-byte boundary: the op must see it and take the scalar kernels (a vector access there
// is a misaligned-address fault on the GPU). Each tensor in turn, so no alignment check is missed.
TEST_F(BiasGeluTest, UnalignedInputsMatchNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (const std::string which : {"x", "bias", "grad_output"}) {
      SCOPED_TRACE(::testing::Message() << dtype << ", " << which << " unaligned");
      const Inputs in = MakeInputs({6, 1024}, dtype, 50);
      const auto place = [&](const at::Tensor& t, const char* name) {
        return which == name ? Unaligned(t.to(device)) : t.to(device);
      };
      ExpectMatchesNaive(
          in, {place(in.x, "x"), place(in.bias, "bias"), place(in.grad_output, "grad_output")});
    }
  }
}

// More elements than one wave of threads holds (132 SMs x 2048 threads on an H200, in chunks of
// up to 8): the forward's grid-stride loop steps the bias column across rows incrementally, and
// each backward thread adds several rows. 1000 columns (vector accesses) and 1001 (scalar).
TEST_F(BiasGeluTest, ManyElementsCoverTheGridStrideLoops) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  if (device.is_cpu()) GTEST_SKIP() << "a CUDA launch-shape case; runs in the _gpu target";
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    for (const int64_t columns : {1000, 1001}) {
      SCOPED_TRACE(::testing::Message() << "x [2500, " << columns << "] " << dtype);
      const Inputs in = MakeInputs({2500, columns}, dtype, 70);
      ExpectMatchesNaive(in, {in.x.to(device), in.bias.to(device), in.grad_output.to(device)});
    }
  }
}

TEST_F(BiasGeluTest, RepeatedCallsAreBitwiseEqual) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{20000, 24}, {64, 1600}, {2, 8193}}) {
    SCOPED_TRACE(::testing::Message() << "x " << at::IntArrayRef(shape));
    const Inputs in = MakeInputs(shape, at::kFloat, 5);
    const at::Tensor x = in.x.to(device);
    const at::Tensor bias = in.bias.to(device);
    const at::Tensor dy = in.grad_output.to(device);
    const BiasGeluGrads a = BiasGeluBackward(dy, x, bias);
    const BiasGeluGrads b = BiasGeluBackward(dy, x, bias);
    EXPECT_TRUE(at::equal(a.input, b.input));
    EXPECT_TRUE(at::equal(a.bias, b.bias));
  }
}

TEST_F(BiasGeluTest, EmptyInputsGiveEmptyResultsAndZeroBiasGradient) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::TensorOptions f32 = at::TensorOptions(device).dtype(at::kFloat);
  const at::Tensor no_rows = at::empty({0, 8}, f32);
  const at::Tensor bias = RandomTensor({8}, 1).to(device, at::kFloat);
  EXPECT_EQ(BiasGeluForward(no_rows, bias).sizes(), no_rows.sizes());
  const BiasGeluGrads grads = BiasGeluBackward(no_rows, no_rows, bias);
  EXPECT_EQ(grads.input.sizes(), no_rows.sizes());
  EXPECT_TRUE(at::equal(grads.bias.cpu(), at::zeros({8}, at::kFloat)));

  const at::Tensor no_columns = at::empty({4, 0}, f32);
  const at::Tensor no_bias = at::empty({0}, f32);
  EXPECT_EQ(BiasGeluForward(no_columns, no_bias).sizes(), no_columns.sizes());
  EXPECT_EQ(BiasGeluBackward(no_columns, no_columns, no_bias).bias.sizes(), no_bias.sizes());
}

TEST_F(BiasGeluTest, MisuseIsRejectedWithAClearMessage) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::TensorOptions f32 = at::TensorOptions(device).dtype(at::kFloat);
  const at::Tensor x = at::ones({3, 5}, f32);
  const at::Tensor b = at::ones({5}, f32);
  EXPECT_KERNEL_ERROR(
      BiasGeluForward(x, at::ones({6}, f32)),
      "BiasGeluForward: bias has shape [6] but x has shape [3, 5]; bias must be [n] = "
      "[5]");
  EXPECT_KERNEL_ERROR(BiasGeluForward(x, b.to(at::kHalf)),
                      "bias is Half but x is Float; they must have the same dtype");
  EXPECT_KERNEL_ERROR(BiasGeluForward(x.to(at::kInt), b.to(at::kInt)),
                      "x must be float32, float16, bfloat16 or float64, got Int");
  EXPECT_KERNEL_ERROR(BiasGeluForward(at::ones({}, f32), b), "got a 0-dim tensor");
  EXPECT_KERNEL_ERROR(BiasGeluForward(x, at::Tensor()), "bias is an undefined tensor");
  EXPECT_KERNEL_ERROR(BiasGeluBackward(at::ones({5, 3}, f32), x, b),
                      "BiasGeluBackward: grad_output has shape [5, 3] but x has shape [3, 5]");
  EXPECT_KERNEL_ERROR(BiasGeluBackward(x.to(at::kBFloat16), x, b),
                      "grad_output is BFloat16 but x is Float");
}

}  // namespace
}  // namespace varuna::kernels
