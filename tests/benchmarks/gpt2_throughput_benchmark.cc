// GPT-2 training-throughput benchmark (manual; not a test): tokens/s, TFLOP/s and MFU of the
// Varuna engine training one GPT-2 preset in one process (one stage, one replica) on one
// device, with a per-op breakdown of where the time goes. run_gpu_benchmarks.sh runs it next to
// the PyTorch reference (gpt2_pytorch_reference.py) on the same model, batch and device.
//
//   bazel run -c opt //tests/benchmarks:gpt2_throughput_benchmark --
//       --preset=gpt2-tiny --device=cpu --dtype=fp32 --steps=5 --profile-ops
//   bazel build -c opt --config=cuda //tests/benchmarks:gpt2_throughput_benchmark   # for a GPU
//
// --fp8-format=hybrid|e4m3: the four linears of each layer in FP8 (pretrain_gpt2's flag);
// --fp8-compare with it: the run without FP8 and then with it, same seed and batches, and the
// ratio of tokens/s and the relative difference of the last loss (tests/gpu/session.sh fp8).
//
// The run: --warmup-steps untimed steps, then --steps timed ones (device synchronised before
// and after), every step's loss, loss scale and skipped flag printed. The data are
// --distinct-batches fixed batches of random token sequences (uniform over the vocabulary,
// from --seed; inputs and labels shifted by one, all positions counted in the loss), cycled,
// so the model can memorise them and the loss visibly falls. Then one human-readable line and
// one JSON line starting {"impl":"varuna-cpp" (the fields are listed at PrintResult).
// `--help` lists every flag with its default; a bad flag or value exits 2 naming the flag.
//
// --deterministic: the cost of pretrain_gpt2's --deterministic in the same process, on the same
// batches: the run above with the default settings, then trainer/deterministic_mode.h's
// switches on and a fresh engine (same seed; auto then picks among the deterministic attention
// backends) run again; a last line gives deterministic tokens/s / default tokens/s. cuBLAS
// reads CUBLAS_WORKSPACE_CONFIG once, so the mode's :4096:8 is set before any CUDA work and
// holds for both runs (on an H100 LibTorch's default workspace is already :4096:8 plus a small
// one).
//
// --profile-ops also prints the device's busy fraction: the union of the device's activity
// (kernels, copies, memsets) over the wall time of the profiled steps, so 1 - it is the time the
// device sat idle waiting for the host. It needs the profiler (CUPTI) to see the device, and the
// profiler slows the host's side, so it is a lower bound on the fraction without the profiler.
// With it, the host's blocking CUDA calls (cudaStreamSynchronize from item() and blocking copies,
// cudaEventSynchronize, ...) per step. On the CPU there is no device: it says n/a.
//
// --sweep-micro-batch: the run above for micro-batches 1, 2, 4, ... and --batch-size itself,
// each on a fresh engine after the allocator's cache is released, stopping at the first that
// runs out of device memory; then a table of tokens/s and peak memory per micro-batch and the
// best one's JSON line again (last, with a "sweep" field), for run_gpu_benchmarks.sh.
//
// FLOPs: Megatron's formula (models/gpt2/flops.h); MFU = TFLOP/s / the device's peak
// (--peak-tflops, else trainer/throughput.h's table; null for an unknown device or the CPU).
// At P=1 Varuna's schedule backs each micro-batch up right after its forward, so nothing is
// recomputed and the hardware FLOPs equal the model FLOPs; the program derives this from the
// schedule and reports a hardware-FLOPs rate as well whenever recomputes do occur.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/DeviceAccelerator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/gpt2/config.h"
#include "models/gpt2/flops.h"
#include "models/gpt2/model.h"
#include "tests/benchmarks/device_memory.h"
#include "trainer/attention_backend.h"
#include "trainer/deterministic_mode.h"
#include "trainer/device_name.h"
#include "trainer/fp8_flags.h"
#include "trainer/fp8_linear_choice.h"
#include "trainer/fusion_flags.h"
#include "trainer/gpt_engine.h"
#include "trainer/op_profile.h"
#include "trainer/throughput.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/io/json.h"
#include "varuna/kernels/causal_attention.h"
#include "varuna/kernels/fp8_linear.h"
#include "varuna/pipeline/schedule.h"
#include "varuna/varuna.h"

