#include "trainer/arguments.h"

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
#include "trainer/argument_checks.h"
#include "trainer/fp8_flags.h"
#include "trainer/lr_schedule.h"
#include "trainer/megatron_flags.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/io/user_paths.h"
#include "varuna/pipeline/schedule.h"

namespace trainer {
namespace {

using varuna::FlagParser;

void Register(FlagParser& p, TrainerArguments& a) {
  p.Add("preset", &a.preset, "model preset: gpt2-tiny, gpt2-355m, gpt2-1.5b, gpt2-2.5b, gpt2-8.3b");
  p.Add("num-layers", &a.num_layers, "transformer layers (overrides the preset)");
  p.Add("hidden-size", &a.hidden_size, "hidden size (overrides the preset)");
  p.Add("num-attention-heads", &a.num_attention_heads, "attention heads (overrides the preset)");
  p.Add("seq-length", &a.seq_length, "tokens per sample (overrides the preset)");
  p.Add("max-position-embeddings", &a.max_position_embeddings,
        "position embeddings (overrides the preset)");
  p.Add("make-vocab-size-divisible-by", &a.make_vocab_size_divisible_by,
        "pad the vocabulary to a multiple of this");
  p.Add("hidden-dropout", &a.hidden_dropout, "dropout after embeddings, attention and MLP");
  p.Add("attention-dropout", &a.attention_dropout, "dropout on attention probabilities");
  p.Add("init-method-std", &a.init_method_std, "standard deviation of the weight init");
  p.Add("print-model-summary", &a.print_model_summary,
        "print parameters per segment and exit (allocates nothing)");
  p.Add("data-path", &a.data_path,
        "prefix of a Megatron dataset (<prefix>.bin/.idx), or a blend of weighted prefixes: "
        "--data-path 0.3 A 0.7 B (each split by --split); default: the bundled corpus");
  p.Add("train-data-path", &a.train_data_path,
        "the training data alone (a prefix, or weighted prefixes), instead of --data-path");
  p.Add("valid-data-path", &a.valid_data_path,
        "the validation data alone (a prefix, or weighted prefixes), instead of --data-path");
  p.Add("test-data-path", &a.test_data_path,
        "the test data alone (a prefix, or weighted prefixes), instead of --data-path");
  p.Add("split", &a.split, "train,valid,test proportions of the documents");
  p.Add("tokenizer-type", &a.tokenizer_type,
        "SentencePieceTokenizer or GPT2BPETokenizer (empty: the kind of the files given; the "
        "sample run with GPT2BPETokenizer uses GPT-2's own files)");
  p.Add("tokenizer-model", &a.tokenizer_model, "SentencePiece model of the data");
  p.Add("vocab-file", &a.vocab_file, "GPT-2 BPE vocab.json of the data (GPT2BPETokenizer)");
  p.Add("merge-file", &a.merge_file, "GPT-2 BPE merges.txt of the data (GPT2BPETokenizer)");
  p.Add("vocab-size", &a.vocab_size, "vocabulary size when no tokenizer is given");
  p.SetMinimum("vocab-size", 0);
  p.Add("eod-mask-loss", &a.eod_mask_loss, "exclude end-of-document tokens from the loss");
  p.Add("reset-position-ids", &a.reset_position_ids, "restart position ids after each EOD");
  p.Add("reset-attention-mask", &a.reset_attention_mask,
        "stop attention across documents inside a sample");
  p.Add("data-cache-path", &a.data_cache_path,
        "directory for the sample-index files (empty: next to the data)");
  p.Add("batch-size", &a.batch_size, "examples per data-parallel replica per step");
  p.SetMinimum("batch-size", 1);
  p.Add("global-batch-size", &a.global_batch_size,
        "Megatron's: examples per step over all D replicas (0: --batch-size x D); each replica "
        "takes global / D in global / (micro x D) micro-batches, so it must divide",
        "8");
  p.SetMinimum("global-batch-size", 0);
  p.Add("train-iters", &a.train_iters, "optimizer steps to train");
  p.SetMinimum("train-iters", 1);
  p.Add("train-samples", &a.train_samples,
        "Megatron's sample-based training: train --train-samples / global batch iterations "
        "(rounded down); the LR flags are then in samples (0: use --train-iters)",
        "80");
  p.SetMinimum("train-samples", 0);
  p.Add("lr", &a.lr, "peak learning rate");
  p.SetMinimum("lr", 0);
  p.Add("min-lr", &a.min_lr, "learning rate at the end of the decay");
  p.SetMinimum("min-lr", 0);
  p.Add("lr-decay-style", &a.lr_decay_style,
        "linear, cosine, constant, inverse-square-root or WSD (Megatron's)");
  p.Add("lr-decay-iters", &a.lr_decay_iters, "steps of warmup plus decay (0: --train-iters)");
  p.SetMinimum("lr-decay-iters", 0);
  p.Add("lr-decay-samples", &a.lr_decay_samples,
        "with --train-samples: samples of warmup plus decay (0: --train-samples)");
  p.SetMinimum("lr-decay-samples", 0);
  p.Add("warmup", &a.warmup, "fraction of --lr-decay-iters (or -samples) spent warming up");
  p.AddAlias("lr-warmup-fraction", "warmup");  // Megatron's name
  p.SetMinimum("warmup", 0);
  p.SetMaximum("warmup", 1);
  p.Add("lr-warmup-iters", &a.lr_warmup_iters,
        "iterations of linear warmup (instead of --lr-warmup-fraction)");
  p.Add("lr-warmup-samples", &a.lr_warmup_samples,
        "with --train-samples: samples of linear warmup (instead of --lr-warmup-fraction)");
  p.Add("lr-wsd-decay-style", &a.lr_wsd_decay_style,
        "with --lr-decay-style=WSD: the final decay, linear, cosine, exponential or minus_sqrt");
  p.Add("lr-wsd-decay-iters", &a.lr_wsd_decay_iters,
        "with --lr-decay-style=WSD: iterations of the final decay (ending at --lr-decay-iters)");
  p.Add("lr-wsd-decay-samples", &a.lr_wsd_decay_samples,
        "with --lr-decay-style=WSD and --train-samples: samples of the final decay");
  for (const char* name :
       {"lr-warmup-iters", "lr-warmup-samples", "lr-wsd-decay-iters", "lr-wsd-decay-samples"}) {
    p.SetMinimum(name, 0);
  }
  p.Add("exit-duration-in-mins", &a.exit_duration_in_mins,
        "checkpoint (with --save) and exit 0 after this many minutes since the start, as "
        "SIGTERM does; every rank stops at the same iteration (0: never)",
        "230");
  p.SetMinimum("exit-duration-in-mins", 0);
  p.Add("recompute-granularity", &a.recompute_granularity,
        "Megatron's activation recomputation: full (with --recompute-method=uniform or block "
        "and --recompute-num-layers = the layers per stage) is what --schedule=varuna does: "
        "every stage but the last recomputes its whole forward before the backward; selective "
        "is refused");
  p.Add("recompute-method", &a.recompute_method,
        "with --recompute-granularity=full: uniform or block (the same here: a whole stage)");
  p.Add("recompute-num-layers", &a.recompute_num_layers,
        "with --recompute-granularity=full: the layers per pipeline stage (the unit Varuna "
        "recomputes)");
  p.SetMinimum("recompute-num-layers", 0);
  p.Add("weight-decay", &a.weight_decay, "decoupled weight decay (not biases or LayerNorm)");
  p.SetMinimum("weight-decay", 0);
  p.Add("clip-grad", &a.clip_grad, "clip the global gradient norm to this (0: off)");
  p.SetMinimum("clip-grad", 0);
  p.Add("adam-beta1", &a.adam_beta1, "Adam beta1");
  p.Add("adam-beta2", &a.adam_beta2, "Adam beta2");
  for (const char* beta : {"adam-beta1", "adam-beta2"}) {
    p.SetMinimum(beta, 0);
    p.SetMaximum(beta, 1, FlagParser::Bound::kExclusive);
  }
  p.Add("adam-eps", &a.adam_eps, "Adam epsilon");
  p.SetMinimum("adam-eps", 0, FlagParser::Bound::kExclusive);
  p.Add("seed", &a.seed, "random seed (weights, data order, dropout)");
  p.SetMinimum("seed", 0);
  p.SetMaximum("seed", 0xffffffffLL);  // a 32-bit seed
  p.Add("fp16", &a.fp16, "fp16 weights and activations, fp32 master weights, loss scaling");
  p.Add("bf16", &a.bf16, "bf16 weights and activations, fp32 master weights");
  p.Add("loss-scale", &a.loss_scale, "static loss scale for --fp16 (0: dynamic)");
  p.SetMinimum("loss-scale", 0);
  p.Add("initial-loss-scale", &a.initial_loss_scale, "first dynamic loss scale");
  p.Add("min-loss-scale", &a.min_loss_scale, "lowest dynamic loss scale");
  for (const char* scale : {"initial-loss-scale", "min-loss-scale"}) {
    p.SetMinimum(scale, 0, FlagParser::Bound::kExclusive);
  }
  p.Add("loss-scale-window", &a.loss_scale_window, "steps without overflow before the scale x2");
  p.Add("hysteresis", &a.hysteresis, "overflowing steps tolerated before the scale x0.5");
  p.SetMinimum("loss-scale-window", 1);
  p.SetMinimum("hysteresis", 1);
  p.Add("device", &a.device, "cpu or cuda (empty: cuda when present)");
  p.Add("peak-tflops", &a.peak_tflops, "device peak TFLOP/s for MFU (0: built-in table)");
  p.SetMinimum("peak-tflops", 0);
  p.Add("log-interval", &a.log_interval, "steps between log lines");
  p.Add("eval-interval", &a.eval_interval, "steps between validation runs (0: never)");
  p.Add("eval-iters", &a.eval_iters, "batches per validation run");
  p.Add("exit-interval", &a.exit_interval, "stop after this iteration (0: never)");
  p.SetMinimum("log-interval", 1);
  for (const char* name : {"eval-interval", "eval-iters", "exit-interval"}) p.SetMinimum(name, 0);
  p.Add("save", &a.save, "directory for checkpoints");
  p.Add("save-interval", &a.save_interval, "steps between checkpoints (0: only at the end)");
  p.SetMinimum("save-interval", 0);
  p.Add("load", &a.load, "directory to resume from (newest complete checkpoint)");
  p.Add("load-iteration", &a.resume_step, "resume from this iteration (= --resume_step)");
  p.Add("keep-last", &a.keep_last, "keep only the newest N complete checkpoints (0: all)");
  p.SetMinimum("keep-last", 0);
  p.Add("checkpoint-tmpdir", &a.checkpoint_tmpdir,
        "stage checkpoints on this local disk, move them to --save in the background");
  p.Add("shard", &a.shard, "the replicas of each stage split the checkpoint writing");
  p.Add("finetune", &a.finetune,
        "load only the weights of --load and start at iteration 0 with a fresh optimizer, LR "
        "schedule, loss scale, RNG and data position (Megatron's --finetune)");
  p.Add("load-optim", &a.load_optim,
        "load the optimizer state of --load (--no-load-optim: the weights, iteration and data "
        "position, a fresh optimizer)");
  p.Add("load-rng", &a.load_rng,
        "restore the RNG state of --load (--no-load-rng: keep this run's --seed generators)");
  p.Add("use-checkpoint-args", &a.use_checkpoint_args,
        "take the model's shape (--num-layers, --hidden-size, --num-attention-heads, "
        "--seq-length, --max-position-embeddings, the padded vocabulary) from the --load "
        "checkpoint");
  p.Add("metrics-file", &a.metrics_file, "also write every log line as JSON to this file");
  p.Add("tensorboard-dir", &a.tensorboard_dir,
        "write TensorBoard event files of the run's scalars to this directory (rank 0)");
  p.Add("tensorboard-log-interval", &a.tensorboard_log_interval,
        "steps between the per-step TensorBoard scalars (loss, learning rate, ...)");
  p.Add("tensorboard-queue-size", &a.tensorboard_queue_size,
        "TensorBoard events held in memory before they are written (they are also written at "
        "every --tensorboard-log-interval)");
  p.SetMinimum("tensorboard-log-interval", 1);
  p.SetMinimum("tensorboard-queue-size", 1);
  p.Add("log-loss-scale-to-tensorboard", &a.log_loss_scale_to_tensorboard,
        "write the loss scale to TensorBoard");
  p.Add("log-validation-ppl-to-tensorboard", &a.log_validation_ppl_to_tensorboard,
        "also write the validation and test perplexity to TensorBoard");
  p.Add("log-memory-to-tensorboard", &a.log_memory_to_tensorboard,
        "write the CUDA allocator's memory statistics to TensorBoard (no-op on the CPU)");
  p.Add("log-timers-to-tensorboard", &a.log_timers_to_tensorboard,
        "write the time per iteration to TensorBoard (iteration-time, seconds)");
  p.Add("timing-log-level", &a.timing_log_level,
        "phase timers after every log line: 0 none, 1 forward-backward, all-grads-sync and "
        "optimizer, 2 also the batch and every micro-batch's phases (the device is synchronised "
        "around each timed phase, which slows the run)");
  p.SetMinimum("timing-log-level", 0);
  p.SetMaximum("timing-log-level", 2);
  p.Add("timing-log-option", &a.timing_log_option,
        "how the timers are shown across ranks: minmax, max or all");
  p.Add("profile", &a.profile,
        "profile the steps from --profile-step-start up to --profile-step-end on the "
        "--profile-ranks: with --use-pytorch-profiler LibTorch's profiler (a trace in "
        "--tensorboard-dir and a per-op summary in the log), else marked for Nsight Systems "
        "(cudaProfilerStart/Stop: run under nsys profile --capture-range=cudaProfilerApi)");
  p.Add("use-pytorch-profiler", &a.use_pytorch_profiler,
        "with --profile: record the steps with LibTorch's profiler instead of marking them for "
        "Nsight Systems");
  p.Add("profile-step-start", &a.profile_step_start,
        "--profile starts before the step taken after this many iterations");
  p.Add("profile-step-end", &a.profile_step_end,
        "--profile stops once this many iterations are done (the steps start+1 .. end of the log)");
  p.SetMinimum("profile-step-start", 0);
  p.SetMinimum("profile-step-end", 1);
  p.Add("profile-ranks", &a.profile_ranks_text,
        "global ranks that --profile profiles: --profile-ranks 0 1 (or 0,1)");
  p.Add("varuna", &a.varuna, "run under the Varuna engine (always on; accepted for scripts)");
  p.Add("stage_to_rank_map", &a.stage_to_rank_map, "Varuna stage map, e.g. \"0,2;1,3;\"");
  p.Add("chunk_size", &a.chunk_size, "micro-batch size (0: --batch-size)");
  p.AddAlias("micro-batch-size", "chunk_size");  // Megatron's name
  p.SetMinimum("chunk_size", 0);
  p.Add("stage-segments", &a.stage_segments_text,
        "layers per pipeline stage in stage order, e.g. 1,1,2 (empty: an even split; the "
        "launcher sets it from a profile)");
  p.Add("rank", &a.rank, "global rank (-1: from RANK, else 0)");
  p.Add("local_rank", &a.local_rank, "rank on this node (-1: from LOCAL_RANK, else 0)");
  p.Add("resume_step", &a.resume_step, "resume from this checkpoint iteration (-1: newest)");
  p.Add("profiling", &a.profiling,
        "Varuna's profile mode: time each segment's forward/backward and memory at each "
        "--profile-micro-batches size, write them to --profile-dir, and exit (no training; "
        "random tokens stand in for data, so no dataset is needed)");
  p.Add("profile-micro-batches", &a.profile_micro_batches,
        "micro-batch sizes to profile: a list (1,2,4,8), a range (1-24), or both (1-4,8)");
  p.Add("profile-segments", &a.profile_segments_text,
        "with --profiling: only these segments (0 = embeddings + layer 0; a list 0,5, a range "
        "0-3, or both); default all. Split a large model's profile over runs or machines");
  p.Add("profile-every-rank", &a.profile_every_rank,
        "with --profiling under the launcher: every rank measures every segment, all at the "
        "same time, and each time kept is the slowest rank's, instead of sharing the segments "
        "out; for ranks that share one machine's cores (the CPU), whose training contends for "
        "them");
  p.Add("profile-rounds", &a.profile_rounds,
        "with --profiling: measure every segment and size this many times, one round after the "
        "other, and keep the median of the rounds (for machines whose speed drifts, e.g. shared "
        "CPUs)");
  p.SetMinimum("profile-rounds", 1);
  p.Add("profile-dir", &a.profile_dir,
        "directory of the profile (default: --save); an existing profile there is extended");
  p.Add("schedule", &a.schedule, "pipeline schedule: varuna, gpipe or 1f1b");
  p.Add("attention-backend", &a.attention_backend,
        "causal attention: fused-softmax, sdpa, or auto (the faster on a GPU)");
  p.Add("deterministic", &a.deterministic,
        "bitwise-repeatable runs under one layout: LibTorch's deterministic algorithms (an op "
        "without one stops the run), CUBLAS_WORKSPACE_CONFIG=:4096:8, cuDNN deterministic, SDPA "
        "without cuDNN");
  p.AddAlias("deterministic-mode", "deterministic");
  p.Add("cross-entropy-loss-fusion", &a.cross_entropy_loss_fusion,
        "the LM head and the cross entropy a chunk of tokens at a time, never holding the "
        "whole [tokens, vocab] logits (the same loss, less memory; on by default; "
        "--no-cross-entropy-loss-fusion: the unfused LM head + log_softmax + nll_loss)");
  p.Add("gradient-accumulation-fusion", &a.gradient_accumulation_fusion,
        "weight-gradient GEMMs that add into the fp32 gradient (half inputs, fp32 output, "
        "beta = 1) instead of a half-precision dW and an add pass; so far the fused LM head's dW "
        "over its token chunks (the same model; on by default; "
        "--no-gradient-accumulation-fusion: dW in the model's dtype, then added)");
  p.Add("bias-dropout-fusion", &a.bias_dropout_fusion,
        "each residual add as one fused op: the output projection without its bias, then bias, "
        "dropout and the residual add in one pass (the same model; on by default; "
        "--no-bias-dropout-fusion: the unfused linear + dropout + add)");
  p.Add("bias-dropout-add-layernorm-fusion", &a.bias_dropout_add_layernorm_fusion,
        "with --bias-dropout-fusion, the residual stream's LayerNorms fused with it: the "
        "attention's bias + dropout + residual add and the LayerNorm after it in one pass, "
        "writing the sum and its normalised form, and each LayerNorm's backward adding the "
        "residual's gradient in its own pass (the same model; on by default; "
        "--no-bias-dropout-add-layernorm-fusion: the ops apart)");
  p.Add("bias-gelu-gemm-fusion", &a.bias_gelu_gemm_fusion,
        "with --bias-dropout-fusion, the MLP's bias + GeLU in the first GEMM's epilogue and the "
        "GeLU and bias gradients in the backward GEMM's (cuBLASLt on a GPU in fp16/bf16; the "
        "same model; off by default; not with --fp8-format or --deterministic)");
  p.Add("fp8-format", &a.fp8_format,
        "FP8 in the linears of each layer (--fp8-linears; Transformer Engine's delayed scaling): "
        "hybrid (E4M3 forward, E5M2 gradients) or e4m3; off when not given. Needs a GPU of "
        "compute capability 8.9 or newer (the CPU emulates it)");
  p.Add("fp8-amax-history-len", &a.fp8_amax_history_len,
        "with --fp8-format: steps of amax history the scales are computed from");
  p.Add("fp8-amax-compute-algo", &a.fp8_amax_compute_algo,
        "with --fp8-format: the amax of the scale, most_recent or max (over the history)");
  p.Add("fp8-margin", &a.fp8_margin, "with --fp8-format: scale = fp8_max / amax / 2^margin");
  p.Add("fp8-linears", &a.fp8_linears,
        "with --fp8-format: which linears of each layer compute in FP8: all (the default), auto "
        "(on a GPU, each where its forward + backward measured faster in FP8 at start-up), or "
        "a comma list of linear_qkv, linear_proj, linear_fc1, linear_fc2");
  p.Add("distributed-timeout-minutes", &a.distributed_timeout_minutes,
        "how long a rank waits for the others (joining, any transfer) before failing");
  p.SetMinimum("distributed-timeout-minutes", 1);
  p.Add("heartbeat-timeout-seconds", &a.heartbeat_timeout_seconds,
        "a rank silent this long (stopped, frozen, unreachable) is named and the job ends; 0: "
        "no heartbeat");
  p.Add("p2p-backend", &a.p2p_backend,
        "activations, gradients and tied weights between stages: nccl, gloo (through pinned "
        "host memory, Varuna's transport; ranks may share a GPU), or auto (nccl on CUDA)");
  p.Add("dp-backend", &a.dp_backend,
        "the data-parallel gradient all-reduce: nccl, gloo, or auto (nccl on CUDA)");
  p.Add("overlap-grad-reduce", &a.overlap_grad_reduce,
        "start each gradient bucket's data-parallel all-reduce during the step's last backward "
        "(default on; the same gradients as without; --no-overlap-grad-reduce: all-reduce the "
        "gradients over the replicas after the pipeline instead)");
}

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// The flag `name`'s list of comma-separated numbers N or ranges A-B, each >= `minimum`; sorted,
// unique. Errors call one number `noun` and several `what`, and suggest `example`.
struct NumberListSpec {
  const char* name;
  int minimum;
  const char* noun;
  const char* what;
  const char* example;
};

absl::StatusOr<std::vector<int>> ParseNumberList(const NumberListSpec& spec,
                                                 const std::string& text) {
  const std::string flag = absl::StrCat("--", spec.name, "=", text);
  std::set<int> numbers;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    std::vector<absl::string_view> ends = absl::StrSplit(item, absl::MaxSplits('-', 1));
    int first = 0;
    int last = 0;
    if (!absl::SimpleAtoi(ends[0], &first) ||
        !absl::SimpleAtoi(ends.size() == 2 ? ends[1] : ends[0], &last)) {
      return Invalid(absl::StrCat(flag, ": \"", item, "\" is not a ", spec.noun,
                                  " or a range A-B: use e.g. ", spec.example));
    }
    if (first < spec.minimum || last < spec.minimum) {
      return Invalid(absl::StrCat(flag, ": ", spec.what, " must be at least ", spec.minimum, " (\"",
                                  item, "\")"));
    }
    if (first > last) {
      return Invalid(
          absl::StrCat(flag, ": the range ", item, " is empty: write the smaller number first"));
    }
    if (last - first > 4096) {
      return Invalid(absl::StrCat(flag, ": the range ", item, " has more than 4096 ", spec.what));
    }
    for (int n = first; n <= last; ++n) numbers.insert(n);
  }
  return std::vector<int>(numbers.begin(), numbers.end());
}

// --stage-segments: comma-separated stage sizes, each >= 1 (checked against the stage map and
// the model by Varuna::ValidateOptions).
absl::StatusOr<std::vector<int>> ParseStageSegments(const std::string& text) {
  std::vector<int> sizes;
  if (absl::StripAsciiWhitespace(text).empty()) return sizes;
  const std::string flag = absl::StrCat("--stage-segments=", text);
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    int size = 0;
    if (!absl::SimpleAtoi(item, &size)) {
      return Invalid(absl::StrCat(flag, ": \"", item,
                                  "\" is not a number of layers: give one count per stage, e.g. "
                                  "--stage-segments=1,1,2"));
    }
    if (size < 1) {
      return Invalid(
          absl::StrCat(flag, ": a stage of ", size, " layers; every stage needs at least 1"));
    }
    sizes.push_back(size);
  }
  return sizes;
}

