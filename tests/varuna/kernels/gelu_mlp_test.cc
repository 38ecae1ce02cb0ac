// GeluMlp, LinearBiasGelu and LinearDGeluBiasGrad against a naive float64 composition on the
// CPU (two GEMMs and the tanh GeLU written out, gradients by autograd), and in float32 against
// the unfused composition the model runs without the fusion, bit for bit; on the device of the
// test binary (kernel_test.bzl: in the _gpu twin, half-precision tensors take cuBLASLt's
// epilogues where the width F is a multiple of 8, and the reference elsewhere).
#include "varuna/kernels/gelu_mlp.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/varuna/kernels/kernel_test_util.h"
#include "varuna/kernels/bias_gelu.h"

namespace varuna::kernels {
namespace {

using testing::AllClose;
using testing::Magnitude;
using testing::RandomTensor;
using testing::Tolerance;
using testing::ToleranceFor;

// x's leading dims, K (in), F (the inner width), H (out). F = 4 x H as in GPT-2, and widths
// that are not multiples of 8 (the reference on every device), odd row counts, one row.
struct Shape {
  std::vector<int64_t> leading;
  int64_t k, f, h;
};

const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {
      {{2, 7}, 16, 64, 16}, {{37}, 24, 96, 24},     {{3, 5}, 8, 12, 8}, {{1}, 32, 128, 32},
      {{129}, 64, 256, 64}, {{4, 33}, 40, 160, 40}, {{2, 3}, 5, 20, 5}};
  return shapes;
}

struct Values {
  at::Tensor x, fc_weight, fc_bias, proj_weight, grad;
};

// Values of typical size: x ~ N(0, 1), weights ~ N(0, 1 / fan_in), so that the inner
// activations span GeLU's curved range; rounded to `dtype` on the CPU.
Values MakeValues(const Shape& s, at::ScalarType dtype, uint64_t seed) {
  std::vector<int64_t> x_shape = s.leading;
  x_shape.push_back(s.k);
  std::vector<int64_t> y_shape = s.leading;
  y_shape.push_back(s.h);
  return {RandomTensor(x_shape, seed).to(dtype),
          RandomTensor({s.f, s.k}, seed + 1, 1.5 / std::sqrt(static_cast<double>(s.k))).to(dtype),
          RandomTensor({s.f}, seed + 2, 0.5, 0.1).to(dtype),
          RandomTensor({s.h, s.f}, seed + 3, 1.0 / std::sqrt(static_cast<double>(s.f))).to(dtype),
          RandomTensor(y_shape, seed + 4).to(dtype)};
}

struct Results {
  at::Tensor y, dx, d_fc_weight, d_fc_bias, d_proj_weight;
};

Values On(const Values& v, const c10::Device& device) {
  return {v.x.to(device), v.fc_weight.to(device), v.fc_bias.to(device), v.proj_weight.to(device),
          v.grad.to(device)};
}

// Runs `mlp` forward and backward on leaves made from `v` (on their device).
template <typename Mlp>
Results Run(const Values& v, const Mlp& mlp) {
  const auto leaf = [](const at::Tensor& t) { return t.detach().clone().requires_grad_(true); };
  const at::Tensor x = leaf(v.x);
  const at::Tensor fc_weight = leaf(v.fc_weight);
  const at::Tensor fc_bias = leaf(v.fc_bias);
  const at::Tensor proj_weight = leaf(v.proj_weight);
  const at::Tensor y = mlp(x, fc_weight, fc_bias, proj_weight);
  y.backward(v.grad);
  return {y.detach(), x.grad(), fc_weight.grad(), fc_bias.grad(), proj_weight.grad()};
}

Results Fused(const Values& v) {
  return Run(v, [](const at::Tensor& x, const at::Tensor& w1, const at::Tensor& b1,
                   const at::Tensor& w2) { return GeluMlp(x, w1, b1, w2); });
}

// What the model runs without the fusion (models/gpt2/transformer_layer.cc, Mlp).
Results Unfused(const Values& v) {
  return Run(
      v, [](const at::Tensor& x, const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2) {
        return at::linear(BiasGelu(at::linear(x, w1), b1), w2);
      });
}

// In float64 on the CPU, the tanh formula written out.
Results Naive(const Values& v) {
  Values cpu;
  for (auto [to, from] : {std::pair{&cpu.x, &v.x},
                          {&cpu.fc_weight, &v.fc_weight},
                          {&cpu.fc_bias, &v.fc_bias},
                          {&cpu.proj_weight, &v.proj_weight},
                          {&cpu.grad, &v.grad}}) {
    *to = from->to(at::kCPU, at::kDouble);
  }
  return Run(cpu, [](const at::Tensor& x, const at::Tensor& w1, const at::Tensor& b1,
                     const at::Tensor& w2) {
    const at::Tensor u = at::matmul(x, w1.t()) + b1;
    const at::Tensor h =
        0.5 * u * (1.0 + at::tanh(std::sqrt(2.0 / std::acos(-1.0)) * (u + 0.044715 * u.pow(3))));
    return at::matmul(h, w2.t());
  });
}

// The output and every gradient of `a` bit for bit those of `b`.
void ExpectBitwiseEqual(const Results& a, const Results& b) {
  EXPECT_TRUE(at::equal(a.y, b.y));
  EXPECT_TRUE(at::equal(a.dx, b.dx));
  EXPECT_TRUE(at::equal(a.d_fc_weight, b.d_fc_weight));
  EXPECT_TRUE(at::equal(a.d_fc_bias, b.d_fc_bias));
  EXPECT_TRUE(at::equal(a.d_proj_weight, b.d_proj_weight));
}

std::string Describe(const Shape& s, at::ScalarType dtype) {
  std::ostringstream out;
  out << "x " << at::IntArrayRef(s.leading) << " x " << s.k << ", F " << s.f << ", H " << s.h
      << ", " << dtype;
  return out.str();
}

class GeluMlpTest : public testing::KernelTest {
 protected:
  void ExpectMatchesNaive(const c10::Device& device, at::ScalarType dtype) {
    uint64_t seed = 700;
    for (const Shape& shape : Shapes()) {
      SCOPED_TRACE(Describe(shape, dtype));
      const Values values = MakeValues(shape, dtype, seed += 10);
      const Results got = Fused(On(values, device));
      const Results want = Naive(values);
      for (auto [name, a, b] : {std::tuple{"y", &got.y, &want.y},
                                {"dx", &got.dx, &want.dx},
                                {"d_fc_weight", &got.d_fc_weight, &want.d_fc_weight},
                                {"d_fc_bias", &got.d_fc_bias, &want.d_fc_bias},
                                {"d_proj_weight", &got.d_proj_weight, &want.d_proj_weight}}) {
        ASSERT_TRUE(a->defined()) << name;
        EXPECT_EQ(a->scalar_type(), dtype) << name;
        EXPECT_EQ(a->device(), device) << name;
        EXPECT_TRUE(AllClose(*a, *b, ToleranceFor(dtype, Magnitude(*b)), name));
      }
    }
  }
};

TEST_F(GeluMlpTest, Float32MatchesTheNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  ExpectMatchesNaive(device, at::kFloat);
}

TEST_F(GeluMlpTest, BFloat16MatchesTheNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  ExpectMatchesNaive(device, at::kBFloat16);
}

TEST_F(GeluMlpTest, Float16MatchesTheNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  ExpectMatchesNaive(device, at::kHalf);
}

TEST_F(GeluMlpTest, Float64MatchesTheNaiveComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  ExpectMatchesNaive(device, at::kDouble);
}

// The reference path (float32 everywhere) runs the unfused composition's own ops: the model
// with and without the fusion trains bit for bit alike in float32.
TEST_F(GeluMlpTest, Float32IsBitwiseTheUnfusedComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  uint64_t seed = 900;
  for (const Shape& shape : Shapes()) {
    SCOPED_TRACE(Describe(shape, at::kFloat));
    const Values values = On(MakeValues(shape, at::kFloat, seed += 10), device);
    const Results fused = Fused(values);
    const Results unfused = Unfused(values);
    ExpectBitwiseEqual(fused, unfused);
  }
}

// The two GEMMs on their own: pre is x W1^T + b1 and h its GeLU; the backward's GEMM gives
// (grad W2) * gelu'(pre) and its column sums.
TEST_F(GeluMlpTest, TheEpilogueGemmsMatchTheirDefinitions) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const Shape shape{{96}, 32, 128, 32};
    SCOPED_TRACE(Describe(shape, dtype));
    const Values values = MakeValues(shape, dtype, 1234);
    const Values on = On(values, device);
    const LinearBiasGeluOutputs forward =
        LinearBiasGelu(on.x.reshape({-1, shape.k}), on.fc_weight, on.fc_bias);
    const at::Tensor x64 = values.x.reshape({-1, shape.k}).to(at::kDouble);
    const at::Tensor pre64 =
        at::addmm(values.fc_bias.to(at::kDouble), x64, values.fc_weight.to(at::kDouble).t());
    const Tolerance tolerance = ToleranceFor(dtype, Magnitude(pre64));
    EXPECT_TRUE(AllClose(forward.pre_activation, pre64, tolerance, "pre"));
    EXPECT_TRUE(AllClose(forward.output, at::gelu(pre64, "tanh"), tolerance, "h"));

