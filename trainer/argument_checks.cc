#include "trainer/argument_checks.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "data/tokenizer_status.h"
#include "trainer/fp8_flags.h"
#include "trainer/fp8_linear_choice.h"
#include "trainer/fusion_flags.h"
#include "trainer/lr_schedule.h"
#include "trainer/megatron_flags.h"
#include "varuna/io/user_paths.h"
#include "varuna/pipeline/schedule.h"

namespace trainer {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

}  // namespace

absl::Status ValidateTrainingSchedule(const TrainerArguments& a) {
  if (absl::StatusOr<WsdDecayStyle> wsd = ParseWsdDecayStyle(a.lr_wsd_decay_style); !wsd.ok()) {
    return wsd.status();
  }
  const bool samples = a.train_samples > 0;
  if (samples && a.WasGiven("train-iters")) {
    return Invalid(absl::StrCat("--train-iters=", a.train_iters,
                                " and --train-samples=", a.train_samples,
                                " exclude each other (Megatron: \"expected sample-based "
                                "training\"): give one of them"));
  }
  // {flag given, the flag of the other form, what to use instead}.
  struct Mixed {
    bool given;
    const char* flag;
    const char* instead;
  };
  const Mixed mixed[] = {
      {!samples && a.lr_decay_samples > 0, "--lr-decay-samples", "--lr-decay-iters"},
      {!samples && a.lr_warmup_samples > 0, "--lr-warmup-samples", "--lr-warmup-iters"},
      {!samples && a.lr_wsd_decay_samples > 0, "--lr-wsd-decay-samples", "--lr-wsd-decay-iters"},
      {samples && a.lr_decay_iters > 0, "--lr-decay-iters", "--lr-decay-samples"},
      {samples && a.lr_warmup_iters > 0, "--lr-warmup-iters", "--lr-warmup-samples"},
      {samples && a.lr_wsd_decay_iters > 0, "--lr-wsd-decay-iters", "--lr-wsd-decay-samples"}};
  for (const Mixed& m : mixed) {
    if (!m.given) continue;
    return Invalid(absl::StrCat(
        m.flag, " does not go with ",
        samples ? "--train-samples (sample-based training, Megatron: \"expected sample-based\")"
                : "iteration-based training (--train-iters; Megatron: \"expected "
                  "iteration-based\")",
        ": use ", m.instead, samples ? "" : ", or train by --train-samples"));
  }
  const int64_t warmup_count = samples ? a.lr_warmup_samples : a.lr_warmup_iters;
  if (a.WasGiven("warmup") && warmup_count > 0) {
    return Invalid(absl::StrCat("can only specify one of --lr-warmup-fraction and ",
                                samples ? "--lr-warmup-samples" : "--lr-warmup-iters",
                                " (Megatron's rule): drop one"));
  }
  const char* unit = samples ? "samples" : "iters";
  const int64_t decay = samples ? (a.lr_decay_samples > 0 ? a.lr_decay_samples : a.train_samples)
                                : (a.lr_decay_iters > 0 ? a.lr_decay_iters : a.train_iters);
  if (warmup_count >= decay) {
    return Invalid(absl::StrCat("--lr-warmup-", unit, "=", warmup_count,
                                " is not below the decay's ", decay, " (--lr-decay-", unit,
                                ", default --train-", unit, "): give a shorter warmup"));
  }
  const int64_t wsd = samples ? a.lr_wsd_decay_samples : a.lr_wsd_decay_iters;
  if (a.lr_decay_style == "WSD" && wsd == 0) {
    return Invalid(absl::StrCat("--lr-decay-style=WSD needs --lr-wsd-decay-", unit,
                                "=N: the length of its final decay, which ends at --lr-decay-",
                                unit, " (e.g. a tenth of it)"));
  }
  if (wsd > decay) {
    return Invalid(absl::StrCat("--lr-wsd-decay-", unit, "=", wsd, " is longer than the decay's ",
                                decay, " (--lr-decay-", unit, ", default --train-", unit,
                                "): the WSD decay ends there, so give at most ", decay));
  }
  // Recomputation. Megatron's full recomputation re-runs a unit of layers from its input in
  // the backward; the Varuna schedule does that with the unit a whole pipeline stage.
  if (a.recompute_granularity == "selective") {
    return Invalid(
        "--recompute-granularity=selective is not supported here: Megatron's selective "
        "recomputation re-runs only the attention core (softmax, dropout) inside each layer; "
        "the Varuna schedule recomputes whole stages instead: use --recompute-granularity=full "
        "--recompute-method=uniform --recompute-num-layers=<layers per stage> (what "
        "--schedule=varuna does), or drop the flag");
  }
  if (!a.recompute_granularity.empty() && a.recompute_granularity != "full") {
    return Invalid(absl::StrCat("--recompute-granularity=", a.recompute_granularity,
                                " is not a granularity: use full (selective is not supported)"));
  }
  if (!a.recompute_method.empty() && a.recompute_method != "uniform" &&
      a.recompute_method != "block") {
    return Invalid(absl::StrCat("--recompute-method=", a.recompute_method,
                                " is not a method: use uniform or block"));
  }
  if (a.recompute_granularity.empty()) {
    if (!a.recompute_method.empty() || a.recompute_num_layers > 0) {
      return Invalid(
          absl::StrCat(a.recompute_method.empty() ? "--recompute-num-layers" : "--recompute-method",
                       " needs --recompute-granularity=full"));
    }
    return absl::OkStatus();
  }
  if (a.recompute_method.empty()) {
    return Invalid(
        "--recompute-granularity=full needs --recompute-method=uniform or block (Megatron's "
        "rule; here both recompute a whole pipeline stage)");
  }
  if (a.schedule != "varuna") {
    return Invalid(absl::StrCat(
        "--recompute-granularity=full is what --schedule=varuna does (every stage but the last "
        "recomputes its forward before the backward), but --schedule=",
        a.schedule,
        " keeps every activation and recomputes nothing: use --schedule=varuna, or "
        "drop the recompute flags"));
  }
  return absl::OkStatus();
}

