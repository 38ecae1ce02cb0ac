#include "varuna/planning/auto_config.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "varuna/pipeline/stage_map.h"

namespace varuna {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The engine all-reduces fp32 master gradients: 4 bytes per parameter.
constexpr int64_t kGradientBytesPerParameter = 4;

// Bytes of one element of the model's own gradients: the profile's dtype (2 for float16 and
// bfloat16, 4 for float32).
int64_t GradientElementBytes(const Profile& profile) { return profile.dtype == "float32" ? 4 : 2; }

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

std::string Gib(int64_t bytes) {
  return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / kBytesPerGiB);
}

absl::Status ValidateRequest(const ClusterSpec& cluster, const AutoConfigOptions& options) {
  if (cluster.nodes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("auto-config: cluster nodes=", cluster.nodes,
                                                   " must be at least 1: give the number of "
                                                   "machines"));
  }
  if (cluster.gpus_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("auto-config: cluster gpus_per_node=", cluster.gpus_per_node,
                     " must be at least 1: give the GPUs of one "
                     "machine"));
  }
  if (cluster.gpu_memory_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("auto-config: cluster gpu_memory_bytes=", cluster.gpu_memory_bytes,
                     " must be positive: give one GPU's memory"));
  }
  for (const auto& [gbps, field] : {std::make_pair(cluster.intra_node_gbps, "intra_node_gbps"),
                                    std::make_pair(cluster.inter_node_gbps, "inter_node_gbps")}) {
    if (!(gbps >= 0) || !std::isfinite(gbps)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "auto-config: cluster ", field, "=", gbps,
          " must be a finite bandwidth >= 0 in Gbit/s (0: use the profile's measured curves)"));
    }
  }
  if (options.global_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("auto-config: global_batch=", options.global_batch,
                     " must be at least 1: give the sequences per optimizer step"));
  }
  if (!(options.memory_fraction > 0 && options.memory_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "auto-config: memory_fraction=", options.memory_fraction, " must be in (0, 1], e.g. 0.9"));
  }
  return absl::OkStatus();
}

// The all-reduce time of `bytes` among `ring` ranks; FailedPrecondition when the profile has no
// curve for that ring size.
absl::StatusOr<double> AllReduceMs(const Profile& profile, int ring, int64_t bytes) {
  if (ring < 2 || bytes <= 0) return 0.0;
  auto it = profile.allreduce.find(ring);
  if (it == profile.allreduce.end() || it->second.points.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("auto-config: the profile has no all-reduce measurements for ring size ", ring,
                     ", which a data-parallel width D=", ring,
                     " needs: profile with at least that many GPUs (or extend the profile with "
                     "add_to_existing)"));
  }
  return it->second.Milliseconds(bytes);
}

// Milliseconds to move `bytes` over a link of `gbps` Gbit/s.
double BandwidthMs(int64_t bytes, double gbps) {
  return static_cast<double>(bytes) * 8.0 / (gbps * 1e6);
}

// The bytes one pass over segment k at micro-batch size b reads and writes: its parameters and
// their gradients in the profile's dtype, and its graph (the whole peak where a profile lacks
// the split).
int64_t PassBytes(const Profile& profile, int k, int b) {
  const SegmentMeasurement& m = profile.compute[k].at(b);
  const int64_t graph = m.graph_memory_bytes > 0 ? m.graph_memory_bytes : m.activation_memory_bytes;
  return 2 * profile.statics[k].parameter_count * GradientElementBytes(profile) + graph;
}

}  // namespace

double ColdShare(int64_t streamed_bytes, int64_t cache_bytes) {
  if (streamed_bytes <= 0 || cache_bytes <= 0) return 0;
  return 1.0 - std::exp(-static_cast<double>(streamed_bytes) / static_cast<double>(cache_bytes));
}