namespace benchmarks {
namespace {

using trainer::ProfiledEvent;
using trainer::ProfileEvents;
using varuna::json::Value;

constexpr char kUsage[] =
    "GPT-2 training throughput of the Varuna engine in one process.\n"
    "Example: gpt2_throughput_benchmark --preset=gpt2-tiny --device=cpu --dtype=fp32 --steps=5 "
    "--profile-ops";

// The command line, with its defaults ("" = decided at run time).
struct Flags {
  std::string preset = "gpt2-355m";
  std::string device;
  std::string dtype;
  int batch_size = 8;
  int chunk_size = 0;
  int seq_length = 0;
  int steps = 50;
  int warmup_steps = 5;
  int distinct_batches = 4;
  int vocab_size = 50257;
  double lr = 1.5e-4;
  double weight_decay = 0.01;
  double clip_grad = 1.0;
  double dropout = -1;
  int64_t seed = 1234;
  std::string attention_backend = "auto";
  bool profile_ops = false;
  int profile_steps = 3;
  double peak_tflops = 0;
  bool deterministic = false;
  bool cross_entropy_loss_fusion = true;
  bool gradient_accumulation_fusion = true;
  bool bias_dropout_fusion = true;
  bool bias_dropout_add_layernorm_fusion = true;
  bool bias_gelu_gemm_fusion = false;
  bool sweep_micro_batch = false;
  std::string fp8_format;           // pretrain_gpt2's --fp8-format ("": off)
  std::string fp8_linears = "all";  // pretrain_gpt2's --fp8-linears
  bool fp8_compare = false;
};

// Registers the flags on `parser`; parsing writes them into `f`, which must outlive it.
void Register(varuna::FlagParser& parser, Flags& f) {
  parser.Add("preset", &f.preset, "gpt2-tiny, gpt2-355m, gpt2-1.5b, gpt2-2.5b, gpt2-8.3b");
  parser.Add("device", &f.device, "cuda or cpu (empty: cuda when a GPU is visible)");
  parser.Add("dtype", &f.dtype, "fp16, bf16 or fp32 (empty: fp16 on cuda, fp32 on cpu)");
  parser.Add("batch-size", &f.batch_size, "sequences per step", "8");
  parser.Add("chunk-size", &f.chunk_size, "sequences per micro-batch (0: the batch size)", "0");
  parser.Add("seq-length", &f.seq_length, "tokens per sequence (0: the preset's)", "0");
  parser.Add("steps", &f.steps, "timed steps, after --warmup-steps untimed ones", "50");
  parser.Add("warmup-steps", &f.warmup_steps, "untimed steps before the timed ones", "5");
  parser.Add("distinct-batches", &f.distinct_batches, "fixed random batches, cycled", "4");
  parser.Add("vocab-size", &f.vocab_size, "GPT-2's; padded to a multiple of 128 in the model",
             "50257");
  parser.Add("lr", &f.lr, "Adam's learning rate", "1.5e-4");
  parser.Add("weight-decay", &f.weight_decay, "Adam's weight decay", "0.01");
  parser.Add("clip-grad", &f.clip_grad, "gradient-norm clipping", "1.0");
  parser.Add("dropout", &f.dropout, "hidden and attention dropout (-1: the preset's, 0.1)", "-1");
  parser.Add("seed", &f.seed, "seed of the parameters and the batches", "1234");
  parser.Add("attention-backend", &f.attention_backend,
             "fused-softmax, sdpa or auto (measured on a GPU)");
  parser.Add("profile-ops", &f.profile_ops, "afterwards, profile --profile-steps steps op by op");
  parser.Add("profile-steps", &f.profile_steps, "steps --profile-ops profiles", "3");
  parser.Add("peak-tflops", &f.peak_tflops, "device peak for MFU (0: the built-in table)", "0");
  parser.Add("deterministic", &f.deterministic,
             "also run under pretrain_gpt2's --deterministic and report its tokens/s as a ratio "
             "of the default run's");
  parser.AddAlias("deterministic-mode", "deterministic");
  parser.Add("cross-entropy-loss-fusion", &f.cross_entropy_loss_fusion,
             "pretrain_gpt2's --cross-entropy-loss-fusion: the LM head and loss a chunk of "
             "tokens at a time (on by default, as there; --no-cross-entropy-loss-fusion: the "
             "unfused LM head + loss)");
  parser.Add("gradient-accumulation-fusion", &f.gradient_accumulation_fusion,
             "pretrain_gpt2's --gradient-accumulation-fusion: the fused LM head's dW GEMMs add "
             "into the fp32 sum (on by default, as there; --no-gradient-accumulation-fusion: dW "
             "in the model's dtype, then added)");
  parser.Add("bias-dropout-fusion", &f.bias_dropout_fusion,
             "pretrain_gpt2's --bias-dropout-fusion (on by default); --no-bias-dropout-fusion: "
             "the unfused linear + dropout + residual add (the baseline of the fused one)");
  parser.Add("bias-dropout-add-layernorm-fusion", &f.bias_dropout_add_layernorm_fusion,
             "pretrain_gpt2's --bias-dropout-add-layernorm-fusion (on by default, with "
             "--bias-dropout-fusion): the attention residual add and ln_2 in one op, and ln_1 "
             "adding the residual's gradient in its backward");
  parser.Add("bias-gelu-gemm-fusion", &f.bias_gelu_gemm_fusion,
             "pretrain_gpt2's --bias-gelu-gemm-fusion (off by default, with "
             "--bias-dropout-fusion): the MLP's bias + GeLU in cuBLASLt's GEMM epilogues");
  parser.Add("fp8-format", &f.fp8_format,
             "pretrain_gpt2's --fp8-format: hybrid or e4m3 in the linears of each layer "
             "(Megatron's amax history 1, most_recent); off when not given");
  parser.Add("fp8-linears", &f.fp8_linears,
             "pretrain_gpt2's --fp8-linears: all, auto (each linear in FP8 where it measured "
             "faster at start-up on a GPU) or a list of linear_qkv, linear_proj, linear_fc1, "
             "linear_fc2");
  parser.Add("fp8-compare", &f.fp8_compare,
             "with --fp8-format: the run without FP8, then with it on a fresh engine (same seed, "
             "same batches); prints FP8 tokens/s / the other's and the relative difference of "
             "the last step's loss (issue 26: at least 1.25x, within 1%, at 1.5B after 200 steps)");
  parser.Add("sweep-micro-batch", &f.sweep_micro_batch,
             "run micro-batches 1, 2, 4, ... up to --batch-size (until one runs out of memory) "
             "and report the best (ignores --chunk-size)");
  for (const char* name : {"batch-size", "steps", "distinct-batches", "vocab-size"}) {
    parser.SetMinimum(name, 1);
  }
  for (const char* name : {"chunk-size", "seq-length", "warmup-steps", "seed", "profile-steps",
                           "lr", "weight-decay", "clip-grad", "peak-tflops"}) {
    parser.SetMinimum(name, 0);
  }
  parser.SetMinimum("dropout", -1);
}

struct Options {
  std::string preset;
  // Batch, micro-batch (chunk_size; micro_batch_size()), device, dtype and clipping.
  varuna::VarunaOptions engine;
  std::string dtype_name;
  int steps = 0;
  int warmup_steps = 0;
  int distinct_batches = 0;
  double lr = 0;
  double weight_decay = 0;
  int64_t seed = 0;
  std::string attention_backend;
  bool profile_ops = false;
  int profile_steps = 0;
  double peak_tflops = 0;
  bool deterministic = false;
  bool cross_entropy_loss_fusion = true;
  bool gradient_accumulation_fusion = true;
  bool bias_dropout_fusion = true;
  bool bias_dropout_add_layernorm_fusion = true;
  bool bias_gelu_gemm_fusion = false;
  bool sweep_micro_batch = false;
  std::optional<varuna::kernels::Fp8Recipe> fp8;
  trainer::Fp8LinearsFlag fp8_linears;
  bool fp8_compare = false;
  gpt2::Gpt2Config model;
};

absl::Status Invalid(const std::string& flag, const std::string& value, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, " ", why));
}

