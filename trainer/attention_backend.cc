#include "trainer/attention_backend.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainer {
namespace {

using varuna::kernels::AttentionBackend;
using varuna::kernels::AttentionBackendName;
using varuna::kernels::AttentionTiming;

// "[b, heads, s, d] dtype": the attention shape measured, for messages.
std::string Shape(const gpt2::Gpt2Config& model, int64_t micro_batch, at::ScalarType dtype) {
  return absl::StrCat("[", micro_batch, ", ", model.num_attention_heads, ", ", model.seq_length,
                      ", ", model.head_dim(), "] ", c10::toString(dtype));
}

// Forward + backward of each backend at the run's shape under the switches in force. Under
// --deterministic a backend without a deterministic kernel throws and is left out, so an empty
// result means none runs; otherwise the error of the last backend is rethrown (as before).
std::vector<AttentionTiming> Measure(const c10::Device& device, at::ScalarType dtype,
                                     const gpt2::Gpt2Config& model, int64_t micro_batch,
                                     int iterations, bool deterministic) {
  const auto measure = [&] {
    return varuna::kernels::MeasureAttentionBackends(device, micro_batch, model.num_attention_heads,
                                                     model.seq_length, model.head_dim(), dtype,
                                                     iterations);
  };
  if (!deterministic) return measure();
  try {
    return measure();
  } catch (const c10::Error&) {
    return {};
  }
}

}  // namespace

absl::StatusOr<AttentionChoice> ChooseAttentionBackend(const std::string& flag,
                                                       const c10::Device& device,
                                                       at::ScalarType dtype,
                                                       const gpt2::Gpt2Config& model,
                                                       int64_t micro_batch, bool deterministic) {
  const std::string mode =
      deterministic ? "; deterministic: SDPA limited to flash, memory-efficient and math" : "";
  if (flag != "auto") {
    absl::StatusOr<AttentionBackend> backend = varuna::kernels::ParseAttentionBackend(flag);
    if (!backend.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--attention-backend=", flag, ": ",
                                                     backend.status().message(),
                                                     ", or auto (the faster one on a GPU)"));
    }
    if (deterministic && device.is_cuda()) {
      const std::vector<AttentionTiming> ran =
          Measure(device, dtype, model, micro_batch, /*iterations=*/1, deterministic);
      if (std::none_of(ran.begin(), ran.end(),
                       [&](const AttentionTiming& t) { return t.backend == *backend; })) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--attention-backend=", flag,
            " with --deterministic: it has no deterministic kernel "
            "for ",
            Shape(model, micro_batch, dtype),
            " on this device: use "
            "--attention-backend=fused-softmax (deterministic by construction) or auto, or drop "
            "--deterministic"));
      }
    }
    return AttentionChoice{*backend, absl::StrCat(flag, " (--attention-backend", mode, ")")};
  }
  if (!device.is_cuda()) {
    return AttentionChoice{
        AttentionBackend::kFusedSoftmax,
        absl::StrCat("fused-softmax (auto: the reference composition on the CPU", mode, ")")};
  }
  constexpr int kIterations = 5;
  const std::vector<AttentionTiming> timings =
      Measure(device, dtype, model, micro_batch, kIterations, deterministic);
  if (timings.empty()) {  // only under --deterministic (Measure rethrows otherwise)
    return absl::FailedPreconditionError(
        absl::StrCat("--attention-backend=auto with --deterministic: no attention backend runs "
                     "deterministically for ",
                     Shape(model, micro_batch, dtype), " on this device: drop --deterministic"));
  }
  const AttentionBackend faster = varuna::kernels::FasterAttentionBackend(timings);
  std::string measured;
  for (const AttentionTiming& timing : timings) {
    absl::StrAppend(&measured, measured.empty() ? "" : ", ", AttentionBackendName(timing.backend),
                    absl::StrFormat(" %.3f ms", timing.milliseconds));
  }
  return AttentionChoice{
      faster, absl::StrCat(AttentionBackendName(faster), " (auto",
                           deterministic ? " among the deterministic backends" : "",
                           ": forward + backward of ", Shape(model, micro_batch, dtype), ": ",
                           measured, mode, ")")};
}

}  // namespace trainer
