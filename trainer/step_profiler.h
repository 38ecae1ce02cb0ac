// StepProfiler: Megatron-LM's --profile. On the ranks of --profile-ranks it profiles the
// training steps from --profile-step-start up to --profile-step-end, counted as Megatron's Nsight
// path counts them: profiling starts before the step taken when the run has completed `start`
// iterations and stops once it has completed `end` (the log's iterations start + 1 .. end; a
// run that resumes past `start` profiles nothing, and one that ends before `end` stops profiling
// at its end). Megatron's PyTorch-profiler path, through torch.profiler's schedule, records one
// step earlier and counts from where the run started; here both paths record the same steps.
//
//   * With --use-pytorch-profiler, LibTorch's Kineto profiler records every op, and on a GPU every
//     kernel, copy and CUDA runtime call (trainer/op_profile.h). At the stop the whole trace goes
//     to --tensorboard-dir as <host>_<pid>.<unix ns>.pt.trace.json (the name PyTorch's
//     tensorboard_trace_handler gives: TensorBoard's PyTorch profiler plugin, Perfetto and
//     chrome://tracing read it), and a summary beside it (<same name>.pt.trace.summary.txt;
//     on rank 0 also in the log): the device time by op, the device's busy fraction and idle
//     milliseconds per step, and the host's waits for the device; on the CPU the host self time
//     by op. The device is synchronised before the first profiled step and after the last, so
//     that the wall time holds exactly the profiled steps' work.
//   * Without it, the steps are marked for NVIDIA Nsight Systems: cudaProfilerStart before the
//     first and cudaProfilerStop after the last (`nsys profile --capture-range=cudaProfilerApi
//     --capture-range-end=stop`). This needs a CUDA device; Create refuses it elsewhere.
//
// Profiling serves the run, not the other way round: a profiler that cannot start or a trace
// that cannot be written is reported (the returned lines) and training goes on.
//
// Thread safety: none; for the training loop's thread. One profiling session per process.
#ifndef VARUNA_TRAINER_STEP_PROFILER_H_
#define VARUNA_TRAINER_STEP_PROFILER_H_

#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/arguments.h"
#include "trainer/op_profile.h"

namespace trainer {

class StepProfiler {
 public:
  // What the trainer profiles, from its arguments (--profile, --use-pytorch-profiler,
  // --profile-step-start/-end, --profile-ranks, --tensorboard-dir; their cross-checks are
  // ValidateArguments'). Returns a profiler that does nothing where --profile is not given or
  // `rank` is not among --profile-ranks. InvalidArgument for the Nsight Systems marks without a
  // CUDA device (or in a build without CUDA), naming --use-pytorch-profiler as the fix.
  static absl::StatusOr<std::unique_ptr<StepProfiler>> Create(const TrainerArguments& a, int rank,
                                                              const c10::Device& device);

  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;
  // Ends a range still open (a run that failed inside it): LibTorch's profiler is turned off
  // without a trace, the Nsight Systems range is closed.
  ~StepProfiler();

  // A line for the log where this rank profiles and the run, training iterations
  // `first_completed` + 1 .. `train_iters`, never takes the step that starts the range (it
  // resumes past it, or ends before it); empty otherwise.
  std::string NotReached(int64_t first_completed, int64_t train_iters) const;

  // Before a step, `completed` iterations done: starts profiling when `completed` is
  // --profile-step-start. Returns a line for the log where the profiler could not start
  // (training goes on without it), else empty.
  std::string BeforeStep(int64_t completed);

  // After a step, `completed` iterations done (`last`: the run takes no further step). Stops
  // profiling when `completed` reaches --profile-step-end or at the last step, writes the trace
  // and the summary, and returns the summary's text, or what could not be written (the log's
  // lines, each ending in '\n'); empty where nothing stopped.
  std::string AfterStep(int64_t completed, bool last);

 private:
  StepProfiler() = default;

  bool enabled_ = false;
  bool pytorch_ = false;
  int64_t start_ = 0;
  int64_t end_ = 0;
  std::string trace_dir_;
  c10::Device device_ = c10::Device(c10::kCPU);
  // While profiling: when it began, and LibTorch's profiler session (--use-pytorch-profiler).
  bool active_ = false;
  std::chrono::steady_clock::time_point began_;
  std::unique_ptr<OpProfiler> session_;
};

}  // namespace trainer

#endif  // VARUNA_TRAINER_STEP_PROFILER_H_