// Checks the parsed flags' ranges and combinations and resolves the run-time defaults;
// InvalidArgument naming the flag (FailedPrecondition for --device=cuda without a GPU).
absl::StatusOr<Options> MakeOptions(const Flags& f) {
  Options o;
  o.preset = f.preset;
  absl::StatusOr<gpt2::Gpt2Config> config = gpt2::PresetConfig(o.preset);
  if (!config.ok()) return config.status();
  o.model = *config;

  if (f.device != "" && f.device != "cuda" && f.device != "cpu") {
    return Invalid("device", f.device, "is not a device: use cuda or cpu");
  }
  const bool cuda = f.device.empty() ? at::hasCUDA() : f.device == "cuda";
  if (cuda && !at::hasCUDA()) {
    return absl::FailedPreconditionError(
        "--device=cuda: no CUDA device is visible to this program (or it was built without "
        "--config=cuda): use --device=cpu, or build with --config=cuda and run on a GPU host");
  }
  o.engine.device = cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  o.dtype_name = f.dtype.empty() ? (cuda ? "fp16" : "fp32") : f.dtype;
  const std::map<std::string, at::ScalarType> dtypes = {
      {"fp16", at::kHalf}, {"bf16", at::kBFloat16}, {"fp32", at::kFloat}};
  if (dtypes.count(o.dtype_name) == 0) {
    return Invalid("dtype", o.dtype_name, "is not a training dtype: use fp16, bf16 or fp32");
  }
  o.engine.dtype = dtypes.at(o.dtype_name);

  o.engine.batch_size = f.batch_size;
  o.engine.chunk_size = f.chunk_size;
  if (o.engine.chunk_size > o.engine.batch_size) {
    return Invalid("chunk-size", absl::StrCat(f.chunk_size),
                   absl::StrCat("exceeds --batch-size=", o.engine.batch_size,
                                ": a micro-batch holds at most the whole batch"));
  }
  o.steps = f.steps;
  o.warmup_steps = f.warmup_steps;
  o.distinct_batches = f.distinct_batches;
  o.seed = f.seed;
  o.profile_steps = f.profile_steps;
  o.lr = f.lr;
  o.weight_decay = f.weight_decay;
  o.engine.clip_grad = f.clip_grad;
  o.peak_tflops = f.peak_tflops;
  o.attention_backend = f.attention_backend;
  o.profile_ops = f.profile_ops;
  o.deterministic = f.deterministic;
  o.cross_entropy_loss_fusion = f.cross_entropy_loss_fusion;
  o.gradient_accumulation_fusion = f.gradient_accumulation_fusion;
  o.bias_dropout_fusion = f.bias_dropout_fusion;
  o.bias_dropout_add_layernorm_fusion = f.bias_dropout_add_layernorm_fusion;
  o.bias_gelu_gemm_fusion = f.bias_gelu_gemm_fusion;
  o.sweep_micro_batch = f.sweep_micro_batch;
  absl::StatusOr<std::optional<varuna::kernels::Fp8Recipe>> fp8 =
      trainer::Fp8RecipeFromFlags(f.fp8_format, 1, "most_recent", 0, /*others_given=*/false);
  if (!fp8.ok()) return fp8.status();
  o.fp8 = *fp8;
  absl::StatusOr<trainer::Fp8LinearsFlag> linears = trainer::CheckFp8Linears(
      f.fp8_linears, /*given=*/f.fp8_linears != "all", f.fp8_format, o.deterministic);
  if (!linears.ok()) return linears.status();
  o.fp8_linears = *linears;
  o.fp8_compare = f.fp8_compare;
  if (o.fp8_compare && !o.fp8) {
    return Invalid("fp8-compare", "true", "needs --fp8-format=hybrid (or e4m3) to compare with");
  }
  // pretrain_gpt2's refusals of the MLP's GEMM epilogues, so that a measured variant is the one
  // asked for.
  if (o.bias_gelu_gemm_fusion) {
    if (absl::Status status =
            trainer::CheckBiasGeluGemmFusion(o.bias_dropout_fusion, o.deterministic, f.fp8_format);
        !status.ok()) {
      return status;
    }
  }
  o.model.vocab_size = f.vocab_size;
  if (f.seq_length > 0) {
    o.model.seq_length = f.seq_length;
    o.model.max_position_embeddings = std::max(o.model.max_position_embeddings, o.model.seq_length);
  }
  if (f.dropout >= 0) {
    o.model.hidden_dropout = f.dropout;
    o.model.attention_dropout = f.dropout;
  }
  if (absl::Status status = o.model.Validate(); !status.ok()) return status;
  return o;
}

