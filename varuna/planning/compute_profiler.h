// ProfileSegments: Varuna's compute profiler. It measures, one cut-point segment at a time, how
// long the segment's forward, recompute and backward take and how much memory its activations
// need at each micro-batch size, and fills a Profile (planning/profile.h) that the simulator and
// auto-configuration read. Model-agnostic: it sees the model only through a StageBuilder.
//
// For each profiled segment k it builds ONE single-segment stage (builder({k, k})), moves it to
// the device and dtype, records its statics, and for each micro-batch size b runs passes of one
// micro-batch as the Varuna schedule runs it on a stage that recomputes:
//   F (forward_ms)    forward without a graph (at::NoGradGuard), after saving the random state,
//                     as the executor runs the forward of a micro-batch whose backward does not
//                     come next;
//   R (recompute_ms)  the executor's recompute task (pipeline/stage_executor.cc): the live random
//                     state saved, F's restored, forward with a graph from a fresh leaf of the
//                     input activation, the live state put back; it does F's work plus the
//                     graph, so it costs about a forward;
//   B (backward_ms)   backward of R's output: the loss for the last segment, otherwise a random
//                     gradient of the output's shape; it also computes the input activation's
//                     gradient (what a stage sends back), as the pipeline does.
// First 1 settling pass and then warmup_passes passes untimed, then timed_passes timed ones;
// each of F, R and B is timed on its own by DeviceTimer::TimeAhead (planning/device_timer.h: on
// a GPU the larger of the host's queueing time and the device's time with the work already
// queued behind a spin kernel, CUDA events on the current stream; the steady clock on the CPU),
// so a segment is charged what it costs inside a stage whose host runs ahead, not the launch
// gaps of a device that starts idle (summed over 24 segments those put the H100 and H200
// predictions 6-8% over the measured step); the profile keeps the median
// over the timed passes (planning/timing_summary.h) with the spread (largest minus smallest)
// and the pass count (with ProfilerOptions::rounds > 1 the whole sweep is repeated and the
// median of the rounds' medians kept: MedianOfRounds). Why: one layer's kernels take well under a
// millisecond on a GPU, so host clocks around a device synchronisation and a mean of a few passes
// let the synchronisation's latency and one slow pass (an allocator call, a clock ramp) decide the
// number; the H100 profile of gpt2-355m had micro-batch 4 faster than 1 and a recompute twice its
// forward. The settling pass runs the exact shapes once, so the caching allocator holds the blocks
// the timed passes need. The cache is deliberately not emptied before timing: training runs with a
// warm cache, and an emptied one would charge each timed pass cudaMalloc/cudaFree calls (which
// synchronise the device) that a training step does not pay. It is emptied between segments
// (and after out-of-memory errors), so that every segment starts from the same state.
// Then one more R + B measures activation_memory_bytes: the peak bytes allocated during it above
// the level before it (CUDA: the caching allocator's statistics; CPU: a CpuAllocationCounter),
// and graph_memory_bytes: the level between R and B above the same (the graph's saved tensors
// and the output, which a stage keeps per micro-batch until its backward; the rest of the peak
// is working memory that one segment's backward needs at a time).
// Parameter gradients exist by then (the warm-up made them), so they are not part of it: they are
// in the statics.
// Then, where the bytes a pass touches (the parameters and their gradients, 2 x their bytes, and
// the graph) could stay in the device's last-level cache between the warm passes
// (CacheEvictor::WorthEvicting: from 8 MiB to twice the cache), timed_passes more passes with
// the cache emptied before each of F, R and B (the emptying untimed): forward_cold_ms,
// recompute_cold_ms, backward_cold_ms. A segment run alone finds its weights where its last
// pass left them; inside a stage, the stage's other segments stream theirs through the cache in
// between, and the simulator charges the share of the difference that their bytes evict
// (auto_config.h: ColdShare). The profile's cache_bytes is the cache's
// size.
//   output_bytes  bytes of the segment's output (0 for the last segment);
//   stash_bytes   bytes of its input: the input tensors for segment 0, the input activation
//                 for the others.
// The activation entering segment k > 0 at size b is a random tensor of the shape and dtype that
// segment k-1 outputs at b (learned by running segment k-1's forward once when k-1 is not
// profiled in the same call). Statics: parameter_count, and state_bytes = numel * (element
// size [weight] + element size [gradient] + 4 [fp32 master gradient] + (element size == 4 ? 0
// : 4) [fp32 master weight] + 8 [Adam moments]), and, after the sizes, the step's work over the
// stage's parameters (in options.dtype, fp32 masters, random gradients), each the median over
// timed_passes after one untimed pass, timed by DeviceTimer::TimeAhead, each timed pass after
// the device's last-level cache was emptied where the segment's state (from 8 MiB up) could
// stay in it (planning/cache_evictor.h: training's step finds that state cold): gradient_ms
// (the gradients unscaled into the masters, then their squared norm, as Varuna::step does; the
// norm's read-back, once per step and stage, is not charged per segment),
// bucket_ms (the masters flattened into one bucket and copied back, as its data-parallel sum
// does around the all-reduce) and optimizer_ms (varuna::Adam::Step). Out of CUDA memory there
// leaves them 0 (progress says so). The step changes the stage's weights, which are
// discarded afterwards.
//
// On CUDA, running out of memory at size b ends that segment's sizes (the larger ones are left
// unmeasured and progress says so).
//
// Thread safety: uses the device exclusively while it runs; on the CPU it replaces LibTorch's
// CPU allocator during each memory measurement (see planning/cpu_allocation_counter.h), so no other
// thread may run LibTorch CPU work meanwhile.
#ifndef VARUNA_PLANNING_COMPUTE_PROFILER_H_
#define VARUNA_PLANNING_COMPUTE_PROFILER_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "varuna/pipeline/stage_module.h"
#include "varuna/pipeline/tensor_map.h"
#include "varuna/planning/profile.h"

