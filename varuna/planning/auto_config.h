// AutoConfig: chooses the pipeline depth P, data-parallel width D, micro-batch size and the cut
// assignment (which segments each stage runs) for the GPUs available now, from a profile
// (planning/profile.h), by simulating every candidate (planning/simulator.h) and ranking them by
// predicted mini-batch time. Varuna's auto_config, re-created so that it runs end to end (its P = 1
// candidate crashed, its -1 micro-batch was not handled, and its cuts were only even).
//
// For every P in 1..min(num_segments, GPUs) and D = GPUs / P (every GPU used; P * D <= GPUs
// when the GPUs do not divide, the remainder idle), and every micro-batch size b the profile
// has for all segments with b <= global_batch / D:
//   - the global batch must split evenly over the replicas (global_batch % D == 0); m =
//     ceil(global_batch / D / b) micro-batches, the last possibly smaller (timed as full);
//   - the cut assignment: contiguous segment ranges, uneven allowed, minimising the slowest
//     stage's forward + recompute + backward at b (BalancedPartition);
//   - costs: a stage's times are the sums over its segments at b; its all-reduce the profile's
//     all-reduce curve for D ranks at the stage's gradient bytes (4 bytes per parameter: the
//     engine reduces fp32 master gradients); a hop the send curve within or across nodes (by
//     the ranks' placement, launch/plan.h: rank = replica * P + stage, node = rank /
//     gpus_per_node; a boundary counts as across nodes when it is for any replica) at the
//     output bytes of the stage's last segment; the optimizer step (SimulationInput::
//     optimizer_ms) the largest over stages of the sum of its segments' optimizer_ms (the
//     stages step in parallel; 0 for profiles without it);
//   - the cache: where the profile has a segment's cold times (SegmentMeasurement::
//     forward_cold_ms) and the cache's size, each of its F, R and B is charged the warm time
//     plus ColdShare of the cold time's excess for what ran since the last pass over the
//     segment's data, as a stage runs a task over its segments, forwards and recomputes in
//     order and backwards in reverse: before F and R the stage's segments before it, before B
//     those after it (a segment's pass bytes: 2 x its parameters in the profile's dtype, plus
//     its graph at b);
//   - memory: a stage's static bytes are its segments' state_bytes, its graph the sum of its
//     segments' graph_memory_bytes (activation_memory_bytes where a profile lacks it), its
//     working memory the largest of its segments' activation_memory_bytes - graph_memory_bytes
//     + output_bytes (the gradient a segment's backward receives),
//     its stash the first segment's stash_bytes, and with D = 1 its fp32 master gradients (4
//     bytes per parameter) released during the micro-batches, as the engine frees them, and
//     with one micro-batch a step the model's own gradients too (the profile's dtype), the
//     working memory then the worst moment of the backward (segment k working beside the
//     graphs of segments up to k and the gradients of those after it); its
//     step's temporaries the largest of its segments' step_memory_bytes, a received gradient its
//     last segment's output_bytes; a
//     candidate whose simulated peak on any stage exceeds the GPU memory (times
//     `memory_fraction`) is dropped.
// Candidates come back fastest first (ties: smaller peak, then fewer stages, then smaller b).
// Note: the launcher (launch/plan.h) requires P to divide the GPU count; candidates with idle
// GPUs are reported here but a caller launching them must use P * D GPUs.
//
// Thread safety: pure functions.
#ifndef VARUNA_PLANNING_AUTO_CONFIG_H_
#define VARUNA_PLANNING_AUTO_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "varuna/pipeline/schedule.h"
#include "varuna/pipeline/segment_range.h"
#include "varuna/planning/profile.h"
#include "varuna/planning/simulator.h"

