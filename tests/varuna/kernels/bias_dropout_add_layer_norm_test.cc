// BiasDropoutAddLayerNormForward / Backward / BiasDropoutAddLayerNorm on the device of the test
// binary (kernel_test.bzl): against the unfused pair (BiasDropoutAdd then LayerNorm, autograd
// adding r's two gradients) from the same generator state, bitwise on the CPU in every dtype and
// with the same mask everywhere; against a float64 composition given the mask the op drew; the
// p = 0 and eval paths (no random numbers drawn); unused outputs; unaligned and empty inputs;
// argument errors.
#include "varuna/kernels/bias_dropout_add_layer_norm.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "tests/varuna/kernels/kernel_test_util.h"
#include "varuna/kernels/bias_dropout_add.h"
#include "varuna/kernels/layer_norm.h"

namespace varuna::kernels {
namespace {

using testing::AllClose;
using testing::Magnitude;
using testing::RandomTensor;
using testing::ToleranceFor;
using testing::Unaligned;

constexpr double kEpsilon = 1e-5;

// Odd sizes and tails, GPT-2 widths (1024: 355M, 1600: 1.5B), h = 1, many short rows, and a row
// longer than the fused kernels take (8193: the unfused kernels on CUDA).
const std::vector<std::vector<int64_t>>& Shapes() {
  static const std::vector<std::vector<int64_t>> shapes = {
      {3, 5, 7}, {2, 13, 1024}, {6, 1600}, {2, 8193}, {1, 1}, {700, 24}, {9, 1}};
  return shapes;
}

struct Inputs {
  at::Tensor x, bias, residual, ln_weight, ln_bias, grad_output, grad_residual;
};

// Values rounded to `dtype` (the LayerNorm's parameters to `weight_dtype`) on the CPU.
Inputs MakeInputs(const std::vector<int64_t>& shape, at::ScalarType dtype,
                  at::ScalarType weight_dtype, uint64_t seed) {
  const int64_t h = shape.back();
  return {RandomTensor(shape, seed, 2.0).to(dtype),
          RandomTensor({h}, seed + 1, 0.5, 0.1).to(dtype),
          RandomTensor(shape, seed + 2, 1.0, 0.3).to(dtype),
          RandomTensor({h}, seed + 3, 0.2, 1.0).to(weight_dtype),
          RandomTensor({h}, seed + 4, 0.2).to(weight_dtype),
          RandomTensor(shape, seed + 5).to(dtype),
          RandomTensor(shape, seed + 6).to(dtype)};
}

Inputs OnDevice(const Inputs& in, const c10::Device& device) {
  return {in.x.to(device),
          in.bias.to(device),
          in.residual.to(device),
          in.ln_weight.to(device),
          in.ln_bias.to(device),
          in.grad_output.to(device),
          in.grad_residual.to(device)};
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

// The results of one path: r, y, and the gradients of x, bias, residual, ln_weight, ln_bias.
struct Results {
  std::vector<at::Tensor> values;  // r, y, dx, dbias, dresidual, dln_weight, dln_bias
};

const char* const kNames[] = {"r", "y", "dx", "dbias", "dresidual", "dln_weight", "dln_bias"};

std::vector<at::Tensor> Leaves(const Inputs& in) {
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& t : {in.x, in.bias, in.residual, in.ln_weight, in.ln_bias}) {
    // An alias, not a copy: an unaligned input stays unaligned.
    leaves.push_back(t.detach().requires_grad_(true));
  }
  return leaves;
}

// Differentiates r * dr + y * dy (the layer uses r in the next residual add and y in the MLP).
Results Finish(const at::Tensor& r, const at::Tensor& y, const std::vector<at::Tensor>& leaves,
               const Inputs& in, bool use_r, bool use_y) {
  std::vector<at::Tensor> outputs;
  std::vector<at::Tensor> grads;
  if (use_r) {
    outputs.push_back(r);
    grads.push_back(in.grad_residual);
  }
  if (use_y) {
    outputs.push_back(y);
    grads.push_back(in.grad_output);
  }
  torch::autograd::backward(outputs, grads);
  Results results{{r.detach(), y.detach()}};
  for (const at::Tensor& leaf : leaves) results.values.push_back(leaf.grad());
  return results;
}

Results Fused(const Inputs& in, double p, bool training, bool use_r = true, bool use_y = true) {
  const std::vector<at::Tensor> l = Leaves(in);
  const BiasDropoutAddLayerNormOutputs out =
      BiasDropoutAddLayerNorm(l[0], l[1], l[2], l[3], l[4], p, training, kEpsilon);
  return Finish(out.residual, out.output, l, in, use_r, use_y);
}

Results Unfused(const Inputs& in, double p, bool training, bool use_r = true, bool use_y = true) {
  const std::vector<at::Tensor> l = Leaves(in);
  const at::Tensor r = BiasDropoutAdd(l[0], l[1], l[2], p, training);
  const at::Tensor y = LayerNorm(r, l[3], l[4], kEpsilon);
  return Finish(r, y, l, in, use_r, use_y);
}

// The float64 composition given `mask` (undefined: none); gradients by autograd.
Results Naive(const Inputs& in, const at::Tensor& mask, double p) {
  Inputs d;
  for (auto [from, to] : std::vector<std::pair<const at::Tensor*, at::Tensor*>>{
           {&in.x, &d.x},
           {&in.bias, &d.bias},
           {&in.residual, &d.residual},
           {&in.ln_weight, &d.ln_weight},
           {&in.ln_bias, &d.ln_bias},
           {&in.grad_output, &d.grad_output},
           {&in.grad_residual, &d.grad_residual}}) {
    *to = from->to(at::kCPU, at::kDouble);
  }
  const std::vector<at::Tensor> l = Leaves(d);
  at::Tensor u = l[0] + l[1];
  if (mask.defined()) u = u * mask.to(at::kCPU, at::kDouble) / (1.0 - p);
  // r as the op stores it: rounded to the inputs' dtype (the gradient passes straight through).
  const at::Tensor sum = l[2] + u;
  const at::Tensor rounded = sum.detach().to(in.x.scalar_type()).to(at::kDouble);
  const at::Tensor r = sum + (rounded - sum.detach());
  const at::Tensor y = at::layer_norm(r, {r.size(-1)}, l[3], l[4], kEpsilon);
  return Finish(r, y, l, d, true, true);
}

class BiasDropoutAddLayerNormTest : public testing::KernelTest {};

// The fused op against the unfused pair from the same generator state: the same mask; bitwise
// the same values on the CPU (the reference path is the unfused ops), within the dtype's
// tolerance on CUDA.
TEST_F(BiasDropoutAddLayerNormTest, MatchesTheUnfusedPairFromTheSameGeneratorState) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const bool cpu = device.is_cpu();
  struct DtypeCase {
    at::ScalarType dtype, weight_dtype;
  };
  const std::vector<DtypeCase> dtypes = {
      {at::kFloat, at::kFloat}, {at::kHalf, at::kHalf},      {at::kBFloat16, at::kBFloat16},
      {at::kHalf, at::kFloat},  {at::kBFloat16, at::kFloat}, {at::kDouble, at::kDouble}};
  uint64_t seed = 100;
  for (const DtypeCase& dc : dtypes) {
    for (const std::vector<int64_t>& shape : Shapes()) {
      for (double p : {0.0, 0.1}) {
        const std::string what = std::string(c10::toString(dc.dtype)) + "/" +
                                 c10::toString(dc.weight_dtype) + " [" +
                                 std::to_string(shape.front()) + ".." +
                                 std::to_string(shape.back()) + "] p " + std::to_string(p);
        const Inputs in =
            OnDevice(MakeInputs(shape, dc.dtype, dc.weight_dtype, seed += 10), device);
        at::manual_seed(seed);
        const at::Tensor state = GeneratorState(device);
        const Results fused = Fused(in, p, /*training=*/true);
        const at::Tensor after_fused = GeneratorState(device);
        SetGeneratorState(device, state);
        const Results unfused = Unfused(in, p, /*training=*/true);
        EXPECT_TRUE(at::equal(GeneratorState(device), after_fused))
            << what << ": the fused op advanced the generator differently";
        // The same mask: the elements r took without x + bias are the same.
        SetGeneratorState(device, state);
        const BiasDropoutAddLayerNormResult fused_raw = BiasDropoutAddLayerNormForward(
            in.x, in.bias, in.residual, in.ln_weight, in.ln_bias, p, true, kEpsilon);
        SetGeneratorState(device, state);
        const BiasDropoutAddResult unfused_raw =
            BiasDropoutAddForward(in.x, in.bias, in.residual, p, true);
        ASSERT_EQ(fused_raw.mask.defined(), p > 0) << what;
        ASSERT_EQ(unfused_raw.mask.defined(), p > 0) << what;
        if (p > 0) {
          EXPECT_TRUE(at::equal(fused_raw.mask, unfused_raw.mask)) << what;
        }
        for (size_t i = 0; i < fused.values.size(); ++i) {
          const at::Tensor& a = fused.values[i];
          const at::Tensor& b = unfused.values[i];
          ASSERT_TRUE(a.defined() && b.defined()) << what << " " << kNames[i];
          EXPECT_EQ(a.scalar_type(), b.scalar_type()) << what << " " << kNames[i];
          if (cpu) {
            EXPECT_TRUE(at::equal(a, b)) << what << " " << kNames[i] << " differs on the CPU";
          } else {
            EXPECT_TRUE(AllClose(a, b, ToleranceFor(a.scalar_type(), Magnitude(b)),
                                 what + " " + kNames[i]));
          }
        }
      }
    }
  }
}

// Against float64 given the mask the op drew: the math, whatever path the device takes.
TEST_F(BiasDropoutAddLayerNormTest, MatchesAFloat64CompositionGivenItsMask) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  uint64_t seed = 500;
  for (at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (const std::vector<int64_t>& shape : Shapes()) {
      for (double p : {0.0, 0.25}) {
        const std::string what = std::string(c10::toString(dtype)) + " h " +
                                 std::to_string(shape.back()) + " p " + std::to_string(p);
        const Inputs in = OnDevice(MakeInputs(shape, dtype, dtype, seed += 10), device);
        at::manual_seed(seed);
        const at::Tensor state = GeneratorState(device);
        const Results fused = Fused(in, p, true);
        SetGeneratorState(device, state);
        const at::Tensor mask =
            BiasDropoutAddLayerNormForward(in.x, in.bias, in.residual, in.ln_weight, in.ln_bias, p,
                                           true, kEpsilon)
                .mask;
        const Results naive = Naive(in, mask, p);
        for (size_t i = 0; i < fused.values.size(); ++i) {
          // Half-precision r feeds the LayerNorm rounded; the gradients through it carry that
          // rounding too, hence a few ulps of slack.
          testing::Tolerance tol = ToleranceFor(dtype, Magnitude(naive.values[i]));
          if (dtype != at::kFloat) tol.atol *= 2.0;
          EXPECT_TRUE(AllClose(fused.values[i], naive.values[i], tol, what + " " + kNames[i]));
        }
      }
    }
  }
}

