#include "trainer/op_profile.h"

#include <fcntl.h>
#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainer {
namespace {

double Milliseconds(uint64_t nanoseconds) { return static_cast<double>(nanoseconds) / 1e6; }

uint64_t Duration(const ProfiledEvent& event) {
  return event.end_ns > event.start_ns ? event.end_ns - event.start_ns : 0;
}

struct Accumulated {
  int64_t calls = 0;
  double milliseconds = 0;
};

std::vector<OpTime> Sorted(const std::map<std::string, Accumulated>& by_name) {
  std::vector<OpTime> rows;
  for (const auto& [name, total] : by_name) rows.push_back({name, total.calls, total.milliseconds});
  std::stable_sort(rows.begin(), rows.end(), [](const OpTime& a, const OpTime& b) {
    return a.milliseconds > b.milliseconds;  // the map already ordered equal times by name
  });
  return rows;
}

// Profiler bookkeeping that is not part of the measured work.
bool IsBookkeeping(const std::string& name) {
  return name.rfind("profiler::", 0) == 0 || name == "[memory]";
}

// Sends this process's stderr to /dev/null while it lives. It is the whole process's: what
// other threads write meanwhile is lost too, so it is kept to the one call that needs it.
class QuietStderr {
 public:
  QuietStderr() {
    std::fflush(stderr);
    saved_ = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);
    const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved_ >= 0 && null >= 0) dup2(null, STDERR_FILENO);
    if (null >= 0) close(null);
  }
  ~QuietStderr() {
    std::fflush(stderr);
    if (saved_ >= 0) {
      dup2(saved_, STDERR_FILENO);
      close(saved_);
    }
  }
  QuietStderr(const QuietStderr&) = delete;
  QuietStderr& operator=(const QuietStderr&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace

std::string ShortOpName(const std::string& name) {
  std::string out = name;
  // Demangled kernels start with their return type and end with their parameter list.
  const bool kernel = out.rfind("[kernel] ", 0) == 0;
  if (kernel) out = out.substr(9);
  if (out.rfind("void ", 0) == 0) out = out.substr(5);
  for (const char* prefix : {"(anonymous namespace)::", "varuna::kernels::cuda::",
                             "varuna::kernels::", "torch::autograd::", "at::native::"}) {
    for (size_t at = out.find(prefix); at != std::string::npos; at = out.find(prefix, at)) {
      out.erase(at, std::string(prefix).size());
    }
  }
  // The parameter list: the last top-level "(...)" that closes the name.
  if (!out.empty() && out.back() == ')') {
    int depth = 0;
    for (size_t i = out.size(); i-- > 0;) {
      if (out[i] == ')') ++depth;
      if (out[i] == '(' && --depth == 0) {
        if (i > 0) out.erase(i);
        break;
      }
    }
  }
  return kernel ? "[kernel] " + out : out;
}

std::vector<OpTime> DeviceTimeByOp(const std::vector<ProfiledEvent>& events) {
  std::unordered_map<uint64_t, const ProfiledEvent*> host_ops;
  for (const ProfiledEvent& event : events) {
    if (!event.device && !event.runtime && event.correlation != 0) {
      host_ops[event.correlation] = &event;
    }
  }
  std::map<std::string, Accumulated> by_name;
  std::set<uint64_t> launching_ops;
  for (const ProfiledEvent& event : events) {
    if (!event.device) continue;
    auto op = event.correlation != 0 ? host_ops.find(event.correlation) : host_ops.end();
    if (op == host_ops.end()) {
      Accumulated& row = by_name["[kernel] " + event.name];
      ++row.calls;
      row.milliseconds += Milliseconds(Duration(event));
      continue;
    }
    Accumulated& row = by_name[op->second->name];
    if (launching_ops.insert(event.correlation).second) ++row.calls;
    row.milliseconds += Milliseconds(Duration(event));
  }
  return Sorted(by_name);
}

std::vector<OpTime> HostSelfTimeByOp(const std::vector<ProfiledEvent>& events) {
  std::map<uint64_t, std::vector<const ProfiledEvent*>> by_thread;
  for (const ProfiledEvent& event : events) {
    if (!event.device && !event.runtime) by_thread[event.thread].push_back(&event);
  }
  std::map<std::string, Accumulated> by_name;
  for (auto& [thread, ops] : by_thread) {
    // Parents before their children: earlier start first, and the longer of two that start
    // together.
    std::stable_sort(ops.begin(), ops.end(), [](const ProfiledEvent* a, const ProfiledEvent* b) {
      if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
      return a->end_ns > b->end_ns;
    });
    std::vector<uint64_t> nested(ops.size(), 0);
    std::vector<size_t> open;  // indices into ops: the chain of ops enclosing the current one
    for (size_t i = 0; i < ops.size(); ++i) {
      while (!open.empty() && (ops[open.back()]->end_ns <= ops[i]->start_ns ||
                               ops[open.back()]->end_ns < ops[i]->end_ns)) {
        open.pop_back();
      }
      if (!open.empty()) nested[open.back()] += Duration(*ops[i]);
      open.push_back(i);
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      const uint64_t duration = Duration(*ops[i]);
      Accumulated& row = by_name[ops[i]->name];
      ++row.calls;
      row.milliseconds += Milliseconds(duration > nested[i] ? duration - nested[i] : 0);
    }
  }
  return Sorted(by_name);
}

double DeviceBusyMilliseconds(const std::vector<ProfiledEvent>& events) {
  std::vector<std::pair<uint64_t, uint64_t>> intervals;
  for (const ProfiledEvent& event : events) {
    if (event.device && event.end_ns > event.start_ns) {
      intervals.emplace_back(event.start_ns, event.end_ns);
    }
  }
  std::sort(intervals.begin(), intervals.end());
  uint64_t busy = 0;
  uint64_t covered_to = 0;  // the end of the union so far
  for (const auto& [start, end] : intervals) {
    const uint64_t from = std::max(start, covered_to);
    if (end > from) busy += end - from;
    covered_to = std::max(covered_to, end);
  }
  return Milliseconds(busy);
}

std::vector<IdleGap> LongestIdleGaps(const std::vector<ProfiledEvent>& events, int count) {
  std::vector<const ProfiledEvent*> device;
  std::unordered_map<uint64_t, const ProfiledEvent*> ops;  // host ops by correlation id
  for (const ProfiledEvent& event : events) {
    if (event.device && event.end_ns > event.start_ns) device.push_back(&event);
    if (!event.device && !event.runtime && event.correlation != 0) ops[event.correlation] = &event;
  }
  std::vector<IdleGap> gaps;
  if (device.empty()) return gaps;
  std::stable_sort(
      device.begin(), device.end(),
      [](const ProfiledEvent* a, const ProfiledEvent* b) { return a->start_ns < b->start_ns; });
  const uint64_t origin = device.front()->start_ns;
  uint64_t covered_to = device.front()->end_ns;
  for (size_t i = 1; i < device.size(); ++i) {
    const ProfiledEvent& next = *device[i];
    if (next.start_ns > covered_to) {
      IdleGap gap;
      gap.start_ms = Milliseconds(covered_to - origin);
      gap.milliseconds = Milliseconds(next.start_ns - covered_to);
      auto op = next.correlation != 0 ? ops.find(next.correlation) : ops.end();
      if (op == ops.end()) {
        gap.ended_by = "[kernel] " + next.name;
      } else {
        gap.ended_by = op->second->name;
        // The innermost host event on the launching thread that spans the gap's start.
        const ProfiledEvent* inner = nullptr;
        for (const ProfiledEvent& event : events) {
          if (event.device || event.thread != op->second->thread) continue;
          if (event.start_ns <= covered_to && covered_to < event.end_ns &&
              (inner == nullptr || event.start_ns >= inner->start_ns)) {
            inner = &event;
          }
        }
        if (inner != nullptr) gap.waiting_in = inner->name;
      }
      gaps.push_back(std::move(gap));
    }
    covered_to = std::max(covered_to, next.end_ns);
  }
  std::stable_sort(gaps.begin(), gaps.end(), [](const IdleGap& a, const IdleGap& b) {
    return a.milliseconds > b.milliseconds;
  });
  if (static_cast<int>(gaps.size()) > count) gaps.resize(static_cast<size_t>(std::max(count, 0)));
  return gaps;
}

std::vector<OpTime> PhaseTimes(const std::vector<ProfiledEvent>& events) {
  std::map<std::string, Accumulated> by_name;
  for (const ProfiledEvent& event : events) {
    if (!event.annotation) continue;
    Accumulated& row = by_name[event.name];
    ++row.calls;
    row.milliseconds += Milliseconds(Duration(event));
  }
  return Sorted(by_name);
}

std::map<std::string, int64_t> HostSyncCalls(const std::vector<ProfiledEvent>& events) {
  static const std::set<std::string> kBlocking = {"cudaStreamSynchronize", "cudaDeviceSynchronize",
                                                  "cudaEventSynchronize", "cudaMemcpy"};
  std::map<std::string, int64_t> calls;
  for (const ProfiledEvent& event : events) {
    if (event.runtime && kBlocking.count(event.name) > 0) ++calls[event.name];
  }
  return calls;
}

absl::StatusOr<std::unique_ptr<OpProfiler>> OpProfiler::Start(bool cuda) {
  namespace profiler = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  using torch::profiler::impl::ProfilerConfig;
  using torch::profiler::impl::ProfilerState;
  if (torch::profiler::impl::profilerEnabled()) {
    return absl::FailedPreconditionError(
        "cannot profile the ops: a LibTorch profiler is already running in this process");
  }
  const ProfilerConfig config(ProfilerState::KINETO);
  std::set<ActivityType> activities = {ActivityType::CPU};
  if (cuda) activities.insert(ActivityType::CUDA);
  try {
    profiler::prepareProfiler(config, activities);
    profiler::enableProfiler(config, activities);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start LibTorch's Kineto profiler (activities: CPU",
                     cuda ? ", CUDA" : "", "): ", e.what()));
  }
  std::unique_ptr<OpProfiler> session(new OpProfiler());
  session->running_ = true;
  session->cuda_ = cuda;
  return session;
}

