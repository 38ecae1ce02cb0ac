#include "varuna/planning/compute_profiler.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "varuna/comm/exception_status.h"
#include "varuna/kernels/multi_tensor.h"
#include "varuna/optim/adam.h"
#include "varuna/pipeline/rng_state.h"
#include "varuna/planning/cache_evictor.h"
#include "varuna/planning/cpu_allocation_counter.h"
#include "varuna/planning/device_timer.h"
#include "varuna/planning/timing_summary.h"

#ifdef VARUNA_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace varuna {
namespace {

using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Passes run before the timed ones: one that settles the allocator, then the warm-up.
constexpr int kSettlingPasses = 1;

int UntimedPasses(const ProfilerOptions& options) {
  return kSettlingPasses + options.warmup_passes;
}

void ReleaseCachedMemory(const c10::Device& device) {
#ifdef VARUNA_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)device;
#endif
}

int64_t Bytes(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

// What a segment outputs at one micro-batch size.
struct OutputSpec {
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
};

// One ProfileSegments call: its options, the output shapes learned so far, its progress.
class SegmentProfiler {
 public:
  SegmentProfiler(const StageBuilder& builder, int num_segments, const InputMaker& inputs,
                  const ProfilerOptions& options)
      : builder_(builder), num_segments_(num_segments), inputs_(inputs), options_(options) {}

  // Measures `sizes` (ascending) of segment k into `profile`.
  absl::Status ProfileSegment(int k, const std::vector<int>& sizes, Profile& profile);

  void set_total(int pairs) { total_pairs_ = pairs; }
  void set_round(int round) { round_ = round; }
  // The size of the cache the cold passes empty (Profile::cache_bytes).
  int64_t cache_bytes() const { return evictor_.cache_bytes(); }

 private:
  std::shared_ptr<StageModule> Build(int k) const {
    std::shared_ptr<StageModule> stage = builder_(SegmentRange{k, k});
    stage->to(options_.device, options_.dtype);
    return stage;
  }

  TensorMap DeviceInputs(int b) const {
    TensorMap map = inputs_(b);
    for (auto& [name, tensor] : map) tensor = tensor.to(options_.device);
    return map;
  }

  // Makes sure outputs_ knows what segment k outputs at each of `sizes` that it can run (a size
  // whose input is unknown, or that runs out of memory, stays unknown).
  void LearnOutputs(int k, const std::vector<int>& sizes);

  SegmentMeasurement Measure(StageModule& stage, int k, int b);

  // Sets statics' gradient_ms, bucket_ms and optimizer_ms: the mean milliseconds of the step's
  // gradient pass, bucket copies and Adam step over `stage`'s parameters (each after one
  // untimed pass).
  void MeasureStepWork(StageModule& stage, SegmentStatic& statics);

  void Progress(const std::string& line) const {
    if (!options_.progress) return;
    options_.progress(options_.rounds > 1
                          ? absl::StrFormat("round %d of %d: %s", round_ + 1, options_.rounds, line)
                          : line);
  }

  const StageBuilder& builder_;
  const int num_segments_;
  const InputMaker& inputs_;
  const ProfilerOptions& options_;
  // Empties the cache before the step work's timed passes (its buffer made once, when first
  // needed, and kept for every segment).
  CacheEvictor evictor_{options_.device};
  std::map<std::pair<int, int>, OutputSpec> outputs_;  // (segment, size) -> its output
  Clock::time_point start_ = Clock::now();
  int total_pairs_ = 0;
  int done_pairs_ = 0;
  int round_ = 0;  // of options_.rounds, from 0: names the round in progress lines
};

void SegmentProfiler::LearnOutputs(int k, const std::vector<int>& sizes) {
  std::vector<int> missing;
  for (int b : sizes) {
    if (outputs_.count({k, b}) == 0) missing.push_back(b);
  }
  if (missing.empty()) return;
  if (k > 0) LearnOutputs(k - 1, missing);
  std::shared_ptr<StageModule> stage = Build(k);
  at::NoGradGuard no_grad;
  for (int b : missing) {
    at::Tensor activation;
    if (k > 0) {
      auto input = outputs_.find({k - 1, b});
      if (input == outputs_.end()) break;
      activation =
          at::randn(input->second.shape,
                    at::TensorOptions().dtype(input->second.dtype).device(options_.device));
    }
    try {
      const at::Tensor out = stage->Forward(activation, DeviceInputs(b));
      outputs_[{k, b}] = OutputSpec{out.sizes().vec(), out.scalar_type()};
    } catch (const c10::OutOfMemoryError&) {
      break;
    }
  }
  stage.reset();
  ReleaseCachedMemory(options_.device);
}

// The bytes allocated now above the level before a measurement (PeakAbove's `level`).
using MemoryLevel = std::function<int64_t()>;

// The peak bytes allocated on `device` while `work` runs, above the level before it (CUDA: the
// caching allocator's statistics, the device synchronised around `work`; CPU: a
// CpuAllocationCounter). `work` gets `level`, to read the level above the same base while it
// runs.
int64_t PeakAbove(const c10::Device& device,
                  const std::function<void(const MemoryLevel& level)>& work) {
#ifdef VARUNA_WITH_CUDA
  if (device.is_cuda()) {
    namespace cca = c10::cuda::CUDACachingAllocator;
    constexpr auto kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    auto allocated = [&] {
      return cca::getDeviceStats(device.index()).allocated_bytes[kAggregate];
    };
    DeviceTimer(device).Synchronize();
    const int64_t before = allocated().current;
    cca::resetPeakStats(device.index());
    work([&] { return std::max<int64_t>(0, allocated().current - before); });
    DeviceTimer(device).Synchronize();
    return std::max<int64_t>(0, allocated().peak - before);
  }
#endif
  CpuAllocationCounter counter;
  work([&] { return counter.current_bytes(); });
  return counter.peak_bytes();
}

SegmentMeasurement SegmentProfiler::Measure(StageModule& stage, int k, int b) {
  const c10::Device device = options_.device;
  DeviceTimer timer(device);
  const bool last = k == num_segments_ - 1;
  const TensorMap inputs = DeviceInputs(b);
  at::Tensor input_activation;
  if (k > 0) {
    const OutputSpec& spec = outputs_.at({k - 1, b});
    input_activation = at::randn(spec.shape, at::TensorOptions().dtype(spec.dtype).device(device));
  }
  // A fresh leaf per pass, so that its gradient (what a stage sends back) is computed anew, as
  // the executor detaches the stashed input before its recompute.
  auto leaf = [&] {
    return input_activation.defined() ? input_activation.detach().requires_grad_(true)
                                      : at::Tensor();
  };
  at::Tensor output_grad;  // Random, made once from the first output's shape.
  SegmentMeasurement m;

  // R and B of one micro-batch, each timed by `timer` into the given sample (when not null).
  // R is the executor's recompute task (pipeline/stage_executor.cc): capture the live random
  // state, restore the one saved before F, forward with a graph, put the live state back.
  // `between`, when given, runs after R and before B (the memory measurement reads the level).
  auto recompute_and_backward = [&](const RngState& before_forward, double* recompute_ms,
                                    double* backward_ms,
                                    const std::function<void()>& between = nullptr) {
    const at::Tensor activation = leaf();
    at::Tensor out;
    const double r = timer.TimeAhead([&] {
      const RngState live = RngState::Capture(device);
      before_forward.Restore();
      out = stage.Forward(activation, inputs);
      live.Restore();
    });
    if (recompute_ms) *recompute_ms = r;
    if (!last && !output_grad.defined()) output_grad = at::randn_like(out);
    if (!last) m.output_bytes = Bytes(out);
    if (!outputs_.count({k, b}))
      outputs_[{k, b}] = OutputSpec{out.sizes().vec(), out.scalar_type()};
    if (between) between();
    const double bw = timer.TimeAhead([&] {
      if (last) {
        out.backward();
      } else {
        out.backward(output_grad);
      }
    });
    if (backward_ms) *backward_ms = bw;
  };
  // One micro-batch as the Varuna schedule runs it on a stage that recomputes: F without a
  // graph (the executor saves the random state first), then R and B; timed ones append to
  // `samples`. A cold pass empties the last-level cache before each of the three (untimed).
  struct Samples {
    std::vector<double> forward, recompute, backward;
  };
  Samples warm, cold;
  auto pass = [&](Samples* samples, bool empty_cache) {
    const std::function<void()> evict = [&] {
      if (empty_cache) evictor_.Evict();
    };
    RngState before_forward;
    evict();
    const double f = timer.TimeAhead([&] {
      before_forward = RngState::Capture(device);
      at::NoGradGuard no_grad;
      stage.Forward(input_activation, inputs);
    });
    evict();
    double r = 0, bw = 0;
    recompute_and_backward(before_forward, &r, &bw, evict);
    if (samples) {
      samples->forward.push_back(f);
      samples->recompute.push_back(r);
      samples->backward.push_back(bw);
    }
  };

  // See the header: one settling pass grows the caching allocator to this shape's needs (the
  // cache is kept: training runs with a warm one), then the warm-up, then the timed passes.
  const int untimed = UntimedPasses(options_);
  for (int i = 0; i < untimed; ++i) pass(nullptr, false);
  timer.Synchronize();
  for (int i = 0; i < options_.timed_passes; ++i) pass(&warm, false);
  const TimingSummary f = Summarize(warm.forward);
  const TimingSummary r = Summarize(warm.recompute);
  const TimingSummary bw = Summarize(warm.backward);
  m.forward_ms = f.median_ms;
  m.recompute_ms = r.median_ms;
  m.backward_ms = bw.median_ms;
  m.timed_passes = options_.timed_passes;
  m.forward_spread_ms = f.spread_ms();
  m.recompute_spread_ms = r.spread_ms();
  m.backward_spread_ms = bw.spread_ms();

  // Activation memory: one more R + B, counted from the level before it: the peak during it,
  // and the level between R and B (what the graph keeps until its backward).
  const RngState now = RngState::Capture(device);
  m.activation_memory_bytes = PeakAbove(device, [&](const MemoryLevel& level) {
    recompute_and_backward(now, nullptr, nullptr, [&] { m.graph_memory_bytes = level(); });
  });

  // The same passes cold (SegmentMeasurement::forward_cold_ms), where what a pass reads and
  // writes (the weights, their gradients, the graph) could stay in the cache between the warm
  // passes.
  int64_t pass_bytes = m.graph_memory_bytes;
  for (const at::Tensor& p : stage.parameters()) pass_bytes += 2 * Bytes(p);
  if (evictor_.WorthEvicting(pass_bytes)) {
    for (int i = 0; i < options_.timed_passes; ++i) pass(&cold, true);
    m.forward_cold_ms = Summarize(cold.forward).median_ms;
    m.recompute_cold_ms = Summarize(cold.recompute).median_ms;
    m.backward_cold_ms = Summarize(cold.backward).median_ms;
  }

  if (k == 0) {
    for (const auto& [name, tensor] : inputs) m.stash_bytes += Bytes(tensor);
  } else {
    m.stash_bytes = Bytes(input_activation);
  }
  return m;
}

void SegmentProfiler::MeasureStepWork(StageModule& stage, SegmentStatic& statics) {
  std::vector<NamedParameter> parameters;
  for (const auto& item : stage.named_parameters()) {
    parameters.push_back(NamedParameter{item.key(), item.value(), true});
  }
  if (parameters.empty()) return;
  // The median over timed_passes, after one untimed pass that allocates what the work needs.
  // Each timed pass finds the state cold, as training's step does after its micro-batches have
  // streamed the whole stage through the caches (cache_evictor.h): where the segment's step
  // state could stay in the last-level cache between passes, the cache is emptied first.
  DeviceTimer timer(options_.device);
  const bool evict = evictor_.WorthEvicting(statics.state_bytes);
  auto median_ms = [&](const std::function<void()>& pass) {
    pass();
    std::vector<double> samples;
    for (int i = 0; i < options_.timed_passes; ++i) {
      if (evict) evictor_.Evict();
      samples.push_back(timer.TimeAhead(pass));
    }
    return Summarize(std::move(samples)).median_ms;
  };
  std::vector<at::Tensor> model_grads;
  for (const NamedParameter& p : parameters) {
    model_grads.push_back(at::randn_like(p.tensor).mul_(1e-3));
  }
  Adam adam(std::move(parameters), AdamOptions());
  std::vector<at::Tensor>& master_grads = adam.MasterGrads();
  // As Varuna::step with ties or replicas: unscale into the masters, then the squared norm. The
  // step reads the norm back once for the whole stage, not once per segment: not timed here.
  auto gradient_pass = [&] {
    kernels::MultiTensorUnscale(model_grads, master_grads, 1.0 / 1024);
    (void)kernels::MultiTensorL2NormSquared(master_grads);
  };
  auto adam_step = [&] { adam.Step(); };
  statics.gradient_ms = median_ms(gradient_pass);
  // As its data-parallel path around the all-reduce: flatten into a bucket, copy back.
  statics.bucket_ms = median_ms([&] {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& g : master_grads) flat.push_back(g.reshape({-1}));
    const at::Tensor bucket = at::cat(flat);
    int64_t offset = 0;
    for (at::Tensor& g : master_grads) {
      g.view({-1}).copy_(bucket.narrow(0, offset, g.numel()));
      offset += g.numel();
    }
  });
  for (at::Tensor& grad : master_grads) grad.normal_(0, 1e-3);
  statics.optimizer_ms = median_ms(adam_step);
  // The step's working memory: the gradient pass and the Adam step once more, each's peak above
  // the level before it (the bucket copies are left out: with replicas the engine's master
  // gradients already are views into the buckets).
  statics.step_memory_bytes =
      std::max(PeakAbove(options_.device, [&](const MemoryLevel&) { gradient_pass(); }),
               PeakAbove(options_.device, [&](const MemoryLevel&) { adam_step(); }));
}

absl::Status SegmentProfiler::ProfileSegment(int k, const std::vector<int>& sizes,
                                             Profile& profile) {
  if (k > 0) LearnOutputs(k - 1, sizes);
  std::shared_ptr<StageModule> stage = Build(k);
  SegmentStatic& statics = profile.statics[static_cast<size_t>(k)];
  statics.parameter_count = 0;
  for (const at::Tensor& p : stage->parameters()) statics.parameter_count += p.numel();
  const int64_t element = static_cast<int64_t>(c10::elementSize(options_.dtype));
  statics.state_bytes =
      statics.parameter_count * (element + element + 4 + (element == 4 ? 0 : 4) + 8);

  for (size_t i = 0; i < sizes.size(); ++i) {
    const int b = sizes[i];
    auto skip_rest = [&](const std::string& why) {
      total_pairs_ -= static_cast<int>(sizes.size() - i);
      Progress(absl::StrFormat("segment %d of %d: %s; micro-batch sizes %s not measured", k,
                               num_segments_, why,
                               absl::StrJoin(sizes.begin() + i, sizes.end(), ",")));
    };
    if (k > 0 && outputs_.count({k - 1, b}) == 0) {
      skip_rest(absl::StrCat("segment ", k - 1, " ran out of memory at micro-batch size ", b));
      break;
    }
    SegmentMeasurement m;
    try {
      m = Measure(*stage, k, b);
    } catch (const c10::OutOfMemoryError&) {
      stage->zero_grad();
      ReleaseCachedMemory(options_.device);
      skip_rest(absl::StrCat("out of memory at micro-batch size ", b));
      break;
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("profiling segment ", k, " at micro-batch size ", b,
                                              " failed: ", comm::OneLineMessage(e)));
    }
    profile.compute[static_cast<size_t>(k)][b] = m;
    done_pairs_ = std::min(done_pairs_ + 1, total_pairs_);  // a size skipped in an earlier round
    const double elapsed_s = MillisecondsSince(start_) / 1e3;
    const double left_s = elapsed_s / done_pairs_ * std::max(0, total_pairs_ - done_pairs_);
    Progress(absl::StrFormat(
        "segment %d of %d, micro-batch %d: forward %.3f ms, recompute %.3f ms, backward %.3f ms "
        "(medians of %d; spread %.3f, %.3f, %.3f ms)%s, activations %.2f MiB (%d of %d "
        "measured, about %.0f s left)",
        k, num_segments_, b, m.forward_ms, m.recompute_ms, m.backward_ms, m.timed_passes,
        m.forward_spread_ms, m.recompute_spread_ms, m.backward_spread_ms,
        m.forward_cold_ms > 0 ? absl::StrFormat("; cold %.3f, %.3f, %.3f ms", m.forward_cold_ms,
                                                m.recompute_cold_ms, m.backward_cold_ms)
                              : "",
        static_cast<double>(m.activation_memory_bytes) / (1 << 20), done_pairs_, total_pairs_,
        left_s));
  }
  // The step's work last: its fp32 masters and moments would otherwise count as activations.
  try {
    if (options_.measure_step_work) MeasureStepWork(*stage, statics);
  } catch (const c10::OutOfMemoryError&) {
    ReleaseCachedMemory(options_.device);
    Progress(
        absl::StrFormat("segment %d of %d: out of memory in the gradient pass or the optimizer "
                        "step; gradient_ms, bucket_ms or optimizer_ms not measured (0)",
                        k, num_segments_));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("profiling the gradient pass and optimizer step of segment ", k,
                     " failed: ", comm::OneLineMessage(e)));
  }
  stage.reset();
  ReleaseCachedMemory(options_.device);
  return absl::OkStatus();
}

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

}  // namespace