// Dropout happens only in training with p > 0; otherwise no random numbers are drawn and the
// result is residual + x + bias, then LayerNorm.
TEST_F(BiasDropoutAddLayerNormTest, EvalAndZeroProbabilityDrawNothing) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Inputs in = OnDevice(MakeInputs({4, 5, 64}, at::kFloat, at::kFloat, 7), device);
  for (auto [p, training] : std::vector<std::pair<double, bool>>{{0.3, false}, {0.0, true}}) {
    at::manual_seed(3);
    const at::Tensor state = GeneratorState(device);
    const BiasDropoutAddLayerNormResult result = BiasDropoutAddLayerNormForward(
        in.x, in.bias, in.residual, in.ln_weight, in.ln_bias, p, training, kEpsilon);
    EXPECT_FALSE(result.mask.defined());
    EXPECT_TRUE(at::equal(GeneratorState(device), state)) << "random numbers were drawn";
    const Results naive = Naive(in, at::Tensor(), p);
    EXPECT_TRUE(AllClose(result.residual, naive.values[0], ToleranceFor(at::kFloat, 4.0), "r"));
    EXPECT_TRUE(AllClose(result.output, naive.values[1], ToleranceFor(at::kFloat, 4.0), "y"));
  }
}

// Only one output used: the other's gradient is zero (autograd passes it undefined).
TEST_F(BiasDropoutAddLayerNormTest, AnUnusedOutputContributesNoGradient) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Inputs in = OnDevice(MakeInputs({3, 40}, at::kFloat, at::kFloat, 21), device);
  for (auto [use_r, use_y] : std::vector<std::pair<bool, bool>>{{true, false}, {false, true}}) {
    at::manual_seed(5);
    const Results fused = Fused(in, 0.2, true, use_r, use_y);
    at::manual_seed(5);
    const Results unfused = Unfused(in, 0.2, true, use_r, use_y);
    for (size_t i = 0; i < fused.values.size(); ++i) {
      const std::string what = std::string(use_r ? "r only " : "y only ") + kNames[i];
      if (!unfused.values[i].defined()) {
        // No path from the used output to this leaf in the unfused graph (ln_* with r only).
        ASSERT_TRUE(fused.values[i].defined()) << what;
        EXPECT_EQ(fused.values[i].abs().max().item<double>(), 0.0) << what;
        continue;
      }
      EXPECT_TRUE(AllClose(fused.values[i], unfused.values[i],
                           ToleranceFor(at::kFloat, Magnitude(unfused.values[i])), what));
    }
  }
}

