#include "varuna/planning/simulator.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace varuna {
namespace {

absl::Status CheckCost(double value, const std::string& field) {
  if (!(value >= 0)) {  // also refuses NaN
    return absl::InvalidArgumentError(absl::StrCat("simulation input: ", field, " = ", value,
                                                   " is negative or NaN: costs must be >= 0"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const SimulationInput& input) {
  if (input.stages.empty()) {
    return absl::InvalidArgumentError(
        "simulation input: stages is empty: give one StageCosts per pipeline stage (P >= 1)");
  }
  if (input.num_micro_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulation input: num_micro_batches = ", input.num_micro_batches,
                     " must be >= 1 (the global batch per replica divided by the micro-batch "
                     "size, rounded up)"));
  }
  const size_t num_stages = input.stages.size();
  if (input.hop_ms.size() != num_stages - 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simulation input: hop_ms has ", input.hop_ms.size(), " entries for ", num_stages,
        " stages: give P - 1 = ", num_stages - 1, " (one per stage boundary)"));
  }
  for (size_t s = 0; s < num_stages; ++s) {
    const StageCosts& c = input.stages[s];
    const std::string name = absl::StrCat("stages[", s, "].");
    for (const auto& [value, field] :
         {std::make_pair(c.forward_ms, "forward_ms"), std::make_pair(c.backward_ms, "backward_ms"),
          std::make_pair(c.recompute_ms, "recompute_ms"),
          std::make_pair(c.gradient_ms, "gradient_ms"),
          std::make_pair(c.allreduce_ms, "allreduce_ms")}) {
      if (absl::Status st = CheckCost(value, name + field); !st.ok()) return st;
    }
    for (const auto& [value, field] : {std::make_pair(c.static_bytes, "static_bytes"),
                                       std::make_pair(c.stash_bytes, "stash_bytes"),
                                       std::make_pair(c.activation_bytes, "activation_bytes"),
                                       std::make_pair(c.working_bytes, "working_bytes"),
                                       std::make_pair(c.released_bytes, "released_bytes"),
                                       std::make_pair(c.step_bytes, "step_bytes"),
                                       std::make_pair(c.gradient_bytes, "gradient_bytes"),
                                       std::make_pair(c.output_bytes, "output_bytes")}) {
      if (value < 0) {
        return absl::InvalidArgumentError(absl::StrCat("simulation input: ", name, field, " = ",
                                                       value, " is negative: bytes must be >= 0"));
      }
    }
    if (c.released_bytes > c.static_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "simulation input: ", name, "released_bytes = ", c.released_bytes,
          " is more than static_bytes = ", c.static_bytes, ": only static memory is released"));
    }
  }
  for (size_t s = 0; s < input.hop_ms.size(); ++s) {
    if (absl::Status st = CheckCost(input.hop_ms[s], absl::StrCat("hop_ms[", s, "]")); !st.ok()) {
      return st;
    }
  }
  return CheckCost(input.optimizer_ms, "optimizer_ms");
}

enum class EventKind { kTaskEnd, kActivationArrives, kGradientArrives };

struct Event {
  double time = 0;
  int64_t sequence = 0;  // tie-break: events at one instant are applied in creation order
  EventKind kind = EventKind::kTaskEnd;
  int stage = 0;
  int micro_batch = 0;  // for arrivals

  // Ordering for a min-heap on (time, sequence).
  bool operator>(const Event& other) const {
    return std::tie(time, sequence) > std::tie(other.time, other.sequence);
  }
};

// One stage's state during the simulation.
struct StageState {
  std::vector<Task> tasks;
  std::vector<bool> done;
  size_t first_not_done = 0;             // every task before it is done
  std::vector<bool> activation_arrived;  // from stage - 1 (always true on the first stage)
  std::vector<bool> gradient_arrived;    // from stage + 1 (always true on the last stage)
  bool busy = false;
  size_t running = 0;  // index of the running task while busy
  int completed = 0;
  double busy_ms = 0;
  double finish_ms = 0;
  int stashed = 0, graphs = 0;
  std::vector<bool> holds_graph;
  int peak_stashed = 0, peak_graphs = 0;
  // Received and not yet taken by their task (the executor's receive threads hold them). A
  // received input becomes its forward's stash, so the inputs held are stashed + waiting.
  int waiting_activations = 0, waiting_gradients = 0;
  int peak_inputs_held = 0;
  // Sent and held until the step's end (pipeline/p2p.h: PendingSends, waited for after the
  // last task): outputs to the next stage (counted when their forward's graph, if it kept
  // one, is gone: until then the output is part of the graph) and gradients to the previous.
  std::vector<bool> forward_kept_graph;
  int sent_outputs = 0, sent_gradients = 0;
  // The most bytes held at once by the terms above that change along the timeline.
  int64_t peak_held_bytes = 0;
  void NoteHeld(const StageCosts& c) {
    const int inputs = stashed + waiting_activations;
    peak_inputs_held = std::max(peak_inputs_held, inputs);
    peak_held_bytes = std::max(
        peak_held_bytes, inputs * c.stash_bytes + graphs * c.activation_bytes +
                             waiting_gradients * c.gradient_bytes + sent_outputs * c.output_bytes +
                             sent_gradients * c.stash_bytes);
  }
};