std::string ProfileDtypeName(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "float32";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    default:
      return "";
  }
}

absl::StatusOr<Profile> ProfileSegments(const StageBuilder& builder, int num_segments,
                                        const InputMaker& inputs, const ProfilerOptions& options,
                                        const Profile* existing) {
  if (num_segments < 1) {
    return Invalid(absl::StrCat("profiling: num_segments=", num_segments,
                                " must be at least 1 (the model's cut-point segments)"));
  }
  if (options.micro_batch_sizes.empty()) {
    return Invalid(
        "profiling: no micro-batch sizes given (ProfilerOptions::micro_batch_sizes is empty): "
        "give at least one size >= 1");
  }
  for (int b : options.micro_batch_sizes) {
    if (b < 1) {
      return Invalid(absl::StrCat("profiling: micro-batch size ", b, " must be at least 1"));
    }
  }
  for (int k : options.segments) {
    if (k < 0 || k >= num_segments) {
      return Invalid(absl::StrCat("profiling: segment ", k, " does not exist: the model has ",
                                  num_segments, " segments (0 to ", num_segments - 1, ")"));
    }
  }
  if (options.warmup_passes < 0 || options.timed_passes < 1) {
    return Invalid(absl::StrCat("profiling: warmup_passes=", options.warmup_passes,
                                " and timed_passes=", options.timed_passes,
                                " must be >= 0 and >= 1"));
  }
  if (options.rounds < 1) {
    return Invalid(absl::StrCat("profiling: rounds=", options.rounds,
                                " must be at least 1 (1 measures every pair once)"));
  }
  const std::string dtype = ProfileDtypeName(options.dtype);
  if (dtype.empty()) {
    return Invalid(absl::StrCat("profiling: dtype ", c10::toString(options.dtype),
                                " is not supported: use float32, float16 or bfloat16"));
  }
  if (!builder || !inputs)
    return Invalid("profiling: the stage builder and input maker must be set");
  if (existing != nullptr && (existing->num_segments != num_segments || existing->dtype != dtype ||
                              existing->compute.size() != static_cast<size_t>(num_segments))) {
    return Invalid(absl::StrCat("profiling: the existing profile has ", existing->num_segments,
                                " segments in ", existing->dtype, ", but this model has ",
                                num_segments, " segments in ", dtype,
                                ": profile into another directory"));
  }

  Profile profile;
  profile.model = existing ? existing->model : "";
  profile.device = existing ? existing->device : options.device.str();
  profile.dtype = dtype;
  profile.num_segments = num_segments;
  profile.statics.resize(static_cast<size_t>(num_segments));
  profile.compute.resize(static_cast<size_t>(num_segments));

  std::set<int> sizes(options.micro_batch_sizes.begin(), options.micro_batch_sizes.end());
  std::set<int> segments(options.segments.begin(), options.segments.end());
  if (segments.empty()) {
    for (int k = 0; k < num_segments; ++k) segments.insert(k);
  }
  // The pairs to measure, by segment.
  std::map<int, std::vector<int>> todo;
  int total = 0;
  for (int k : segments) {
    for (int b : sizes) {
      if (existing && existing->compute[static_cast<size_t>(k)].count(b)) continue;
      todo[k].push_back(b);
      ++total;
    }
  }
  SegmentProfiler profiler(builder, num_segments, inputs, options);
  profiler.set_total(total * options.rounds);
  profile.cache_bytes = profiler.cache_bytes();
  std::vector<Profile> rounds;
  for (int round = 0; round < options.rounds; ++round) {
    profiler.set_round(round);
    Profile measured = profile;
    for (const auto& [k, todo_sizes] : todo) {
      if (absl::Status status = profiler.ProfileSegment(k, todo_sizes, measured); !status.ok()) {
        return status;
      }
    }
    rounds.push_back(std::move(measured));
  }
  if (rounds.size() == 1) return std::move(rounds.front());
  return MedianOfRounds(rounds);
}

