#include "trainer/attention_backend.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainer {

using varuna::kernels::AttentionBackend;
using varuna::kernels::AttentionBackendName;

absl::StatusOr<AttentionChoice> ChooseAttentionBackend(const std::string& flag,
                                                       const c10::Device& device,
                                                       at::ScalarType dtype,
                                                       const gpt2::Gpt2Config& model,
                                                       int64_t micro_batch) {
  if (flag != "auto") {
    absl::StatusOr<AttentionBackend> backend = varuna::kernels::ParseAttentionBackend(flag);
    if (!backend.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--attention-backend=", flag, ": ",
                                                     backend.status().message(),
                                                     ", or auto (the faster one on a GPU)"));
    }
    return AttentionChoice{*backend, absl::StrCat(flag, " (--attention-backend)")};
  }
  if (!device.is_cuda()) {
    return AttentionChoice{AttentionBackend::kFusedSoftmax,
                           "fused-softmax (auto: the reference composition on the CPU)"};
  }
  constexpr int kIterations = 5;
  const std::vector<varuna::kernels::AttentionTiming> timings =
      varuna::kernels::MeasureAttentionBackends(device, micro_batch, model.num_attention_heads,
                                                model.seq_length, model.head_dim(), dtype,
                                                kIterations);
  const AttentionBackend faster = varuna::kernels::FasterAttentionBackend(timings);
  std::string measured;
  for (const varuna::kernels::AttentionTiming& timing : timings) {
    absl::StrAppend(&measured, measured.empty() ? "" : ", ", AttentionBackendName(timing.backend),
                    absl::StrFormat(" %.3f ms", timing.milliseconds));
  }
  return AttentionChoice{
      faster,
      absl::StrCat(AttentionBackendName(faster), " (auto: forward + backward of [", micro_batch,
                   ", ", model.num_attention_heads, ", ", model.seq_length, ", ", model.head_dim(),
                   "] ", c10::toString(dtype), ": ", measured, ")")};
}

}  // namespace trainer
