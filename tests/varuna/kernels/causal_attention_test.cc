// CausalAttention's two backends on the test's device against a naive float64 attention with
// autograd (forward, and the gradients of q, k and v through the views of a fused QKV tensor);
// dropout semantics; backend names; the timing helpers.
#include "varuna/kernels/causal_attention.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "tests/varuna/kernels/kernel_test_util.h"

namespace varuna::kernels {
namespace {

using ::varuna::kernels::testing::AllClose;
using ::varuna::kernels::testing::RandomTensor;
using ::varuna::kernels::testing::ToleranceFor;

using CausalAttentionTest = testing::KernelTest;

constexpr AttentionBackend kBackends[] = {AttentionBackend::kFusedSoftmax, AttentionBackend::kSdpa};

std::vector<at::ScalarType> DtypesOn(const c10::Device& device) {
  if (device.is_cpu()) return {at::kFloat, at::kDouble, at::kBFloat16};
  return {at::kFloat, at::kHalf, at::kBFloat16};
}

// q, k, v [b, heads, s, d] as the model makes them: views into one [b, s, 3 * heads * d]
// tensor (the fused QKV projection), split on the last dim, heads moved to dim 1.
struct Qkv {
  at::Tensor q, k, v;
};
Qkv SplitHeads(const at::Tensor& qkv, int64_t heads) {
  const int64_t b = qkv.size(0);
  const int64_t s = qkv.size(1);
  const int64_t h = qkv.size(2) / 3;
  const std::vector<at::Tensor> parts = qkv.split(h, /*dim=*/-1);
  const auto view = [&](const at::Tensor& t) {
    return t.view({b, s, heads, h / heads}).transpose(1, 2);
  };
  return {view(parts[0]), view(parts[1]), view(parts[2])};
}

struct AttentionResult {
  at::Tensor out;       // [b, heads, s, d]
  at::Tensor grad_qkv;  // [b, s, 3h]: the gradients of q, k and v side by side
};

// The naive float64 attention, written out: softmax((q k^T) / sqrt(d) masked) v, with autograd.
AttentionResult NaiveAttention(const at::Tensor& qkv, int64_t heads, const at::Tensor& grad) {
  const at::Tensor leaf = qkv.to(at::kCPU, at::kDouble).clone().requires_grad_();
  const Qkv x = SplitHeads(leaf, heads);
  const int64_t s = qkv.size(1);
  const double d = static_cast<double>(x.q.size(-1));
  const at::Tensor scores = at::matmul(x.q, x.k.transpose(-2, -1)) / std::sqrt(d);
  const at::Tensor future = at::ones({s, s}, at::kBool).triu(1);
  const at::Tensor z = scores.masked_fill(future, -INFINITY);
  const at::Tensor e = at::exp(z - z.amax(-1, /*keepdim=*/true).detach());
  const at::Tensor out = at::matmul(e / e.sum(-1, /*keepdim=*/true), x.v);
  out.backward(grad.to(at::kCPU, at::kDouble));
  return {out.detach(), leaf.grad()};
}

AttentionResult OpAttention(const at::Tensor& qkv, int64_t heads, const at::Tensor& grad,
                            AttentionBackend backend, double dropout, bool training) {
  const at::Tensor leaf = qkv.detach().clone().requires_grad_();
  const Qkv x = SplitHeads(leaf, heads);
  const at::Tensor out = CausalAttention(x.q, x.k, x.v, dropout, training, backend);
  out.backward(grad);
  return {out.detach(), leaf.grad()};
}

TEST_F(CausalAttentionTest, BothBackendsMatchNaiveAttention) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  struct Shape {
    int64_t b, heads, s, d;
  };
  std::vector<Shape> shapes = {{1, 1, 1, 4}, {2, 3, 5, 4}, {1, 2, 17, 8}, {2, 4, 64, 16}};
  if (!device.is_cpu()) shapes.push_back({1, 4, 1024, 64});
  uint64_t seed = 100;
  for (const at::ScalarType dtype : DtypesOn(device)) {
    for (const Shape& shape : shapes) {
      seed += 2;
      const at::Tensor qkv =
          RandomTensor({shape.b, shape.s, 3 * shape.heads * shape.d}, seed).to(device, dtype);
      const at::Tensor grad =
          RandomTensor({shape.b, shape.heads, shape.s, shape.d}, seed + 1).to(device, dtype);
      const AttentionResult naive = NaiveAttention(qkv, shape.heads, grad);
      const double grad_magnitude = naive.grad_qkv.abs().max().item<double>();
      for (const AttentionBackend backend : kBackends) {
        std::ostringstream what;
        what << AttentionBackendName(backend) << " " << dtype << " b " << shape.b << " heads "
             << shape.heads << " s " << shape.s << " d " << shape.d;
        const AttentionResult ours =
            OpAttention(qkv, shape.heads, grad, backend, /*dropout=*/0.0, /*training=*/true);
        EXPECT_EQ(ours.out.scalar_type(), dtype) << what.str();
        EXPECT_EQ(ours.out.device(), device) << what.str();
        EXPECT_TRUE(AllClose(ours.out, naive.out, ToleranceFor(dtype), what.str() + " output"));
        EXPECT_TRUE(AllClose(ours.grad_qkv, naive.grad_qkv, ToleranceFor(dtype, grad_magnitude),
                             what.str() + " grad q|k|v"));
      }
    }
  }
}

TEST_F(CausalAttentionTest, FusedSoftmaxIsTheModelsUnfusedAttentionOnTheCpu) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  if (!device.is_cpu()) GTEST_SKIP() << "a statement about the CPU reference path";
  // The composition models/gpt2 used before the fused op: fp32 softmax of scores masked with the
  // lowest float.
  const at::Tensor qkv = RandomTensor({2, 16, 3 * 4 * 8}, 7).to(at::kFloat);
  const Qkv x = SplitHeads(qkv, 4);
  const at::Tensor mask = at::ones({16, 16}, at::kBool).triu(1).view({1, 1, 16, 16});
  const at::Tensor scores = at::matmul(x.q * (1.0 / std::sqrt(8.0)), x.k.transpose(-2, -1));
  const at::Tensor probs =
      at::softmax(scores.masked_fill(mask, std::numeric_limits<float>::lowest()), -1);
  const at::Tensor expected = at::matmul(probs, x.v);
  EXPECT_TRUE(at::equal(CausalAttention(x.q, x.k, x.v, 0.0, false, AttentionBackend::kFusedSoftmax),
                        expected));
}

