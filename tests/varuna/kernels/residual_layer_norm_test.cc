// ResidualLayerNorm on the device of the test binary (kernel_test.bzl): against the unfused pair
// it replaces (LayerNorm of x, and the residual add reading x itself, autograd adding x's two
// gradients), bitwise on the CPU in every dtype; against a float64 composition; the residual
// output as an alias of x wired to the op's node; unused outputs; unaligned and empty inputs;
// no-grad use; argument errors.
#include "varuna/kernels/residual_layer_norm.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/varuna/kernels/kernel_test_util.h"
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
// longer than the fused backward takes (8193: the unfused kernels on CUDA).
const std::vector<std::vector<int64_t>>& Shapes() {
  static const std::vector<std::vector<int64_t>> shapes = {
      {3, 5, 7}, {2, 13, 1024}, {6, 1600}, {2, 8193}, {1, 1}, {700, 24}, {9, 1}};
  return shapes;
}

struct Inputs {
  at::Tensor x, weight, bias, grad_output, grad_residual, next;  // next: what r is added to
};

Inputs MakeInputs(const std::vector<int64_t>& shape, at::ScalarType dtype,
                  at::ScalarType weight_dtype, uint64_t seed, const c10::Device& device) {
  const int64_t h = shape.back();
  return {RandomTensor(shape, seed, 2.0, 0.3).to(device, dtype),
          RandomTensor({h}, seed + 1, 0.2, 1.0).to(device, weight_dtype),
          RandomTensor({h}, seed + 2, 0.2).to(device, weight_dtype),
          RandomTensor(shape, seed + 3).to(device, dtype),
          RandomTensor(shape, seed + 4).to(device, dtype),
          RandomTensor(shape, seed + 5).to(device, dtype)};
}

// r (as the next op sees it), y, dx, dweight, dbias.
struct Results {
  std::vector<at::Tensor> values;
};

const char* const kNames[] = {"r", "y", "dx", "dweight", "dbias"};

std::vector<at::Tensor> Leaves(const Inputs& in) {
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& t : {in.x, in.weight, in.bias}) {
    // An alias, not a copy: an unaligned input stays unaligned.
    leaves.push_back(t.detach().requires_grad_(true));
  }
  return leaves;
}

// The layer's use of the two outputs: r in a residual add (r + next, gradient dr), y in the
// block (gradient dy).
Results Finish(const at::Tensor& r, const at::Tensor& y, const std::vector<at::Tensor>& leaves,
               const Inputs& in, bool use_r, bool use_y) {
  std::vector<at::Tensor> outputs;
  std::vector<at::Tensor> grads;
  if (use_r) {
    outputs.push_back(r + in.next);
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

Results Fused(const Inputs& in, bool use_r = true, bool use_y = true) {
  const std::vector<at::Tensor> l = Leaves(in);
  const ResidualLayerNormOutputs out = ResidualLayerNorm(l[0], l[1], l[2], kEpsilon);
  return Finish(out.residual, out.output, l, in, use_r, use_y);
}

Results Unfused(const Inputs& in, bool use_r = true, bool use_y = true) {
  const std::vector<at::Tensor> l = Leaves(in);
  return Finish(l[0], LayerNorm(l[0], l[1], l[2], kEpsilon), l, in, use_r, use_y);
}

// The same in float64 on the CPU, with ATen's LayerNorm.
Results Naive(const Inputs& in) {
  Inputs d;
  for (auto [from, to] :
       std::vector<std::pair<const at::Tensor*, at::Tensor*>>{{&in.x, &d.x},
                                                              {&in.weight, &d.weight},
                                                              {&in.bias, &d.bias},
                                                              {&in.grad_output, &d.grad_output},
                                                              {&in.grad_residual, &d.grad_residual},
                                                              {&in.next, &d.next}}) {
    *to = from->to(at::kCPU, at::kDouble);
  }
  const std::vector<at::Tensor> l = Leaves(d);
  const at::Tensor y = at::layer_norm(l[0], {l[0].size(-1)}, l[1], l[2], kEpsilon);
  return Finish(l[0], y, l, d, true, true);
}

class ResidualLayerNormTest : public testing::KernelTest {};

// Against the unfused pair: bitwise on the CPU (the reference adds the two gradients in x's
// dtype, as autograd does), within the dtype's tolerance on CUDA (one rounding fewer).
TEST_F(ResidualLayerNormTest, MatchesLayerNormWithTheResidualAddReadingX) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  struct DtypeCase {
    at::ScalarType dtype, weight_dtype;
  };
  const std::vector<DtypeCase> dtypes = {
      {at::kFloat, at::kFloat}, {at::kHalf, at::kHalf},      {at::kBFloat16, at::kBFloat16},
      {at::kHalf, at::kFloat},  {at::kBFloat16, at::kFloat}, {at::kDouble, at::kDouble}};
  uint64_t seed = 100;
  for (const DtypeCase& dc : dtypes) {
    for (const std::vector<int64_t>& shape : Shapes()) {
      const std::string what =
          std::string(c10::toString(dc.dtype)) + "/" + c10::toString(dc.weight_dtype) + " [" +
          std::to_string(shape.front()) + ".." + std::to_string(shape.back()) + "]";
      const Inputs in = MakeInputs(shape, dc.dtype, dc.weight_dtype, seed += 10, device);
      const Results fused = Fused(in);
      const Results unfused = Unfused(in);
      for (size_t i = 0; i < fused.values.size(); ++i) {
        const at::Tensor& a = fused.values[i];
        const at::Tensor& b = unfused.values[i];
        ASSERT_TRUE(a.defined() && b.defined()) << what << " " << kNames[i];
        EXPECT_EQ(a.scalar_type(), b.scalar_type()) << what << " " << kNames[i];
        if (device.is_cpu()) {
          EXPECT_TRUE(at::equal(a, b)) << what << " " << kNames[i] << " differs on the CPU";
        } else {
          EXPECT_TRUE(
              AllClose(a, b, ToleranceFor(a.scalar_type(), Magnitude(b)), what + " " + kNames[i]));
        }
      }
    }
  }
}

// Against float64: the math, whatever path the device takes.
TEST_F(ResidualLayerNormTest, MatchesAFloat64Composition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  uint64_t seed = 500;
  for (at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (const std::vector<int64_t>& shape : Shapes()) {
      const std::string what =
          std::string(c10::toString(dtype)) + " h " + std::to_string(shape.back());
      const Inputs in = MakeInputs(shape, dtype, dtype, seed += 10, device);
      const Results fused = Fused(in);
      const Results naive = Naive(in);
      for (size_t i = 0; i < fused.values.size(); ++i) {
        EXPECT_TRUE(AllClose(fused.values[i], naive.values[i],
                             ToleranceFor(dtype, Magnitude(naive.values[i])),
                             what + " " + kNames[i]));
      }
    }
  }
}

// `residual` is x's storage, not a copy, and both outputs lead to the one node, so x's two
// gradients meet in its backward (the graph has no add for them).
TEST_F(ResidualLayerNormTest, TheResidualIsXAndBothGradientsReachOneNode) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Inputs in = MakeInputs({4, 64}, at::kFloat, at::kFloat, 7, device);
  const std::vector<at::Tensor> l = Leaves(in);
  const ResidualLayerNormOutputs out = ResidualLayerNorm(l[0], l[1], l[2], kEpsilon);
  EXPECT_EQ(out.residual.data_ptr(), l[0].data_ptr());
  EXPECT_TRUE(at::equal(out.residual, in.x));
  ASSERT_NE(out.residual.grad_fn(), nullptr);
  EXPECT_EQ(out.residual.grad_fn(), out.output.grad_fn());
  EXPECT_NE(out.output.grad_fn()->name().find("ResidualLayerNormFunction"), std::string::npos)
      << out.output.grad_fn()->name();
}