namespace {

// The simulator's input for P stages `stages` at micro-batch size b with D replicas.
absl::StatusOr<SimulationInput> BuildInput(const Profile& profile, const ClusterSpec& cluster,
                                           ScheduleKind schedule,
                                           const std::vector<SegmentRange>& stages, int replicas,
                                           int micro_batch, int num_micro_batches) {
  SimulationInput input;
  input.schedule = schedule;
  input.num_micro_batches = num_micro_batches;
  const int num_stages = static_cast<int>(stages.size());
  // A pass's warm time, plus the share of its cold excess that `streamed` bytes since the last
  // pass over the segment's data evict (a cold time under the warm one is the host's noise:
  // nothing added).
  auto charged = [&profile](double warm, double cold, int64_t streamed) {
    if (cold <= 0) return warm;
    return warm + ColdShare(streamed, profile.cache_bytes) * std::max(0.0, cold - warm);
  };
  for (int s = 0; s < num_stages; ++s) {
    const SegmentRange& range = stages[s];
    // What runs between two passes over one segment's data, as a stage runs a task over all of
    // its segments (pipeline/stage_executor.cc): forwards and recomputes in order, backwards in
    // reverse. So a forward or a recompute of segment k follows the stage's segments before k,
    // which ran since k's last backward or since the previous task's pass over them, and a
    // backward follows the segments after k, which ran since k's forward or recompute of the
    // same micro-batch.
    int64_t before = 0;  // pass bytes of the stage's segments before k
    int64_t after = 0;   // and after it
    for (int k = range.first; k <= range.last; ++k) after += PassBytes(profile, k, micro_batch);
    StageCosts costs;
    double optimizer_ms = 0;
    int64_t parameters = 0;
    // Per segment, in order: its graph, its backward's working memory and its parameters (for
    // one micro-batch a step, below).
    struct SegmentMemory {
      int64_t graph, working, parameters;
    };
    std::vector<SegmentMemory> segments;
    for (int k = range.first; k <= range.last; ++k) {
      const SegmentMeasurement& measured = profile.compute[k].at(micro_batch);
      const int64_t pass_bytes = PassBytes(profile, k, micro_batch);
      after -= pass_bytes;
      costs.forward_ms += charged(measured.forward_ms, measured.forward_cold_ms, before);
      costs.recompute_ms += charged(measured.recompute_ms, measured.recompute_cold_ms, before);
      costs.backward_ms += charged(measured.backward_ms, measured.backward_cold_ms, after);
      before += pass_bytes;
      // What the graph keeps (every segment's, for each micro-batch held) and the backward's
      // working memory on top (one segment's at a time). A profile without the split (written
      // before it was measured) counts each segment's whole peak as kept.
      const int64_t kept = measured.graph_memory_bytes > 0 ? measured.graph_memory_bytes
                                                           : measured.activation_memory_bytes;
      costs.activation_bytes += kept;
      // A segment's backward also holds the gradient it receives (its output's size), which
      // the profiler made before measuring: from the next segment, or from the next stage.
      const int64_t working = measured.activation_memory_bytes - kept + measured.output_bytes;
      costs.working_bytes = std::max(costs.working_bytes, working);
      parameters += profile.statics[k].parameter_count;
      segments.push_back({kept, working, profile.statics[k].parameter_count});
      costs.static_bytes += profile.statics[k].state_bytes;
      // The step works through the parameters one tensor (or one multi-tensor chunk) at a
      // time: the largest segment's temporaries.
      costs.step_bytes = std::max(costs.step_bytes, profile.statics[k].step_memory_bytes);
      optimizer_ms += profile.statics[k].optimizer_ms;
      costs.gradient_ms +=
          profile.statics[k].gradient_ms + (replicas > 1 ? profile.statics[k].bucket_ms : 0.0);
    }
    // profile.joins (SegmentJoin) is not charged: on the CPU it made predictions worse
    // (docs/profiling.md, "Segment joins"), and it has not been measured on a GPU yet.
    // The stages step in parallel: the slowest one ends the mini-batch.
    input.optimizer_ms = std::max(input.optimizer_ms, optimizer_ms);
    costs.stash_bytes = profile.compute[range.first].at(micro_batch).stash_bytes;
    costs.gradient_bytes = profile.compute[range.last].at(micro_batch).output_bytes;
    costs.output_bytes = costs.gradient_bytes;
    // Without replicas the engine frees the fp32 master gradients for the micro-batches
    // (Varuna::step: ReleaseMasterGrads); with them they are views into the data-parallel
    // buckets, which stay.
    if (replicas == 1) costs.released_bytes += parameters * kGradientBytesPerParameter;
    // The model's own gradients are freed when a step starts (ZeroModelGrads) and made again
    // by the first backward, segment by segment from the last, as the graphs go. With one
    // micro-batch a step (one graph at a time) the peak is then the worst moment of that
    // backward: while segment k works, the graphs of segments up to k and the gradients of the
    // segments after it. So all the model's gradients are released and that worst moment is
    // the working memory above the graphs.
    if (num_micro_batches == 1) {
      const int64_t element = GradientElementBytes(profile);
      int64_t graphs = 0, gradients_after = parameters * element, worst = 0;
      for (const SegmentMemory& segment : segments) {
        graphs += segment.graph;
        gradients_after -= segment.parameters * element;
        worst = std::max(worst, graphs + segment.working + gradients_after);
      }
      costs.released_bytes += parameters * element;
      costs.working_bytes = worst - costs.activation_bytes;
    }
    costs.released_bytes = std::min(costs.released_bytes, costs.static_bytes);
    input.stages.push_back(costs);
  }
  // Ranks as the launcher places them (rank = replica * P + stage, node = rank / GPUs per
  // node); a boundary is across nodes when it is for any replica, the slowest replica setting
  // the pace.
  const StageMap map = StageMap::Uniform(num_stages, replicas);
  for (int s = 0; s < num_stages; ++s) {
    int64_t parameters = 0;
    for (int k = stages[s].first; k <= stages[s].last; ++k) {
      parameters += profile.statics[k].parameter_count;
    }
    const int64_t bytes = parameters * kGradientBytesPerParameter;
    bool ring_across = false;
    for (int r = 1; r < replicas; ++r) {
      ring_across = ring_across || map.rank(s, r) / cluster.gpus_per_node !=
                                       map.rank(s, 0) / cluster.gpus_per_node;
    }
    const double gbps = ring_across ? cluster.inter_node_gbps : cluster.intra_node_gbps;
    if (replicas > 1 && gbps > 0) {
      input.stages[s].allreduce_ms = 2.0 * (replicas - 1) / replicas * BandwidthMs(bytes, gbps);
      continue;
    }
    absl::StatusOr<double> allreduce = AllReduceMs(profile, replicas, bytes);
    if (!allreduce.ok()) return allreduce.status();
    input.stages[s].allreduce_ms = *allreduce;
  }
  for (int s = 0; s + 1 < num_stages; ++s) {
    bool across = false;
    for (int r = 0; r < replicas; ++r) {
      across = across ||
               map.rank(s, r) / cluster.gpus_per_node != map.rank(s + 1, r) / cluster.gpus_per_node;
    }
    const int64_t bytes = profile.compute[stages[s].last].at(micro_batch).output_bytes;
    const double gbps = across ? cluster.inter_node_gbps : cluster.intra_node_gbps;
    if (gbps > 0) {
      input.hop_ms.push_back(BandwidthMs(bytes, gbps));
      continue;
    }
    const CostCurve& curve = across ? profile.send_across_nodes : profile.send_within_node;
    if (bytes > 0 && curve.points.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "auto-config: the profile has no point-to-point measurements ",
          across ? "across nodes (send_across_nodes)" : "within a node (send_within_node)",
          ", which P=", num_stages, " over ", cluster.nodes, " node(s) of ", cluster.gpus_per_node,
          " GPU(s) needs: profile on ",
          across ? "at least two nodes" : "at least two GPUs of one node"));
    }
    input.hop_ms.push_back(curve.Milliseconds(bytes));
  }
  return input;
}