absl::StatusOr<Profile> MedianOfRounds(const std::vector<Profile>& rounds) {
  if (rounds.empty()) return Invalid("MedianOfRounds: no rounds given");
  for (const Profile& round : rounds) {
    if (round.num_segments != rounds.front().num_segments ||
        round.compute.size() != rounds.front().compute.size() ||
        round.statics.size() != rounds.front().statics.size()) {
      return Invalid(absl::StrCat("MedianOfRounds: a round has ", round.num_segments,
                                  " segments where the first has ", rounds.front().num_segments,
                                  ": combine profiles of one model only"));
    }
  }
  // Into `m`, one time's median over the measurements `all` and its spread: the largest of their
  // spreads and of the range of their times.
  using Field = double SegmentMeasurement::*;
  auto combine = [](const std::vector<const SegmentMeasurement*>& all, Field time, Field spread,
                    SegmentMeasurement& m) {
    std::vector<double> times;
    double largest_spread = 0;
    for (const SegmentMeasurement* one : all) {
      times.push_back(one->*time);
      largest_spread = std::max(largest_spread, one->*spread);
    }
    const TimingSummary summary = Summarize(std::move(times));
    m.*time = summary.median_ms;
    m.*spread = std::max(summary.spread_ms(), largest_spread);
  };
  Profile result = rounds.front();
  for (size_t k = 0; k < result.compute.size(); ++k) {
    std::map<int, SegmentMeasurement> combined;
    for (const auto& [b, first] : rounds.front().compute[k]) {
      std::vector<const SegmentMeasurement*> all;
      for (const Profile& round : rounds) {
        const auto found = round.compute[k].find(b);
        if (found != round.compute[k].end()) all.push_back(&found->second);
      }
      if (all.size() != rounds.size()) continue;  // out of memory in some round
      SegmentMeasurement m = first;
      m.timed_passes = 0;
      for (const SegmentMeasurement* one : all) {
        m.timed_passes += one->timed_passes;
        m.activation_memory_bytes =
            std::max(m.activation_memory_bytes, one->activation_memory_bytes);
        m.graph_memory_bytes = std::max(m.graph_memory_bytes, one->graph_memory_bytes);
      }
      combine(all, &SegmentMeasurement::forward_ms, &SegmentMeasurement::forward_spread_ms, m);
      combine(all, &SegmentMeasurement::recompute_ms, &SegmentMeasurement::recompute_spread_ms, m);
      combine(all, &SegmentMeasurement::backward_ms, &SegmentMeasurement::backward_spread_ms, m);
      for (Field cold :
           {&SegmentMeasurement::forward_cold_ms, &SegmentMeasurement::recompute_cold_ms,
            &SegmentMeasurement::backward_cold_ms}) {
        std::vector<double> times;
        for (const SegmentMeasurement* one : all) {
          if (one->*cold > 0) times.push_back(one->*cold);
        }
        m.*cold = Summarize(std::move(times)).median_ms;
      }
      combined[b] = m;
    }
    result.compute[k] = std::move(combined);
    // Over the rounds that measured the step work (one that ran out of memory left it 0).
    std::vector<double> gradient, bucket, optimizer;
    for (const Profile& round : rounds) {
      const SegmentStatic& s = round.statics[k];
      if (s.gradient_ms == 0 && s.bucket_ms == 0 && s.optimizer_ms == 0) continue;
      gradient.push_back(s.gradient_ms);
      bucket.push_back(s.bucket_ms);
      optimizer.push_back(s.optimizer_ms);
    }
    result.statics[k].gradient_ms = Summarize(gradient).median_ms;
    result.statics[k].bucket_ms = Summarize(bucket).median_ms;
    result.statics[k].optimizer_ms = Summarize(optimizer).median_ms;
    for (const Profile& round : rounds) {
      result.statics[k].step_memory_bytes =
          std::max(result.statics[k].step_memory_bytes, round.statics[k].step_memory_bytes);
    }
  }
  return result;
}