// Inputs that are not 16-byte aligned or not contiguous (the kernels' scalar path), and no rows.
TEST_F(BiasDropoutAddLayerNormTest, UnalignedNonContiguousAndEmptyInputs) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    const Inputs in = OnDevice(MakeInputs({5, 64}, dtype, dtype, 31), device);
    Inputs odd = in;
    odd.x = Unaligned(in.x);
    odd.residual = Unaligned(in.residual);
    odd.grad_output = Unaligned(in.grad_output);
    odd.grad_residual = in.grad_residual.t().contiguous().t();  // strided: copied
    at::manual_seed(9);
    const Results expected = Fused(in, 0.1, true);
    at::manual_seed(9);
    const Results actual = Fused(odd, 0.1, true);
    for (size_t i = 0; i < expected.values.size(); ++i) {
      const std::string what = std::string(c10::toString(dtype)) + " " + kNames[i];
      if (device.is_cpu()) {
        EXPECT_TRUE(at::equal(actual.values[i], expected.values[i])) << what;
      } else {
        // The scalar path adds a row's elements in another order than the vector path.
        EXPECT_TRUE(AllClose(actual.values[i], expected.values[i],
                             ToleranceFor(dtype, Magnitude(expected.values[i])), what));
      }
    }
  }
  const Inputs empty = OnDevice(MakeInputs({0, 16}, at::kFloat, at::kFloat, 41), device);
  const Results none = Fused(empty, 0.1, true);
  EXPECT_EQ(none.values[0].numel(), 0);
  EXPECT_EQ(none.values[2].numel(), 0);
  for (int i : {3, 5, 6}) {
    EXPECT_TRUE(at::equal(none.values[i], at::zeros({16}, none.values[i].options()))) << kNames[i];
  }
}

