#include "tests/benchmarks/op_profile.h"

#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace benchmarks {
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

}  // namespace

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

std::map<std::string, int64_t> HostSyncCalls(const std::vector<ProfiledEvent>& events) {
  static const std::set<std::string> kBlocking = {"cudaStreamSynchronize", "cudaDeviceSynchronize",
                                                  "cudaEventSynchronize", "cudaMemcpy"};
  std::map<std::string, int64_t> calls;
  for (const ProfiledEvent& event : events) {
    if (event.runtime && kBlocking.count(event.name) > 0) ++calls[event.name];
  }
  return calls;
}

absl::StatusOr<std::vector<ProfiledEvent>> ProfileEvents(
    bool cuda, const std::function<absl::Status()>& body) {
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
  absl::Status status;
  try {
    status = body();
  } catch (...) {
    profiler::disableProfiler();
    throw;
  }
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  if (!status.ok()) return status;

  std::vector<ProfiledEvent> events;
  for (const profiler::KinetoEvent& kineto : result->events()) {
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
    event.thread = kineto.startThreadId();
    event.start_ns = kineto.startNs();
    event.end_ns = kineto.endNs();
    event.correlation = device ? kineto.linkedCorrelationId() : kineto.correlationId();
    events.push_back(std::move(event));
  }
  return events;
}

std::string FormatOpTable(const std::string& title, const std::vector<OpTime>& ops,
                          double total_milliseconds, int rows) {
  auto percent = [&](double ms) {
    return total_milliseconds > 0 ? 100 * ms / total_milliseconds : 0;
  };
  std::string table = absl::StrCat(title, "\n");
  absl::StrAppend(&table,
                  absl::StrFormat("  %-60s %8s %12s %7s\n", "op", "calls", "total ms", "% step"));
  double sum = 0;
  double rest = 0;
  int64_t rest_calls = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    sum += ops[i].milliseconds;
    if (static_cast<int>(i) >= rows) {
      rest += ops[i].milliseconds;
      rest_calls += ops[i].calls;
      continue;
    }
    const std::string name =
        ops[i].name.size() > 60 ? ops[i].name.substr(0, 57) + "..." : ops[i].name;
    absl::StrAppend(&table, absl::StrFormat("  %-60s %8d %12.3f %6.1f%%\n", name, ops[i].calls,
                                            ops[i].milliseconds, percent(ops[i].milliseconds)));
  }
  if (static_cast<int>(ops.size()) > rows) {
    absl::StrAppend(&table, absl::StrFormat("  %-60s %8d %12.3f %6.1f%%\n",
                                            absl::StrCat("(", ops.size() - rows, " other ops)"),
                                            rest_calls, rest, percent(rest)));
  }
  absl::StrAppend(&table,
                  absl::StrFormat("  %-60s %8s %12.3f %6.1f%%\n", "sum", "", sum, percent(sum)));
  return table;
}

}  // namespace benchmarks
