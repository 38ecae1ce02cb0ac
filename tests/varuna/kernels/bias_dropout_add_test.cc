// BiasDropoutAddForward / BiasDropoutAddBackward / BiasDropoutAdd on the device of the test
// binary (kernel_test.bzl): against a naive float64 composition given the mask the op drew;
// the mask's statistics (rate, independence of neighbours); replay from a restored generator
// state; the p = 0 and eval paths; on the CPU, bitwise equality with
// residual + at::dropout(x + bias) in float32; argument errors.
#include "varuna/kernels/bias_dropout_add.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
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

// Odd sizes and tails (n not a multiple of the vector width or of 4), GPT-2 widths, n = 1, and
// many rows (more than one wave of blocks).
const std::vector<std::vector<int64_t>>& Shapes() {
  static const std::vector<std::vector<int64_t>> shapes = {
      {3, 5, 7}, {2, 13, 1024}, {64, 1600}, {2, 8193}, {1, 1}, {4096, 96}, {20000, 24}, {3000, 1}};
  return shapes;
}

struct Inputs {
  at::Tensor x, bias, residual, grad_output;
};

// Values rounded to `dtype` on the CPU, so both sides see the same numbers.
Inputs MakeInputs(const std::vector<int64_t>& shape, at::ScalarType dtype, uint64_t seed) {
  return {RandomTensor(shape, seed, 2.0).to(dtype),
          RandomTensor({shape.back()}, seed + 1, 0.5, 0.1).to(dtype),
          RandomTensor(shape, seed + 2).to(dtype), RandomTensor(shape, seed + 3).to(dtype)};
}

Inputs OnDevice(const Inputs& in, const c10::Device& device) {
  return {in.x.to(device), in.bias.to(device), in.residual.to(device), in.grad_output.to(device)};
}

struct Naive {
  at::Tensor output, grad_input, grad_bias;
};

// y = residual + m (x + bias) / keep in float64 with `mask` (undefined: all ones, keep = 1);
// gradients by autograd.
Naive NaiveGivenMask(const Inputs& in, const at::Tensor& mask, double p) {
  const auto leaf = [](const at::Tensor& t) {
    return t.detach().to(at::kCPU, at::kDouble).clone().requires_grad_(true);
  };
  const at::Tensor x = leaf(in.x);
  const at::Tensor bias = leaf(in.bias);
  const at::Tensor residual = leaf(in.residual);
  at::Tensor u = x + bias;
  if (mask.defined()) u = u * mask.to(at::kCPU, at::kDouble) / (1.0 - p);
  const at::Tensor y = residual + u;
  y.backward(in.grad_output.to(at::kCPU, at::kDouble));
  EXPECT_TRUE(at::equal(residual.grad(), in.grad_output.to(at::kCPU, at::kDouble)));
  return {y.detach(), x.grad(), bias.grad()};
}

at::Tensor GeneratorState(const c10::Device& device) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void SetGeneratorState(const c10::Device& device, const at::Tensor& state) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

