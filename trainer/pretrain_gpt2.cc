// pretrain_gpt2: Megatron-LM's pretrain_gpt2 in C++, on the Varuna engine.
//
//   bazel run //trainer:pretrain_gpt2                      # the sample run (see README)
//   bazel run //trainer:pretrain_gpt2 -- --preset=gpt2-355m --data-path=DATA_text_document
//       --tokenizer-model=spm.model --batch-size=8 --train-iters=1000 --lr=1.5e-4 --save=ckpts
//
// One step: the data gives this replica's batch, Varuna::step runs forward, backward and the
// update, the LR schedule moves only on applied steps; every --log-interval a line with loss,
// loss scale, grad norm, throughput and MFU; every --eval-interval the validation loss; every
// --save-interval a checkpoint; with --tensorboard-dir the scalars also go to TensorBoard event
// files (trainer/tensorboard_log.h).
#include <ATen/ATen.h>
#include <ATen/DeviceAccelerator.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/gpt2/config.h"
#include "models/gpt2/flops.h"
#include "models/gpt2/summary.h"
#include "trainer/arguments.h"
#include "trainer/attention_backend.h"
#include "trainer/deterministic_mode.h"
#include "trainer/device_name.h"
#include "trainer/gpt_data.h"
#include "trainer/gpt_engine.h"
#include "models/gpt2/model_record.h"
#include "trainer/lr_schedule.h"
#include "varuna/io/user_paths.h"
#include "trainer/profile_mode.h"
#include "trainer/setup.h"
#include "trainer/stop_signal.h"
#include "trainer/tensorboard_log.h"
#include "trainer/throughput.h"
#include "trainer/training_log.h"
#include "varuna/comm/exception_status.h"
#include "varuna/comm/world.h"
#include "varuna/io/json.h"
#include "varuna/varuna.h"