OpProfiler::~OpProfiler() {
  if (!running_) return;
  try {
    const std::optional<QuietStderr> quiet =
        cuda_ ? std::nullopt : std::optional<QuietStderr>(std::in_place);
    (void)torch::autograd::profiler::disableProfiler();
  } catch (...) {
    // Nothing to report to from a destructor; the profiler is as off as it can be made.
  }
}

absl::StatusOr<std::vector<ProfiledEvent>> OpProfiler::Stop(const std::string& trace_path) {
  if (!running_) return absl::FailedPreconditionError("the op profiler was already stopped");
  std::unique_ptr<torch::autograd::profiler::ProfilerResult> result;
  {
    // Stopping, Kineto looks for GPUs and logs an error on stderr where there is none
    // ("gpuGetDeviceCount failed"), which on the CPU is no error (LibTorch keeps Kineto's errors
    // on). The trace keeps the line, under "ERROR".
    const std::optional<QuietStderr> quiet =
        cuda_ ? std::nullopt : std::optional<QuietStderr>(std::in_place);
    result = torch::autograd::profiler::disableProfiler();
  }
  running_ = false;
  if (!trace_path.empty()) {
    // Kineto logs a trace it cannot write rather than failing: the file is opened here first,
    // and checked afterwards.
    if (!std::ofstream(trace_path)) {
      return absl::UnavailableError(
          absl::StrCat("cannot write the profiler's trace to ", trace_path,
                       ": the file cannot be created (does its directory exist?)"));
    }
    try {
      result->save(trace_path);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("cannot write the profiler's trace to ", trace_path, ": ", e.what()));
    }
    std::error_code error;
    if (std::filesystem::file_size(trace_path, error) == 0 || error) {
      return absl::UnavailableError(absl::StrCat("cannot write the profiler's trace to ",
                                                 trace_path,
                                                 ": LibTorch's profiler wrote "
                                                 "nothing (its reason is on stderr)"));
    }
  }
  std::vector<ProfiledEvent> events;
  for (const torch::autograd::profiler::KinetoEvent& kineto : result->events()) {
    const auto type = static_cast<libkineto::ActivityType>(kineto.activityType());
    const bool host =
        type == libkineto::ActivityType::CPU_OP || type == libkineto::ActivityType::USER_ANNOTATION;
    const bool device = type == libkineto::ActivityType::CONCURRENT_KERNEL ||
                        type == libkineto::ActivityType::GPU_MEMCPY ||
                        type == libkineto::ActivityType::GPU_MEMSET;
    const bool runtime = type == libkineto::ActivityType::CUDA_RUNTIME ||
                         type == libkineto::ActivityType::CUDA_DRIVER;
    if ((!host && !device && !runtime) || kineto.isHiddenEvent()) continue;
    ProfiledEvent event;
    event.name = kineto.name();
    if (IsBookkeeping(event.name)) continue;
    event.device = device;
    event.runtime = runtime;
    event.annotation = type == libkineto::ActivityType::USER_ANNOTATION;
    event.thread = kineto.startThreadId();
    event.start_ns = kineto.startNs();
    event.end_ns = kineto.endNs();
    event.correlation = device ? kineto.linkedCorrelationId() : kineto.correlationId();
    events.push_back(std::move(event));
  }
  return events;
}