class BiasDropoutAddTest : public testing::KernelTest {
 protected:
  // The op on `on_device` against the naive composition given the mask it drew, forward and
  // backward.
  static void ExpectMatchesNaive(const Inputs& in, const Inputs& on_device, double p,
                                 bool training) {
    const at::ScalarType dtype = in.x.scalar_type();
    const BiasDropoutAddResult result =
        BiasDropoutAddForward(on_device.x, on_device.bias, on_device.residual, p, training);
    ASSERT_EQ(result.output.scalar_type(), dtype);
    ASSERT_EQ(result.output.device(), on_device.x.device());
    ASSERT_EQ(result.mask.defined(), training && p > 0.0);
    if (result.mask.defined()) {
      ASSERT_EQ(result.mask.scalar_type(), at::kBool);
      ASSERT_EQ(result.mask.sizes(), in.x.sizes());
    }
    const Naive naive = NaiveGivenMask(in, result.mask, p);
    EXPECT_TRUE(AllClose(result.output, naive.output, ToleranceFor(dtype, Magnitude(naive.output)),
                         "output"));

    const BiasDropoutAddGrads grads = BiasDropoutAddBackward(on_device.grad_output, result.mask, p);
    ASSERT_EQ(grads.input.scalar_type(), dtype);
    ASSERT_EQ(grads.bias.scalar_type(), dtype);
    EXPECT_TRUE(AllClose(grads.input, naive.grad_input,
                         ToleranceFor(dtype, Magnitude(naive.grad_input)), "grad_input"));
    // The bias gradient sums each column over every row, so its rounding grows with the terms,
    // not with their sum, which can cancel (an H200 on 2026-11-27: 0.111857 against 0.111853
    // for 3000 terms of about 1): the magnitude is the larger of the sum's and the terms'
    // absolute column sum over sqrt(rows), the typical size of a sum of that many rounded terms.
    const int64_t columns = in.x.size(-1);
    at::Tensor terms = in.grad_output.to(at::kCPU, at::kDouble).reshape({-1, columns});
    if (result.mask.defined()) {
      terms = terms * result.mask.to(at::kCPU, at::kDouble).reshape({-1, columns}) / (1.0 - p);
    }
    const double bias_magnitude =
        std::max(Magnitude(naive.grad_bias), terms.abs().sum(0).max().item<double>() /
                                                 std::sqrt(static_cast<double>(terms.size(0))));
    EXPECT_TRUE(
        AllClose(grads.bias, naive.grad_bias, ToleranceFor(dtype, bias_magnitude), "grad_bias"));
    // The bias gradient's reduction order is fixed: a second backward gives the same bits.
    EXPECT_TRUE(
        at::equal(BiasDropoutAddBackward(on_device.grad_output, result.mask, p).bias, grads.bias));
  }

  void CheckAgainstNaive(const c10::Device& device, at::ScalarType dtype) {
    uint64_t seed = 300;
    for (const std::vector<int64_t>& shape : Shapes()) {
      for (const double p : {0.0, 0.1, 0.5}) {
        std::ostringstream what;
        what << "x " << at::IntArrayRef(shape) << " " << dtype << " p " << p;
        SCOPED_TRACE(what.str());
        const Inputs in = MakeInputs(shape, dtype, seed += 10);
        ExpectMatchesNaive(in, OnDevice(in, device), p, /*training=*/true);
      }
    }
  }
};

TEST_F(BiasDropoutAddTest, Float32MatchesNaiveCompositionGivenItsMask) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kFloat);
}

TEST_F(BiasDropoutAddTest, Float64MatchesNaiveCompositionGivenItsMask) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kDouble);
}

TEST_F(BiasDropoutAddTest, Float16MatchesNaiveCompositionGivenItsMask) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kHalf);
}

TEST_F(BiasDropoutAddTest, BFloat16MatchesNaiveCompositionGivenItsMask) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  CheckAgainstNaive(device, at::kBFloat16);
}

// Eval, and p = 0 in training: residual + x + bias, no mask, and no random number drawn (the
// generator's state is unchanged, so switching dropout off does not shift later masks).
TEST_F(BiasDropoutAddTest, EvalAndZeroProbabilityAreBiasAddOnly) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const auto& [p, training] :
         std::vector<std::pair<double, bool>>{{0.0, true}, {0.0, false}, {0.3, false}}) {
      SCOPED_TRACE(::testing::Message() << dtype << " p " << p << " training " << training);
      const Inputs in = MakeInputs({7, 96}, dtype, 21);
      const at::Tensor before = GeneratorState(device);
      ExpectMatchesNaive(in, OnDevice(in, device), p, training);
      EXPECT_TRUE(at::equal(GeneratorState(device), before));
      // Without a mask the input gradient is the output gradient itself.
      const at::Tensor grad_output = in.grad_output.to(device);
      EXPECT_TRUE(BiasDropoutAddBackward(grad_output, at::Tensor(), p).input.is_same(grad_output));
    }
  }
}