namespace trainer {

using varuna::ResolveUserPath;
namespace {

using varuna::json::Value;

// "--hidden-size: checkpoint 128, flags 256; ..." for every model field that differs.
std::string ModelDifferences(const Value& saved, const Value& current) {
  std::vector<std::string> differences;
  for (const auto& [key, value] : current.items()) {
    const Value* old = varuna::json::Find(saved, key);
    const std::string old_text = old ? varuna::json::Serialize(*old) : "missing";
    if (old_text != varuna::json::Serialize(value)) {
      std::string flag = absl::StrCat("--", key);
      std::replace(flag.begin(), flag.end(), '_', '-');
      if (key == "padded_vocab_size") {
        flag =
            "the padded vocabulary (--tokenizer-model, --vocab-size, "
            "--make-vocab-size-divisible-by)";
      }
      differences.push_back(
          absl::StrCat(flag, ": checkpoint ", old_text, ", now ", varuna::json::Serialize(value)));
    }
  }
  return absl::StrJoin(differences, "; ");
}

// Where training stands; saved in every checkpoint.
struct TrainingState {
  int64_t iteration = 0;
  int64_t consumed_samples = 0;
  int64_t skipped = 0;
};

absl::StatusOr<double> Evaluate(varuna::Varuna& engine, const GptData& data, data::Split split,
                                int64_t eval_iters) {
  double total = 0;
  for (int64_t k = 0; k < eval_iters; ++k) {
    absl::StatusOr<varuna::TensorMap> batch = data.EvalBatch(split, k);
    if (!batch.ok()) return batch.status();
    absl::StatusOr<double> loss = engine.evaluate(*batch);
    if (!loss.ok()) return loss.status();
    total += *loss;
  }
  return total / static_cast<double>(eval_iters);
}

// What a checkpoint records besides the engine's state.
struct SavedContext {
  Value model;                  // ModelConfigJson: compared on resume
  Value model_record;           // CheckpointModelJson: what the checkpoint records
  std::string tokenizer_model;  // absolute path, for export_hf
  Value lr_schedule;
  std::string data_fingerprint;
};

absl::Status Save(varuna::Varuna& engine, const TrainerArguments& a, const TrainingState& state,
                  const SavedContext& context, TrainingLog& log) {
  Value trainer = Value::object();
  trainer["iteration"] = state.iteration;
  trainer["consumed_samples"] = state.consumed_samples;
  trainer["skipped_iterations"] = state.skipped;
  trainer["model"] = context.model_record;
  trainer["tokenizer_model"] = context.tokenizer_model;
  trainer["lr_schedule"] = context.lr_schedule;
  trainer["data_fingerprint"] = context.data_fingerprint;
  varuna::CheckpointOptions options;
  options.save_dir = ResolveUserPath(a.save);
  options.staging_dir = a.checkpoint_tmpdir.empty() ? "" : ResolveUserPath(a.checkpoint_tmpdir);
  options.shard = a.shard;
  options.keep_last = static_cast<int>(a.keep_last);
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status status = engine.checkpoint(options, state.iteration, trainer); !status.ok()) {
    return status;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log.Info(options.staging_dir.empty()
               ? absl::StrFormat("saved checkpoint at iteration %d to %s in %.2f s",
                                 state.iteration, a.save, seconds)
               : absl::StrFormat("staged checkpoint at iteration %d in %s in %.2f s; moving it to "
                                 "%s in the background",
                                 state.iteration, a.checkpoint_tmpdir, seconds, a.save));
  return absl::OkStatus();
}

// --profiling: measures the model's segments into the profile directory instead of training.
absl::Status ProfileMode(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                         const varuna::VarunaOptions& engine,
                         const std::vector<std::string>& mode_lines) {
  // Launched (WORLD_SIZE > 1): every rank profiles its share; the stage map plays no part.
  int world_size = 1;
  if (const char* text = std::getenv("WORLD_SIZE"); text != nullptr && *text) {
    if (!absl::SimpleAtoi(text, &world_size) || world_size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("the environment variable WORLD_SIZE=\"", text,
                                                     "\" is not a number of processes"));
    }
  }
  int gpus_per_node = 0;  // 0: LOCAL_WORLD_SIZE is not set
  if (const char* text = std::getenv("LOCAL_WORLD_SIZE"); text != nullptr && *text) {
    if (!absl::SimpleAtoi(text, &gpus_per_node) || gpus_per_node < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("the environment variable LOCAL_WORLD_SIZE=\"", text,
                       "\" is not a number of processes per node: set it to the processes each "
                       "node runs (//varuna:launch sets it to --gpus_per_node)"));
    }
  }
  // The sample run's default metrics file is for training; profiling writes one only if asked.
  const bool rank0 = engine.rank == 0;
  const std::string metrics = !rank0 || (a.sample_run && !a.WasGiven("metrics-file"))
                                  ? ""
                                  : ResolveUserPath(a.metrics_file);
  absl::StatusOr<std::unique_ptr<TrainingLog>> log =
      TrainingLog::Open(rank0 ? stdout : nullptr, metrics);
  if (!log.ok()) return log.status();
  std::unique_ptr<varuna::comm::World> world;
  if (world_size > 1) {
    absl::StatusOr<std::unique_ptr<varuna::comm::World>> joined =
        JoinWorld(a, engine, world_size, /*stop_requested=*/nullptr);
    if (!joined.ok()) return joined.status();
    world = std::move(*joined);
    if (gpus_per_node == 0) {
      (*log)->Info(
          "> LOCAL_WORLD_SIZE is not set: every process counts as a node of its own for the "
          "communication curves");
    }
  }
  for (const std::string& line : mode_lines) (*log)->Info(line);
  absl::StatusOr<AttentionChoice> attention =
      ChooseAttentionBackend(a.attention_backend, engine.device, engine.dtype, config,
                             /*micro_batch=*/a.profile_micro_batch_sizes.back(), a.deterministic);
  if (!attention.ok()) return attention.status();
  (*log)->Info(absl::StrCat("> attention: ", attention->reason));
  ProfileModeOptions options;
  options.dir = ResolveUserPath(a.profile_dir.empty() ? a.save : a.profile_dir);
  options.micro_batch_sizes = a.profile_micro_batch_sizes;
  options.segments = a.profile_segments;
  options.device = engine.device;
  options.device_name = DeviceName(engine.device);
  options.dtype = engine.dtype;
  options.seed = static_cast<uint64_t>(a.seed);
  options.execution.attention = attention->backend;
  options.execution.bias_dropout_fusion = a.bias_dropout_fusion;
  options.world = world.get();
  options.gpus_per_node = std::max(gpus_per_node, 1);
  at::manual_seed(a.seed);
  return RunProfiling(config, options, **log);
}