void Synchronize(const c10::Device& device) {
  if (!device.is_cpu()) at::accelerator::synchronizeDevice(device.index());
}

// Peak bytes held by LibTorch's CUDA caching allocator on `device` (as PyTorch's
// torch.cuda.max_memory_allocated), in GB; nullopt on the CPU.
std::optional<double> PeakMemoryGb(const c10::Device& device) {
  const std::optional<double> bytes = varuna::benchmarks::PeakMemoryBytes(device);
  if (!bytes) return std::nullopt;
  return *bytes / 1e9;
}

// --distinct-batches fixed batches of random sequences, on the host (page-locked for CUDA), as
// the trainer's loader gives them: the engine sums the loss mask there and copies each
// micro-batch to the device without waiting. The tokens of batch k
// are the k-th draw of at::randint(0, vocab, [batch, seq + 1]) from a CPU generator seeded
// with --seed, which torch.randint with torch.Generator().manual_seed(seed) reproduces.
std::vector<varuna::TensorMap> MakeBatches(const Options& o) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  const int64_t b = o.engine.batch_size;
  const int64_t s = o.model.seq_length;
  const bool pin = o.engine.device.is_cuda();
  auto host = [pin](const at::Tensor& tensor) {
    return pin ? tensor.contiguous().pin_memory() : tensor.contiguous();
  };
  std::vector<varuna::TensorMap> batches;
  for (int k = 0; k < o.distinct_batches; ++k) {
    const at::Tensor tokens = at::randint(0, o.model.vocab_size, {b, s + 1}, generator, at::kLong);
    varuna::TensorMap batch;
    batch["input_ids"] = host(tokens.narrow(1, 0, s));
    batch["labels"] = host(tokens.narrow(1, 1, s));
    batch["position_ids"] = host(at::arange(s, at::kLong).expand({b, s}));
    batch["loss_mask"] = host(at::ones({b, s}, at::kFloat));
    batches.push_back(std::move(batch));
  }
  return batches;
}

struct Run {
  std::vector<double> losses;
  std::vector<int> skipped_steps;  // 0-based over all steps
  double timed_seconds = 0;
};

// The micro-batches Varuna's schedule recomputes at P=1 (the executor re-runs the forward of
// every micro-batch with an R task).
int RecomputedMicroBatches(int micro_batches) {
  int recomputed = 0;
  for (const varuna::Task& task :
       varuna::BuildSchedule(varuna::ScheduleKind::kVaruna, 1, micro_batches, 0)) {
    if (task.kind == varuna::TaskKind::kRecompute) ++recomputed;
  }
  return recomputed;
}