// The sample run: settings that show the loss falling within minutes on a CPU.
void ApplySampleRunDefaults(TrainerArguments& a) {
  a.sample_run = true;
  if (!a.WasGiven("train-iters")) a.train_iters = 600;
  if (!a.WasGiven("batch-size")) a.batch_size = 16;
  if (!a.WasGiven("lr")) a.lr = 2e-3;
  if (!a.WasGiven("warmup")) a.warmup = 0.02;
  if (!a.WasGiven("eval-interval")) a.eval_interval = 100;
  if (!a.WasGiven("metrics-file")) a.metrics_file = "varuna_sample_run/metrics.jsonl";
}

}  // namespace

bool TrainerArguments::UsesBundledGpt2() const {
  return sample_run && data::TokenizerKindNamed(tokenizer_type) == data::TokenizerKind::kGpt2Bpe &&
         vocab_file.empty() && merge_file.empty();
}

bool TrainerArguments::WasGiven(const std::string& name) const {
  return std::find(given.begin(), given.end(), name) != given.end();
}

absl::StatusOr<TrainerArguments> ParseArguments(const std::vector<std::string>& args) {
  TrainerArguments a;
  FlagParser parser;
  Register(parser, a);
  RefuseUnsupportedMegatronFlags(parser);
  if (absl::Status status = parser.Parse(args); !status.ok()) return status;
  if (parser.help_requested()) {
    a.help_requested = true;
    a.help = parser.Help();
    return a;
  }
  for (const char* name : {"num-layers",
                           "hidden-size",
                           "num-attention-heads",
                           "seq-length",
                           "max-position-embeddings",
                           "data-path",
                           "train-iters",
                           "batch-size",
                           "lr",
                           "save",
                           "eval-interval",
                           "save-interval",
                           "metrics-file",
                           "tokenizer-model",
                           "warmup",
                           "global-batch-size",
                           "train-samples",
                           "lr-decay-iters",
                           "make-vocab-size-divisible-by",
                           "fp8-amax-history-len",
                           "fp8-amax-compute-algo",
                           "fp8-margin",
                           "fp8-linears",
                           "bias-dropout-add-layernorm-fusion"}) {
    if (parser.WasSet(name)) a.given.push_back(name);
  }
  if (!a.HasDataPaths()) ApplySampleRunDefaults(a);
  if (absl::Status status = ValidateArguments(a); !status.ok()) return status;
  if (absl::Status status = ParseDataPaths(a); !status.ok()) return status;
  absl::StatusOr<std::vector<int>> sizes =
      ParseNumberList({"profile-micro-batches", 1, "size", "micro-batch sizes", "1,2,4,8 or 1-24"},
                      a.profile_micro_batches);
  if (!sizes.ok()) return sizes.status();
  a.profile_micro_batch_sizes = *std::move(sizes);
  if (!a.profile_segments_text.empty()) {
    absl::StatusOr<std::vector<int>> segments =
        ParseNumberList({"profile-segments", 0, "segment", "segment indices", "0,5 or 0-9"},
                        a.profile_segments_text);
    if (!segments.ok()) return segments.status();
    a.profile_segments = *std::move(segments);
  }
  absl::StatusOr<std::vector<int>> profile_ranks =
      ParseNumberList({"profile-ranks", 0, "rank", "global ranks", "0 1 or 0,1"},
                      absl::StrJoin(a.profile_ranks_text, ","));
  if (!profile_ranks.ok()) return profile_ranks.status();
  a.profile_ranks = *std::move(profile_ranks);
  absl::StatusOr<std::vector<int>> stage_segments = ParseStageSegments(a.stage_segments_text);
  if (!stage_segments.ok()) return stage_segments.status();
  a.stage_segments = *std::move(stage_segments);
  return a;
}

}  // namespace trainer