LrScheduleOptions ScheduleOptions(const TrainerArguments& a) {
  LrScheduleOptions options;
  options.max_lr = a.lr;
  options.min_lr = a.min_lr;
  options.style = *ParseLrDecayStyle(a.lr_decay_style);  // checked by ParseArguments
  options.decay_steps = a.lr_decay_iters > 0 ? a.lr_decay_iters : a.train_iters;
  options.warmup_steps = static_cast<int64_t>(a.warmup * static_cast<double>(options.decay_steps));
  return options;
}

SavedContext MakeSavedContext(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                              const TrainingInputs& inputs, const GptData& data) {
  const LrScheduleOptions schedule = ScheduleOptions(a);
  SavedContext context;
  context.model = gpt2::ModelConfigJson(config);
  context.model_record = gpt2::CheckpointModelJson(config);
  context.tokenizer_model = inputs.tokenizer_model.empty()
                                ? ""
                                : std::filesystem::absolute(inputs.tokenizer_model).string();
  context.lr_schedule = Value::object();
  context.lr_schedule["lr"] = a.lr;
  context.lr_schedule["min_lr"] = a.min_lr;
  context.lr_schedule["decay_style"] = a.lr_decay_style;
  context.lr_schedule["decay_iters"] = schedule.decay_steps;
  context.lr_schedule["warmup_iters"] = schedule.warmup_steps;
  context.data_fingerprint = absl::StrFormat("%016x", data.indexed().Fingerprint());
  return context;
}

// With a checkpoint to load (CheckRun's answer): restores the engine from it (refusing one of
// another model) and returns where training stands; otherwise the start.
absl::StatusOr<TrainingState> Resume(const TrainerArguments& a, bool has_checkpoint,
                                     varuna::Varuna& engine, const SavedContext& context,
                                     TrainingLog& log) {
  TrainingState state;
  if (!has_checkpoint) {
    if (!a.load.empty()) {
      log.Info(absl::StrCat("> --load=", a.load,
                            " holds no checkpoint yet: starting from scratch at iteration 0"));
    }
    return state;
  }
  std::optional<int64_t> iteration;
  if (a.resume_step >= 0) iteration = a.resume_step;
  auto same_model = [&](const Value& saved) -> absl::Status {
    const Value* saved_model = varuna::json::Find(saved, "model");
    if (saved_model == nullptr || !saved_model->is_object()) {
      return absl::DataLossError(
          absl::StrCat("the checkpoint in ", a.load, " has no model configuration"));
    }
    if (std::string diff = ModelDifferences(*saved_model, context.model); !diff.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpoint in ", a.load, " was written for another model: ", diff,
                       ". Use the model flags it was trained with"));
    }
    return absl::OkStatus();
  };
  absl::StatusOr<varuna::Varuna::Loaded> loaded =
      engine.load_checkpoint(ResolveUserPath(a.load), iteration, same_model);
  if (!loaded.ok()) return loaded.status();
  const Value& saved = loaded->trainer_state;
  if (!loaded->note.empty()) log.Info(absl::StrCat("> checkpoint: ", loaded->note));
  state.iteration = loaded->iteration;
  state.consumed_samples =
      varuna::json::AsInt64(varuna::json::Find(saved, "consumed_samples")).value_or(0);
  state.skipped =
      varuna::json::AsInt64(varuna::json::Find(saved, "skipped_iterations")).value_or(0);
  log.Info(absl::StrFormat("> resumed from %s at iteration %d (%d samples consumed)", a.load,
                           state.iteration, state.consumed_samples));
  const Value* fingerprint = varuna::json::Find(saved, "data_fingerprint");
  const std::string& now = context.data_fingerprint;
  if (fingerprint != nullptr && fingerprint->is_string() &&
      fingerprint->get_ref<const std::string&>() != now) {
    log.Info(
        absl::StrCat("> warning: the checkpoint was trained on other data (index "
                     "fingerprint ",
                     fingerprint->get_ref<const std::string&>(), ", now ", now,
                     "): the data stream continues at the same position of this data"));
  }
  return state;
}