absl::Status Step(varuna::Varuna& engine, const varuna::TensorMap& batch, int index, int total,
                  bool timed, Run& run) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<varuna::StepResult> result = engine.step(batch);
  if (!result.ok()) return result.status();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  run.losses.push_back(result->loss);
  if (result->overflow) run.skipped_steps.push_back(index);
  absl::PrintF("step %3d/%d%s loss %.4f  loss scale %g  %s  grad norm %.3f  %.1f ms\n", index + 1,
               total, timed ? "" : " (warm-up)", result->loss, result->loss_scale,
               result->overflow ? "SKIPPED (inf/NaN)" : "applied", result->grad_norm, ms);
  std::fflush(stdout);
  return absl::OkStatus();
}

// Profiles o.profile_steps more steps op by op and prints the tables and summaries.
absl::StatusOr<trainer::StepsProfileSummary> ProfileOps(
    varuna::Varuna& engine, const std::vector<varuna::TensorMap>& batches, const Options& o) {
  const bool cuda = o.engine.device.is_cuda();
  double wall_ms = 0;
  absl::StatusOr<std::vector<ProfiledEvent>> events = ProfileEvents(cuda, [&]() -> absl::Status {
    Synchronize(o.engine.device);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.profile_steps; ++i) {
      absl::StatusOr<varuna::StepResult> result = engine.step(batches[i % batches.size()]);
      if (!result.ok()) return result.status();
    }
    Synchronize(o.engine.device);
    wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return absl::OkStatus();
  });
  if (!events.ok()) return events.status();
  // The two device synchronisations around the profiled steps are the benchmark's own.
  trainer::StepsProfileSummary summary = trainer::SummarizeSteps(
      *events, cuda, wall_ms, o.profile_steps, /*bracketing_syncs=*/2, /*rows=*/25);
  absl::PrintF("%s", summary.text.c_str());
  return summary;
}

// The JSON line's fields: impl, preset, dtype, device, attention, batch, micro_batch, seq,
// steps, warmup_steps, tokens_per_s, tflops (model FLOPs, Megatron's formula), mfu (null if
// the peak is unknown), hw_tflops (with recomputed forwards; equals tflops at P=1),
// peak_tflops, step_ms, losses [first, last], skipped (count over all steps),
// last_skipped_step (1-based, 0 if none), peak_memory_gb (null on the CPU), deterministic
// (whether the run was under --deterministic's switches). Prints the human line and returns the
// JSON, which Benchmark completes with the profile's device_busy_fraction and
// host_syncs_per_step (null without --profile-ops, or where unknown) and prints.
Value PrintResult(const Options& o, const std::string& device_name, const std::string& attention,
                  const Run& run, int recomputed, bool deterministic) {
  const int64_t b = o.engine.batch_size;
  const int micro_batches =
      (o.engine.batch_size + o.engine.micro_batch_size() - 1) / o.engine.micro_batch_size();
  const double model_flops = gpt2::TrainingFlopsPerIteration(o.model, b);
  const double full_recompute = gpt2::TrainingFlopsWithFullRecompute(o.model, b);
  const double hw_flops = model_flops + (full_recompute - model_flops) * recomputed /
                                            static_cast<double>(micro_batches);
  const double step_seconds = run.timed_seconds / o.steps;
  const std::optional<double> peak =
      o.peak_tflops > 0 ? std::optional<double>(o.peak_tflops) : trainer::PeakTflops(device_name);
  const trainer::Throughput t = trainer::MeasureThroughput(
      model_flops, static_cast<double>(b * o.model.seq_length), step_seconds, peak);
  const double hw_tflops = hw_flops / step_seconds / 1e12;
  const std::optional<double> memory = PeakMemoryGb(o.engine.device);

  absl::PrintF(
      "%s %s on %s: batch %d x %d tokens (micro-batch %d), %d timed steps: %.1f ms/step, %.0f "
      "tokens/s, %.2f TFLOP/s (model), MFU %s; recompute: %d of %d micro-batches%s; loss %.4f -> "
      "%.4f; %zu skipped step(s)%s; peak memory %s\n",
      o.preset, o.dtype_name, device_name, o.engine.batch_size, o.model.seq_length,
      o.engine.micro_batch_size(), o.steps, step_seconds * 1e3, t.tokens_per_second, t.tflops,
      t.mfu ? absl::StrFormat("%.1f%% of %.0f TFLOP/s", *t.mfu * 100, *peak).c_str()
            : "unknown (no peak for this device: pass --peak-tflops)",
      recomputed, micro_batches,
      recomputed > 0 ? absl::StrFormat(" (hardware %.2f TFLOP/s)", hw_tflops).c_str() : "",
      run.losses.front(), run.losses.back(), run.skipped_steps.size(),
      run.skipped_steps.empty() ? ""
                                : absl::StrCat(" (steps ",
                                               absl::StrJoin(run.skipped_steps, ",",
                                                             [](std::string* out, int i) {
                                                               absl::StrAppend(out, i + 1);
                                                             }),
                                               ")")
                                      .c_str(),
      memory ? absl::StrFormat("%.2f GB", *memory).c_str() : "n/a (CPU)");

  Value json = Value::object();
  json["impl"] = "varuna-cpp";
  json["preset"] = o.preset;
  json["dtype"] = o.dtype_name;
  json["device"] = device_name;
  json["attention"] = attention;
  json["batch"] = o.engine.batch_size;
  json["micro_batch"] = o.engine.micro_batch_size();
  json["seq"] = o.model.seq_length;
  json["steps"] = o.steps;
  json["warmup_steps"] = o.warmup_steps;
  json["tokens_per_s"] = t.tokens_per_second;
  json["tflops"] = t.tflops;
  json["mfu"] = t.mfu ? Value(*t.mfu) : Value();
  json["hw_tflops"] = hw_tflops;
  json["peak_tflops"] = peak ? Value(*peak) : Value();
  json["step_ms"] = step_seconds * 1e3;
  Value losses = Value::array();
  losses.push_back(run.losses.front());
  losses.push_back(run.losses.back());
  json["losses"] = std::move(losses);
  json["skipped"] = static_cast<int64_t>(run.skipped_steps.size());
  json["last_skipped_step"] = run.skipped_steps.empty() ? 0 : run.skipped_steps.back() + 1;
  json["peak_memory_gb"] = memory ? Value(*memory) : Value();
  json["deterministic"] = deterministic;
  json["device_busy_fraction"] = Value();
  json["host_syncs_per_step"] = Value();
  return json;
}

