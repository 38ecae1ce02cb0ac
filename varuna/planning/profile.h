// Profile: what Varuna's profile mode measures of a model on a device, as data: per cut-point
// segment and micro-batch size the compute times and memory, point-to-point transfer times
// against message size (within a node and across nodes), and all-reduce times against message
// size and ring size. The simulator (planning/simulator.h) and auto-configuration
// (planning/auto_config.h) read it; `--profiling` (trainer) writes it.
//
// Stored as JSON files in a profile directory (see ReadProfile/WriteProfile):
//   <dir>/profile.json              model (its JSON text, so sequence length and sizes too),
//                                   device, dtype, num_segments, the communication tables
//                                   ([bytes, ms] pairs; all-reduce keyed by ring size) and the
//                                   segment joins (SegmentJoin, by micro-batch size)
//   <dir>/segment_<k>.json          segment k's statics and its measurements by micro-batch size
// so that profiling can be extended a segment or a micro-batch size at a time
// (add_to_existing) and several ranks can each write their own segments.
//
// Thread safety: plain data; the functions hold no state.
#ifndef VARUNA_PLANNING_PROFILE_H_
#define VARUNA_PLANNING_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace varuna {

// One segment run at one micro-batch size. Times are the medians over the profiler's timed
// passes (profiles written before 2026-11-25's change to medians hold means over theirs).
struct SegmentMeasurement {
  double forward_ms = 0;
  double backward_ms = 0;
  double recompute_ms = 0;  // forward again with a graph, as the Varuna schedule's R task
  // How the times were taken: the number of timed passes the medians are over and, per time,
  // the spread (largest minus smallest sample). JSON "timed_passes", "forward_spread_ms",
  // "backward_spread_ms", "recompute_spread_ms": written only when timed_passes > 0, optional
  // on read (older profiles: all 0, meaning unknown). Informational: the simulator reads the
  // medians only.
  int timed_passes = 0;
  double forward_spread_ms = 0;
  double backward_spread_ms = 0;
  double recompute_spread_ms = 0;
  // The same three medians with the device's last-level cache emptied before each pass
  // (CacheEvictor), as training can find a segment's weights and graph after the other
  // segments of its stage have streamed theirs through the cache. Measured where the segment's pass
  // bytes could stay in the cache between the warm passes (CacheEvictor::WorthEvicting); 0
  // elsewhere and in profiles written before they were measured (2026-11-27), meaning the warm
  // times apply. JSON "forward_cold_ms", "backward_cold_ms", "recompute_cold_ms": written where
  // measured, optional on read. How much of the difference a stage is charged is the simulator's
  // (auto_config.h: ColdShare).
  double forward_cold_ms = 0;
  double backward_cold_ms = 0;
  double recompute_cold_ms = 0;
  // Peak device memory while running forward + backward of this segment alone at this size,
  // above what was allocated before (activations, workspaces), in bytes.
  int64_t activation_memory_bytes = 0;
  // Of that, what its forward with a graph (R) leaves allocated until its backward: the saved
  // activations and the output, in bytes; activation_memory_bytes minus this is the backward's
  // working memory, which a stage needs for one segment at a time, not for each. JSON
  // "graph_memory_bytes", optional on read (profiles written before it was measured: 0, meaning
  // unknown; the planner then counts the whole peak as kept).
  int64_t graph_memory_bytes = 0;
  // Bytes of the activation leaving the segment (what crosses the cut after it; 0 for the last).
  int64_t output_bytes = 0;
  // Bytes of the segment's input kept for a later recompute (the stash); the input activation
  // for segments after the first, the input ids for the first.
  int64_t stash_bytes = 0;
};

// Parameters, gradients and optimizer state of one segment (independent of the micro-batch).
struct SegmentStatic {
  int64_t parameter_count = 0;
  int64_t state_bytes = 0;  // weights + gradients + fp32 masters + Adam moments, in bytes
  // Median time of one Adam step (varuna::Adam::Step, fp32 masters) over the segment's parameters
  // in the profiled dtype; JSON "optimizer_ms", optional on read (older profiles: 0).
  double optimizer_ms = 0;
  // Median time of the engine's gradient pass over the segment's parameters after a step's last
  // backward: the model's gradients unscaled into the fp32 master gradients, then their squared
  // norm (Varuna::step); JSON "gradient_ms", optional on read (older profiles: 0).
  double gradient_ms = 0;
  // Median time of flattening the segment's gradients into one all-reduce bucket and copying the
  // sums back, which a step pays with D > 1 replicas; JSON "bucket_ms", optional (0).
  double bucket_ms = 0;
  // Peak memory of the step's own work over the segment's parameters (the gradient pass, then
  // the Adam step) above what was allocated before it, in bytes: the temporaries of those ops
  // (none for the fused GPU kernels, the largest parameter's few on the CPU). JSON
  // "step_memory_bytes", optional on read (older profiles: 0), written where not 0.
  int64_t step_memory_bytes = 0;
};

