// TrainerArguments: every flag of //trainer:pretrain_gpt2, with Megatron's and Varuna's
// spellings and defaults, parsed and validated once at start-up. The parser
// (varuna/flags/flag_parser.h) checks each flag's own bounds and gives every boolean flag its
// --no-X form (Megatron's --no-bias-dropout-fusion, --no-overlap-grad-reduce,
// --no-log-loss-scale-to-tensorboard); ParseArguments then checks the flags together
// (trainer/argument_checks.h).
#ifndef VARUNA_TRAINER_ARGUMENTS_H_
#define VARUNA_TRAINER_ARGUMENTS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/blend.h"

namespace trainer {

struct TrainerArguments {
  // Model. --preset fills all of these; flags given explicitly override the preset.
  std::string preset = "gpt2-tiny";
  int num_layers = 0;
  int hidden_size = 0;
  int num_attention_heads = 0;
  int seq_length = 0;
  int max_position_embeddings = 0;
  int make_vocab_size_divisible_by = 128;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  double init_method_std = 0.02;
  bool print_model_summary = false;  // Print the per-segment summary and exit.

  // Data.
  // Megatron's data flags, each a list of words as given: --data-path (one prefix of
  // <prefix>.bin/.idx, or weighted prefixes "W1 P1 W2 P2 ...", split by --split per dataset), or
  // --train-data-path / --valid-data-path / --test-data-path (each split from the whole of its
  // own datasets, each optionally weighted). None of them: the bundled sample corpus.
  std::vector<std::string> data_path;
  std::vector<std::string> train_data_path;
  std::vector<std::string> valid_data_path;
  std::vector<std::string> test_data_path;
  // Those flags read by data::ParseBlend, the prefixes made absolute (ResolveUserPath) and
  // checked to exist; split_data_blends is indexed by data::Split.
  data::Blend data_blend;
  std::array<data::Blend, 3> split_data_blends;
  std::string split = "969,30,1";
  // The tokenizer, by Megatron's flags (data/tokenizer_status.h): SentencePieceTokenizer with
  // --tokenizer-model, or GPT2BPETokenizer with --vocab-file and --merge-file; --tokenizer-type
  // may be left out when the files say which. The sample run with
  // --tokenizer-type=GPT2BPETokenizer and no files uses GPT-2's own (./setup.sh fetches them).
  std::string tokenizer_type;
  std::string tokenizer_model;
  std::string vocab_file;
  std::string merge_file;
  int64_t vocab_size = 0;  // Without a tokenizer: the data's vocabulary size.
  bool eod_mask_loss = false;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  std::string data_cache_path;  // Where index files go; empty: next to the data.

  // Training.
  int batch_size = 8;  // Per data-parallel replica.
  // Megatron's --global-batch-size: examples per step over all replicas; 0: --batch-size x D.
  // Once D is known (ApplyJobShape, trainer/job_shape.h), batch_size = global / D.
  int global_batch_size = 0;
  int64_t train_iters = 300;
  // Megatron's sample-based training: --train-samples / global batch iterations (rounded down);
  // then the LR schedule counts samples. 0: iteration-based.
  int64_t train_samples = 0;
  double lr = 1.5e-4;
  double min_lr = 0;
  std::string lr_decay_style = "linear";           // also inverse-square-root, WSD
  int64_t lr_decay_iters = 0;                      // 0: --train-iters.
  int64_t lr_decay_samples = 0;                    // 0: --train-samples.
  double warmup = 0.01;                            // Fraction of the decay (--lr-warmup-fraction).
  int64_t lr_warmup_iters = 0;                     // Megatron's; instead of --warmup.
  int64_t lr_warmup_samples = 0;                   // Megatron's, with --train-samples.
  std::string lr_wsd_decay_style = "exponential";  // WSD's final decay (Megatron's default)
  int64_t lr_wsd_decay_iters = 0;                  // WSD's final decay, in iterations
  int64_t lr_wsd_decay_samples = 0;                // or in samples
  // Checkpoint and exit after this many minutes of the run, as SIGTERM does; 0: never.
  double exit_duration_in_mins = 0;
  // Megatron's activation recomputation flags, checked against what --schedule does
  // (trainer/job_shape.h): "" or full; "" or uniform or block; 0 or the layers per stage.
  std::string recompute_granularity;
  std::string recompute_method;
  int recompute_num_layers = 0;
  double weight_decay = 0.01;
  double clip_grad = 1.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  int64_t seed = 1234;
  bool fp16 = false;
  bool bf16 = false;
  double loss_scale = 0;  // Static loss scale; 0: dynamic.
  double initial_loss_scale = 131072;
  double min_loss_scale = 1;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  std::string device;      // cpu or cuda; empty: cuda when available, else cpu.
  double peak_tflops = 0;  // Device peak for MFU; 0: from the built-in table.