namespace varuna {

struct ProfilerOptions {
  // The micro-batch sizes to measure (each >= 1; order and duplicates do not matter).
  std::vector<int> micro_batch_sizes;
  // Passes per (segment, size) run before timing after the one settling pass (>= 0), and passes
  // timed (>= 1; the profile keeps their median).
  int warmup_passes = 2;
  int timed_passes = 7;
  // Rounds of the whole measurement (>= 1): every (segment, size) pair and every segment's step
  // work is measured once per round, the rounds one after the other, and the profile keeps the
  // median of the rounds' times (MedianOfRounds). On a machine whose speed drifts over seconds
  // (a CPU shared with other tenants, whose caches and memory bandwidth come and go), a slow
  // stretch then moves one round's numbers, not the profile's.
  int rounds = 1;
  // Where and in which dtype the stages run.
  c10::Device device = c10::kCPU;
  at::ScalarType dtype = at::kFloat;  // kFloat, kHalf or kBFloat16
  // The segments to profile, each in [0, num_segments); empty: all.
  std::vector<int> segments;
  // Whether to time each segment's step work (gradient_ms, bucket_ms, optimizer_ms; it needs
  // the segment's fp32 masters and Adam moments); false leaves them 0.
  bool measure_step_work = true;
  // Called with one line per measured (segment, size) and round ("round i of N: " first when
  // rounds > 1), with its times and an estimate of the time left, and with a line for each size
  // skipped after an out-of-memory error. May be empty.
  std::function<void(const std::string&)> progress;
};

// The model's input tensors for a micro-batch of `micro_batch` examples, on the CPU (the
// profiler moves them to the device).
using InputMaker = std::function<TensorMap(int micro_batch)>;

// Profiles the segments of a model with `num_segments` segments built by `builder`.
// `existing` (may be null): (segment, size) pairs it already has are not measured again
// (add_to_existing); it must have num_segments segments and the dtype of options.dtype.
// Returns a profile holding only what this call measured (statics of the segments it built,
// compute of the pairs it measured), with num_segments and dtype set, model and device copied
// from `existing` (empty model and options.device.str() without it; the caller names them),
// and no communication curves: merge it into `existing` with MergeProfile.
// InvalidArgument naming the option for empty or non-positive sizes, a segment index out of
// range, warmup_passes < 0, timed_passes < 1, rounds < 1, num_segments < 1, an unsupported dtype,
// or an `existing` profile of another segment count or dtype; Internal naming the segment and size
// when the model throws (an out-of-memory error on CUDA is not an error, see above).
absl::StatusOr<Profile> ProfileSegments(const StageBuilder& builder, int num_segments,
                                        const InputMaker& inputs, const ProfilerOptions& options,
                                        const Profile* existing);

// The profile of several rounds of the same measurements (ProfilerOptions::rounds), each as
// ProfileSegments returns it: per segment and micro-batch size measured in every round,
// forward_ms, recompute_ms and backward_ms are the medians of the rounds' (TimingSummary: for
// an even count the mean of the middle two), each spread the largest of the rounds' spreads and
// of the range of the rounds' times, the cold times the medians of the rounds' that measured
// them (none: 0), timed_passes the sum, activation_memory_bytes and graph_memory_bytes each the
// largest, output_bytes and stash_bytes the first round's; a size
// missing from any round (it ran out of memory there) is left out. Per segment, gradient_ms,
// bucket_ms and optimizer_ms are the medians of the rounds' that measured them (all three 0: out of
// memory there; none: 0), and parameter_count and state_bytes the first round's. Everything else
// (model, device, dtype, cache_bytes, curves, joins) is the first round's. InvalidArgument for no
// rounds, or rounds of different segment counts. Also combines separate profiles of one model (as
// simulator_accuracy does).
absl::StatusOr<Profile> MedianOfRounds(const std::vector<Profile>& rounds);

// Profiles all `num_segments` segments of the model as ONE stage (builder({0, num_segments - 1})),
// measured as ProfileSegments measures a segment (options.segments is ignored; progress lines
// say "the whole model"; the step work is not measured: its times are 0): a one-segment
// profile, for SegmentJoins. Sizes that run out of CUDA memory are left out, as there. Errors
// as ProfileSegments.
absl::StatusOr<Profile> ProfileWholeModel(const StageBuilder& builder, int num_segments,
                                          const InputMaker& inputs, const ProfilerOptions& options);

// The segment joins (profile.h: SegmentJoin) at every micro-batch size that `whole`
// (ProfileWholeModel's profile) and every segment of `segments` measured: per F, R and B,
// (whole - sum over the segments) / (num_segments - 1). Empty with fewer than two segments or
// a `whole` that is not a one-segment profile.
std::map<int, SegmentJoin> SegmentJoins(const Profile& whole, const Profile& segments);

// "float32", "float16" or "bfloat16" for those dtypes (Profile::dtype), else "".
std::string ProfileDtypeName(at::ScalarType dtype);

}  // namespace varuna

#endif  // VARUNA_PLANNING_COMPUTE_PROFILER_H_
