// The causal-attention backend of a training run (--attention-backend).
//
//   fused-softmax  the fused causal softmax between two GEMMs (Megatron's path)
//   sdpa           LibTorch's scaled_dot_product_attention (flash / cuDNN / efficient kernels)
//   auto           on the CPU: fused-softmax (its reference composition, the tested path); on
//                  CUDA: whichever of the two runs forward + backward faster for this run's
//                  micro-batch shape on this device, measured once at start-up (a few
//                  iterations each, about a second).
//
// Under --deterministic (trainer/deterministic_mode.h, which limits SDPA to its flash,
// memory-efficient and math kernels) both backends are deterministic: fused-softmax by
// construction, sdpa through LibTorch's deterministic switch. auto then picks among the
// backends that run under the switch for this shape, and on CUDA an explicit choice is tried
// once at this shape and refused if it finds no deterministic kernel.
//
// Thread safety: none needed; called once per process.
#ifndef VARUNA_TRAINER_ATTENTION_BACKEND_H_
#define VARUNA_TRAINER_ATTENTION_BACKEND_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "models/gpt2/config.h"
#include "varuna/kernels/causal_attention.h"

namespace trainer {

struct AttentionChoice {
  varuna::kernels::AttentionBackend backend;
  std::string reason;  // For the log: "sdpa (auto: 1.92 ms vs fused-softmax 2.71 ms ...)".
};

// Resolves `flag` (the value of --attention-backend) for `device` and `dtype`; auto on CUDA
// measures the attention of `model` at `micro_batch` sequences. `deterministic`: the run is
// under --deterministic (the mode already entered). InvalidArgument naming the flag and the
// valid values when it is none of them, or, under --deterministic, naming the backend that
// found no deterministic kernel and the fix.
absl::StatusOr<AttentionChoice> ChooseAttentionBackend(const std::string& flag,
                                                       const c10::Device& device,
                                                       at::ScalarType dtype,
                                                       const gpt2::Gpt2Config& model,
                                                       int64_t micro_batch, bool deterministic);

}  // namespace trainer

#endif  // VARUNA_TRAINER_ATTENTION_BACKEND_H_