  // Logging, evaluation, checkpoints.
  int64_t log_interval = 10;
  int64_t eval_interval = 100;
  int64_t eval_iters = 10;
  int64_t exit_interval = 0;
  std::string save;
  int64_t save_interval = 0;
  std::string load;
  int64_t keep_last = 0;          // Keep the newest N complete checkpoints; 0: all.
  std::string checkpoint_tmpdir;  // Stage checkpoints here (Varuna's tempdir); empty: none.
  bool shard = false;             // Replicas split the checkpoint writing (Varuna's --shard).
  // Megatron's loading flags (trainer/run_checkpoint.h). --finetune: the --load checkpoint's
  // weights only, from iteration 0 with a fresh optimizer, LR schedule, loss scale, RNG and data
  // position. --no-load-optim: the weights, iteration and data position, a fresh optimizer (and
  // so LR schedule, which follows the optimizer's steps). --no-load-rng: this run's --seed
  // generators, not the checkpoint's.
  bool finetune = false;
  bool load_optim = true;
  bool load_rng = true;
  // --use-checkpoint-args: the model's shape flags from the --load checkpoint's model record.
  bool use_checkpoint_args = false;
  std::string metrics_file;
  // TensorBoard (Megatron's flags): scalars in event files in --tensorboard-dir, from rank 0.
  std::string tensorboard_dir;
  int64_t tensorboard_log_interval = 1;
  int64_t tensorboard_queue_size = 1000;
  bool log_loss_scale_to_tensorboard = true;  // Off with --no-log-loss-scale-to-tensorboard.
  bool log_validation_ppl_to_tensorboard = false;
  bool log_memory_to_tensorboard = false;  // CUDA allocator statistics (none on the CPU).
  bool log_timers_to_tensorboard = false;  // iteration-time

  // Varuna.
  bool varuna = false;
  std::string stage_to_rank_map;
  int chunk_size = 0;
  // --stage-segments: segments (layers) per pipeline stage, e.g. "1,1,2"; empty: an even split.
  std::string stage_segments_text;
  std::vector<int> stage_segments;  // --stage-segments parsed, in stage order.
  int rank = -1;
  int local_rank = -1;
  int64_t resume_step = -1;  // Also --load-iteration.
  // Megatron's --timing-log-level (0: none, 1: the step's main phases, 2: also per micro-batch)
  // and --timing-log-option (minmax, max, all): trainer/phase_timing.h.
  int timing_log_level = 0;
  std::string timing_log_option = "minmax";

  // Megatron's --profile (trainer/step_profiler.h): the steps from --profile-step-start up to
  // --profile-step-end on the --profile-ranks, recorded by LibTorch's profiler
  // (--use-pytorch-profiler, its trace into --tensorboard-dir) or marked for Nsight Systems.
  bool profile = false;
  bool use_pytorch_profiler = false;
  int64_t profile_step_start = 10;
  int64_t profile_step_end = 12;
  std::vector<std::string> profile_ranks_text = {"0"};  // As given: "0 1" or "0,1".
  std::vector<int> profile_ranks;                       // Parsed, ascending.