// Simulate(input), its error naming the configuration P x D at micro-batch size b.
absl::StatusOr<SimulationResult> SimulateConfiguration(const SimulationInput& input, int p, int d,
                                                       int b) {
  absl::StatusOr<SimulationResult> result = Simulate(input);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat("auto-config: simulating P=", p, " D=", d, " b=", b, ": ",
                                     result.status().message()));
  }
  return result;
}

int64_t LargestPeak(const SimulationResult& result) {
  int64_t peak = 0;
  for (int64_t bytes : result.peak_memory_bytes) peak = std::max(peak, bytes);
  return peak;
}

std::string FormatStages(const std::vector<SegmentRange>& stages) {
  std::vector<std::string> parts;
  for (const SegmentRange& range : stages) {
    parts.push_back(range.first == range.last ? absl::StrCat(range.first)
                                              : absl::StrCat(range.first, "-", range.last));
  }
  return absl::StrJoin(parts, "|");
}

}  // namespace

std::vector<SegmentRange> BalancedPartition(const std::vector<double>& cost, int parts) {
  const int n = static_cast<int>(cost.size());
  if (parts < 1 || parts > n) return {};
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  auto range_sum = [&prefix](int first, int last) { return prefix[last + 1] - prefix[first]; };

  // best[k][i]: the smallest largest-range sum over splits of segments i..n-1 into k non-empty
  // ranges (infinite where impossible). best[0][n] = 0: nothing left, no range.
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, kInfinity));
  best[0][n] = 0;
  for (int k = 1; k <= parts; ++k) {
    for (int i = n - k; i >= 0; --i) {
      for (int last = i; last <= n - k; ++last) {
        best[k][i] = std::min(best[k][i], std::max(range_sum(i, last), best[k - 1][last + 1]));
      }
    }
  }
  // The earliest optimal split: each range ends as soon as the rest can still be split within
  // the optimum. The comparisons repeat the very sums of the table, so the optimum is met
  // exactly.
  const double optimum = best[parts][0];
  std::vector<SegmentRange> ranges;
  int first = 0;
  for (int k = parts; k >= 1; --k) {
    int last = first;
    while (last < n - k && std::max(range_sum(first, last), best[k - 1][last + 1]) > optimum) {
      ++last;
    }
    ranges.push_back(SegmentRange{first, last});
    first = last + 1;
  }
  return ranges;
}

