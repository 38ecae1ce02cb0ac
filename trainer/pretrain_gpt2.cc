// pretrain_gpt2: Megatron-LM's pretrain_gpt2 in C++, on the Varuna engine.
//
//   bazel run //trainer:pretrain_gpt2                      # the sample run (see README)
//   bazel run //trainer:pretrain_gpt2 -- --preset=gpt2-355m --data-path=DATA_text_document
//       --tokenizer-model=spm.model --batch-size=8 --train-iters=1000 --lr=1.5e-4 --save=ckpts
//
// Run sets up (trainer/setup.h: vocabulary, model, engine options, the job, the data, the
// engine), resumes (trainer/run_checkpoint.h) and calls Train. One step of Train: the data gives
// this replica's batch, Varuna::step runs forward, backward and the update, the LR schedule
// moves only on applied steps; every --log-interval a line with loss, loss scale, grad norm,
// throughput and MFU; every --eval-interval the validation loss; every --save-interval a
// checkpoint. The log, the metrics file and TensorBoard are one RunReport (trainer/run_report.h).
// --profiling measures the model instead (trainer/profile_mode.h).
#include <ATen/DeviceAccelerator.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "models/gpt2/config.h"
#include "models/gpt2/summary.h"
#include "trainer/arguments.h"
#include "trainer/deterministic_mode.h"
#include "trainer/device_name.h"
#include "trainer/exit_duration.h"
#include "trainer/fp8_flags.h"
#include "trainer/fp8_start.h"
#include "trainer/gpt_data.h"
#include "trainer/gpt_engine.h"
#include "trainer/host_malloc.h"
#include "trainer/job_shape.h"
#include "trainer/lr_schedule.h"
#include "trainer/phase_timing.h"
#include "trainer/profile_mode.h"
#include "trainer/run_checkpoint.h"
#include "trainer/run_report.h"
#include "trainer/setup.h"
#include "trainer/step_metrics.h"
#include "trainer/step_profiler.h"
#include "trainer/stop_signal.h"
#include "trainer/training_state.h"
#include "varuna/comm/exception_status.h"
#include "varuna/comm/world.h"
#include "varuna/launch/environment.h"
#include "varuna/launch/host.h"
#include "varuna/pipeline/phase_timers.h"
#include "varuna/pipeline/trace_range.h"
#include "varuna/planning/cpu_allocation_counter.h"
#include "varuna/varuna.h"