namespace varuna {

struct ClusterSpec {
  int nodes = 1;
  int gpus_per_node = 1;
  int64_t gpu_memory_bytes = 0;  // per GPU
  // Link bandwidths in Gbit/s (10^9 bits per second), for planning from a profile without
  // communication curves (a one-GPU profile) or for another cluster than the profiled one. 0:
  // the profile's measured curves. When > 0 they replace the curves for the links they name:
  //   a hop over a stage boundary within a node (across nodes) takes bytes * 8 / (intra_node_gbps
  //   (inter_node_gbps) * 1e6) ms;
  //   a stage's all-reduce over D replicas takes the ring's 2 (D - 1) / D * bytes * 8 / (gbps *
  //   1e6) ms, with inter_node_gbps when the stage's replicas sit on more than one node, else
  //   intra_node_gbps.
  // Bandwidth only: no latency term, so small messages come out cheaper than measured ones.
  double intra_node_gbps = 0;
  double inter_node_gbps = 0;
};

struct AutoConfigOptions {
  int64_t global_batch = 0;  // sequences per optimizer step, over all replicas
  ScheduleKind schedule = ScheduleKind::kVaruna;
  double memory_fraction = 0.9;  // of gpu_memory_bytes usable for the model's state and activations
};

struct Candidate {
  int pipeline_stages = 0;           // P
  int data_parallel = 0;             // D
  int micro_batch = 0;               // b
  int num_micro_batches = 0;         // m
  std::vector<SegmentRange> stages;  // P contiguous ranges covering every segment
  SimulationResult simulation;
};

// The share of a segment's cold-minus-warm time that a stage is charged when `streamed_bytes`
// of other data pass through a cache of `cache_bytes` between two of its passes: 1 - exp(-
// streamed / cache), the fraction of the cache's lines such a stream replaces where any line is
// as likely to go as another (random replacement); 0 where either is 0 or less, towards 1 as
// the stream outgrows the cache. Why: a segment profiled alone finds much of its data in the
// cache (on the 2-core CPU machine's 32 MiB L3 at micro-batch 1, a layer's F 2.7 ms warm and
// 2.9 ms cold), where training has run the stage's other segments in between
// (docs/profiling.md, "The cache"). Other processes on the same host are not counted (on the
// CPU, counting them put the two-stage pipeline's prediction at micro-batch 1 3.9% and 5.4%
// over, with each segment then charged for the whole rest of its stage).
double ColdShare(int64_t streamed_bytes, int64_t cache_bytes);

// The contiguous split of segments with `cost` (one entry per segment, >= 0) into `parts`
// non-empty ranges that minimises the largest range sum (ties: the earliest such split, each
// range ending as soon as the rest can still be split within the optimum). Empty when parts is
// not in [1, cost.size()].
std::vector<SegmentRange> BalancedPartition(const std::vector<double>& cost, int parts);

// Every feasible candidate, fastest first. InvalidArgument naming the field for a bad cluster
// or options (nodes, gpus_per_node, gpu_memory_bytes, intra_node_gbps, inter_node_gbps (negative
// or not finite), global_batch, memory_fraction), for an
// invalid profile (ValidateProfile's message), or when the global batch fits no D (not a
// multiple of any D tried, or smaller than D times the smallest micro-batch size);
// FailedPrecondition naming what is missing when a segment has no measurements, or when every
// P x D needs something the profile lacks (an all-reduce ring, a send curve), or when nothing
// fits in memory (the message gives the smallest peak found and the memory available).
// A P x D the profile cannot price (e.g. a pipeline across nodes, profiled on one node) is
// left out, and "P=p D=d: <what is missing>" appended to `skipped` when it is not null.
absl::StatusOr<std::vector<Candidate>> SearchConfigurations(
    const Profile& profile, const ClusterSpec& cluster, const AutoConfigOptions& options,
    std::vector<std::string>* skipped = nullptr);

// The simulation of `candidate`'s P, D, micro-batch size, micro-batch count and stage split on
// `profile`, priced as SearchConfigurations prices it (memory is simulated, not checked): for
// pricing a configuration chosen from one profile with another measurement of the same model.
// InvalidArgument for a bad cluster or options (as SearchConfigurations), an invalid profile, a
// candidate whose stages do not cover the profile's segments in order (one contiguous range per
// stage), or one that needs more than the cluster's GPUs; FailedPrecondition
// naming what the profile lacks (the micro-batch size for a segment, a curve).
absl::StatusOr<SimulationResult> SimulateCandidate(const Profile& profile,
                                                   const ClusterSpec& cluster,
                                                   const AutoConfigOptions& options,
                                                   const Candidate& candidate);

// A table of the first `rows` candidates: P, D, b, m, stage boundaries, predicted mini-batch
// time, bubble, peak memory of the fullest stage.
std::string FormatCandidates(const std::vector<Candidate>& candidates, int rows);

// The planner's table (the launcher's --dry_run) of the first `rows` candidates: P, D, b, m,
// predicted step time, tokens/s (tokens_per_step / step time; "-" when tokens_per_step <= 0),
// bubble, memory per GPU in GB (10^9 bytes, the fullest stage's simulated peak) and the stage
// boundaries.
std::string FormatPlan(const std::vector<Candidate>& candidates, int rows, int64_t tokens_per_step);

}  // namespace varuna

#endif  // VARUNA_PLANNING_AUTO_CONFIG_H_