// What one iteration costs, for the log's throughput and MFU.
struct IterationCost {
  int64_t global_batch = 0;  // sequences, all replicas
  double flops = 0;          // Megatron's formula
  double tokens = 0;
  // The peak of all the job's devices: the FLOP/s are the whole job's (global batch, all
  // stages).
  std::optional<double> job_peak_tflops;
};

IterationCost CostOf(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                     const varuna::VarunaOptions& engine, const std::string& device_name) {
  IterationCost cost;
  cost.global_batch = a.batch_size * engine.stage_map.num_replicas();
  cost.flops = gpt2::TrainingFlopsPerIteration(config, cost.global_batch);
  cost.tokens = static_cast<double>(cost.global_batch) * static_cast<double>(config.seq_length);
  const std::optional<double> peak =
      a.peak_tflops > 0 ? std::optional<double>(a.peak_tflops) : PeakTflops(device_name);
  if (peak) cost.job_peak_tflops = *peak * engine.stage_map.world_size();
  return cost;
}

// The steps since the last log line: the mean loss of those applied, the time of all.
class LogInterval {
 public:
  void Add(const varuna::StepResult& result, double seconds) {
    seconds_ += seconds;
    ++steps_;
    if (result.overflow) return;
    loss_sum_ += result.loss;
    ++losses_;
    grad_norm_ = result.grad_norm;
  }

  // The log line's record, and a fresh interval.
  StepRecord Take(const TrainerArguments& a, const TrainingState& state, varuna::Varuna& engine,
                  const IterationCost& cost) {
    const double seconds = seconds_ / static_cast<double>(steps_);
    const Throughput throughput =
        MeasureThroughput(cost.flops, cost.tokens, seconds, cost.job_peak_tflops);
    StepRecord record;
    record.iteration = state.iteration;
    record.train_iters = a.train_iters;
    record.consumed_samples = state.consumed_samples;
    record.ms_per_iteration = seconds * 1e3;
    record.lr = engine.optimizer().options().lr;
    record.loss = losses_ > 0 ? loss_sum_ / static_cast<double>(losses_)
                              : std::numeric_limits<double>::quiet_NaN();
    record.loss_scale = engine.loss_scale();
    record.grad_norm = grad_norm_;
    record.skipped = state.skipped;
    record.tokens_per_sec = throughput.tokens_per_second;
    record.tflops = throughput.tflops;
    record.mfu = throughput.mfu;
    *this = LogInterval();
    return record;
  }

 private:
  double loss_sum_ = 0;
  int64_t losses_ = 0;
  double grad_norm_ = 0;
  double seconds_ = 0;  // in steps only: evaluations and checkpoints are left out
  int64_t steps_ = 0;
};