    // The backward's GEMM from the pre-activation as it came out (rounded to the dtype).
    const at::Tensor grad = on.grad.reshape({-1, shape.h});
    const LinearDGeluBiasGradOutputs backward =
        LinearDGeluBiasGrad(grad, on.proj_weight, forward.pre_activation);
    const at::Tensor u = forward.pre_activation.to(at::kCPU, at::kDouble).requires_grad_(true);
    const at::Tensor dh =
        values.grad.reshape({-1, shape.h}).to(at::kDouble).mm(values.proj_weight.to(at::kDouble));
    at::gelu(u, "tanh").backward(dh);
    const at::Tensor dpre64 = u.grad();
    EXPECT_TRUE(
        AllClose(backward.pre_activation, dpre64, ToleranceFor(dtype, Magnitude(dpre64)), "dpre"));
    const at::Tensor dbias64 = dpre64.sum(0);
    EXPECT_TRUE(AllClose(backward.bias, dbias64, ToleranceFor(dtype, Magnitude(dbias64)), "dbias"));
  }
}

// The same inputs give the same bits twice (on CUDA: the same cuBLASLt algorithm, and its
// bias-gradient reduction repeatable), at a GPT-2 width in half precision.
TEST_F(GeluMlpTest, RepeatsBitwise) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf, at::kFloat}) {
    SCOPED_TRACE(Describe({{512}, 256, 1024, 256}, dtype));
    const Values values = On(MakeValues({{512}, 256, 1024, 256}, dtype, 4321), device);
    const Results first = Fused(values);
    const Results second = Fused(values);
    ExpectBitwiseEqual(first, second);
  }
}