// The kept fraction is keep = 1 - p (within 5 standard deviations), also among the elements of
// each position modulo 4 and 8 (the CUDA kernel's Philox components and vectors), and
// neighbours are independent: P(m_e = m_{e+1}) = keep^2 + p^2.
TEST_F(BiasDropoutAddTest, MaskHasTheDropoutRateAndIndependentNeighbours) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const double p : {0.1, 0.5}) {
      SCOPED_TRACE(::testing::Message() << dtype << " p " << p);
      const int64_t rows = 512;
      const int64_t columns = 1024;
      const Inputs in = MakeInputs({rows, columns}, dtype, 5);
      const at::Tensor mask =
          BiasDropoutAddForward(in.x.to(device), in.bias.to(device), in.residual.to(device), p,
                                /*training=*/true)
              .mask.to(at::kCPU, at::kDouble)
              .reshape({-1});
      const double keep = 1.0 - p;
      const auto expect_rate = [](const at::Tensor& m, double q, const char* what) {
        const double n = static_cast<double>(m.numel());
        const double sigma = std::sqrt(q * (1.0 - q) / n);
        EXPECT_NEAR(m.mean().item<double>(), q, 5.0 * sigma) << what;
      };
      expect_rate(mask, keep, "all elements");
      for (int64_t r = 0; r < 8; ++r) {
        expect_rate(mask.slice(0, r, mask.numel(), 8), keep, "one position modulo 8");
      }
      const at::Tensor same = mask.slice(0, 1).eq(mask.slice(0, 0, -1)).to(at::kDouble);
      expect_rate(same, keep * keep + p * p, "equal neighbours");
    }
  }
}

// The recompute contract: the same generator state gives the same output and mask, bit for bit;
// without the restore the next call draws a different mask.
TEST_F(BiasDropoutAddTest, RestoredGeneratorStateReplaysTheMask) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    const Inputs in = OnDevice(MakeInputs({33, 1000}, dtype, 8), device);
    const at::Tensor state = GeneratorState(device);
    const BiasDropoutAddResult first = BiasDropoutAddForward(in.x, in.bias, in.residual, 0.3, true);
    const BiasDropoutAddResult next = BiasDropoutAddForward(in.x, in.bias, in.residual, 0.3, true);
    SetGeneratorState(device, state);
    const BiasDropoutAddResult replay =
        BiasDropoutAddForward(in.x, in.bias, in.residual, 0.3, true);
    EXPECT_TRUE(at::equal(replay.mask, first.mask));
    EXPECT_TRUE(at::equal(replay.output, first.output));
    EXPECT_FALSE(at::equal(next.mask, first.mask));
  }
}

// The autograd op under a restored state draws the mask BiasDropoutAddForward drew, and its
// gradients are the naive ones given that mask (dresidual = dy).
TEST_F(BiasDropoutAddTest, AutogradOpMatchesNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  uint64_t seed = 9;
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    for (const double p : {0.0, 0.2}) {
      SCOPED_TRACE(::testing::Message() << dtype << " p " << p);
      const Inputs in = MakeInputs({4, 2, 1024}, dtype, seed += 10);
      const Inputs d = OnDevice(in, device);
      const at::Tensor state = GeneratorState(device);
      const at::Tensor mask = BiasDropoutAddForward(d.x, d.bias, d.residual, p, true).mask;
      SetGeneratorState(device, state);
      const at::Tensor x = d.x.clone().requires_grad_(true);
      const at::Tensor bias = d.bias.clone().requires_grad_(true);
      const at::Tensor residual = d.residual.clone().requires_grad_(true);
      const at::Tensor y = BiasDropoutAdd(x, bias, residual, p, /*training=*/true);
      y.backward(d.grad_output);
      const Naive naive = NaiveGivenMask(in, mask, p);
      EXPECT_TRUE(
          AllClose(y, naive.output, ToleranceFor(dtype, Magnitude(naive.output)), "output"));
      EXPECT_TRUE(AllClose(x.grad(), naive.grad_input,
                           ToleranceFor(dtype, Magnitude(naive.grad_input)), "x.grad"));
      EXPECT_TRUE(AllClose(bias.grad(), naive.grad_bias,
                           ToleranceFor(dtype, Magnitude(naive.grad_bias)), "bias.grad"));
      EXPECT_TRUE(at::equal(residual.grad(), d.grad_output));
    }
  }
}