TEST_F(CausalAttentionTest, DropoutOnlyWhenTraining) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::Tensor qkv = RandomTensor({2, 32, 3 * 2 * 8}, 11).to(device, at::kFloat);
  const Qkv x = SplitHeads(qkv, 2);
  for (const AttentionBackend backend : kBackends) {
    const char* name = AttentionBackendName(backend);
    const at::Tensor plain = CausalAttention(x.q, x.k, x.v, 0.0, true, backend);
    // training == false: dropout ignored, deterministic.
    const at::Tensor eval_a = CausalAttention(x.q, x.k, x.v, 0.5, false, backend);
    const at::Tensor eval_b = CausalAttention(x.q, x.k, x.v, 0.5, false, backend);
    EXPECT_TRUE(at::equal(eval_a, eval_b)) << name;
    EXPECT_TRUE(at::equal(eval_a, plain)) << name;
    // training == true: probabilities dropped, so the output changes, and from call to call.
    const at::Tensor train_a = CausalAttention(x.q, x.k, x.v, 0.5, true, backend);
    const at::Tensor train_b = CausalAttention(x.q, x.k, x.v, 0.5, true, backend);
    EXPECT_FALSE(at::allclose(train_a, plain)) << name;
    EXPECT_FALSE(at::equal(train_a, train_b)) << name;
    EXPECT_TRUE(train_a.isfinite().all().item<bool>()) << name;
  }
}

TEST_F(CausalAttentionTest, ParsesBackendNames) {
  for (const AttentionBackend backend : kBackends) {
    const absl::StatusOr<AttentionBackend> parsed =
        ParseAttentionBackend(AttentionBackendName(backend));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, backend);
  }
  EXPECT_STREQ(AttentionBackendName(AttentionBackend::kFusedSoftmax), "fused-softmax");
  EXPECT_STREQ(AttentionBackendName(AttentionBackend::kSdpa), "sdpa");
  for (const char* bad : {"flash", "auto", "", "SDPA"}) {
    const absl::StatusOr<AttentionBackend> parsed = ParseAttentionBackend(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), "unknown attention backend '" + std::string(bad) +
                                             "': choose one of fused-softmax, sdpa");
  }
}