// A one-direction link across one stage boundary: carries one transfer at a time, in order.
struct Link {
  double free_at = 0;
};

class Simulation {
 public:
  explicit Simulation(const SimulationInput& input)
      : input_(input),
        num_stages_(static_cast<int>(input.stages.size())),
        m_(input.num_micro_batches),
        stages_(num_stages_),
        forward_links_(std::max(num_stages_ - 1, 0)),
        backward_links_(std::max(num_stages_ - 1, 0)) {
    for (int s = 0; s < num_stages_; ++s) {
      StageState& st = stages_[s];
      st.tasks = BuildSchedule(input.schedule, num_stages_, m_, s);
      st.done.assign(st.tasks.size(), false);
      st.activation_arrived.assign(m_, s == 0);
      st.gradient_arrived.assign(m_, s == num_stages_ - 1);
      st.holds_graph.assign(m_, false);
      st.forward_kept_graph.assign(m_, false);
    }
  }

  absl::StatusOr<SimulationResult> Run() {
    Decide(0);
    for (int s = 0; s < num_stages_; ++s) stages_[s].NoteHeld(input_.stages[s]);
    while (!events_.empty()) {
      const double now = events_.top().time;
      // Apply everything that happens at this instant before any stage picks its next task, so
      // that a decision sees every arrival of the same instant.
      while (!events_.empty() && events_.top().time == now) {
        const Event event = events_.top();
        events_.pop();
        Apply(event);
      }
      Decide(now);
      // What is held between this instant and the next: after every arrival, every backward
      // that ended (its memory is free for a task starting now) and every task that started.
      for (int s = 0; s < num_stages_; ++s) stages_[s].NoteHeld(input_.stages[s]);
    }
    for (int s = 0; s < num_stages_; ++s) {
      if (stages_[s].completed != static_cast<int>(stages_[s].tasks.size())) {
        return absl::InternalError(absl::StrCat(
            "simulation of the ", ScheduleKindName(input_.schedule), " schedule stalled on stage ",
            s, " after ", stages_[s].completed, " of ", stages_[s].tasks.size(),
            " tasks: a bug in the schedule or the simulator"));
      }
    }
    return Result();
  }

 private:
  void Push(double time, EventKind kind, int stage, int micro_batch) {
    events_.push(Event{time, next_sequence_++, kind, stage, micro_batch});
  }

  double Duration(TaskKind kind, int stage) const {
    const StageCosts& c = input_.stages[stage];
    switch (kind) {
      case TaskKind::kForward:
        return c.forward_ms;
      case TaskKind::kRecompute:
        return c.recompute_ms;
      case TaskKind::kBackward:
        return c.backward_ms;
    }
    return 0;
  }

  // A forward that keeps its autograd graph does what a recompute does (the profile's R: a
  // forward with a graph), not the graph-free forward F measures; profiles without R give F.
  double GraphForwardMs(int stage) const {
    const StageCosts& c = input_.stages[stage];
    return c.recompute_ms > 0 ? c.recompute_ms : c.forward_ms;
  }

  // Starts a transfer on `link` at `ready` (or when the link frees up); returns its arrival.
  double Transfer(Link& link, double ready, double hop_ms) {
    const double start = std::max(ready, link.free_at);
    link.free_at = start + hop_ms;
    return link.free_at;
  }

  void Apply(const Event& event) {
    StageState& st = stages_[event.stage];
    switch (event.kind) {
      case EventKind::kActivationArrives:
        st.activation_arrived[event.micro_batch] = true;
        ++st.waiting_activations;
        return;
      case EventKind::kGradientArrives:
        st.gradient_arrived[event.micro_batch] = true;
        ++st.waiting_gradients;
        return;
      case EventKind::kTaskEnd:
        break;
    }
    const int s = event.stage;
    const Task task = st.tasks[st.running];
    st.busy = false;
    ++st.completed;
    if (task.kind == TaskKind::kForward && s + 1 < num_stages_) {
      Push(Transfer(forward_links_[s], event.time, input_.hop_ms[s]), EventKind::kActivationArrives,
           s + 1, task.micro_batch);
      if (!st.forward_kept_graph[task.micro_batch]) ++st.sent_outputs;
    }
    if (task.kind == TaskKind::kBackward) {
      if (s > 0) {
        Push(Transfer(backward_links_[s - 1], event.time, input_.hop_ms[s - 1]),
             EventKind::kGradientArrives, s - 1, task.micro_batch);
        ++st.sent_gradients;
      }
      if (s + 1 < num_stages_ && st.forward_kept_graph[task.micro_batch]) ++st.sent_outputs;
      --st.stashed;
      if (st.holds_graph[task.micro_batch]) --st.graphs;
      st.holds_graph[task.micro_batch] = false;
      st.finish_ms = event.time;
    }
  }