absl::StatusOr<std::vector<ProfiledEvent>> ProfileEvents(
    bool cuda, const std::function<absl::Status()>& body) {
  absl::StatusOr<std::unique_ptr<OpProfiler>> session = OpProfiler::Start(cuda);
  if (!session.ok()) return session.status();
  // An exception from `body` leaves through the session's destructor, which stops the profiler.
  if (absl::Status status = body(); !status.ok()) return status;
  return (*session)->Stop();
}

StepsProfileSummary SummarizeSteps(const std::vector<ProfiledEvent>& events, bool cuda,
                                   double wall_milliseconds, int steps, int bracketing_syncs,
                                   int rows) {
  const std::string what =
      absl::StrCat(steps, " profiled step", steps == 1 ? "" : "s", ", ",
                   absl::StrFormat("%.1f ms", wall_milliseconds), " of wall time");
  StepsProfileSummary summary;
  // Every branch ends with the host's time in the named phases, where the trace has any.
  const auto finish = [&]() -> StepsProfileSummary {
    const std::vector<OpTime> phases = PhaseTimes(events);
    if (!phases.empty()) {
      absl::StrAppend(&summary.text,
                      FormatOpTable(absl::StrCat("host time in the trainer's and the engine's "
                                                 "phases (",
                                                 what,
                                                 "; each including the phases and ops inside "
                                                 "it; % of the wall time):"),
                                    phases, wall_milliseconds, rows, /*sum_row=*/false));
    }
    return summary;
  };
  const std::vector<OpTime> device = DeviceTimeByOp(events);
  if (device.empty()) {
    if (cuda) {
      absl::StrAppend(&summary.text,
                      "note: the profiler recorded no CUDA activity (CUPTI unavailable?); the "
                      "host times below do not show where the GPU spends its time\n");
    }
    absl::StrAppend(
        &summary.text,
        FormatOpTable(absl::StrCat("host self time by op (", what, "; % of the wall time):"),
                      HostSelfTimeByOp(events), wall_milliseconds, rows),
        "device busy fraction: ",
        cuda ? "unknown (the profiler saw no device activity)"
             : "n/a on the CPU (no device: the host runs every op itself)",
        "\n");
    return finish();
  }
  absl::StrAppend(&summary.text,
                  FormatOpTable(absl::StrCat("device time by op (", what,
                                             "; a kernel counts for the op that launched it; % "
                                             "of the wall time):"),
                                device, wall_milliseconds, rows));
  const double busy = DeviceBusyMilliseconds(events);
  summary.device_busy_fraction = wall_milliseconds > 0 ? busy / wall_milliseconds : 0.0;
  absl::StrAppend(
      &summary.text,
      absl::StrFormat("device busy fraction: %.1f%% (%.1f ms with a kernel, copy or memset "
                      "running, overlaps counted once, of %.1f ms of wall time; idle %.1f ms per "
                      "step; measured under the profiler, which slows the host: a lower bound "
                      "on the fraction without it)\n",
                      100 * *summary.device_busy_fraction, busy, wall_milliseconds,
                      (wall_milliseconds - busy) / std::max(steps, 1)));
  const std::vector<IdleGap> gaps = LongestIdleGaps(events, 5);
  if (!gaps.empty()) {
    absl::StrAppend(&summary.text,
                    "the device's longest idle stretches (ms into the profile: length; what the "
                    "host was in when it began -> the op whose work ended it):\n");
    for (const IdleGap& gap : gaps) {
      absl::StrAppend(
          &summary.text,
          absl::StrFormat("  %10.3f: %8.3f ms; %s -> %s\n", gap.start_ms, gap.milliseconds,
                          gap.waiting_in.empty() ? "(no host op)" : ShortOpName(gap.waiting_in),
                          ShortOpName(gap.ended_by)));
    }
  }
  bool any_runtime = false;
  for (const ProfiledEvent& event : events) any_runtime = any_runtime || event.runtime;
  if (!any_runtime) {
    absl::StrAppend(&summary.text,
                    "host waits for the device: not recorded (no CUDA runtime calls in the "
                    "trace)\n");
    return finish();
  }
  int64_t waits = 0;
  std::string by_name;
  for (const auto& [name, calls] : HostSyncCalls(events)) {
    waits +=
        name == "cudaDeviceSynchronize" ? std::max<int64_t>(calls - bracketing_syncs, 0) : calls;
    absl::StrAppend(&by_name, by_name.empty() ? "" : ", ", name, " ", calls);
  }
  summary.host_syncs_per_step = static_cast<double>(waits) / std::max(steps, 1);
  absl::StrAppend(
      &summary.text,
      absl::StrFormat("host waits for the device: %.1f per step (%s over %d steps, "
                      "less %d cudaDeviceSynchronize of the profiling's own)\n",
                      *summary.host_syncs_per_step, by_name.empty() ? "none" : by_name.c_str(),
                      steps, bracketing_syncs));
  return finish();
}