// cuBLASLt's epilogues run for CUDA fp16/bf16 tensors whose width F is a positive multiple of 8;
// the reference runs for everything else (the CPU, float32, F = 12).
TEST_F(GeluMlpTest, TheEpiloguesRunOnCudaInHalfPrecisionWhereTheWidthAllows) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf, at::kFloat}) {
    for (const int64_t f : {int64_t{128}, int64_t{12}}) {
      const Shape shape{{40}, 32, f, 32};
      SCOPED_TRACE(Describe(shape, dtype));
      const Values v = On(MakeValues(shape, dtype, 99), device);
      bool forward = true;
      bool backward = true;
      const LinearBiasGeluOutputs out =
          LinearBiasGelu(v.x.reshape({-1, shape.k}), v.fc_weight, v.fc_bias, &forward);
      LinearDGeluBiasGrad(v.grad.reshape({-1, shape.h}), v.proj_weight, out.pre_activation,
                          &backward);
      const bool expected = device.is_cuda() && dtype != at::kFloat && f % 8 == 0;
      EXPECT_EQ(forward, expected);
      EXPECT_EQ(backward, expected);
      // A bias or pre-activation off 16-byte alignment (a view one element in) takes the
      // reference: cuBLASLt cannot be told their alignment.
      const LinearBiasGeluOutputs shifted = LinearBiasGelu(v.x.reshape({-1, shape.k}), v.fc_weight,
                                                           testing::Unaligned(v.fc_bias), &forward);
      EXPECT_FALSE(forward);
      LinearDGeluBiasGrad(v.grad.reshape({-1, shape.h}), v.proj_weight,
                          testing::Unaligned(out.pre_activation), &backward);
      EXPECT_FALSE(backward);
      EXPECT_TRUE(AllClose(shifted.output, out.output.to(at::kCPU, at::kDouble),
                           ToleranceFor(dtype, Magnitude(out.output)), "h, unaligned bias"));
    }
  }
}

