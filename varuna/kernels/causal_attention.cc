#include "varuna/kernels/causal_attention.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/DeviceAccelerator.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <chrono>
#include <cmath>
#include <exception>
#include <string>

#include "absl/status/status.h"
#include "varuna/kernels/argument_checks.h"
#include "varuna/kernels/causal_softmax.h"

namespace varuna::kernels {
namespace {

constexpr AttentionBackend kAllBackends[] = {AttentionBackend::kFusedSoftmax,
                                             AttentionBackend::kSdpa};

void CheckAttentionInput(const at::Tensor& t, const char* name, const at::Tensor& q) {
  CheckDefined(t, "CausalAttention", name);
  TORCH_CHECK(t.dim() == 4, "CausalAttention: ", name,
              " must have shape [batch, heads, seq, head_dim], got ", t.sizes());
  TORCH_CHECK(t.sizes() == q.sizes(), "CausalAttention: ", name, " has shape ", t.sizes(),
              " but q has shape ", q.sizes(), "; q, k and v must have the same shape");
  TORCH_CHECK(t.scalar_type() == q.scalar_type(), "CausalAttention: ", name, " is ",
              t.scalar_type(), " but q is ", q.scalar_type(),
              "; q, k and v must have the same dtype");
  TORCH_CHECK(t.device() == q.device(), "CausalAttention: ", name, " is on ", t.device(),
              " but q is on ", q.device(), "; q, k and v must be on the same device");
}

at::Tensor FusedSoftmaxAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 double dropout, bool training) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  // Scaled before the product, as Megatron's baddbmm alpha, so fp16 scores stay in range.
  const at::Tensor scores = at::matmul(q * scale, k.transpose(-2, -1));
  at::Tensor probs = CausalSoftmax(scores, /*scale=*/1.0);
  if (training && dropout > 0.0) probs = at::dropout(probs, dropout, /*train=*/true);
  return at::matmul(probs, v);
}

void SynchronizeDevice(const c10::Device& device) {
  if (device.is_cpu()) return;
  at::accelerator::synchronizeDevice(device.index());
}

}  // namespace

absl::StatusOr<AttentionBackend> ParseAttentionBackend(std::string_view name) {
  std::string valid;
  for (const AttentionBackend backend : kAllBackends) {
    if (name == AttentionBackendName(backend)) return backend;
    if (!valid.empty()) valid += ", ";
    valid += AttentionBackendName(backend);
  }
  return absl::InvalidArgumentError("unknown attention backend '" + std::string(name) +
                                    "': choose one of " + valid);
}

const char* AttentionBackendName(AttentionBackend backend) {
  switch (backend) {
    case AttentionBackend::kFusedSoftmax:
      return "fused-softmax";
    case AttentionBackend::kSdpa:
      return "sdpa";
  }
  return "unknown";
}

at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           double dropout, bool training, AttentionBackend backend) {
  CheckAttentionInput(q, "q", q);  // checks q.defined() before comparing q with itself
  CheckAttentionInput(k, "k", q);
  CheckAttentionInput(v, "v", q);
  TORCH_CHECK(c10::isFloatingType(q.scalar_type()),
              "CausalAttention: q, k and v must be floating point, got ", q.scalar_type());
  TORCH_CHECK(dropout >= 0.0 && dropout < 1.0, "CausalAttention: dropout must be in [0, 1), got ",
              dropout);
  if (backend == AttentionBackend::kFusedSoftmax) {
    return FusedSoftmaxAttention(q, k, v, dropout, training);
  }
  TORCH_CHECK(backend == AttentionBackend::kSdpa, "CausalAttention: unknown backend ",
              static_cast<int>(backend));
  return at::scaled_dot_product_attention(
      q, k, v, /*attn_mask=*/std::nullopt, /*dropout_p=*/training ? dropout : 0.0,
      /*is_causal=*/true, /*scale=*/1.0 / std::sqrt(static_cast<double>(q.size(-1))));
}

std::vector<AttentionTiming> MeasureAttentionBackends(c10::Device device, int64_t batch,
                                                      int64_t heads, int64_t seq, int64_t head_dim,
                                                      at::ScalarType dtype, int iterations) {
  TORCH_CHECK(batch > 0 && heads > 0 && seq > 0 && head_dim > 0,
              "MeasureAttentionBackends: batch, heads, seq and head_dim must be positive, got ",
              batch, ", ", heads, ", ", seq, ", ", head_dim);
  TORCH_CHECK(iterations > 0, "MeasureAttentionBackends: iterations must be positive, got ",
              iterations);
  // A private generator: measuring must not move the default generators that training draws
  // dropout masks and initial weights from.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(/*seed_in=*/12345);
  const auto random = [&] {
    return at::randn({batch, heads, seq, head_dim}, generator, at::kFloat).to(device, dtype);
  };
  const at::Tensor q = random().requires_grad_();
  const at::Tensor k = random().requires_grad_();
  const at::Tensor v = random().requires_grad_();
  const at::Tensor grad = random();
  const c10::AutoGradMode enable_grad(true);

  std::vector<AttentionTiming> timings;
  std::exception_ptr failure;
  for (const AttentionBackend backend : kAllBackends) {
    const auto step = [&] {
      at::Tensor out = CausalAttention(q, k, v, /*dropout=*/0.0, /*training=*/true, backend);
      out.backward(grad);
      for (const at::Tensor& input : {q, k, v}) input.mutable_grad() = at::Tensor();
    };
    try {
      step();  // warm-up: kernel selection, allocator growth, lazy initialisation
      SynchronizeDevice(q.device());
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iterations; ++i) step();
      SynchronizeDevice(q.device());
      const std::chrono::duration<double, std::milli> elapsed =
          std::chrono::steady_clock::now() - start;
      timings.push_back({backend, elapsed.count() / iterations});
    } catch (const c10::Error&) {
      failure = std::current_exception();
    }
  }
  if (timings.empty() && failure) std::rethrow_exception(failure);
  return timings;
}

AttentionBackend FasterAttentionBackend(const std::vector<AttentionTiming>& timings) {
  TORCH_CHECK(!timings.empty(),
              "FasterAttentionBackend: no timings to choose from (MeasureAttentionBackends "
              "returned none)");
  const AttentionTiming* best = &timings.front();
  for (const AttentionTiming& timing : timings) {
    if (timing.milliseconds < best->milliseconds) best = &timing;
  }
  return best->backend;
}

}  // namespace varuna::kernels