// One benchmark run on a fresh engine; `deterministic`: under --deterministic's switches
// (already entered). Returns its JSON line (printed).
absl::StatusOr<Value> Benchmark(const Options& o, bool deterministic) {
  const std::string device_name = trainer::DeviceName(o.engine.device);
  trainer::GptEngineOptions options;
  options.model = o.model;
  options.engine = o.engine;
  options.attention_backend = o.attention_backend;
  options.execution.fused_cross_entropy = o.cross_entropy_loss_fusion;
  options.execution.gradient_accumulation_fusion = o.gradient_accumulation_fusion;
  options.execution.bias_dropout_fusion = o.bias_dropout_fusion;
  options.execution.bias_dropout_add_layernorm_fusion = o.bias_dropout_add_layernorm_fusion;
  options.execution.bias_gelu_gemm_fusion = o.bias_gelu_gemm_fusion;
  options.execution.fp8 = o.fp8;
  options.fp8_linears = o.fp8_linears;
  options.deterministic = deterministic;
  options.seed = static_cast<uint64_t>(o.seed);
  options.adam.lr = o.lr;
  options.adam.weight_decay = o.weight_decay;
  absl::StatusOr<trainer::GptEngine> gpt = trainer::CreateGptEngine(options);
  if (!gpt.ok()) return gpt.status();
  const trainer::AttentionChoice* attention = &gpt->attention;
  varuna::Varuna& engine = *gpt->varuna;
  const std::vector<varuna::TensorMap> batches = MakeBatches(o);
  const int micro_batches =
      (o.engine.batch_size + o.engine.micro_batch_size() - 1) / o.engine.micro_batch_size();
  const int recomputed = RecomputedMicroBatches(micro_batches);

  absl::PrintF(
      "varuna-cpp: %s (%d layers, hidden %d, %d heads, vocab %lld padded), %s on %s, attention "
      "%s\n  batch %d x %d tokens in micro-batches of %d; Varuna schedule at P=1: %s "
      "(%d recomputed)\n  data: %d fixed batches of random tokens (seed %lld), cycled so the "
      "loss falls as the model memorises them; Adam lr %g, weight decay %g, clip %g, dropout %g\n",
      o.preset, o.model.num_layers, o.model.hidden_size, o.model.num_attention_heads,
      static_cast<long long>(o.model.padded_vocab_size()), o.dtype_name, device_name,
      attention->reason, o.engine.batch_size, o.model.seq_length, o.engine.micro_batch_size(),
      varuna::FormatTasks(varuna::BuildSchedule(varuna::ScheduleKind::kVaruna, 1, micro_batches, 0))
          .c_str(),
      recomputed, o.distinct_batches, static_cast<long long>(o.seed), o.lr, o.weight_decay,
      o.engine.clip_grad, o.model.hidden_dropout);
  if (o.fp8) absl::PrintF("  fp8 linears: %s\n", gpt->fp8_linears);
  std::fflush(stdout);

  Run run;
  const int total = o.warmup_steps + o.steps;
  for (int i = 0; i < o.warmup_steps; ++i) {
    if (absl::Status s = Step(engine, batches[i % batches.size()], i, total, false, run); !s.ok()) {
      return s;
    }
  }
  Synchronize(o.engine.device);
  const auto start = std::chrono::steady_clock::now();
  for (int i = o.warmup_steps; i < total; ++i) {
    if (absl::Status s = Step(engine, batches[i % batches.size()], i, total, true, run); !s.ok()) {
      return s;
    }
  }
  Synchronize(o.engine.device);
  run.timed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Value json =
      PrintResult(o, device_name, varuna::kernels::AttentionBackendName(attention->backend), run,
                  recomputed, deterministic);
  if (o.profile_ops && o.profile_steps > 0) {
    absl::StatusOr<trainer::StepsProfileSummary> profile = ProfileOps(engine, batches, o);
    if (!profile.ok()) return profile.status();
    if (profile->device_busy_fraction) {
      json["device_busy_fraction"] = *profile->device_busy_fraction;
    }
    if (profile->host_syncs_per_step) json["host_syncs_per_step"] = *profile->host_syncs_per_step;
  }
  absl::PrintF("%s\n", varuna::json::Serialize(json).c_str());
  std::fflush(stdout);
  return json;
}

