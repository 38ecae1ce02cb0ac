// The FP8 flags of Megatron-LM (Transformer Engine's delayed scaling), read into a recipe:
//   --fp8-format=hybrid|e4m3         off when not given (Megatron's default)
//   --fp8-amax-history-len=N         steps of amax kept (Megatron's default 1)
//   --fp8-amax-compute-algo=most_recent|max   (Megatron's default most_recent)
//   --fp8-margin=M                   scale = fp8_max / amax / 2^M (default 0)
// and the start-up checks of an FP8 run: the device (CUDA of compute capability 8.9 or newer, or
// the CPU, where LibTorch emulates the FP8 GEMM) and the shapes (multiples of 16).
//
// Thread safety: pure functions.
#ifndef VARUNA_TRAINER_FP8_FLAGS_H_
#define VARUNA_TRAINER_FP8_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "varuna/kernels/fp8_linear.h"

namespace trainer {

// The recipe of the four flags' values; nullopt when `format` is empty (FP8 off). Errors
// (InvalidArgument, naming the flag, its value and the choices): an unknown format or
// algorithm, a history length < 1 or a negative margin, or any of the other three flags given
// (`others_given`) without --fp8-format.
absl::StatusOr<std::optional<varuna::kernels::Fp8Recipe>> Fp8RecipeFromFlags(
    const std::string& format, int64_t amax_history_len, const std::string& amax_compute_algo,
    int margin, bool others_given);

// "> fp8: hybrid (E4M3 forward, E5M2 gradients), delayed scaling: amax history 1, most_recent,
// margin 0", for the start-up log (which linears: trainer/fp8_linear_choice.h).
std::string DescribeFp8Recipe(const varuna::kernels::Fp8Recipe& recipe);

}  // namespace trainer

#endif  // VARUNA_TRAINER_FP8_FLAGS_H_
