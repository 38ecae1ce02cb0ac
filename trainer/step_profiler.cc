#include "trainer/step_profiler.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "varuna/planning/device_timer.h"

#ifdef VARUNA_WITH_CUDA
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#endif

namespace trainer {
namespace {

namespace fs = std::filesystem;

// <host>_<pid>.<unix ns>.pt.trace.json, as PyTorch's tensorboard_trace_handler names a trace.
std::string TraceName() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof(host), "localhost");
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  return absl::StrCat(host, "_", getpid(), ".", ns, ".pt.trace.json");
}

// Marks the start and the end of the range Nsight Systems captures.
absl::Status MarkForNsight(bool start) {
#ifdef VARUNA_WITH_CUDA
  const cudaError_t error = start ? cudaProfilerStart() : cudaProfilerStop();
  if (error != cudaSuccess) {
    return absl::InternalError(absl::StrCat(start ? "cudaProfilerStart" : "cudaProfilerStop",
                                            " failed: ", cudaGetErrorString(error)));
  }
  return absl::OkStatus();
#else
  (void)start;
  return absl::FailedPreconditionError("this build has no CUDA (build with --config=cuda)");
#endif
}

}  // namespace

absl::StatusOr<std::unique_ptr<StepProfiler>> StepProfiler::Create(const TrainerArguments& a,
                                                                   int rank,
                                                                   const c10::Device& device) {
  std::unique_ptr<StepProfiler> profiler(new StepProfiler());
  if (!a.profile) return profiler;
  if (!a.use_pytorch_profiler) {
#ifdef VARUNA_WITH_CUDA
    const bool cuda_build = true;
#else
    const bool cuda_build = false;
#endif
    if (!device.is_cuda() || !cuda_build) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--profile without --use-pytorch-profiler marks the steps for NVIDIA Nsight Systems "
          "(cudaProfilerStart/Stop), which needs a CUDA device",
          cuda_build ? "" : " and a build with --config=cuda", "; this run is on ", device.str(),
          ": add --use-pytorch-profiler (LibTorch's profiler, a trace in "
          "--tensorboard-dir)"));
    }
  }
  if (std::find(a.profile_ranks.begin(), a.profile_ranks.end(), rank) == a.profile_ranks.end()) {
    return profiler;
  }
  profiler->enabled_ = true;
  profiler->pytorch_ = a.use_pytorch_profiler;
  profiler->start_ = a.profile_step_start;
  profiler->end_ = a.profile_step_end;
  profiler->trace_dir_ = a.tensorboard_dir;
  profiler->device_ = device;
  return profiler;
}

StepProfiler::~StepProfiler() {
  if (!active_) return;
  session_.reset();  // LibTorch's profiler off, the events dropped
  if (!pytorch_) (void)MarkForNsight(false);
}

std::string StepProfiler::NotReached(int64_t first_completed, int64_t train_iters) const {
  if (!enabled_ || (first_completed <= start_ && start_ < train_iters)) return "";
  return absl::StrCat("--profile: nothing profiled: the range starts after iteration ", start_,
                      " (--profile-step-start), and this run trains iterations ",
                      first_completed + 1, "-", train_iters);
}

std::string StepProfiler::BeforeStep(int64_t completed) {
  if (!enabled_ || active_ || completed != start_) return "";
  varuna::DeviceTimer(device_).Synchronize();
  if (pytorch_) {
    absl::StatusOr<std::unique_ptr<OpProfiler>> session = OpProfiler::Start(device_.is_cuda());
    if (!session.ok()) {
      return absl::StrCat("--profile: not profiling, training goes on: ",
                          session.status().message());
    }
    session_ = std::move(*session);
  } else if (absl::Status status = MarkForNsight(true); !status.ok()) {
    return absl::StrCat("--profile: not profiling, training goes on: ", status.message());
  }
  active_ = true;
  began_ = std::chrono::steady_clock::now();
  return "";
}

std::string StepProfiler::AfterStep(int64_t completed, bool last) {
  if (!active_ || (completed < end_ && !last)) return "";
  varuna::DeviceTimer(device_).Synchronize();
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began_).count();
  active_ = false;
  const int64_t first = start_ + 1;  // the range starts only at `start_` completed
  const int steps = static_cast<int>(completed - first + 1);
  const std::string range = steps == 1 ? absl::StrCat("iteration ", first)
                                       : absl::StrCat("iterations ", first, "-", completed);
  if (!pytorch_) {
    if (absl::Status status = MarkForNsight(false); !status.ok()) {
      return absl::StrCat("--profile: ", status.message(), "\n");
    }
    return absl::StrFormat(
        "--profile: %s marked for Nsight Systems (cudaProfilerStart/Stop), %.1f ms of wall "
        "time\n",
        range, wall_ms);
  }
  std::unique_ptr<OpProfiler> session = std::move(session_);
  std::error_code error;
  fs::create_directories(trace_dir_, error);
  const std::string trace = (fs::path(trace_dir_) / TraceName()).string();
  absl::StatusOr<std::vector<ProfiledEvent>> events = session->Stop(error ? std::string() : trace);
  if (error) {
    return absl::StrCat("--profile: ", range,
                        " not written: cannot create --tensorboard-dir=", trace_dir_, ": ",
                        error.message(), "\n");
  }
  if (!events.ok()) {
    return absl::StrCat("--profile: ", range, " not written: ", events.status().message(), "\n");
  }
  // The synchronisation above is the profiler's own (the one before the range ran before the
  // profiler started).
  const StepsProfileSummary summary = SummarizeSteps(*events, device_.is_cuda(), wall_ms, steps,
                                                     /*bracketing_syncs=*/1, /*rows=*/25);
  std::string text =
      absl::StrCat("--profile: ", range, " recorded by LibTorch's profiler (",
                   "the profiled steps run slower); trace: ", trace, "\n", summary.text);
  const std::string summary_path = trace.substr(0, trace.size() - 5) + ".summary.txt";
  std::ofstream out(summary_path);
  out << text;
  out.close();
  if (!out) {
    absl::StrAppend(&text, "--profile: the summary could not be written to ", summary_path, "\n");
  }
  return text;
}

}  // namespace trainer