// The output is a tensor of its own, as at::linear's is: the caller may modify it in place. The
// backward is not differentiable again, and says so.
TEST_F(GeluMlpTest, TheOutputMayBeModifiedInPlaceAndADoubleBackwardIsRefused) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Values v = On(MakeValues({{4, 8}, 16, 64, 16}, at::kFloat, 66), device);
  const at::Tensor x = v.x.clone().requires_grad_(true);
  at::Tensor y = GeluMlp(x, v.fc_weight, v.fc_bias, v.proj_weight);
  y.add_(1);
  y.backward(v.grad);
  // Only x needs a gradient (the weights' branches are skipped): the unfused MLP's dx.
  const at::Tensor unfused_x = v.x.clone().requires_grad_(true);
  at::linear(BiasGelu(at::linear(unfused_x, v.fc_weight), v.fc_bias), v.proj_weight)
      .backward(v.grad);
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(at::equal(x.grad(), unfused_x.grad()));
  const at::Tensor x2 = v.x.clone().requires_grad_(true);
  const at::Tensor y2 = GeluMlp(x2, v.fc_weight, v.fc_bias, v.proj_weight);
  EXPECT_KERNEL_ERROR(torch::autograd::grad({y2}, {x2}, {v.grad}, /*retain_graph=*/true,
                                            /*create_graph=*/true),
                      "GeluMlp: its backward is not differentiable");
}

// An input that needs no gradient (here x, as a stage's first layer input from the embedding
// would not be without a graph) takes the backward's branch that skips dx, and the gradients that
// are asked for are the unfused MLP's, bit for bit in float32.
TEST_F(GeluMlpTest, AnInputWithoutGradientGetsNoneAndTheOthersTheirs) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Values values = On(MakeValues({{4, 8}, 16, 64, 16}, at::kFloat, 55), device);
  const at::Tensor w1 = values.fc_weight.clone().requires_grad_(true);
  const at::Tensor b1 = values.fc_bias.clone().requires_grad_(true);
  const at::Tensor w2 = values.proj_weight.clone().requires_grad_(true);
  GeluMlp(values.x, w1, b1, w2).backward(values.grad);
  EXPECT_FALSE(values.x.grad().defined());
  const Results unfused = Unfused(values);
  EXPECT_TRUE(at::equal(w1.grad(), unfused.d_fc_weight));
  EXPECT_TRUE(at::equal(b1.grad(), unfused.d_fc_bias));
  EXPECT_TRUE(at::equal(w2.grad(), unfused.d_proj_weight));
}

TEST_F(GeluMlpTest, MisuseNamesTheArgument) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Values v = On(MakeValues({{4}, 16, 64, 16}, at::kFloat, 77), device);
  EXPECT_KERNEL_ERROR(GeluMlp(at::Tensor(), v.fc_weight, v.fc_bias, v.proj_weight),
                      "GeluMlp: x is an undefined tensor");
  EXPECT_KERNEL_ERROR(GeluMlp(v.x, v.fc_weight, v.fc_bias, v.proj_weight.t()),
                      "proj_weight must be [H, F]");
  EXPECT_KERNEL_ERROR(GeluMlp(v.x, v.fc_weight.narrow(1, 0, 8), v.fc_bias, v.proj_weight),
                      "LinearBiasGelu: weight has shape");
  EXPECT_KERNEL_ERROR(GeluMlp(v.x, v.fc_weight, v.fc_bias.narrow(0, 0, 8), v.proj_weight),
                      "LinearBiasGelu: bias has shape");
  EXPECT_KERNEL_ERROR(
      GeluMlp(v.x, v.fc_weight, v.fc_bias.to(at::kDouble), v.proj_weight.narrow(1, 0, 64)),
      "bias is Double but x is Float");
  EXPECT_KERNEL_ERROR(LinearDGeluBiasGrad(v.grad, v.proj_weight, v.grad),
                      "LinearDGeluBiasGrad: weight has shape");
  EXPECT_KERNEL_ERROR(LinearBiasGelu(v.x.to(at::kInt), v.fc_weight, v.fc_bias),
                      "LinearBiasGelu: x");
}

}  // namespace
}  // namespace varuna::kernels