// The scalars of one step, for TensorBoard: its own loss (NaN when it was skipped), not the
// interval's mean.
StepRecord OneStep(const varuna::StepResult& result, const TrainingState& state,
                   varuna::Varuna& engine) {
  StepRecord record;
  record.iteration = state.iteration;
  record.consumed_samples = state.consumed_samples;
  record.lr = engine.optimizer().options().lr;
  record.loss = result.overflow ? std::numeric_limits<double>::quiet_NaN() : result.loss;
  record.loss_scale = result.loss_scale;
  record.grad_norm = result.grad_norm;
  record.skipped = state.skipped;
  return record;
}

// The CUDA caching allocator's statistics of `device` (Megatron's torch.cuda.memory_stats
// scalars); nullopt on the CPU, which has no such allocator.
std::optional<DeviceMemory> MemoryOf(const c10::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  const c10::CachingDeviceAllocator::DeviceStats stats =
      at::accelerator::getDeviceStats(device.index());
  constexpr size_t kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  DeviceMemory memory;
  memory.reserved_bytes = stats.reserved_bytes[kAll].current;
  memory.allocated_bytes = stats.allocated_bytes[kAll].current;
  memory.max_allocated_bytes = stats.allocated_bytes[kAll].peak;
  memory.allocated_count = stats.allocation[kAll].current;
  return memory;
}