TEST_F(BiasDropoutAddLayerNormTest, MisuseNamesTheArgument) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Inputs in = OnDevice(MakeInputs({2, 3, 8}, at::kFloat, at::kFloat, 51), device);
  auto forward = [&](const at::Tensor& x, const at::Tensor& bias, const at::Tensor& residual,
                     const at::Tensor& w, const at::Tensor& b, double p, double eps) {
    BiasDropoutAddLayerNormForward(x, bias, residual, w, b, p, true, eps);
  };
  EXPECT_KERNEL_ERROR(
      forward(at::Tensor(), in.bias, in.residual, in.ln_weight, in.ln_bias, 0.1, kEpsilon),
      "x is an undefined tensor");
  EXPECT_KERNEL_ERROR(
      forward(in.x, in.bias.narrow(0, 0, 4), in.residual, in.ln_weight, in.ln_bias, 0.1, kEpsilon),
      "bias");
  EXPECT_KERNEL_ERROR(
      forward(in.x, in.bias, in.residual.to(at::kDouble), in.ln_weight, in.ln_bias, 0.1, kEpsilon),
      "residual");
  EXPECT_KERNEL_ERROR(
      forward(in.x, in.bias, in.residual, in.ln_weight.narrow(0, 0, 7), in.ln_bias, 0.1, kEpsilon),
      "ln_weight has shape [7]");
  EXPECT_KERNEL_ERROR(
      forward(in.x, in.bias, in.residual, in.ln_weight, in.ln_bias.to(at::kDouble), 0.1, kEpsilon),
      "ln_bias is Double");
  EXPECT_KERNEL_ERROR(forward(in.x.to(at::kHalf), in.bias.to(at::kHalf), in.residual.to(at::kHalf),
                              in.ln_weight, in.ln_bias.to(at::kHalf), 0.1, kEpsilon),
                      "ln_bias is Half but ln_weight is Float");
  EXPECT_KERNEL_ERROR(forward(in.x, in.bias, in.residual, in.ln_weight, in.ln_bias, 1.0, kEpsilon),
                      "the dropout probability p = 1 is not in [0, 1)");
  EXPECT_KERNEL_ERROR(forward(in.x, in.bias, in.residual, in.ln_weight, in.ln_bias, 0.1, -1.0),
                      "epsilon is -1");
  EXPECT_KERNEL_ERROR(
      forward(in.x.narrow(-1, 0, 0), in.bias.narrow(0, 0, 0), in.residual.narrow(-1, 0, 0),
              in.ln_weight.narrow(0, 0, 0), in.ln_bias.narrow(0, 0, 0), 0.1, kEpsilon),
      "must be at least 1");

  const BiasDropoutAddLayerNormResult f = BiasDropoutAddLayerNormForward(
      in.x, in.bias, in.residual, in.ln_weight, in.ln_bias, 0.1, true, kEpsilon);
  auto backward = [&](const at::Tensor& dy, const at::Tensor& dr, const at::Tensor& mask,
                      const at::Tensor& mean) {
    BiasDropoutAddLayerNormBackward(dy, dr, f.residual, mask, mean, f.rstd, in.ln_weight, 0.1);
  };
  EXPECT_KERNEL_ERROR(backward(in.grad_output.narrow(1, 0, 2), in.grad_residual, f.mask, f.mean),
                      "grad_output");
  EXPECT_KERNEL_ERROR(backward(in.grad_output, in.grad_residual.to(at::kDouble), f.mask, f.mean),
                      "grad_residual");
  EXPECT_KERNEL_ERROR(backward(in.grad_output, in.grad_residual, f.mask.to(at::kFloat), f.mean),
                      "it must be the bool mask");
  EXPECT_KERNEL_ERROR(backward(in.grad_output, in.grad_residual, f.mask, f.mean.narrow(0, 0, 5)),
                      "mean is Float [5] but must be Float [6]");
  EXPECT_KERNEL_ERROR(
      BiasDropoutAddLayerNormBackward(in.grad_output, at::Tensor(), f.residual, at::Tensor(),
                                      f.mean, f.rstd, in.ln_weight, -0.5),
      "p = -0.5");
}

}  // namespace
}  // namespace varuna::kernels