absl::StatusOr<SimulationResult> SimulateCandidate(const Profile& profile,
                                                   const ClusterSpec& cluster,
                                                   const AutoConfigOptions& options,
                                                   const Candidate& candidate) {
  if (absl::Status status = ValidateRequest(cluster, options); !status.ok()) return status;
  if (absl::Status status = ValidateProfile(profile); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat("auto-config: ", status.message()));
  }
  int next = 0;
  for (const SegmentRange& range : candidate.stages) {
    if (range.first != next || range.last < range.first) {
      next = -1;  // out of order, overlapping or empty: never the segment count
      break;
    }
    next = range.last + 1;
  }
  if (candidate.stages.empty() || next != profile.num_segments ||
      static_cast<int>(candidate.stages.size()) != candidate.pipeline_stages ||
      candidate.data_parallel < 1 || candidate.num_micro_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("auto-config: the candidate's ", candidate.stages.size(), " stage(s) ",
                     FormatStages(candidate.stages), " (P=", candidate.pipeline_stages,
                     ", D=", candidate.data_parallel, ", m=", candidate.num_micro_batches,
                     ") do not split the profile's ", profile.num_segments,
                     " segments in order, one range per stage: price a candidate of this model"));
  }
  for (int k = 0; k < profile.num_segments; ++k) {
    if (profile.compute[k].count(candidate.micro_batch) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("auto-config: profile segment ", k, " has no measurement at micro-batch ",
                       candidate.micro_batch, ": profile that size (--profile-micro-batches)"));
    }
  }
  const int gpus = cluster.nodes * cluster.gpus_per_node;
  if (candidate.pipeline_stages * candidate.data_parallel > gpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("auto-config: the candidate's P=", candidate.pipeline_stages,
                     " x D=", candidate.data_parallel, " needs more GPUs than the cluster's ", gpus,
                     ": price it on a cluster of at least P x D GPUs"));
  }
  absl::StatusOr<SimulationInput> input =
      BuildInput(profile, cluster, options.schedule, candidate.stages, candidate.data_parallel,
                 candidate.micro_batch, candidate.num_micro_batches);
  if (!input.ok()) return input.status();
  return SimulateConfiguration(*input, candidate.pipeline_stages, candidate.data_parallel,
                               candidate.micro_batch);
}