// True, after saying so, when `status` is a start-up phase (`phase`) given up on a stop request;
// the run then ends with exit 0, as a stop during training does after its checkpoint.
bool StoppedWhileStarting(const absl::Status& status, const StopSignal& stop_signal,
                          const char* phase, TrainingLog& log) {
  if (!absl::IsCancelled(status) || !stop_signal.requested()) return false;
  log.Info(absl::StrFormat("stop requested (%s) while %s: %s; exiting", stop_signal.signal_name(),
                           phase, status.message()));
  return true;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// `mode_lines`: what --deterministic set (EnterDeterministicMode), for the start-up log;
// `tensorboard`: the TensorBoard log on rank 0 with --tensorboard-dir, else null.
absl::Status Run(const TrainerArguments& a, const std::string& argv0,
                 const std::vector<std::string>& mode_lines, TensorBoardLog* tensorboard) {
  // From its first moment a training run takes SIGUSR1/SIGTERM to mean "checkpoint and stop":
  // each start-up phase that waits reads it, and every step (after its backward), so one that
  // comes while the job starts is neither lost nor fatal. Profiling and --print-model-summary
  // keep the signals' default actions.
  std::optional<StopSignal> stop_signal;
  if (!a.profiling && !a.print_model_summary) stop_signal.emplace();

  // 1. Everything that can be checked without touching a file is checked first.
  absl::StatusOr<Vocabulary> vocabulary = KnownVocabulary(a);
  if (!vocabulary.ok()) return vocabulary.status();
  absl::StatusOr<gpt2::Gpt2Config> config = ModelConfig(a, vocabulary->size);
  if (!config.ok()) return config.status();
  if (absl::Status s = CheckEodToken(a, *vocabulary); !s.ok()) return s;
  if (a.print_model_summary) {
    std::printf("%s", gpt2::FormatSummary(*config, gpt2::Summarize(*config)).c_str());
    return absl::OkStatus();
  }
  absl::StatusOr<varuna::VarunaOptions> engine_options = EngineOptions(a);
  if (!engine_options.ok()) return engine_options.status();
  // This rank's GPU becomes the process's current device before anything touches CUDA, so
  // that work naming no device (c10d's, NCCL's, LibTorch's) lands there and not on GPU 0.
  if (engine_options->device.is_cuda()) {
    at::accelerator::setDeviceIndex(engine_options->device.index());
  }
  if (a.profiling) return ProfileMode(a, *config, *engine_options, mode_lines);
  const absl::StatusOr<bool> has_checkpoint = CheckRun(a, *config, *engine_options);
  if (!has_checkpoint.ok()) return has_checkpoint.status();

  // 2. The log, the inputs, the job's processes, the data and the engine.
  absl::StatusOr<std::unique_ptr<TrainingLog>> log_or =
      OpenTrainingLog(a, engine_options->rank == 0);
  if (!log_or.ok()) return log_or.status();
  TrainingLog& log = **log_or;
  const auto stop_requested = [&stop_signal] { return stop_signal->requested(); };
  absl::StatusOr<TrainingInputs> inputs =
      PrepareInputs(a, argv0, engine_options->rank == 0, log, stop_requested);
  if (StoppedWhileStarting(inputs.status(), *stop_signal, "preparing the data", log)) {
    return absl::OkStatus();
  }
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<std::unique_ptr<varuna::comm::World>> world =
      JoinJob(a, *engine_options, log, stop_requested);
  if (StoppedWhileStarting(world.status(), *stop_signal, "joining the job", log)) {
    return absl::OkStatus();
  }
  if (!world.ok()) return world.status();
  absl::StatusOr<std::unique_ptr<varuna::comm::Heartbeat>> heartbeat =
      StartHeartbeat(a, world->get());
  if (!heartbeat.ok()) return heartbeat.status();
  log.Info(gpt2::FormatSummary(*config, gpt2::Summarize(*config)));
  absl::StatusOr<std::unique_ptr<GptData>> data =
      OpenData(a, *config, *inputs, *engine_options, *vocabulary, log);
  if (!data.ok()) return data.status();
  log.Info(absl::StrCat("> data: ", (*data)->Describe()));
  for (const std::string& line : mode_lines) log.Info(line);
  absl::StatusOr<GptEngine> gpt =
      CreateGptEngine(TrainerEngineOptions(a, *config, *engine_options));
  if (StoppedWhileStarting(gpt.status(), *stop_signal, "creating the process groups", log)) {
    return absl::OkStatus();
  }
  if (!gpt.ok()) return gpt.status();
  // Declared after the engine, the heartbeat stops first on every way out of Run: the groups
  // this rank then tears down, and rank 0 leaving with its store, are no failure of the job.
  const std::unique_ptr<varuna::comm::Heartbeat> watching = *std::move(heartbeat);
  log.Info(absl::StrCat("> attention: ", gpt->attention.reason));
  if (a.cross_entropy_loss_fusion) {
    log.Info(
        "> cross entropy: fused with the LM head, a chunk of tokens at a time "
        "(--cross-entropy-loss-fusion)");
  }
  log.Info(a.bias_dropout_fusion
               ? "> residual adds: bias, dropout and add fused (--bias-dropout-fusion)"
               : "> residual adds: unfused linear + dropout + add (--no-bias-dropout-fusion)");
  varuna::Varuna& engine = *gpt->varuna;

  // 3. Resume.
  const SavedContext context = MakeSavedContext(a, *config, *inputs, **data);
  absl::StatusOr<TrainingState> resumed = Resume(a, has_checkpoint.value(), engine, context, log);
  if (!resumed.ok()) return resumed.status();
  TrainingState state = *resumed;
  const int64_t first_iteration = state.iteration;
  if (tensorboard != nullptr) {
    if (!a.load.empty()) tensorboard->SkipThrough(state.iteration);
    log.Info(absl::StrCat("> tensorboard: ", tensorboard->path()));
    if (a.log_memory_to_tensorboard && !engine_options->device.is_cuda()) {
      log.Info("> tensorboard: no memory scalars on the CPU (--log-memory-to-tensorboard)");
    }
  }

  // 4. Train: step, log, evaluate, checkpoint, until --train-iters, a stop or --exit-interval.
  const LrSchedule schedule(ScheduleOptions(a));
  const std::string device_name = DeviceName(engine_options->device);
  const IterationCost cost = CostOf(a, *config, *engine_options, device_name);
  log.Info(
      absl::StrFormat("> training %s for %d iterations on %s (%s), global batch %d x %d tokens, "
                      "%.3g GFLOP per iteration (Megatron's formula)",
                      a.preset, a.train_iters, device_name, c10::toString(engine_options->dtype),
                      cost.global_batch, config->seq_length, cost.flops / 1e9));
  if (a.eval_interval > 0 && state.iteration == 0) {
    absl::StatusOr<double> loss = Evaluate(engine, **data, data::Split::kValid, a.eval_iters);
    if (!loss.ok()) return loss.status();
    log.Eval({0, "validation", *loss});
    if (tensorboard != nullptr) {
      if (absl::Status s = tensorboard->Eval({0, "validation", *loss}, 0); !s.ok()) return s;
    }
  }
  LogInterval interval;
  bool saved_last = false;
  bool stopped = false;
  while (state.iteration < a.train_iters) {
    const auto step_start = std::chrono::steady_clock::now();
    engine.optimizer().set_lr(schedule.At(engine.optimizer().step_count()));
    absl::StatusOr<varuna::TensorMap> batch = (*data)->TrainBatch(state.consumed_samples);
    if (!batch.ok()) return batch.status();
    absl::StatusOr<varuna::StepResult> result = engine.step(*batch, stop_requested);
    if (!result.ok()) return result.status();
    interval.Add(*result, SecondsSince(step_start));
    ++state.iteration;
    state.consumed_samples += cost.global_batch;
    saved_last = false;
    if (result->completed_checkpoint >= 0) {
      log.Info(absl::StrFormat("checkpoint at iteration %d is complete in %s",
                               result->completed_checkpoint, a.save));
    }
    if (result->overflow) {
      ++state.skipped;
      log.Info(absl::StrFormat("iteration %d skipped: inf/NaN in the gradients (loss scale %g)",
                               state.iteration, result->loss_scale));
    }
    if (tensorboard != nullptr && tensorboard->WantsStep(state.iteration)) {
      const std::optional<DeviceMemory> memory =
          a.log_memory_to_tensorboard ? MemoryOf(engine_options->device) : std::nullopt;
      if (absl::Status s = tensorboard->Step(OneStep(*result, state, engine), memory); !s.ok()) {
        return s;
      }
    }
    if (state.iteration % a.log_interval == 0) {
      const StepRecord record = interval.Take(a, state, engine, cost);
      log.Step(record);
      if (!log.status().ok()) return log.status();
      if (tensorboard != nullptr) {
        if (absl::Status s = tensorboard->Throughput(record); !s.ok()) return s;
      }
    }
    if (result->stop) {
      stopped = true;
      log.Info(absl::StrFormat(
          "stop requested (%s) at iteration %d: %s",
          *stop_signal->signal_name() ? stop_signal->signal_name() : "a signal on another rank",
          state.iteration,
          a.save.empty() ? "exiting without a checkpoint (no --save)"
                         : "checkpointing and exiting"));
      break;
    }
    if (a.eval_interval > 0 && state.iteration % a.eval_interval == 0 &&
        state.iteration < a.train_iters) {
      absl::StatusOr<double> loss = Evaluate(engine, **data, data::Split::kValid, a.eval_iters);
      if (!loss.ok()) return loss.status();
      log.Eval({state.iteration, "validation", *loss});
      if (tensorboard != nullptr) {
        if (absl::Status s =
                tensorboard->Eval({state.iteration, "validation", *loss}, state.consumed_samples);
            !s.ok()) {
          return s;
        }
      }
    }
    if (!a.save.empty() && a.save_interval > 0 && state.iteration % a.save_interval == 0) {
      if (absl::Status s = Save(engine, a, state, context, log); !s.ok()) return s;
      saved_last = true;
    }
    if (a.exit_interval > 0 && state.iteration % a.exit_interval == 0) {
      log.Info(absl::StrFormat("exiting at iteration %d (--exit-interval=%d)", state.iteration,
                               a.exit_interval));
      break;
    }
  }

  // 5. The last checkpoint (a run that took no step rewrites nothing) and the final evaluation.
  if (!a.save.empty() && !saved_last && state.iteration > first_iteration) {
    if (absl::Status s = Save(engine, a, state, context, log); !s.ok()) return s;
  }
  if (!a.checkpoint_tmpdir.empty() && !a.save.empty() && state.iteration > first_iteration) {
    log.Info("waiting for the background checkpoint move to finish");
  }
  if (absl::Status s = engine.finish_checkpoint(); !s.ok()) return s;
  if (stopped) return log.status();  // preempted: exit promptly
  if (a.eval_interval > 0) {
    for (data::Split split : {data::Split::kValid, data::Split::kTest}) {
      if (!(*data)->has(split)) continue;
      absl::StatusOr<double> loss = Evaluate(engine, **data, split, a.eval_iters);
      if (!loss.ok()) return loss.status();
      const EvalRecord record{state.iteration, split == data::Split::kValid ? "validation" : "test",
                              *loss};
      log.Eval(record);
      if (tensorboard != nullptr) {
        if (absl::Status s = tensorboard->Eval(record, state.consumed_samples); !s.ok()) return s;
      }
    }
  }
  return log.status();
}

}  // namespace
}  // namespace trainer

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<trainer::TrainerArguments> arguments = trainer::ParseArguments(args);
  if (!arguments.ok()) {
    std::fprintf(stderr, "pretrain_gpt2: error: %s\n",
                 std::string(arguments.status().message()).c_str());
    return 2;
  }
  if (arguments->help_requested) {
    std::printf(
        "Usage: bazel run //trainer:pretrain_gpt2 -- [flags]\n"
        "Pretrains GPT-2 (Megatron-LM's pretrain_gpt2 on the Varuna engine). Without "
        "--data-path it trains\ngpt2-tiny on the bundled sample corpus. Flags (dashes and "
        "underscores are interchangeable):\n%s",
        arguments->help.c_str());
    return 0;
  }
  // --deterministic: before anything touches CUDA, since cuBLAS reads its workspace setting
  // once, when it initializes.
  std::vector<std::string> mode_lines;
  if (arguments->deterministic) {
    absl::StatusOr<std::vector<std::string>> entered = trainer::EnterDeterministicMode();
    if (!entered.ok()) {
      std::fprintf(stderr, "pretrain_gpt2: error: %s\n",
                   std::string(entered.status().message()).c_str());
      return 2;
    }
    mode_lines = *std::move(entered);
  }
  // --tensorboard-dir is checked (created, a file opened in it) before anything else runs; a
  // directory that cannot hold the event files is a usage error, like a bad flag.
  absl::StatusOr<std::unique_ptr<trainer::TensorBoardLog>> tensorboard =
      trainer::OpenTensorBoardLog(*arguments);
  if (!tensorboard.ok()) {
    std::fprintf(stderr, "pretrain_gpt2: error: %s\n",
                 std::string(tensorboard.status().message()).c_str());
    return 2;
  }
  absl::Status status;
  try {
    status = trainer::Run(*arguments, argv[0], mode_lines, tensorboard->get());
  } catch (const std::exception& e) {  // LibTorch reports, e.g., CUDA out of memory this way.
    status = absl::InternalError(varuna::comm::OneLineMessage(e));
  }
  // Under --deterministic an op without a deterministic implementation throws (at start-up or
  // in a step); say which op and what to do instead of LibTorch's Python-flavoured advice.
  if (const std::optional<std::string> op =
          trainer::NondeterministicOperation(std::string(status.message()))) {
    status = absl::FailedPreconditionError(trainer::NondeterministicOperationError(*op));
  }
  if (!status.ok()) {
    std::fprintf(stderr, "pretrain_gpt2: error: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
