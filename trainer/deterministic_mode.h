// --deterministic (Megatron's --deterministic-mode): the process-wide settings under which two
// runs with the same flags, and a resumed run and the uninterrupted one, give bitwise-equal
// losses on the same layout (stage map, micro-batch size, device model, thread count).
//
// What the mode sets (EnterDeterministicMode), all in LibTorch's global context or the
// environment, before any CUDA work:
//   - LibTorch's deterministic algorithms, warn_only = false: an op that has a deterministic
//     variant uses it; an op that has none throws c10::Error ("<op> does not have a
//     deterministic implementation ..."), which pretrain_gpt2 turns into an error naming the
//     op and the fix (NondeterministicOperation, NondeterministicOperationError).
//     LibTorch's companion setting stays at its default: under the switch, memory from
//     at::empty is filled (NaN / the largest integer), so even a read of unwritten memory
//     repeats.
//   - CUBLAS_WORKSPACE_CONFIG=:4096:8 (cuBLAS reads it once, when it initializes); a value the
//     user set is kept if it is one of cuBLAS's deterministic ones (:4096:8, :16:8), refused
//     otherwise.
//   - cuDNN deterministic, cuDNN benchmark off (no timing-dependent algorithm choice).
//   - SDPA without its cuDNN backend, which has no deterministic kernel (measured on an H100,
//     PyTorch 2.11: "No available kernel" under the deterministic switch); flash,
//     memory-efficient and math remain, each repeatable under the switch (dropout included).
//
// The project's own CUDA kernels (varuna/kernels/cuda) need no switch: none uses atomics, and
// every reduction adds in an order fixed by the shapes and the device's SM count alone:
//   layer_norm (gamma/beta grads: one fp32 partial-sum row per block, then
//     SumPartialRowsKernel in row order), bias_gelu (bias grad: the same two stages),
//   causal_softmax (one row per warp or block, fixed shuffle tree), multi_tensor (squared L2
//     norm: per-chunk block sums, then one block in chunk order; the inf flag is a store of
//     1.0f by any block, order-free), fused_adam (elementwise), softmax_cross_entropy (a block
//     per row, fixed reduction tree; --cross-entropy-loss-fusion), bias_dropout_add (bias grad:
//     the two stages of bias_gelu; the dropout mask from Philox by element index;
//     --bias-dropout-fusion).
//
// Thread safety: EnterDeterministicMode changes the environment and LibTorch's global context:
// call it once from main, before other threads start. The other functions are pure.
#ifndef VARUNA_TRAINER_DETERMINISTIC_MODE_H_
#define VARUNA_TRAINER_DETERMINISTIC_MODE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace trainer {

inline constexpr char kCublasWorkspaceVariable[] = "CUBLAS_WORKSPACE_CONFIG";
inline constexpr char kDeterministicCublasWorkspace[] = ":4096:8";

// The CUBLAS_WORKSPACE_CONFIG the mode runs with, given its current value (nullptr or empty:
// not set): not set -> ":4096:8"; ":4096:8" or ":16:8" -> kept. Any other value is
// InvalidArgument naming it and the fix (unset it, or set one of the two).
absl::StatusOr<std::string> DeterministicCublasWorkspace(const char* current);

// Turns the mode on for this process (see the file comment). Returns one line per choice for
// the start-up log ("> deterministic: ..."). On an error (that of DeterministicCublasWorkspace)
// nothing has been changed.
absl::StatusOr<std::vector<std::string>> EnterDeterministicMode();

// The op named in `message` when it is LibTorch's error for an op without a deterministic
// implementation under the deterministic switch ("<op> does not have a deterministic
// implementation, but you set 'torch.use_deterministic_algorithms(True)'..."); nullopt for any
// other message.
std::optional<std::string> NondeterministicOperation(std::string_view message);

// pretrain_gpt2's message for such an op: names it and says what to do.
std::string NondeterministicOperationError(const std::string& op);

}  // namespace trainer

#endif  // VARUNA_TRAINER_DETERMINISTIC_MODE_H_