absl::StatusOr<std::vector<Candidate>> SearchConfigurations(const Profile& profile,
                                                            const ClusterSpec& cluster,
                                                            const AutoConfigOptions& options,
                                                            std::vector<std::string>* skipped) {
  if (absl::Status status = ValidateRequest(cluster, options); !status.ok()) return status;
  if (absl::Status status = ValidateProfile(profile); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat("auto-config: ", status.message()));
  }
  for (int k = 0; k < profile.num_segments; ++k) {
    if (profile.compute[k].empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "auto-config: profile segment ", k, " of ", profile.num_segments,
          " has no measurements: profile it (--profiling with add_to_existing) first"));
    }
  }
  const std::vector<int> sizes = profile.CommonMicroBatchSizes();
  if (sizes.empty()) {
    return absl::FailedPreconditionError(
        "auto-config: no micro-batch size was measured for every segment: profile all "
        "segments at the same sizes (--profile-micro-batches)");
  }

  const int gpus = cluster.nodes * cluster.gpus_per_node;
  const double available = static_cast<double>(cluster.gpu_memory_bytes) * options.memory_fraction;
  const int max_stages = std::min(profile.num_segments, gpus);
  std::vector<Candidate> candidates;
  int simulated = 0;
  int64_t smallest_peak = std::numeric_limits<int64_t>::max();
  std::string smallest_peak_config;
  std::vector<std::string> widths_tried;
  absl::Status first_missing;  // the first candidate the profile cannot price
  for (int p = 1; p <= max_stages; ++p) {
    const int d = gpus / p;
    widths_tried.push_back(absl::StrCat(d));
    if (options.global_batch % d != 0) continue;
    const int64_t replica_batch = options.global_batch / d;
    for (int b : sizes) {
      if (b > replica_batch) break;
      const int m = static_cast<int>((replica_batch + b - 1) / b);
      std::vector<double> cost(profile.num_segments);
      for (int k = 0; k < profile.num_segments; ++k) {
        const SegmentMeasurement& measured = profile.compute[k].at(b);
        cost[k] = measured.forward_ms + measured.recompute_ms + measured.backward_ms;
      }
      std::vector<SegmentRange> stages = BalancedPartition(cost, p);
      absl::StatusOr<SimulationInput> input =
          BuildInput(profile, cluster, options.schedule, stages, d, b, m);
      if (input.status().code() == absl::StatusCode::kFailedPrecondition) {
        // A missing curve depends on P and D only: every b of this P is skipped alike.
        if (first_missing.ok()) first_missing = input.status();
        if (skipped != nullptr) {
          skipped->push_back(absl::StrCat("P=", p, " D=", d, ": ", input.status().message()));
        }
        break;
      }
      if (!input.ok()) return input.status();
      absl::StatusOr<SimulationResult> result = SimulateConfiguration(*input, p, d, b);
      if (!result.ok()) return result.status();
      ++simulated;
      const int64_t peak = LargestPeak(*result);
      if (static_cast<double>(peak) > available) {
        if (peak < smallest_peak) {
          smallest_peak = peak;
          smallest_peak_config = absl::StrCat("P=", p, " D=", d, " b=", b);
        }
        continue;
      }
      Candidate candidate;
      candidate.pipeline_stages = p;
      candidate.data_parallel = d;
      candidate.micro_batch = b;
      candidate.num_micro_batches = m;
      candidate.stages = std::move(stages);
      candidate.simulation = std::move(*result);
      candidates.push_back(std::move(candidate));
    }
  }

  if (simulated == 0 && !first_missing.ok()) return first_missing;
  if (simulated == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "auto-config: global_batch=", options.global_batch, " fits no configuration on ", gpus,
        " GPU(s): it must be a multiple of the data-parallel width D (tried D in {",
        absl::StrJoin(widths_tried, ","),
        "}) and at least D times the smallest profiled "
        "micro-batch size (",
        sizes.front(), "): choose such a global batch"));
  }
  if (candidates.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "auto-config: no configuration fits in GPU memory: the smallest simulated peak is ",
        smallest_peak, " bytes (", Gib(smallest_peak), ", ", smallest_peak_config, ") but only ",
        static_cast<int64_t>(available), " bytes (", Gib(static_cast<int64_t>(available)),
        " = memory_fraction ", options.memory_fraction, " of gpu_memory_bytes ",
        cluster.gpu_memory_bytes, ") are available: use more GPUs or GPUs with more memory"));
  }
  // Fastest first; ties: less memory, then fewer stages, then smaller micro-batches.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     return std::make_tuple(a.simulation.minibatch_ms, LargestPeak(a.simulation),
                                            a.pipeline_stages, a.micro_batch) <
                            std::make_tuple(b.simulation.minibatch_ms, LargestPeak(b.simulation),
                                            b.pipeline_stages, b.micro_batch);
                   });
  return candidates;
}