  // Whether task t of stage s has its inputs (the list order is handled by the caller).
  bool Ready(const StageState& st, size_t t) const {
    const Task& task = st.tasks[t];
    switch (task.kind) {
      case TaskKind::kForward:
        return st.activation_arrived[task.micro_batch];
      case TaskKind::kRecompute:
        return true;  // its forward ran earlier in the list
      case TaskKind::kBackward:
        return st.gradient_arrived[task.micro_batch];
    }
    return false;
  }

  // The task stage `st` runs next, if one can start now: the first task of the list not yet run,
  // except that a recompute whose gradient has not arrived lets the next forward of the list go
  // first when that forward's input is here (the executor's opportunistic rule,
  // pipeline/stage_executor.cc).
  std::optional<size_t> Next(const StageState& st) const {
    const size_t t = st.first_not_done;
    if (t == st.tasks.size()) return std::nullopt;
    const Task& task = st.tasks[t];
    if (task.kind == TaskKind::kRecompute && !st.gradient_arrived[task.micro_batch]) {
      for (size_t u = t + 1; u < st.tasks.size(); ++u) {
        if (st.done[u] || st.tasks[u].kind != TaskKind::kForward) continue;
        if (Ready(st, u)) return u;
        break;
      }
    }
    if (!Ready(st, t)) return std::nullopt;
    return t;
  }

  void Decide(double now) {
    for (int s = 0; s < num_stages_; ++s) {
      StageState& st = stages_[s];
      if (st.busy) continue;
      const std::optional<size_t> t = Next(st);
      if (!t) continue;
      const Task task = st.tasks[*t];
      st.done[*t] = true;
      while (st.first_not_done < st.tasks.size() && st.done[st.first_not_done]) {
        ++st.first_not_done;
      }
      st.busy = true;
      st.running = *t;
      const bool keeps_graph = task.kind == TaskKind::kForward && KeepsGraph(st.tasks, *t);
      const double duration = keeps_graph ? GraphForwardMs(s) : Duration(task.kind, s);
      st.busy_ms += duration;
      // Memory is taken when a task starts and given back when the backward ends; a received
      // input or gradient leaves the receive side when its task starts (the gradient a backward
      // works on is part of its working memory).
      if (task.kind == TaskKind::kForward && s > 0) --st.waiting_activations;
      if (task.kind == TaskKind::kBackward && s + 1 < num_stages_) --st.waiting_gradients;
      if (task.kind == TaskKind::kForward) {
        ++st.stashed;
        if (keeps_graph) {
          st.holds_graph[task.micro_batch] = true;
          st.forward_kept_graph[task.micro_batch] = true;
          ++st.graphs;
        }
      } else if (task.kind == TaskKind::kRecompute && !st.holds_graph[task.micro_batch]) {
        st.holds_graph[task.micro_batch] = true;
        ++st.graphs;
      }
      st.peak_stashed = std::max(st.peak_stashed, st.stashed);
      st.peak_graphs = std::max(st.peak_graphs, st.graphs);
      Push(now + duration, EventKind::kTaskEnd, s, 0);
    }
  }

  SimulationResult Result() const {
    SimulationResult result;
    double last_backward = 0, busy = 0, end = 0;
    for (int s = 0; s < num_stages_; ++s) {
      const StageState& st = stages_[s];
      const StageCosts& c = input_.stages[s];
      result.stage_busy_ms.push_back(st.busy_ms);
      result.stage_finish_ms.push_back(st.finish_ms);
      result.peak_stashed.push_back(st.peak_stashed);
      result.peak_inputs.push_back(st.peak_inputs_held);
      result.peak_graphs.push_back(st.peak_graphs);
      result.peak_memory_bytes.push_back(
          std::max(c.static_bytes - c.released_bytes + st.peak_held_bytes + c.working_bytes,
                   c.static_bytes + c.step_bytes));
      last_backward = std::max(last_backward, st.finish_ms);
      end = std::max(end, st.finish_ms + c.gradient_ms + c.allreduce_ms);
      busy += st.busy_ms;
    }
    result.minibatch_ms = end + input_.optimizer_ms;
    if (last_backward > 0) result.bubble_fraction = 1 - busy / (num_stages_ * last_backward);
    return result;
  }

  const SimulationInput& input_;
  const int num_stages_;
  const int m_;
  std::vector<StageState> stages_;
  std::vector<Link> forward_links_;   // [s]: activations s -> s+1
  std::vector<Link> backward_links_;  // [s]: gradients s+1 -> s
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t next_sequence_ = 0;
};

}  // namespace

absl::StatusOr<SimulationResult> Simulate(const SimulationInput& input) {
  if (absl::Status status = Validate(input); !status.ok()) return status;
  return Simulation(input).Run();
}

}  // namespace varuna