absl::Status ValidateArguments(const TrainerArguments& a) {
  if (absl::Status status = ValidateTrainingSchedule(a); !status.ok()) return status;
  if (a.min_lr > a.lr) {
    return Invalid(
        absl::StrCat("--min-lr=", a.min_lr, " is above --lr=", a.lr,
                     ": the learning rate decays to --min-lr, so give --min-lr <= --lr"));
  }
  if (absl::StatusOr<LrDecayStyle> style = ParseLrDecayStyle(a.lr_decay_style); !style.ok()) {
    return style.status();
  }
  if (a.fp16 && a.bf16) return Invalid("--fp16 and --bf16 exclude each other: choose one");
  if (a.WasGiven("bias-dropout-add-layernorm-fusion") && a.bias_dropout_add_layernorm_fusion &&
      !a.bias_dropout_fusion) {
    return Invalid(
        "--bias-dropout-add-layernorm-fusion needs --bias-dropout-fusion (it fuses that op's "
        "attention residual add with ln_2), but --no-bias-dropout-fusion was given: drop "
        "--no-bias-dropout-fusion, or drop --bias-dropout-add-layernorm-fusion");
  }
  if (a.bias_gelu_gemm_fusion) {
    if (absl::Status status =
            CheckBiasGeluGemmFusion(a.bias_dropout_fusion, a.deterministic, a.fp8_format);
        !status.ok()) {
      return status;
    }
  }
  if (absl::StatusOr<std::optional<varuna::kernels::Fp8Recipe>> fp8 = Fp8RecipeFromFlags(
          a.fp8_format, a.fp8_amax_history_len, a.fp8_amax_compute_algo, a.fp8_margin,
          a.WasGiven("fp8-amax-history-len") || a.WasGiven("fp8-amax-compute-algo") ||
              a.WasGiven("fp8-margin"));
      !fp8.ok()) {
    return fp8.status();
  }
  if (absl::StatusOr<Fp8LinearsFlag> linears =
          CheckFp8Linears(a.fp8_linears, a.WasGiven("fp8-linears"), a.fp8_format, a.deterministic);
      !linears.ok()) {
    return linears.status();
  } else if (linears->automatic && a.profiling) {
    return Invalid(
        "--fp8-linears=auto with --profiling: a profile times one fixed model, and auto chooses "
        "by a timing at each start: give the linears training runs (its log's \"> fp8 "
        "linears:\" line names them), e.g. --fp8-linears=linear_qkv,linear_fc1,linear_fc2, or "
        "all");
  }
  if (a.min_loss_scale > a.initial_loss_scale) {
    return Invalid(absl::StrCat("--min-loss-scale=", a.min_loss_scale,
                                " is above --initial-loss-scale=", a.initial_loss_scale,
                                ": give --min-loss-scale <= --initial-loss-scale"));
  }
  if (!a.device.empty() && a.device != "cpu" && a.device != "cuda") {
    return Invalid(absl::StrCat("--device=", a.device, " is not a device: use cpu or cuda"));
  }
  if (a.eval_interval > 0 && a.eval_iters < 1) {
    return Invalid("--eval-iters must be at least 1 when --eval-interval is set");
  }
  if (a.save_interval > 0 && a.save.empty()) {
    return Invalid(absl::StrCat("--save-interval=", a.save_interval,
                                " needs --save=DIR (where to write checkpoints)"));
  }
  // 0 means "the preset's" only when the flag is left out.
  for (const auto& [name, value] : {std::pair<const char*, int64_t>{"num-layers", a.num_layers},
                                    {"hidden-size", a.hidden_size},
                                    {"num-attention-heads", a.num_attention_heads},
                                    {"seq-length", a.seq_length},
                                    {"max-position-embeddings", a.max_position_embeddings}}) {
    if (a.WasGiven(name) && value < 1) {
      return Invalid(absl::StrCat("--", name, "=", value, " must be at least 1: leave --", name,
                                  " out to use the value of --preset=", a.preset));
    }
  }
  data::TokenizerSpec tokenizer{a.tokenizer_type, a.tokenizer_model, a.vocab_file, a.merge_file};
  // The sample run finds GPT-2's own files itself.
  if (a.UsesBundledGpt2()) tokenizer.vocab_file = tokenizer.merge_file = "bundled";
  absl::StatusOr<std::optional<data::TokenizerKind>> kind = data::TokenizerKindOf(tokenizer);
  if (!kind.ok()) return kind.status();
  if (a.HasDataPaths() && !kind->has_value() && a.vocab_size == 0) {
    return Invalid(
        absl::StrCat(a.data_path.empty() ? "--train-data-path=" : "--data-path=",
                     absl::StrJoin(a.data_path.empty() ? a.train_data_path : a.data_path, " "),
                     " needs the data's vocabulary: give --tokenizer-model=FILE "
                     "(SentencePiece), --vocab-file=FILE --merge-file=FILE (GPT-2 "
                     "BPE), or --vocab-size=N"));
  }
  // With --global-batch-size the batch per replica is known with D (trainer/job_shape.h).
  if (a.global_batch_size == 0 && a.chunk_size > a.batch_size) {
    return Invalid(absl::StrCat("--chunk_size=", a.chunk_size,
                                " must be between 1 and --batch-size=", a.batch_size,
                                " (or 0 for one micro-batch)"));
  }
  if (absl::StatusOr<varuna::ScheduleKind> kind = varuna::ParseScheduleKind(a.schedule);
      !kind.ok()) {
    return kind.status();
  }
  if (a.attention_backend != "auto" && a.attention_backend != "fused-softmax" &&
      a.attention_backend != "sdpa") {
    return Invalid(absl::StrCat("--attention-backend=", a.attention_backend,
                                " is not a backend: use fused-softmax, sdpa or auto"));
  }
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string&>{"--p2p-backend", a.p2p_backend},
        {"--dp-backend", a.dp_backend}}) {
    if (value != "auto" && value != "nccl" && value != "gloo") {
      return Invalid(absl::StrCat(flag, "=", value, " is not a backend: use nccl, gloo or auto"));
    }
  }
  if (a.heartbeat_timeout_seconds < 0 || a.heartbeat_timeout_seconds == 1) {
    return Invalid(absl::StrCat("--heartbeat-timeout-seconds=", a.heartbeat_timeout_seconds,
                                " must be 0 (off) or at least 2"));
  }
  for (const auto& [flag, given] : {std::pair<const char*, bool>{"--keep-last", a.keep_last > 0},
                                    {"--checkpoint-tmpdir", !a.checkpoint_tmpdir.empty()},
                                    {"--shard", a.shard}}) {
    if (given && a.save.empty()) {
      return Invalid(absl::StrCat(flag, " needs --save=DIR (where checkpoints go)"));
    }
  }
  if (a.tensorboard_dir.empty()) {
    for (const auto& [flag, given] :
         {std::pair<const char*, bool>{"--log-validation-ppl-to-tensorboard",
                                       a.log_validation_ppl_to_tensorboard},
          {"--log-memory-to-tensorboard", a.log_memory_to_tensorboard},
          {"--log-timers-to-tensorboard", a.log_timers_to_tensorboard}}) {
      if (given) {
        return Invalid(
            absl::StrCat(flag, " needs --tensorboard-dir=DIR (where the event files go)"));
      }
    }
  }
  for (const auto& [flag, given] : {std::pair<const char*, bool>{"--finetune", a.finetune},
                                    {"--no-load-optim", !a.load_optim},
                                    {"--no-load-rng", !a.load_rng},
                                    {"--use-checkpoint-args", a.use_checkpoint_args}}) {
    if (given && a.load.empty()) {
      return Invalid(absl::StrCat(flag, " needs --load=DIR (the checkpoint to load)"));
    }
  }
  if (a.resume_step >= 0 && a.load.empty()) {
    return Invalid(absl::StrCat("--resume_step=", a.resume_step,
                                " needs --load=DIR (the checkpoints to resume from)"));
  }
  if (a.timing_log_option != "minmax" && a.timing_log_option != "max" &&
      a.timing_log_option != "all") {
    return Invalid(absl::StrCat("--timing-log-option=", a.timing_log_option,
                                " is not an option: give minmax, max or all"));
  }
  if (a.use_pytorch_profiler && !a.profile) {
    return Invalid("--use-pytorch-profiler chooses how --profile records the steps: add --profile");
  }
  if (a.profile && a.profiling) {
    return Invalid(
        "--profile records training steps, and --profiling (Varuna's profile mode) trains none: "
        "give one of them");
  }
  if (a.profile && a.profile_step_end <= a.profile_step_start) {
    return Invalid(absl::StrCat("--profile-step-end=", a.profile_step_end,
                                " must be above --profile-step-start=", a.profile_step_start,
                                " (--profile records the steps in between): give "
                                "--profile-step-end=",
                                a.profile_step_start + 1, " or more"));
  }
  if (a.profile && a.use_pytorch_profiler && a.tensorboard_dir.empty()) {
    return Invalid(
        "--profile --use-pytorch-profiler writes its trace into --tensorboard-dir, as Megatron-LM "
        "does: give --tensorboard-dir=DIR");
  }
  if (a.profiling && a.profile_dir.empty() && a.save.empty()) {
    return Invalid(
        "--profiling needs --profile-dir=DIR or --save=DIR (where the profile is written)");
  }
  return absl::OkStatus();
}