TEST_F(CausalAttentionTest, MisuseThrowsNamingTheArgument) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const auto options = at::TensorOptions().device(device);
  const at::Tensor t = at::randn({1, 2, 4, 8}, options);
  const auto attend = [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         double dropout = 0.0) {
    return [=] { CausalAttention(q, k, v, dropout, true, AttentionBackend::kFusedSoftmax); };
  };
  EXPECT_KERNEL_ERROR(attend(at::randn({2, 4, 8}, options), t, t)(),
                      "CausalAttention: q must have shape [batch, heads, seq, head_dim], got "
                      "[2, 4, 8]");
  EXPECT_KERNEL_ERROR(attend(t, at::randn({1, 2, 5, 8}, options), t)(),
                      "k has shape [1, 2, 5, 8] but q has shape [1, 2, 4, 8]");
  EXPECT_KERNEL_ERROR(attend(t, t, t.to(at::kHalf))(),
                      "v is Half but q is Float; q, k and v must have the same dtype");
  EXPECT_KERNEL_ERROR(attend(t, t, at::Tensor())(), "v is an undefined tensor");
  EXPECT_KERNEL_ERROR(attend(t.to(at::kInt), t.to(at::kInt), t.to(at::kInt))(),
                      "q, k and v must be floating point, got Int");
  EXPECT_KERNEL_ERROR(attend(t, t, t, 1.0)(), "dropout must be in [0, 1), got 1");
  EXPECT_KERNEL_ERROR(attend(t, t, t, -0.1)(), "dropout must be in [0, 1), got -0.1");
}

TEST_F(CausalAttentionTest, MeasuresBothBackendsWithoutTouchingTheDefaultGenerator) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::Tensor state_before = at::detail::getDefaultCPUGenerator().get_state();
  const std::vector<AttentionTiming> timings =
      MeasureAttentionBackends(device, 1, 2, 16, 8, at::kFloat, /*iterations=*/2);
  EXPECT_TRUE(at::equal(at::detail::getDefaultCPUGenerator().get_state(), state_before));
  ASSERT_EQ(timings.size(), 2u);
  EXPECT_EQ(timings[0].backend, AttentionBackend::kFusedSoftmax);
  EXPECT_EQ(timings[1].backend, AttentionBackend::kSdpa);
  for (const AttentionTiming& timing : timings) {
    EXPECT_GT(timing.milliseconds, 0.0) << AttentionBackendName(timing.backend);
    EXPECT_LT(timing.milliseconds, 10000.0) << AttentionBackendName(timing.backend);
  }
  const AttentionBackend faster = FasterAttentionBackend(timings);
  EXPECT_TRUE(faster == AttentionBackend::kFusedSoftmax || faster == AttentionBackend::kSdpa);

  EXPECT_KERNEL_ERROR(MeasureAttentionBackends(device, 1, 0, 16, 8, at::kFloat, 1),
                      "batch, heads, seq and head_dim must be positive, got 1, 0, 16, 8");
  EXPECT_KERNEL_ERROR(MeasureAttentionBackends(device, 1, 2, 16, 8, at::kFloat, 0),
                      "iterations must be positive, got 0");
}

TEST_F(CausalAttentionTest, FasterBackendIsTheSmallestTime) {
  using B = AttentionBackend;
  EXPECT_EQ(FasterAttentionBackend({{B::kFusedSoftmax, 2.0}, {B::kSdpa, 1.5}}), B::kSdpa);
  EXPECT_EQ(FasterAttentionBackend({{B::kFusedSoftmax, 1.0}, {B::kSdpa, 1.5}}), B::kFusedSoftmax);
  EXPECT_EQ(FasterAttentionBackend({{B::kSdpa, 1.0}, {B::kFusedSoftmax, 1.0}}), B::kSdpa);
  EXPECT_EQ(FasterAttentionBackend({{B::kFusedSoftmax, 3.0}}), B::kFusedSoftmax);
  EXPECT_KERNEL_ERROR(FasterAttentionBackend({}),
                      "FasterAttentionBackend: no timings to choose from");
}

}  // namespace
}  // namespace varuna::kernels
