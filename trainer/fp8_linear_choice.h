// Which linears of each layer compute in FP8 (--fp8-linears, with --fp8-format):
//
//   all (the default)   the four: linear_qkv, linear_proj, linear_fc1, linear_fc2
//   a comma list        those named (Megatron-core's names of attn.c_attn, attn.c_proj, mlp.c_fc
//                       and mlp.c_proj)
//   auto                on the CPU, all four (LibTorch emulates the FP8 GEMM there: nothing to
//                       measure); on CUDA, each linear in FP8 only where its forward + backward
//                       at this run's micro-batch took at most 95% of its time in the model's
//                       dtype, measured once at start-up (the median of 20 iterations each, fresh
//                       weights, timed as training pays them: varuna::DeviceTimer::TimeAhead) and,
//                       in a job of several processes, summed over every rank first so that all
//                       ranks choose alike (replicas must hold the same FP8 state). The choice is
//                       made again at every start, a resumed run's included; not in profile mode,
//                       which times one fixed model (argument_checks refuses it).
//
// An FP8 GEMM is not faster at every shape (on one H200 the attention projection was slower in
// FP8 than in bf16 at both GPT-2 widths measured: docs/kernels.md), so auto measures.
//
// Thread safety: none needed; called once per engine built (CreateGptEngine), from one thread.
#ifndef VARUNA_TRAINER_FP8_LINEAR_CHOICE_H_
#define VARUNA_TRAINER_FP8_LINEAR_CHOICE_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model.h"
#include "varuna/comm/world.h"
#include "varuna/kernels/fp8_linear.h"

namespace trainer {

// --fp8-linears as parsed: `automatic` for auto, else the linears named.
struct Fp8LinearsFlag {
  bool automatic = false;
  gpt2::Fp8LinearSet linears;
};

// Parses `value`: all, auto, or a comma list of linear_qkv, linear_proj, linear_fc1, linear_fc2
// (each at most once). InvalidArgument naming --fp8-linears, the bad word and the choices.
absl::StatusOr<Fp8LinearsFlag> ParseFp8Linears(const std::string& value);

// --fp8-linears as the trainer takes it: ParseFp8Linears(value), refused (InvalidArgument, naming
// the fix) when `given` without FP8 (`fp8_format` empty), or auto with --deterministic (a timing
// may choose differently from one run to the next).
absl::StatusOr<Fp8LinearsFlag> CheckFp8Linears(const std::string& value, bool given,
                                               const std::string& fp8_format, bool deterministic);

// "linear_qkv, linear_fc1" (in layer order), "all four", or "none".
std::string Fp8LinearsNames(const gpt2::Fp8LinearSet& linears);

struct Fp8LinearsChoice {
  gpt2::Fp8LinearSet linears;
  // For the log: "linear_qkv, linear_fc1, linear_fc2 (auto: forward + backward of 8192 tokens:
  // linear_qkv fp8 0.467 ms vs bf16 0.709 ms, ...)".
  std::string reason;
};

// auto's rule on timings `ms`, two per linear in layer order (FP8's, then the dtype's, in
// milliseconds), measured at `tokens` tokens and summed over `ranks` ranks: FP8 where its time
// is at most 95% of the dtype's. The reason names each timing. Throws c10::Error unless `ms` has
// 8 entries.
Fp8LinearsChoice DecideFp8Linears(const std::vector<double>& ms, at::ScalarType dtype,
                                  int64_t tokens, int ranks);

// Resolves `flag` for a model of `model` in `dtype` on `device` at `micro_batch` sequences with
// `recipe`. Only `flag.automatic` on CUDA measures; `world` (null: one process) then sums the
// timings over its ranks, every rank reaching that sum even when its own measurement failed.
// Errors: the world's all-reduce failing; Internal when the measurement failed on any rank
// (e.g. out of memory), naming the fix.
absl::StatusOr<Fp8LinearsChoice> ChooseFp8Linears(const Fp8LinearsFlag& flag,
                                                  const c10::Device& device, at::ScalarType dtype,
                                                  const gpt2::Gpt2Config& model,
                                                  int64_t micro_batch,
                                                  const varuna::kernels::Fp8Recipe& recipe,
                                                  varuna::comm::World* world);

}  // namespace trainer

#endif  // VARUNA_TRAINER_FP8_LINEAR_CHOICE_H_
