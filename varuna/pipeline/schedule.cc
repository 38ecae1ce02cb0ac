#include "varuna/pipeline/schedule.h"

#include <algorithm>
#include <deque>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace varuna {
namespace {

bool ValidArguments(int num_stages, int num_micro_batches, int stage) {
  return num_stages >= 1 && num_micro_batches >= 1 && stage >= 0 && stage < num_stages;
}

// Varuna's tick model (its generate_schedule.cc) for all stages at once. Each stage has four
// FIFO queues of ready micro-batches; each tick every stage pops one item, preferring the second
// tick of a backward, then a backward, then a recompute, then a forward, and appends it to its
// list (the second backward tick is not a task). The consequences of all picks become visible
// on the next tick:
//   F(i) on stage s < P-1 -> F(i) ready on s+1;  F(i) on the last stage -> B(i) ready there;
//   B(i) on stage s -> its second tick ready on s, and R(i) ready on s-1 if s > 0;
//   R(i) on stage s -> B(i) ready on s.
// Forward, recompute and backward thus take 1, 1 and 2 ticks.
std::vector<std::vector<Task>> GenerateVaruna(int num_stages, int num_micro_batches) {
  struct Queues {
    std::deque<int> forward, recompute, backward, backward_second_tick;
  };
  enum class Pick { kNone, kForward, kRecompute, kBackward, kBackwardSecondTick };
  std::vector<Queues> queues(num_stages);
  for (int i = 0; i < num_micro_batches; ++i) queues[0].forward.push_back(i);
  std::vector<std::vector<Task>> lists(num_stages);
  std::vector<std::pair<Pick, int>> picks(num_stages);
  auto pop = [](std::deque<int>& queue) {
    const int front = queue.front();
    queue.pop_front();
    return front;
  };
  while (true) {
    bool any = false;
    for (int s = 0; s < num_stages; ++s) {
      Queues& q = queues[s];
      if (!q.backward_second_tick.empty()) {
        picks[s] = {Pick::kBackwardSecondTick, pop(q.backward_second_tick)};
      } else if (!q.backward.empty()) {
        picks[s] = {Pick::kBackward, pop(q.backward)};
      } else if (!q.recompute.empty()) {
        picks[s] = {Pick::kRecompute, pop(q.recompute)};
      } else if (!q.forward.empty()) {
        picks[s] = {Pick::kForward, pop(q.forward)};
      } else {
        picks[s] = {Pick::kNone, 0};
      }
      any = any || picks[s].first != Pick::kNone;
    }
    if (!any) break;
    for (int s = 0; s < num_stages; ++s) {
      const auto [pick, i] = picks[s];
      switch (pick) {
        case Pick::kForward:
          lists[s].push_back({TaskKind::kForward, i});
          if (s + 1 < num_stages) {
            queues[s + 1].forward.push_back(i);
          } else {
            queues[s].backward.push_back(i);
          }
          break;
        case Pick::kRecompute:
          lists[s].push_back({TaskKind::kRecompute, i});
          queues[s].backward.push_back(i);
          break;
        case Pick::kBackward:
          lists[s].push_back({TaskKind::kBackward, i});
          queues[s].backward_second_tick.push_back(i);
          if (s > 0) queues[s - 1].recompute.push_back(i);
          break;
        case Pick::kBackwardSecondTick:
        case Pick::kNone:
          break;
      }
    }
  }
  return lists;
}

std::vector<Task> Gpipe(int num_micro_batches) {
  std::vector<Task> tasks;
  for (int i = 0; i < num_micro_batches; ++i) tasks.push_back({TaskKind::kForward, i});
  for (int i = 0; i < num_micro_batches; ++i) tasks.push_back({TaskKind::kBackward, i});
  return tasks;
}

std::vector<Task> OneForwardOneBackward(int num_stages, int num_micro_batches, int stage) {
  const int warmup = std::min(num_stages - stage - 1, num_micro_batches);
  std::vector<Task> tasks;
  for (int i = 0; i < warmup; ++i) tasks.push_back({TaskKind::kForward, i});
  for (int i = 0; i < num_micro_batches - warmup; ++i) {
    tasks.push_back({TaskKind::kForward, warmup + i});
    tasks.push_back({TaskKind::kBackward, i});
  }
  for (int i = num_micro_batches - warmup; i < num_micro_batches; ++i) {
    tasks.push_back({TaskKind::kBackward, i});
  }
  return tasks;
}

double Duration(TaskKind kind, double forward_time, double backward_time, double recompute_time) {
  switch (kind) {
    case TaskKind::kForward:
      return forward_time;
    case TaskKind::kRecompute:
      return recompute_time;
    case TaskKind::kBackward:
      return backward_time;
  }
  return 0;
}

}  // namespace