// --sweep-micro-batch: Benchmark at micro-batches 1, 2, 4, ... and the batch size, each on a
// fresh engine with the allocator's cache released first, until one runs out of device memory;
// then the table and the best run's JSON line again, with the sweep in it.
absl::Status SweepMicroBatch(const Options& o) {
  std::vector<int> sizes;
  for (int size = 1; size < o.engine.batch_size; size *= 2) sizes.push_back(size);
  sizes.push_back(o.engine.batch_size);
  Value sweep = Value::array();
  std::optional<Value> best;
  std::string table;
  for (int size : sizes) {
    Options run = o;
    run.engine.chunk_size = size;
    varuna::benchmarks::ReleaseCachedMemory(o.engine.device);
    varuna::benchmarks::ResetPeakMemory(o.engine.device);
    absl::PrintF("\n==== micro-batch %d of %d\n", size, o.engine.batch_size);
    std::fflush(stdout);
    Value row = Value::object();
    row["micro_batch"] = size;
    std::optional<std::string> out_of_memory;
    absl::StatusOr<Value> json;
    try {
      json = Benchmark(run, /*deterministic=*/false);
    } catch (const c10::OutOfMemoryError& e) {
      out_of_memory = std::string(e.what_without_backtrace());
    }
    varuna::benchmarks::ReleaseCachedMemory(o.engine.device);
    if (out_of_memory) {
      const std::string first_line = out_of_memory->substr(0, out_of_memory->find('\n'));
      absl::PrintF("micro-batch %d: out of device memory (%s); larger ones are not tried\n", size,
                   first_line.c_str());
      row["error"] = "out of memory";
      sweep.push_back(row);
      absl::StrAppend(&table,
                      absl::StrFormat("  %11d  %12s  %10s  %10s\n", size, "out of memory", "", ""));
      break;
    }
    if (!json.ok()) return json.status();
    const double tokens = (*json)["tokens_per_s"].get<double>();
    const Value& memory = (*json)["peak_memory_gb"];
    row["tokens_per_s"] = tokens;
    row["step_ms"] = (*json)["step_ms"];
    row["peak_memory_gb"] = memory;
    sweep.push_back(row);
    absl::StrAppend(
        &table, absl::StrFormat("  %11d  %12.0f  %10.1f  %10s\n", size, tokens,
                                (*json)["step_ms"].get<double>(),
                                memory.is_null() ? std::string("n/a (CPU)")
                                                 : absl::StrFormat("%.2f", memory.get<double>())));
    if (!best || tokens > (*best)["tokens_per_s"].get<double>()) best = *json;
  }
  if (!best) {
    return absl::ResourceExhaustedError(
        "--sweep-micro-batch: even micro-batch 1 ran out of device memory: use a smaller model, "
        "--seq-length or --dtype, or a device with more memory");
  }
  absl::PrintF(
      "\nmicro-batch sweep, %s %s, batch %d (tokens/s of the timed steps; peak memory in GB):\n"
      "  micro-batch      tokens/s     step ms     peak GB\n%s"
      "best: micro-batch %lld, %.0f tokens/s\n",
      o.preset, o.dtype_name, o.engine.batch_size, table,
      static_cast<long long>((*best)["micro_batch"].get<int64_t>()),
      (*best)["tokens_per_s"].get<double>());
  (*best)["sweep"] = std::move(sweep);
  absl::PrintF("%s\n", varuna::json::Serialize(*best).c_str());
  return absl::OkStatus();
}