// On the CPU the op draws exactly as at::dropout does: in float32, with the same generator
// state, it is bitwise residual + at::dropout(x + bias, p), and so are the three gradients.
TEST_F(BiasDropoutAddTest, CpuFloat32IsBitwiseTheUnfusedComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  if (!device.is_cpu()) GTEST_SKIP() << "the CUDA kernel draws its own Philox stream";
  for (const double p : {0.0, 0.1, 0.5}) {
    for (const bool training : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "p " << p << " training " << training);
      const Inputs in = MakeInputs({5, 3, 96}, at::kFloat, 77);
      const auto run = [&](bool fused) {
        const at::Tensor x = in.x.clone().requires_grad_(true);
        const at::Tensor bias = in.bias.clone().requires_grad_(true);
        const at::Tensor residual = in.residual.clone().requires_grad_(true);
        at::manual_seed(123);
        const at::Tensor y = fused ? BiasDropoutAdd(x, bias, residual, p, training)
                                   : residual + at::dropout(x + bias, p, training);
        y.backward(in.grad_output);
        return std::vector<at::Tensor>{y.detach(), x.grad(), bias.grad(), residual.grad()};
      };
      const std::vector<at::Tensor> fused = run(true);
      const std::vector<at::Tensor> unfused = run(false);
      for (size_t i = 0; i < fused.size(); ++i) {
        EXPECT_TRUE(at::equal(fused[i], unfused[i])) << "result " << i;
      }
    }
  }
}

TEST_F(BiasDropoutAddTest, NonContiguousInputsGiveTheSameResults) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  Inputs in;
  in.x = RandomTensor({40, 9}, 1, 2.0).to(at::kFloat).t();
  in.residual = RandomTensor({40, 9}, 2).to(at::kFloat).t();
  in.grad_output = RandomTensor({40, 9}, 3).to(at::kFloat).t();
  in.bias = RandomTensor({40}, 4).to(at::kFloat);
  ASSERT_FALSE(in.x.is_contiguous());
  const Inputs d = OnDevice(in, device);
  const BiasDropoutAddResult result = BiasDropoutAddForward(d.x, d.bias, d.residual, 0.25, true);
  EXPECT_TRUE(result.output.is_contiguous());
  const Naive naive = NaiveGivenMask(in, result.mask, 0.25);
  EXPECT_TRUE(AllClose(result.output, naive.output,
                       ToleranceFor(at::kFloat, Magnitude(naive.output)), "output"));
  const BiasDropoutAddGrads grads = BiasDropoutAddBackward(d.grad_output, result.mask, 0.25);
  EXPECT_TRUE(grads.input.is_contiguous());
  EXPECT_TRUE(AllClose(grads.input, naive.grad_input,
                       ToleranceFor(at::kFloat, Magnitude(naive.grad_input)), "grad_input"));
  EXPECT_TRUE(AllClose(grads.bias, naive.grad_bias,
                       ToleranceFor(at::kFloat, Magnitude(naive.grad_bias)), "grad_bias"));
}

// n = 1024 allows vector accesses in every dtype, but one tensor starts off a 16-byte boundary:
// the op must take the scalar kernels, which draw the very mask the vector kernels draw.
TEST_F(BiasDropoutAddTest, UnalignedInputsDrawTheSameMask) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    const Inputs in = MakeInputs({6, 1024}, dtype, 50);
    const Inputs aligned = OnDevice(in, device);
    const at::Tensor state = GeneratorState(device);
    const at::Tensor vector_mask =
        BiasDropoutAddForward(aligned.x, aligned.bias, aligned.residual, 0.4, true).mask;
    for (const std::string which : {"x", "bias", "residual", "grad_output"}) {
      SCOPED_TRACE(::testing::Message() << dtype << ", " << which << " unaligned");
      const auto place = [&](const at::Tensor& t, const char* name) {
        return which == name ? Unaligned(t.to(device)) : t.to(device);
      };
      const Inputs d{place(in.x, "x"), place(in.bias, "bias"), place(in.residual, "residual"),
                     place(in.grad_output, "grad_output")};
      SetGeneratorState(device, state);
      const BiasDropoutAddResult result = BiasDropoutAddForward(d.x, d.bias, d.residual, 0.4, true);
      EXPECT_TRUE(at::equal(result.mask, vector_mask));
      SetGeneratorState(device, state);
      ExpectMatchesNaive(in, d, 0.4, /*training=*/true);
    }
  }
}