std::string FormatCandidates(const std::vector<Candidate>& candidates, int rows) {
  std::string table = absl::StrFormat("%4s %4s %4s %4s %5s %12s %7s %12s  %s\n", "rank", "P", "D",
                                      "b", "m", "time_ms", "bubble", "peak_GiB", "stages");
  const int shown = std::min(std::max(rows, 0), static_cast<int>(candidates.size()));
  for (int i = 0; i < shown; ++i) {
    const Candidate& c = candidates[i];
    absl::StrAppendFormat(&table, "%4d %4d %4d %4d %5d %12.3f %7.3f %12.3f  %s\n", i + 1,
                          c.pipeline_stages, c.data_parallel, c.micro_batch, c.num_micro_batches,
                          c.simulation.minibatch_ms, c.simulation.bubble_fraction,
                          static_cast<double>(LargestPeak(c.simulation)) / kBytesPerGiB,
                          FormatStages(c.stages));
  }
  return table;
}

std::string FormatPlan(const std::vector<Candidate>& candidates, int rows,
                       int64_t tokens_per_step) {
  std::string table =
      absl::StrFormat("%4s %4s %4s %4s %5s %12s %12s %7s %10s  %s\n", "rank", "P", "D", "b", "m",
                      "step_ms", "tokens/s", "bubble", "GB/GPU", "stages");
  const int shown = std::min(std::max(rows, 0), static_cast<int>(candidates.size()));
  for (int i = 0; i < shown; ++i) {
    const Candidate& c = candidates[i];
    const double ms = c.simulation.minibatch_ms;
    const std::string tokens =
        tokens_per_step > 0 && ms > 0
            ? absl::StrFormat("%.0f", static_cast<double>(tokens_per_step) / (ms / 1000.0))
            : "-";
    absl::StrAppendFormat(&table, "%4d %4d %4d %4d %5d %12.1f %12s %7.3f %10.2f  %s\n", i + 1,
                          c.pipeline_stages, c.data_parallel, c.micro_batch, c.num_micro_batches,
                          ms, tokens, c.simulation.bubble_fraction,
                          static_cast<double>(LargestPeak(c.simulation)) / 1e9,
                          FormatStages(c.stages));
  }
  return table;
}

}  // namespace varuna