  // --profiling: measure the model's segments instead of training (Varuna's profile mode).
  bool profiling = false;
  std::string profile_micro_batches = "1-24";  // Sizes: a list "1,2,4,8", ranges "1-24", or both.
  std::string profile_segments_text;           // --profile-segments as given; empty: every segment.
  std::vector<int> profile_segments;  // Parsed, ascending, each >= 0 (checked against the model).
  // --profile-every-rank: under the launcher every rank measures every segment, all at once
  // (ranks sharing one machine's cores then contend as in training); rank 0's are kept.
  bool profile_every_rank = false;
  // --profile-rounds: the measurement repeated this many times, the median of the rounds kept.
  int profile_rounds = 1;
  std::string profile_dir;                     // Where the profile goes; empty: --save.
  std::vector<int> profile_micro_batch_sizes;  // --profile-micro-batches parsed, ascending.
  std::string schedule = "varuna";             // varuna, gpipe or 1f1b
  std::string attention_backend = "auto";      // auto, fused-softmax or sdpa
  // --deterministic (Megatron's --deterministic-mode): bitwise-repeatable runs on one layout
  // (trainer/deterministic_mode.h).
  bool deterministic = false;
  // Megatron's --cross-entropy-loss-fusion: the LM head and the loss a chunk of tokens at a
  // time, without the [tokens, V] logits (varuna/kernels/lm_head_cross_entropy.h). On by
  // default (off in Megatron); --no-cross-entropy-loss-fusion: at::linear + log_softmax + nll.
  bool cross_entropy_loss_fusion = true;
  // Megatron's --gradient-accumulation-fusion (on by default, as there;
  // --no-gradient-accumulation-fusion turns it off): weight-gradient GEMMs that add into the fp32
  // gradient (varuna/kernels/weight_gradient_accumulation.h). So far only the fused LM head's
  // dW, summed over its token chunks; the layers' linears still produce half gradients that the
  // engine copies into its fp32 masters. The same model either way.
  bool gradient_accumulation_fusion = true;
  // Megatron's --bias-dropout-fusion (on by default, as there; --no-bias-dropout-fusion turns it
  // off): each residual add runs c_proj without its bias, then bias + dropout + add in one op
  // (varuna/kernels/bias_dropout_add.h). The same model either way.
  bool bias_dropout_fusion = true;
  // With --bias-dropout-fusion (on by default; --no-bias-dropout-add-layernorm-fusion turns it
  // off): the attention's bias + dropout + residual add and the LayerNorm after it (ln_2) as one
  // op (varuna/kernels/bias_dropout_add_layer_norm.h, llm.c's fused residual forward). Megatron
  // has no such flag; the name follows --bias-dropout-fusion. The same model either way.
  bool bias_dropout_add_layernorm_fusion = true;
  // With --bias-dropout-fusion: the MLP as one op, its bias + GeLU in c_fc's GEMM epilogue and
  // the GeLU and bias gradients in the backward GEMM's (varuna/kernels/gelu_mlp.h; cuBLASLt on
  // CUDA in fp16/bf16). Off by default until a GPU has measured it; Megatron has no such flag
  // (Transformer Engine's LayerNormMLP does the same). Not with --fp8-format or --deterministic.
  bool bias_gelu_gemm_fusion = false;
  // Megatron's FP8 flags (trainer/fp8_flags.h): --fp8-format=hybrid|e4m3 (empty: off), the
  // amax history length (Megatron's default 1), its compute algorithm (most_recent or max) and
  // the margin. Read into a recipe by Fp8RecipeFromFlags.
  std::string fp8_format;
  int64_t fp8_amax_history_len = 1;
  std::string fp8_amax_compute_algo = "most_recent";
  int fp8_margin = 0;
  // --fp8-linears (trainer/fp8_linear_choice.h): which linears of each layer compute in FP8:
  // all, auto (measured at start-up on a GPU) or a list of linear_qkv, linear_proj, linear_fc1,
  // linear_fc2.
  std::string fp8_linears = "all";
  int distributed_timeout_minutes = 10;
  // A rank whose heartbeat (varuna/comm/heartbeat.h) stops for this long is reported by name
  // and the job ends, long before the distributed timeout. 0: no heartbeat.
  int heartbeat_timeout_seconds = 60;
  // Libraries of the pipeline (and tied-weight) transfers and of the data-parallel all-reduce:
  // auto (NCCL on CUDA, Gloo on the CPU), nccl, or gloo (host-staged on CUDA: ranks may then
  // share a GPU).
  std::string p2p_backend = "auto";
  std::string dp_backend = "auto";
  // Megatron's --overlap-grad-reduce: the data-parallel all-reduce of each gradient bucket
  // starts during the last backward of the step (VarunaOptions::overlap_grad_reduce). On by
  // default; --no-overlap-grad-reduce reduces after the pipeline instead (same gradients).
  bool overlap_grad_reduce = true;

  // No --data-path: the sample run on the bundled corpus, whose defaults ParseArguments
  // applies to the flags not given (see README).
  bool sample_run = false;

  // Which flags the user gave (for "explicit overrides preset" and for the default run).
  std::vector<std::string> given;
  bool help_requested = false;
  std::string help;  // The flag table, filled when help_requested.

  bool WasGiven(const std::string& name) const;
  // Whether any of the data-path flags was given (otherwise: the sample run).
  bool HasDataPaths() const {
    return !data_path.empty() || !train_data_path.empty() || !valid_data_path.empty() ||
           !test_data_path.empty();
  }
  // The sample run with GPT-2's own files: --tokenizer-type=GPT2BPETokenizer and neither
  // --vocab-file nor --merge-file (the trainer finds them in its runfiles).
  bool UsesBundledGpt2() const;
};

// Parses and validates `args` (without the program name). InvalidArgument names the flag and
// says what to do. Relative paths are returned as given (see ResolveUserPath in
// varuna/io/user_paths.h).
absl::StatusOr<TrainerArguments> ParseArguments(const std::vector<std::string>& args);

}  // namespace trainer

#endif  // VARUNA_TRAINER_ARGUMENTS_H_