std::string FormatOpTable(const std::string& title, const std::vector<OpTime>& ops,
                          double total_milliseconds, int rows, bool sum_row) {
  auto percent = [&](double ms) {
    return total_milliseconds > 0 ? 100 * ms / total_milliseconds : 0;
  };
  std::string table = absl::StrCat(title, "\n");
  absl::StrAppend(&table,
                  absl::StrFormat("  %-60s %8s %12s %7s\n", "op", "calls", "total ms", "% step"));
  double sum = 0;
  double rest = 0;
  int64_t rest_calls = 0;
  // Rows whose short names would coincide keep their full names.
  std::map<std::string, int> shown_count;
  for (size_t i = 0; i < ops.size() && static_cast<int>(i) < rows; ++i) {
    ++shown_count[ShortOpName(ops[i].name)];
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    sum += ops[i].milliseconds;
    if (static_cast<int>(i) >= rows) {
      rest += ops[i].milliseconds;
      rest_calls += ops[i].calls;
      continue;
    }
    const std::string short_name = ShortOpName(ops[i].name);
    const std::string shown = shown_count[short_name] > 1 ? ops[i].name : short_name;
    const std::string name = shown.size() > 60 ? shown.substr(0, 57) + "..." : shown;
    absl::StrAppend(&table, absl::StrFormat("  %-60s %8d %12.3f %6.1f%%\n", name, ops[i].calls,
                                            ops[i].milliseconds, percent(ops[i].milliseconds)));
  }
  if (static_cast<int>(ops.size()) > rows) {
    absl::StrAppend(&table, absl::StrFormat("  %-60s %8d %12.3f %6.1f%%\n",
                                            absl::StrCat("(", ops.size() - rows, " other ops)"),
                                            rest_calls, rest, percent(rest)));
  }
  if (sum_row) {
    absl::StrAppend(&table,
                    absl::StrFormat("  %-60s %8s %12.3f %6.1f%%\n", "sum", "", sum, percent(sum)));
  }
  return table;
}

}  // namespace trainer