absl::StatusOr<ScheduleKind> ParseScheduleKind(const std::string& name) {
  if (name == "varuna") return ScheduleKind::kVaruna;
  if (name == "gpipe") return ScheduleKind::kGpipe;
  if (name == "1f1b") return ScheduleKind::k1F1B;
  return absl::InvalidArgumentError(absl::StrCat(
      "--schedule=\"", name,
      "\" is not a pipeline schedule: use varuna (forwards run ahead, recompute before each "
      "backward), gpipe (all forwards, then all backwards) or 1f1b (one forward, one backward)"));
}

const char* ScheduleKindName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kVaruna:
      return "varuna";
    case ScheduleKind::kGpipe:
      return "gpipe";
    case ScheduleKind::k1F1B:
      return "1f1b";
  }
  return "unknown";
}

std::vector<Task> VarunaGeneratorSchedule(int num_stages, int num_micro_batches, int stage) {
  if (!ValidArguments(num_stages, num_micro_batches, stage)) return {};
  return GenerateVaruna(num_stages, num_micro_batches)[stage];
}

std::vector<Task> BuildSchedule(ScheduleKind kind, int num_stages, int num_micro_batches,
                                int stage) {
  if (!ValidArguments(num_stages, num_micro_batches, stage)) return {};
  switch (kind) {
    case ScheduleKind::kGpipe:
      return Gpipe(num_micro_batches);
    case ScheduleKind::k1F1B:
      return OneForwardOneBackward(num_stages, num_micro_batches, stage);
    case ScheduleKind::kVaruna:
      break;
  }
  // Drop each recompute that directly follows its own forward: nothing runs in between, so the
  // forward may as well keep its graph (see VarunaGeneratorSchedule).
  std::vector<Task> tasks;
  for (const Task& task : VarunaGeneratorSchedule(num_stages, num_micro_batches, stage)) {
    if (task.kind == TaskKind::kRecompute && !tasks.empty() &&
        tasks.back() == Task{TaskKind::kForward, task.micro_batch}) {
      continue;
    }
    tasks.push_back(task);
  }
  return tasks;
}

bool KeepsGraph(const std::vector<Task>& tasks, size_t forward_index) {
  if (forward_index >= tasks.size() || tasks[forward_index].kind != TaskKind::kForward) {
    return false;
  }
  const Task recompute{TaskKind::kRecompute, tasks[forward_index].micro_batch};
  return std::find(tasks.begin(), tasks.end(), recompute) == tasks.end();
}

std::string FormatTasks(const std::vector<Task>& tasks) {
  std::string out;
  for (const Task& task : tasks) {
    const char* letter = task.kind == TaskKind::kForward     ? "F"
                         : task.kind == TaskKind::kRecompute ? "R"
                                                             : "B";
    absl::StrAppend(&out, out.empty() ? "" : " ", letter, task.micro_batch);
  }
  return out;
}

ScheduleStats SimulateSchedule(ScheduleKind kind, int num_stages, int num_micro_batches,
                               double forward_time, double backward_time, double recompute_time) {
  if (!ValidArguments(num_stages, num_micro_batches, 0)) {
    ScheduleStats stats;
    stats.deadlock = true;
    return stats;
  }
  std::vector<std::vector<Task>> lists;
  for (int s = 0; s < num_stages; ++s) {
    lists.push_back(BuildSchedule(kind, num_stages, num_micro_batches, s));
  }
  return SimulateTaskLists(lists, forward_time, backward_time, recompute_time);
}