absl::Status ParseDataPaths(TrainerArguments& a) {
  if (!a.data_path.empty() &&
      (!a.train_data_path.empty() || !a.valid_data_path.empty() || !a.test_data_path.empty())) {
    return Invalid(
        "--data-path and --train-data-path / --valid-data-path / --test-data-path exclude each "
        "other: give --data-path (split by --split) or the per-split paths");
  }
  const bool per_split =
      !a.train_data_path.empty() || !a.valid_data_path.empty() || !a.test_data_path.empty();
  if (per_split && a.train_data_path.empty()) {
    return Invalid("--valid-data-path / --test-data-path need --train-data-path as well");
  }
  if (per_split && a.valid_data_path.empty() && a.eval_interval > 0) {
    return Invalid(absl::StrCat("--eval-interval=", a.eval_interval,
                                " needs validation data: give --valid-data-path, or "
                                "--eval-interval=0 for no validation"));
  }
  const std::pair<const char*, std::vector<std::string>*> flags[] = {
      {"--data-path", &a.data_path},
      {"--train-data-path", &a.train_data_path},
      {"--valid-data-path", &a.valid_data_path},
      {"--test-data-path", &a.test_data_path}};
  data::Blend* blends[] = {&a.data_blend, &a.split_data_blends[0], &a.split_data_blends[1],
                           &a.split_data_blends[2]};
  for (int i = 0; i < 4; ++i) {
    if (flags[i].second->empty()) continue;
    absl::StatusOr<data::Blend> blend = data::ParseBlend(flags[i].first, *flags[i].second);
    if (!blend.ok()) return blend.status();
    for (std::string& prefix : blend->prefixes) {
      prefix = varuna::ResolveUserPath(prefix);
      for (const char* extension : {".idx", ".bin"}) {
        const std::string file = prefix + extension;
        if (access(file.c_str(), R_OK) != 0) {
          return Invalid(absl::StrCat(
              flags[i].first, ": no dataset at ", prefix, " (", file,
              " cannot be read): give the prefix preprocess_data wrote, without .bin/.idx"));
        }
      }
    }
    *blends[i] = *std::move(blend);
  }
  return absl::OkStatus();
}

}  // namespace trainer