// What a segment costs inside a stage, right after the segment before it, beyond what it costs
// run alone, at one micro-batch size: the whole model run as one stage against the sum of its
// segments run one at a time, divided by the joins between them (num_segments - 1), per F, R
// and B: a stage of n consecutive segments would cost the sum of its segments plus n - 1 joins.
// Negative where segments run together cost less than apart, positive where more. Measured where
// the whole model fits (compute_profiler.h: ProfileWholeModel). Informational: the simulator
// does not charge it (on the CPU it made predictions worse; docs/profiling.md, "Segment
// joins").
struct SegmentJoin {
  double forward_ms = 0;
  double recompute_ms = 0;
  double backward_ms = 0;
};

// Time against message size, for interpolation: points sorted by bytes, strictly increasing.
struct CostCurve {
  std::vector<std::pair<int64_t, double>> points;  // (bytes, milliseconds)

  // Milliseconds for `bytes`: linear between neighbouring points, linear extrapolation through
  // the last two (or, below the first point, the first two) points beyond the ends, never below
  // 0; 0 for bytes <= 0. An empty curve gives 0; a one-point curve gives its time for any size.
  double Milliseconds(int64_t bytes) const;
};

struct Profile {
  // What was profiled; a profile only applies to the same model, device and dtype.
  std::string model;   // the model config as JSON text (gpt2::ModelConfigJson)
  std::string device;  // e.g. "NVIDIA H200" or "cpu"
  std::string dtype;   // "float32", "float16", "bfloat16"
  int num_segments = 0;
  // The profiled device's last-level cache in bytes (CacheEvictor::cache_bytes: the CPU's L3, a
  // GPU's L2), against which the simulator weighs the cold times; JSON "cache_bytes", optional
  // (0: unknown, the warm times are charged).
  int64_t cache_bytes = 0;
  std::vector<SegmentStatic> statics;  // [num_segments]
  // compute[k][b]: segment k at micro-batch size b (sizes need not be contiguous).
  std::vector<std::map<int, SegmentMeasurement>> compute;  // [num_segments]
  CostCurve send_within_node;  // one activation/gradient transfer between GPUs of one node
  CostCurve send_across_nodes;
  // allreduce[ring]: an all-reduce among `ring` ranks (ring >= 2) against message bytes.
  std::map<int, CostCurve> allreduce;
  // joins[b]: see SegmentJoin; empty where not measured (older profiles, models too large to
  // run whole on one device). JSON: profile.json
  // "segment_joins", a list of {micro_batch_size, forward_ms, recompute_ms, backward_ms},
  // optional on read.
  std::map<int, SegmentJoin> joins;

  // The micro-batch sizes every segment has been measured at, ascending.
  std::vector<int> CommonMicroBatchSizes() const;
};

// Validates (num_segments > 0, dtype one of the three, vectors sized to it, micro-batch sizes
// >= 1, times (optimizer_ms, spreads and cold times too) finite and >= 0, cache_bytes >= 0,
// timed_passes >= 0, byte counts >= 0, curves sorted strictly by bytes, ring sizes
// >= 2): OK, or InvalidArgument naming the field and the fix. Segments without measurements are
// valid (a partial profile).
absl::Status ValidateProfile(const Profile& profile);

// Writes profile.json and every segment_<k>.json that has measurements or statics into `dir`
// (created with its parents if missing), each atomically (temporary file + fsync + rename),
// profile.json last, then fsyncs `dir`. InvalidArgument (nothing written) if ValidateProfile
// fails; I/O errors name the file.
absl::Status WriteProfile(const Profile& profile, const std::string& dir);

// Reads a profile directory. NotFound naming the directory when profile.json is missing;
// InvalidArgument naming the file and field for malformed content (bad JSON, a missing or
// mistyped field, a negative time or size, an unsorted curve, a segment file for another
// segment, a micro-batch size twice), or ValidateProfile's error. Segments without a file
// come back with no measurements and zero statics (a partial profile: ValidateProfile accepts it,
// the simulator refuses the segments it needs).
absl::StatusOr<Profile> ReadProfile(const std::string& dir);

// Merges `update` into `base` (same model, device, dtype and segment count, else
// FailedPrecondition naming the difference; InvalidArgument if either fails ValidateProfile;
// `base` is then unchanged): measurements present in `update` replace those in `base` (by
// segment and micro-batch size), a segment's statics are replaced where `update` has
// measurements or non-zero statics for it; curves' points are merged by bytes (update wins), and
// joins by micro-batch size (update wins); cache_bytes is `update`'s where it has one.
absl::Status MergeProfile(const Profile& update, Profile& base);

}  // namespace varuna

#endif  // VARUNA_PLANNING_PROFILE_H_