// --fp8-compare: the run without FP8, then with it, and their ratios.
absl::Status CompareFp8(const Options& o) {
  Options baseline = o;
  baseline.fp8.reset();
  absl::StatusOr<Value> without = Benchmark(baseline, /*deterministic=*/false);
  if (!without.ok()) return without.status();
  absl::PrintF("\nthe same with --fp8-format=%s:\n", varuna::kernels::Fp8FormatName(o.fp8->format));
  // Each run's peak_memory_gb its own (the first run's engine is gone by now).
  varuna::benchmarks::ReleaseCachedMemory(o.engine.device);
  varuna::benchmarks::ResetPeakMemory(o.engine.device);
  absl::StatusOr<Value> with = Benchmark(o, /*deterministic=*/false);
  if (!with.ok()) return with.status();
  const double tokens = (*with)["tokens_per_s"].get<double>();
  const double base_tokens = (*without)["tokens_per_s"].get<double>();
  const double loss = (*with)["losses"][1].get<double>();
  const double base_loss = (*without)["losses"][1].get<double>();
  const double difference = (loss - base_loss) / base_loss;
  absl::PrintF(
      "fp8 %s: %.0f tokens/s against %.0f (%s): ratio %.3f; loss after %d steps %.6f against "
      "%.6f: relative difference %+.4f (goal: ratio >= 1.25, |difference| <= 0.01)\n",
      varuna::kernels::Fp8FormatName(o.fp8->format), tokens, base_tokens, o.dtype_name,
      tokens / base_tokens, o.warmup_steps + o.steps, loss, base_loss, difference);
  Value json = Value::object();
  json["fp8_ratio"] = tokens / base_tokens;
  json["fp8_loss_relative_difference"] = difference;
  json["preset"] = o.preset;
  json["dtype"] = o.dtype_name;
  json["fp8_format"] = varuna::kernels::Fp8FormatName(o.fp8->format);
  json["steps"] = o.warmup_steps + o.steps;
  json["fp8_tokens_per_s"] = tokens;
  json["baseline_tokens_per_s"] = base_tokens;
  json["fp8_loss"] = loss;
  json["baseline_loss"] = base_loss;
  absl::PrintF("%s\n", varuna::json::Serialize(json).c_str());
  return absl::OkStatus();
}

absl::Status Main(const Options& o) {
  if (o.fp8_compare) return CompareFp8(o);
  if (o.sweep_micro_batch) return SweepMicroBatch(o);
  absl::StatusOr<Value> standard_run = Benchmark(o, /*deterministic=*/false);
  if (!standard_run.ok() || !o.deterministic) return standard_run.status();
  const double standard = (*standard_run)["tokens_per_s"].get<double>();
  absl::StatusOr<std::vector<std::string>> lines = trainer::EnterDeterministicMode();
  if (!lines.ok()) return lines.status();
  absl::PrintF("\nthe same under --deterministic:\n");
  for (const std::string& line : *lines) absl::PrintF("%s\n", line.c_str());
  absl::StatusOr<Value> deterministic_run = Benchmark(o, /*deterministic=*/true);
  if (!deterministic_run.ok()) return deterministic_run.status();
  const double deterministic = (*deterministic_run)["tokens_per_s"].get<double>();
  const double ratio = deterministic / standard;
  absl::PrintF(
      "--deterministic: %.0f tokens/s against %.0f by default: ratio %.3f (deterministic / "
      "default, same process, same batches)\n",
      deterministic, standard, ratio);
  Value json = Value::object();
  json["determinism_ratio"] = ratio;
  json["preset"] = o.preset;
  json["dtype"] = o.dtype_name;
  json["default_tokens_per_s"] = standard;
  json["deterministic_tokens_per_s"] = deterministic;
  absl::PrintF("%s\n", varuna::json::Serialize(json).c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace benchmarks

int main(int argc, char** argv) {
  benchmarks::Flags flags;
  varuna::FlagParser parser;
  benchmarks::Register(parser, flags);
  if (std::optional<int> exit =
          parser.ParseMain("gpt2_throughput_benchmark", benchmarks::kUsage, argc, argv)) {
    return *exit;
  }
  // cuBLAS reads its workspace setting once, at its first use: --deterministic's goes in before
  // any CUDA work (it then holds for the default run too; see the file comment).
  if (flags.deterministic) {
    absl::StatusOr<std::string> workspace =
        trainer::DeterministicCublasWorkspace(std::getenv(trainer::kCublasWorkspaceVariable));
    if (!workspace.ok()) {
      std::fprintf(stderr, "gpt2_throughput_benchmark: error: %s\n",
                   std::string(workspace.status().message()).c_str());
      return 2;
    }
    setenv(trainer::kCublasWorkspaceVariable, workspace->c_str(), /*overwrite=*/1);
  }
  absl::StatusOr<benchmarks::Options> options = benchmarks::MakeOptions(flags);
  if (!options.ok()) {
    std::fprintf(stderr, "gpt2_throughput_benchmark: error: %s\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }
  try {
    if (absl::Status status = benchmarks::Main(*options); !status.ok()) {
      std::fprintf(stderr, "gpt2_throughput_benchmark: %s\n",
                   std::string(status.message()).c_str());
      return 1;
    }
  } catch (const std::exception& e) {  // LibTorch reports, e.g., CUDA out of memory this way.
    std::fprintf(stderr, "gpt2_throughput_benchmark: %s\n", e.what());
    return 1;
  }
  return 0;
}