// Only one output used: the other's gradient is zero (autograd passes it undefined).
TEST_F(ResidualLayerNormTest, AnUnusedOutputContributesNoGradient) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Inputs in = MakeInputs({3, 40}, at::kFloat, at::kFloat, 21, device);
  for (auto [use_r, use_y] : std::vector<std::pair<bool, bool>>{{true, false}, {false, true}}) {
    const Results fused = Fused(in, use_r, use_y);
    const Results unfused = Unfused(in, use_r, use_y);
    for (size_t i = 0; i < fused.values.size(); ++i) {
      const std::string what = std::string(use_r ? "r only " : "y only ") + kNames[i];
      if (!unfused.values[i].defined()) {
        // No path from r to the LayerNorm's parameters in the unfused graph.
        ASSERT_TRUE(fused.values[i].defined()) << what;
        EXPECT_EQ(fused.values[i].abs().max().item<double>(), 0.0) << what;
        continue;
      }
      EXPECT_TRUE(AllClose(fused.values[i], unfused.values[i],
                           ToleranceFor(at::kFloat, Magnitude(unfused.values[i])), what));
    }
  }
}

// Inputs that are not 16-byte aligned or not contiguous, and no rows.
TEST_F(ResidualLayerNormTest, UnalignedNonContiguousAndEmptyInputs) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (at::ScalarType dtype : {at::kFloat, at::kHalf}) {
    const Inputs in = MakeInputs({5, 64}, dtype, dtype, 31, device);
    Inputs odd = in;
    odd.x = Unaligned(in.x);
    odd.grad_output = Unaligned(in.grad_output);
    odd.grad_residual = in.grad_residual.t().contiguous().t();  // strided: copied
    const Results expected = Fused(in);
    const Results actual = Fused(odd);
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
  const Results none = Fused(MakeInputs({0, 16}, at::kFloat, at::kFloat, 41, device));
  EXPECT_EQ(none.values[0].numel(), 0);
  EXPECT_EQ(none.values[2].numel(), 0);
  for (int i : {3, 4}) {
    EXPECT_TRUE(at::equal(none.values[i], at::zeros({16}, none.values[i].options()))) << kNames[i];
  }
}

// Evaluation (no graph): the input itself and its LayerNorm.
TEST_F(ResidualLayerNormTest, WithoutGradientsReturnsXAndItsLayerNorm) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Inputs in = MakeInputs({2, 3, 48}, at::kBFloat16, at::kFloat, 61, device);
  at::NoGradGuard no_grad;
  const ResidualLayerNormOutputs out = ResidualLayerNorm(in.x, in.weight, in.bias, kEpsilon);
  EXPECT_EQ(out.residual.data_ptr(), in.x.data_ptr());
  EXPECT_FALSE(out.output.requires_grad());
  EXPECT_TRUE(at::equal(out.output, LayerNormForward(in.x, in.weight, in.bias, kEpsilon).output));
}

TEST_F(ResidualLayerNormTest, MisuseNamesTheArgument) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Inputs in = MakeInputs({2, 3, 8}, at::kFloat, at::kFloat, 51, device);
  EXPECT_KERNEL_ERROR(ResidualLayerNorm(at::Tensor(), in.weight, in.bias, kEpsilon),
                      "x is an undefined tensor");
  EXPECT_KERNEL_ERROR(ResidualLayerNorm(in.x, in.weight.narrow(0, 0, 7), in.bias, kEpsilon),
                      "weight");
  EXPECT_KERNEL_ERROR(ResidualLayerNorm(in.x, in.weight, in.bias, -1.0), "epsilon");
}

}  // namespace
}  // namespace varuna::kernels