// More elements than one wave of threads holds: the forward's grid-stride loop steps the bias
// column across rows incrementally, and each backward thread adds several rows.
TEST_F(BiasDropoutAddTest, ManyElementsCoverTheGridStrideLoops) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  if (device.is_cpu()) GTEST_SKIP() << "a CUDA launch-shape case; runs in the _gpu target";
  for (const at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    for (const int64_t columns : {1000, 1001}) {
      SCOPED_TRACE(::testing::Message() << "x [2500, " << columns << "] " << dtype);
      const Inputs in = MakeInputs({2500, columns}, dtype, 70);
      ExpectMatchesNaive(in, OnDevice(in, device), 0.1, /*training=*/true);
    }
  }
}

TEST_F(BiasDropoutAddTest, EmptyInputsGiveEmptyResultsAndZeroBiasGradient) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::Tensor x = at::empty({0, 8}, at::TensorOptions(device).dtype(at::kFloat));
  const at::Tensor bias = at::ones({8}, x.options());
  const BiasDropoutAddResult result = BiasDropoutAddForward(x, bias, x, 0.1, true);
  EXPECT_EQ(result.output.sizes(), x.sizes());
  const BiasDropoutAddGrads grads = BiasDropoutAddBackward(x, result.mask, 0.1);
  EXPECT_EQ(grads.input.sizes(), x.sizes());
  EXPECT_TRUE(at::equal(grads.bias.cpu(), at::zeros({8})));
}

TEST_F(BiasDropoutAddTest, MisuseThrowsNamingTheArgument) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::TensorOptions f32 = at::TensorOptions(device).dtype(at::kFloat);
  const at::Tensor x = at::zeros({4, 8}, f32);
  const at::Tensor bias = at::zeros({8}, f32);
  EXPECT_KERNEL_ERROR(BiasDropoutAddForward(at::Tensor(), bias, x, 0.1, true), "x is an undefined");
  EXPECT_KERNEL_ERROR(BiasDropoutAddForward(x, at::Tensor(), x, 0.1, true), "bias is an undefined");
  EXPECT_KERNEL_ERROR(BiasDropoutAddForward(x, bias, at::Tensor(), 0.1, true),
                      "residual is an undefined");
  EXPECT_KERNEL_ERROR(BiasDropoutAddForward(at::zeros({}, f32), bias, x, 0.1, true), "0-dim");
  EXPECT_KERNEL_ERROR(BiasDropoutAddForward(x, at::zeros({7}, f32), x, 0.1, true),
                      "bias must be [n] = [8]");
  EXPECT_KERNEL_ERROR(BiasDropoutAddForward(x, bias.to(at::kHalf), x, 0.1, true), "the same dtype");
  EXPECT_KERNEL_ERROR(BiasDropoutAddForward(x, bias, at::zeros({4, 9}, f32), 0.1, true),
                      "residual has shape");
  EXPECT_KERNEL_ERROR(BiasDropoutAddForward(x.to(at::kInt), bias.to(at::kInt), x, 0.1, true),
                      "float32, float16, bfloat16 or float64");
  EXPECT_KERNEL_ERROR(BiasDropoutAddForward(x, bias, x, 1.0, true), "not in [0, 1)");
  EXPECT_KERNEL_ERROR(BiasDropoutAddForward(x, bias, x, -0.1, false), "not in [0, 1)");
  EXPECT_KERNEL_ERROR(BiasDropoutAddBackward(at::Tensor(), at::Tensor(), 0.1),
                      "grad_output is an undefined");
  EXPECT_KERNEL_ERROR(BiasDropoutAddBackward(x, at::ones({4, 8}, f32), 0.1), "must be the bool");
  EXPECT_KERNEL_ERROR(BiasDropoutAddBackward(x, at::ones({4, 7}, f32.dtype(at::kBool)), 0.1),
                      "mask has shape");
  EXPECT_KERNEL_ERROR(BiasDropoutAddBackward(x, at::Tensor(), 1.5), "not in [0, 1)");
}

}  // namespace
}  // namespace varuna::kernels