namespace trainer {
namespace {

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

// The mean loss over --eval-iters batches of `split`, reported at `state`.
absl::Status EvaluateAndReport(varuna::Varuna& engine, const GptData& data, data::Split split,
                               int64_t eval_iters, const TrainingState& state, RunReport& report) {
  double total = 0;
  for (int64_t k = 0; k < eval_iters; ++k) {
    absl::StatusOr<varuna::TensorMap> batch = data.EvalBatch(split, k);
    if (!batch.ok()) return batch.status();
    absl::StatusOr<double> loss = engine.evaluate(*batch);
    if (!loss.ok()) return loss.status();
    total += *loss;
  }
  const EvalRecord record{state.iteration, split == data::Split::kTest ? "test" : "validation",
                          total / static_cast<double>(eval_iters)};
  return report.Evaluation(record, state.consumed_samples);
}

// What a step says besides its numbers: a background checkpoint completed, a skipped step.
void ReportStepEvents(const varuna::StepResult& result, const TrainingState& state,
                      const TrainerArguments& a, RunReport& report) {
  if (result.completed_checkpoint >= 0) {
    report.Info(absl::StrFormat(
        "successfully saved checkpoint at iteration %d to %s (moved there in the background)",
        result.completed_checkpoint, a.save));
  }
  if (result.overflow) {
    report.Info(absl::StrFormat("iteration %d skipped: inf/NaN in the gradients (loss scale %g)",
                                state.iteration, result.loss_scale));
  }
}

// The engine's choices, for the start-up log.
void ReportEngine(const TrainerArguments& a, const GptEngine& gpt, RunReport& report) {
  report.Info(absl::StrCat("> attention: ", gpt.attention.reason));
  if (a.cross_entropy_loss_fusion) {
    report.Info(
        "> cross entropy: fused with the LM head, a chunk of tokens at a time "
        "(--cross-entropy-loss-fusion)");
  }
  if (absl::StatusOr<std::optional<varuna::kernels::Fp8Recipe>> fp8 =
          Fp8RecipeFromFlags(a.fp8_format, a.fp8_amax_history_len, a.fp8_amax_compute_algo,
                             a.fp8_margin, /*others_given=*/false);
      fp8.ok() && fp8->has_value()) {
    report.Info(DescribeFp8Recipe(**fp8));
    report.Info(absl::StrCat("> fp8 linears: ", gpt.fp8_linears));
  }
  report.Info(a.bias_dropout_fusion
                  ? "> residual adds: bias, dropout and add fused (--bias-dropout-fusion)"
                  : "> residual adds: unfused linear + dropout + add (--no-bias-dropout-fusion)");
  if (a.bias_gelu_gemm_fusion) {
    report.Info(
        "> MLP: bias + GeLU in the first GEMM's epilogue, their gradients in the backward GEMM's "
        "(--bias-gelu-gemm-fusion; cuBLASLt on a GPU in fp16/bf16)");
  }
}

// What --profile has to say (trainer/step_profiler.h): in the log, and on stderr on the ranks
// other than 0, whose log goes nowhere.
void ReportProfile(const std::string& lines, const varuna::Varuna& engine, RunReport& report) {
  if (lines.empty()) return;
  if (engine.options().rank != 0) std::fprintf(stderr, "%s\n", lines.c_str());
  report.Info(std::string(absl::StripSuffix(lines, "\n")));
}

// Trains from `state`: step, report, evaluate, checkpoint, until --train-iters, a stop (a
// signal, or --exit-duration-in-mins: `exit_duration`) or --exit-interval; then the last
// checkpoint (a run that took no step rewrites nothing) and, unless stopped, the final
// evaluations.
absl::Status Train(const TrainerArguments& a, varuna::Varuna& engine, const GptData& data,
                   const RunRecord& record, const IterationCost& cost, TrainingState state,
                   const StopSignal& stop_signal, const ExitDuration& exit_duration,
                   StepProfiler& profiler, varuna::PhaseTimers* timers, RunReport& report) {
  const int64_t first_iteration = state.iteration;
  const LrSchedule schedule(LearningRateSchedule(a));
  // The engine agrees on a stop across ranks, so all stop at the same step.
  const auto stop_requested = [&stop_signal, &exit_duration] {
    return stop_signal.requested() || exit_duration.Expired();
  };
  const auto every = [&state](int64_t interval) {
    return interval > 0 && state.iteration % interval == 0;
  };
  if (a.eval_interval > 0 && state.iteration == 0) {
    absl::Status s =
        EvaluateAndReport(engine, data, data::Split::kValid, a.eval_iters, state, report);
    if (!s.ok()) return s;
  }
  ReportProfile(profiler.NotReached(state.iteration, a.train_iters), engine, report);
  LogInterval interval;
  bool saved_last = false;
  bool stopped = false;
  while (state.iteration < a.train_iters) {
    ReportProfile(profiler.BeforeStep(state.iteration), engine, report);
    const auto step_start = std::chrono::steady_clock::now();
    engine.optimizer().set_lr(schedule.At(engine.optimizer().step_count()));
    varuna::Phase batch_range("pretrain_gpt2::batch", timers, 2, "batch-generator");
    absl::StatusOr<varuna::TensorMap> batch = data.TrainBatch(state.consumed_samples);
    batch_range.End();
    if (!batch.ok()) return batch.status();
    absl::StatusOr<varuna::StepResult> result = engine.step(*batch, stop_requested);
    if (!result.ok()) return result.status();
    interval.Add(*result, SecondsSince(step_start));
    ++state.iteration;
    state.consumed_samples += cost.global_batch;
    if (result->overflow) ++state.skipped;
    saved_last = false;
    const bool last = state.iteration >= a.train_iters || result->stop || every(a.exit_interval);
    ReportProfile(profiler.AfterStep(state.iteration, last), engine, report);
    varuna::TraceRange report_range("pretrain_gpt2::report");
    ReportStepEvents(*result, state, a, report);
    if (absl::Status s = report.Step(OneStep(*result, state, engine)); !s.ok()) return s;
    if (every(a.log_interval)) {
      const int64_t steps = interval.steps();  // what the timers' totals are divided by
      StepRecord line = interval.Take(state, a.train_iters, engine, cost);
      if (timers != nullptr) {
        absl::StatusOr<TimerTable> table = GatherTimers(*timers, engine, steps);
        if (!table.ok()) return table.status();
        line.timers = Spans(*table);
        line.timers_block = FormatTimers(*table, a.timing_log_option);
      }
      if (absl::Status s = report.Interval(line); !s.ok()) return s;
    }
    report_range.End();
    if (result->stop) {
      stopped = true;
      std::string why = stop_signal.signal_name();
      if (why.empty()) {
        why = exit_duration.Expired()       ? exit_duration.Describe()
              : a.exit_duration_in_mins > 0 ? "a signal or --exit-duration-in-mins on another rank"
                                            : "a signal on another rank";
      }
      report.Info(absl::StrFormat("stop requested (%s) at iteration %d: %s", why, state.iteration,
                                  a.save.empty() ? "exiting without a checkpoint (no --save)"
                                                 : "checkpointing and exiting"));
      break;
    }
    if (every(a.eval_interval) && state.iteration < a.train_iters) {
      varuna::TraceRange range("pretrain_gpt2::evaluate");
      absl::Status s =
          EvaluateAndReport(engine, data, data::Split::kValid, a.eval_iters, state, report);
      if (!s.ok()) return s;
    }
    if (!a.save.empty() && every(a.save_interval)) {
      varuna::TraceRange range("pretrain_gpt2::checkpoint");
      if (absl::Status s = SaveCheckpoint(engine, a, state, record, report.log()); !s.ok()) {
        return s;
      }
      saved_last = true;
    }
    if (every(a.exit_interval)) {
      report.Info(absl::StrFormat("exiting at iteration %d (--exit-interval=%d)", state.iteration,
                                  a.exit_interval));
      break;
    }
  }
  const bool stepped = state.iteration > first_iteration;
  if (!a.save.empty() && !saved_last && stepped) {
    if (absl::Status s = SaveCheckpoint(engine, a, state, record, report.log()); !s.ok()) return s;
  }
  if (!a.checkpoint_tmpdir.empty() && !a.save.empty() && stepped) {
    report.Info("waiting for the background checkpoint move to finish");
  }
  if (absl::Status s = engine.finish_checkpoint(); !s.ok()) return s;
  if (stopped || a.eval_interval == 0) return absl::OkStatus();  // preempted: exit promptly
  for (data::Split split : {data::Split::kValid, data::Split::kTest}) {
    if (!data.has(split)) continue;
    absl::Status s = EvaluateAndReport(engine, data, split, a.eval_iters, state, report);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The program: `launch` is the launcher's environment, `mode_lines` what --deterministic set
// (for the start-up log), `tensorboard` the TensorBoard log (rank 0 with --tensorboard-dir).
absl::Status Run(const TrainerArguments& a, const std::string& argv0,
                 const varuna::LaunchEnvironment& launch,
                 const std::vector<std::string>& mode_lines,
                 std::unique_ptr<TensorBoardLog> tensorboard) {
  // From its first moment a training run takes SIGUSR1/SIGTERM to mean "checkpoint and stop":
  // each start-up phase that waits reads it, and every step (after its backward), so one that
  // comes while the job starts is neither lost nor fatal. Profiling and --print-model-summary
  // keep the signals' default actions.
  std::optional<StopSignal> stop_signal;
  if (!a.profiling && !a.print_model_summary) stop_signal.emplace();
  const ExitDuration exit_duration(a.exit_duration_in_mins, std::chrono::steady_clock::now());

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
  absl::StatusOr<varuna::VarunaOptions> options = EngineOptions(a, launch);
  if (!options.ok()) return options.status();
  // This rank's GPU becomes the process's current device before anything touches CUDA, so
  // that work naming no device (c10d's, NCCL's, LibTorch's) lands there and not on GPU 0.
  if (options->device.is_cuda()) at::accelerator::setDeviceIndex(options->device.index());
  if (a.profiling) return RunProfileMode(a, *config, *options, launch, mode_lines);
  absl::StatusOr<std::unique_ptr<StepProfiler>> profiler =
      StepProfiler::Create(a, options->rank, options->device);
  if (!profiler.ok()) return profiler.status();
  const absl::StatusOr<bool> has_checkpoint = CheckRun(a, *config, *options, launch);
  if (!has_checkpoint.ok()) return has_checkpoint.status();

  // 2. The report, the inputs, the job's processes, the data and the engine.
  // On the CPU, LibTorch's allocations are counted from here, before anything of the model
  // exists, for the memory statistics a GPU's caching allocator gives. The counter is never
  // removed (so deliberately not deleted): after a failed step a receive thread the executor
  // detached may still allocate (pipeline/stage_executor.cc), and putting the allocator back
  // would race it; the process ends after Run.
  const varuna::CpuAllocationCounter* cpu_allocations =
      options->device.is_cuda() ? nullptr : new varuna::CpuAllocationCounter;
  absl::StatusOr<std::unique_ptr<TrainingLog>> log = OpenTrainingLog(a, options->rank == 0);
  if (!log.ok()) return log.status();
  std::function<std::optional<DeviceMemory>()> memory;
  if (options->device.is_cuda()) {
    memory = [device = options->device] { return DeviceMemoryOf(device); };
  } else {
    memory = [cpu_allocations]() -> std::optional<DeviceMemory> {
      return CpuMemoryOf(*cpu_allocations);
    };
  }
  RunReport report(*std::move(log), std::move(tensorboard), memory);
  const auto stop_requested = [&stop_signal] { return stop_signal->requested(); };
  absl::StatusOr<TrainingInputs> inputs =
      PrepareInputs(a, argv0, options->rank == 0, report.log(), stop_requested);
  if (StoppedWhileStarting(inputs.status(), *stop_signal, "preparing the data", report.log())) {
    return absl::OkStatus();
  }
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<std::unique_ptr<varuna::comm::World>> world =
      JoinJob(a, *options, launch, report.log(), stop_requested);
  if (StoppedWhileStarting(world.status(), *stop_signal, "joining the job", report.log())) {
    return absl::OkStatus();
  }
  if (!world.ok()) return world.status();
  absl::StatusOr<std::unique_ptr<varuna::comm::Heartbeat>> heartbeat =
      StartHeartbeat(a, world->get());
  if (!heartbeat.ok()) return heartbeat.status();
  report.Info(gpt2::FormatSummary(*config, gpt2::Summarize(*config)));
  absl::StatusOr<std::unique_ptr<GptData>> data =
      OpenData(a, *config, *inputs, *options, *vocabulary, report.log());
  if (!data.ok()) return data.status();
  report.Info(absl::StrCat("> data: ", (*data)->Describe()));
  for (const std::string& line : mode_lines) report.Info(line);
  // --timing-log-level: the step's phases timed, the device's stream waited for around each.
  // Made before the engine, which holds a pointer to it, so that it outlives the engine.
  std::optional<varuna::PhaseTimers> timers;
  if (a.timing_log_level > 0) timers.emplace(a.timing_log_level, options->device);
  absl::StatusOr<GptEngine> gpt = CreateGptEngine(TrainerEngineOptions(a, *config, *options));
  if (StoppedWhileStarting(gpt.status(), *stop_signal, "creating the process groups",
                           report.log())) {
    return absl::OkStatus();
  }
  if (!gpt.ok()) return gpt.status();
  // Declared after the engine, the heartbeat stops first on every way out of Run: the groups
  // this rank then tears down, and rank 0 leaving with its store, are no failure of the job.
  const std::unique_ptr<varuna::comm::Heartbeat> watching = *std::move(heartbeat);
  ReportEngine(a, *gpt, report);

  // 3. Resume, and train.
  const RunRecord record = MakeRunRecord(a, *config, vocabulary->tokenizer, **data);
  absl::StatusOr<TrainingState> state =
      Resume(a, *has_checkpoint, *gpt->varuna, record, report.log());
  if (!state.ok()) return state.status();
  report.Start(state->iteration, *has_checkpoint);
  const std::string device_name = DeviceName(options->device);
  const IterationCost cost = CostOf(*config, a.batch_size, *options, device_name, a.peak_tflops);
  report.Info(
      absl::StrFormat("> training %s for %d iterations on %s (%s), global batch %d x %d tokens, "
                      "%.3g GFLOP per iteration (Megatron's formula)",
                      a.preset, a.train_iters, device_name, c10::toString(options->dtype),
                      cost.global_batch, config->seq_length, cost.flops / 1e9));
  if (a.train_samples > 0) {
    report.Info(absl::StrFormat(
        "> setting training iterations to %d (--train-samples=%d / global batch %d, rounded down)",
        a.train_iters, a.train_samples, cost.global_batch));
  }
  if (timers) gpt->varuna->set_phase_timers(&*timers);
  return Train(a, *gpt->varuna, **data, record, cost, *state, *stop_signal, exit_duration,
               **profiler, timers ? &*timers : nullptr, report);
}

// "pretrain_gpt2: error: <message>" on stderr; returns `code`.
int Fail(const absl::Status& status, int code) {
  std::fprintf(stderr, "pretrain_gpt2: error: %s\n", std::string(status.message()).c_str());
  return code;
}

}  // namespace
}  // namespace trainer

int main(int argc, char** argv) {
  // Before training allocates: freed host memory stays for the next step (host_malloc.h). Where
  // the user set malloc's thresholds, theirs stand (the result says which; nothing to log).
  trainer::KeepFreedHostMemory([](const char* name) { return std::getenv(name); });
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<trainer::TrainerArguments> arguments = trainer::ParseArguments(args);
  if (!arguments.ok()) return trainer::Fail(arguments.status(), 2);
  if (arguments->help_requested) {
    std::printf(
        "Usage: bazel run //trainer:pretrain_gpt2 -- [flags]\n"
        "Pretrains GPT-2 (Megatron-LM's pretrain_gpt2 on the Varuna engine). Without "
        "--data-path it trains\ngpt2-tiny on the bundled sample corpus. Flags (dashes and "
        "underscores are interchangeable):\n%s",
        arguments->help.c_str());
    return 0;
  }
  // The launcher's environment (RANK, WORLD_SIZE, ...), read once; a bad one is a usage error.
  absl::StatusOr<varuna::LaunchEnvironment> launch =
      varuna::LaunchEnvironment::Read(varuna::ProcessEnvironment());
  if (!launch.ok()) return trainer::Fail(launch.status(), 2);
  // --use-checkpoint-args: the model's shape from the --load checkpoint, before anything reads it.
  if (arguments->use_checkpoint_args) {
    absl::StatusOr<std::string> taken = trainer::UseCheckpointArgs(*arguments);
    if (!taken.ok()) return trainer::Fail(taken.status(), 2);
    if (trainer::ProcessRank(*arguments, *launch) == 0) std::printf("%s\n", taken->c_str());
  }
  // The flags whose meaning needs D x P (--global-batch-size, --train-samples, --recompute-*).
  // A malformed --stage_to_rank_map is reported by the set-up, with the other layout errors.
  if (absl::StatusOr<trainer::JobShape> shape = trainer::JobShapeOf(*arguments, *launch);
      shape.ok()) {
    if (absl::Status s = trainer::ApplyJobShape(*arguments, *shape); !s.ok()) {
      return trainer::Fail(s, 2);
    }
  }
  // --deterministic: before anything touches CUDA, since cuBLAS reads its workspace setting
  // once, when it initializes.
  std::vector<std::string> mode_lines;
  if (arguments->deterministic) {
    absl::StatusOr<std::vector<std::string>> entered = trainer::EnterDeterministicMode();
    if (!entered.ok()) return trainer::Fail(entered.status(), 2);
    mode_lines = *std::move(entered);
  }
  // --profile's Nsight Systems marks where there is no CUDA device: a usage error too.
  if (absl::StatusOr<varuna::VarunaOptions> options = trainer::EngineOptions(*arguments, *launch);
      options.ok()) {
    if (absl::Status s =
            trainer::StepProfiler::Create(*arguments, options->rank, options->device).status();
        !s.ok()) {
      return trainer::Fail(s, 2);
    }
  }
  // --tensorboard-dir is checked (created, a file opened in it) before anything else runs; a
  // directory that cannot hold the event files is a usage error, like a bad flag.
  absl::StatusOr<std::unique_ptr<trainer::TensorBoardLog>> tensorboard =
      trainer::OpenTensorBoardLog(*arguments, *launch);
  if (!tensorboard.ok()) return trainer::Fail(tensorboard.status(), 2);
  // --fp8-format on a device or with shapes that cannot take it: a usage error too.
  if (absl::Status s = trainer::CheckFp8Start(*arguments, *launch); !s.ok()) {
    return trainer::Fail(s, 2);
  }
  absl::Status status;
  try {
    status = trainer::Run(*arguments, argv[0], *launch, mode_lines, *std::move(tensorboard));
  } catch (const std::exception& e) {  // LibTorch reports, e.g., CUDA out of memory this way.
    status = absl::InternalError(varuna::comm::OneLineMessage(e));
  }
  // Under --deterministic an op without a deterministic implementation throws (at start-up or
  // in a step); say which op and what to do instead of LibTorch's Python-flavoured advice.
  if (const std::optional<std::string> op =
          trainer::NondeterministicOperation(std::string(status.message()))) {
    status = absl::FailedPreconditionError(trainer::NondeterministicOperationError(*op));
  }
  return status.ok() ? 0 : trainer::Fail(status, 1);
}