absl::StatusOr<Profile> ProfileWholeModel(const StageBuilder& builder, int num_segments,
                                          const InputMaker& inputs,
                                          const ProfilerOptions& options) {
  if (num_segments < 1) {
    return Invalid(absl::StrCat("profiling the whole model: num_segments=", num_segments,
                                " must be at least 1 (the model's cut-point segments)"));
  }
  if (!builder) return Invalid("profiling the whole model: the stage builder must be set");
  const StageBuilder whole = [builder, num_segments](SegmentRange) {
    return builder(SegmentRange{0, num_segments - 1});
  };
  ProfilerOptions one_stage = options;
  one_stage.segments.clear();
  one_stage.measure_step_work = false;  // the joins need F, R and B only
  if (options.progress) {
    one_stage.progress = [progress = options.progress](const std::string& line) {
      progress(absl::StrCat("(the whole model as one stage) ", line));
    };
  }
  return ProfileSegments(whole, 1, inputs, one_stage, nullptr);
}

std::map<int, SegmentJoin> SegmentJoins(const Profile& whole, const Profile& segments) {
  std::map<int, SegmentJoin> joins;
  const int n = segments.num_segments;
  if (n < 2 || whole.compute.size() != 1 || segments.compute.size() != static_cast<size_t>(n)) {
    return joins;
  }
  for (const auto& [b, stage] : whole.compute[0]) {
    SegmentJoin sum;
    bool everywhere = true;
    for (const auto& segment : segments.compute) {
      const auto measured = segment.find(b);
      if (measured == segment.end()) {
        everywhere = false;
        break;
      }
      sum.forward_ms += measured->second.forward_ms;
      sum.recompute_ms += measured->second.recompute_ms;
      sum.backward_ms += measured->second.backward_ms;
    }
    if (!everywhere) continue;
    const double gaps = n - 1;
    joins[b] = SegmentJoin{(stage.forward_ms - sum.forward_ms) / gaps,
                           (stage.recompute_ms - sum.recompute_ms) / gaps,
                           (stage.backward_ms - sum.backward_ms) / gaps};
  }
  return joins;
}

}  // namespace varuna