ScheduleStats SimulateTaskLists(const std::vector<std::vector<Task>>& stage_tasks,
                                double forward_time, double backward_time, double recompute_time) {
  const int num_stages = static_cast<int>(stage_tasks.size());
  int num_micro_batches = 0;
  for (const auto& tasks : stage_tasks) {
    for (const Task& task : tasks)
      num_micro_batches = std::max(num_micro_batches, task.micro_batch + 1);
  }
  // End times of F(i) and B(i) per stage; negative until the task has run.
  constexpr double kNotRun = -1;
  std::vector<std::vector<double>> forward_end(num_stages,
                                               std::vector<double>(num_micro_batches, kNotRun));
  std::vector<std::vector<double>> backward_end = forward_end;
  std::vector<size_t> next(num_stages, 0);
  std::vector<double> clock(num_stages, 0);
  double busy = 0;
  // Runs, stage by stage, every task whose inputs exist, until a whole sweep runs nothing.
  // Start times do not depend on the sweep order: a task starts at the latest end of the task
  // before it on its stage and of the remote task it waits for.
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < num_stages; ++s) {
      const std::vector<Task>& tasks = stage_tasks[s];
      for (; next[s] < tasks.size(); ++next[s]) {
        const Task& task = tasks[next[s]];
        const int i = task.micro_batch;
        if (i < 0) break;  // never runs
        double start = clock[s];
        double waits_for = 0;
        if (task.kind == TaskKind::kForward) {
          if (s > 0) waits_for = forward_end[s - 1][i];
        } else {
          // R(i) and B(i) need F(i) earlier on this stage; B(i) also the gradient from s+1.
          waits_for = forward_end[s][i];
          if (task.kind == TaskKind::kBackward && s + 1 < num_stages && waits_for >= 0) {
            waits_for = backward_end[s + 1][i];
          }
        }
        if (waits_for < 0) break;
        start = std::max(start, waits_for);
        const double duration = Duration(task.kind, forward_time, backward_time, recompute_time);
        clock[s] = start + duration;
        busy += duration;
        if (task.kind == TaskKind::kForward) forward_end[s][i] = clock[s];
        if (task.kind == TaskKind::kBackward) backward_end[s][i] = clock[s];
        progress = true;
      }
    }
  }

  ScheduleStats stats;
  stats.peak_live_activations.assign(num_stages, 0);
  stats.peak_graphs.assign(num_stages, 0);
  for (int s = 0; s < num_stages; ++s) {
    const std::vector<Task>& tasks = stage_tasks[s];
    stats.deadlock = stats.deadlock || next[s] < tasks.size();
    stats.makespan = std::max(stats.makespan, clock[s]);
    std::vector<bool> live(num_micro_batches, false), graph(num_micro_batches, false);
    int num_live = 0, num_graphs = 0;
    for (size_t k = 0; k < next[s]; ++k) {
      const int i = tasks[k].micro_batch;
      switch (tasks[k].kind) {
        case TaskKind::kForward:
          num_live += live[i] ? 0 : 1;
          live[i] = true;
          if (KeepsGraph(tasks, k) && !graph[i]) {
            graph[i] = true;
            ++num_graphs;
          }
          break;
        case TaskKind::kRecompute:
          num_graphs += graph[i] ? 0 : 1;
          graph[i] = true;
          break;
        case TaskKind::kBackward:
          num_live -= live[i] ? 1 : 0;
          num_graphs -= graph[i] ? 1 : 0;
          live[i] = false;
          graph[i] = false;
          break;
      }
      stats.peak_live_activations[s] = std::max(stats.peak_live_activations[s], num_live);
      stats.peak_graphs[s] = std::max(stats.peak_graphs[s], num_graphs);
    }
  }
  if (stats.makespan > 0) {
    stats.bubble_fraction = 1 - busy / (num_stages * stats.makespan);
  }
  return stats;
}

}  // namespace varuna
