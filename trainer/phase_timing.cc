#include "trainer/phase_timing.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainer {
namespace {

// Megatron's label: the name and a space, padded with dots to 48 characters.
std::string Label(const std::string& name) {
  std::string label = name + " ";
  if (label.size() < 48) label.append(48 - label.size(), '.');
  return label;
}

// The (rank, ms) of the ranks that ran the table's i-th phase (a time above 0), by rank.
std::vector<std::pair<int, double>> RanksThatRan(const TimerTable& table, size_t i) {
  std::vector<std::pair<int, double>> ran;
  for (int rank = 0; rank < table.world_size; ++rank) {
    const double ms = table.ms[static_cast<size_t>(rank) * table.names.size() + i];
    if (ms > 0) ran.emplace_back(rank, ms);
  }
  return ran;
}

}  // namespace

std::vector<std::string> TimerNames(int level) {
  // Megatron's order (its training_log's timers_to_log), with Varuna's own phases beside their
  // neighbours: recompute-compute after forward-compute, wait-sends after the sends.
  static const std::pair<const char*, int> kTimers[] = {
      {"forward-backward", 1}, {"forward-compute", 2}, {"recompute-compute", 2},
      {"backward-compute", 2}, {"batch-generator", 2}, {"forward-recv", 2},
      {"forward-send", 2},     {"backward-recv", 2},   {"backward-send", 2},
      {"wait-sends", 2},       {"all-grads-sync", 1},  {"optimizer", 1}};
  std::vector<std::string> names;
  for (const auto& [name, timer_level] : kTimers) {
    if (timer_level <= level) names.push_back(name);
  }
  return names;
}

absl::StatusOr<TimerTable> GatherTimers(varuna::PhaseTimers& timers, varuna::Varuna& engine,
                                        int64_t iterations) {
  TimerTable table;
  table.names = TimerNames(timers.level());
  table.world_size = engine.options().stage_map.world_size();
  table.ms.assign(static_cast<size_t>(table.world_size) * table.names.size(), 0.0);
  std::map<std::string, double> mine;
  for (const auto& [name, ms] : timers.Take()) mine[name] = ms;
  const size_t row = static_cast<size_t>(engine.options().rank) * table.names.size();
  for (size_t i = 0; i < table.names.size(); ++i) {
    const auto it = mine.find(table.names[i]);
    if (it != mine.end()) table.ms[row + i] = it->second / std::max<int64_t>(iterations, 1);
  }
  if (absl::Status status = engine.SumOverRanks(table.ms); !status.ok()) return status;
  return table;
}

std::string FormatTimers(const TimerTable& table, const std::string& option) {
  std::string lines;
  if (option == "all") {
    for (size_t i = 0; i < table.names.size(); ++i) {
      const std::vector<std::pair<int, double>> ran = RanksThatRan(table, i);
      if (ran.empty()) continue;
      absl::StrAppend(&lines, absl::StrFormat("\n  %s:", table.names[i]));
      for (const auto& [rank, ms] : ran) {
        absl::StrAppend(&lines, absl::StrFormat("\n     rank %2d: %.2f", rank, ms));
      }
    }
  } else {
    for (const TimerSpan& span : Spans(table)) {
      absl::StrAppend(&lines, option == "max"
                                  ? absl::StrFormat("\n    %s: %.2f", Label(span.name), span.max_ms)
                                  : absl::StrFormat("\n    %s: (%.2f, %.2f)", Label(span.name),
                                                    span.min_ms, span.max_ms));
    }
  }
  if (lines.empty()) return "";
  const char* title = option == "max"   ? "max time across ranks (ms):"
                      : option == "all" ? "times across ranks (ms):"
                                        : "(min, max) time across ranks (ms):";
  return absl::StrCat(title, lines);
}

std::vector<TimerSpan> Spans(const TimerTable& table) {
  std::vector<TimerSpan> spans;
  for (size_t i = 0; i < table.names.size(); ++i) {
    const std::vector<std::pair<int, double>> ran = RanksThatRan(table, i);
    if (ran.empty()) continue;
    TimerSpan span{table.names[i], ran.front().second, ran.front().second};
    for (const auto& [rank, ms] : ran) {
      span.min_ms = std::min(span.min_ms, ms);
      span.max_ms = std::max(span.max_ms, ms);
    }
    spans.push_back(span);
  }
  return spans;
}

}  // namespace trainer
