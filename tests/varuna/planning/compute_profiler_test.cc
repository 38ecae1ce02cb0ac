// Tests of varuna/planning/compute_profiler.h on a tiny GPT-2 on the CPU.
#include "varuna/planning/compute_profiler.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model.h"
#include "models/gpt2/summary.h"
#include "varuna/planning/cache_evictor.h"

namespace varuna {
namespace {

using ::testing::HasSubstr;
using ::testing::Lt;

constexpr int kSeq = 16;
constexpr int kHidden = 32;
constexpr int kVocab = 64;

gpt2::Gpt2Config TinyConfig() {
  gpt2::Gpt2Config config;
  config.num_layers = 3;
  config.hidden_size = kHidden;
  config.num_attention_heads = 2;
  config.seq_length = kSeq;
  config.max_position_embeddings = kSeq;
  config.vocab_size = kVocab;
  return config;
}

TensorMap Inputs(int b) {
  TensorMap map;
  map["input_ids"] = at::randint(kVocab, {b, kSeq}, at::kLong);
  map["position_ids"] = at::arange(kSeq, at::kLong).unsqueeze(0).repeat({b, 1});
  map["labels"] = at::randint(kVocab, {b, kSeq}, at::kLong);
  map["loss_mask"] = at::ones({b, kSeq}, at::kFloat);
  return map;
}

class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    at::manual_seed(3);
    ASSERT_TRUE(config_.Validate().ok());
    options_.warmup_passes = 1;
    options_.timed_passes = 2;
    options_.progress = [this](const std::string& line) { lines_.push_back(line); };
  }

  absl::StatusOr<Profile> Run(const std::vector<int>& sizes, const Profile* existing = nullptr) {
    options_.micro_batch_sizes = sizes;
    return ProfileSegments(gpt2::Gpt2StageBuilder(config_, 11), config_.num_layers, Inputs,
                           options_, existing);
  }

  gpt2::Gpt2Config config_ = TinyConfig();
  ProfilerOptions options_;
  std::vector<std::string> lines_;
};

TEST_F(ProfilerTest, MeasuresEverySegmentAtEverySize) {
  absl::StatusOr<Profile> profile = Run({4, 1});
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->num_segments, 3);
  EXPECT_EQ(profile->dtype, "float32");
  EXPECT_EQ(profile->device, "cpu");
  EXPECT_TRUE(ValidateProfile(*profile).ok()) << ValidateProfile(*profile);
  const gpt2::ModelSummary summary = gpt2::Summarize(config_);
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE("segment " + std::to_string(k));
    const auto& compute = profile->compute[k];
    ASSERT_EQ(compute.size(), 2u);
    ASSERT_EQ(compute.count(1), 1u);
    ASSERT_EQ(compute.count(4), 1u);
    for (const auto& [b, m] : compute) {
      EXPECT_GT(m.forward_ms, 0);
      EXPECT_GT(m.recompute_ms, 0);
      EXPECT_GT(m.backward_ms, 0);
      EXPECT_GT(m.activation_memory_bytes, 0);
      // The graph keeps the output (the loss, for the last) and saved tensors; the backward
      // needs working memory beyond it.
      EXPECT_GE(m.graph_memory_bytes, std::max<int64_t>(m.output_bytes, 1));
      EXPECT_LT(m.graph_memory_bytes, m.activation_memory_bytes);
      EXPECT_EQ(m.timed_passes, 2);  // the medians are over options_.timed_passes
      EXPECT_GE(m.forward_spread_ms, 0);
      EXPECT_GE(m.recompute_spread_ms, 0);
      EXPECT_GE(m.backward_spread_ms, 0);
      EXPECT_EQ(m.output_bytes, k == 2 ? 0 : int64_t{b} * kSeq * kHidden * 4);
      // Segment 0 keeps its inputs (three int64 tensors and the float loss mask).
      EXPECT_EQ(m.stash_bytes,
                k == 0 ? int64_t{b} * kSeq * (8 + 8 + 8 + 4) : int64_t{b} * kSeq * kHidden * 4);
    }
    EXPECT_GT(compute.at(4).activation_memory_bytes, compute.at(1).activation_memory_bytes);
    EXPECT_EQ(profile->statics[k].parameter_count, summary.segments[k].allocated);
    EXPECT_EQ(profile->statics[k].state_bytes, summary.segments[k].allocated * (4 + 4 + 4 + 8));
    EXPECT_GT(profile->statics[k].optimizer_ms, 0);  // one Adam step over the segment
    EXPECT_LT(profile->statics[k].optimizer_ms, 1000);
    EXPECT_GT(profile->statics[k].gradient_ms, 0);  // unscale + norm over the segment
    EXPECT_LT(profile->statics[k].gradient_ms, 1000);
    EXPECT_GT(profile->statics[k].bucket_ms, 0);  // flatten + copy back
    EXPECT_LT(profile->statics[k].bucket_ms, 1000);
    // The CPU's unfused step work makes temporaries, each at most a parameter's size a few
    // times over (never the segment's whole state).
    EXPECT_GT(profile->statics[k].step_memory_bytes, 0);
    EXPECT_LT(profile->statics[k].step_memory_bytes, profile->statics[k].state_bytes);
  }
  ASSERT_EQ(lines_.size(), 6u);
  EXPECT_THAT(lines_[0], HasSubstr("segment 0 of 3, micro-batch 1: forward "));
  EXPECT_THAT(lines_[0], HasSubstr("(medians of 2; spread "));
  EXPECT_THAT(lines_[5], HasSubstr("segment 2 of 3, micro-batch 4"));
  EXPECT_THAT(lines_[5], HasSubstr("6 of 6 measured, about 0 s left"));
}

TEST_F(ProfilerTest, TheWholeModelIsOneStageOfEverySegment) {
  options_.micro_batch_sizes = {2};
  options_.segments = {1};  // ignored: the whole model is measured
  absl::StatusOr<Profile> whole =
      ProfileWholeModel(gpt2::Gpt2StageBuilder(config_, 11), config_.num_layers, Inputs, options_);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->num_segments, 1);
  ASSERT_EQ(whole->compute[0].count(2), 1u);
  const SegmentMeasurement& m = whole->compute[0].at(2);
  EXPECT_GT(m.forward_ms, 0);
  EXPECT_GT(m.recompute_ms, 0);
  EXPECT_GT(m.backward_ms, 0);
  EXPECT_EQ(m.output_bytes, 0);  // it ends with the loss, as the last segment does
  EXPECT_EQ(whole->statics[0].parameter_count,
            gpt2::AllocatedParameters(config_, 0, config_.num_layers - 1));
  // No optimizer state for the whole model: the joins need F, R and B only.
  EXPECT_EQ(whole->statics[0].optimizer_ms, 0);
  EXPECT_EQ(whole->statics[0].gradient_ms, 0);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], HasSubstr("(the whole model as one stage) segment 0 of 1"));
  EXPECT_FALSE(ProfileWholeModel(gpt2::Gpt2StageBuilder(config_, 11), 0, Inputs, options_).ok());
}

TEST_F(ProfilerTest, EveryGraphPlusOneBackwardsWorkingMemoryIsTheWholeModelsPeak) {
  // What the planner charges one stage of every segment (auto_config.h: the graphs summed, the
  // largest working memory once, with the gradient a segment receives) against the whole model
  // measured as that stage. Summing the segments' peaks instead charges every backward's
  // working memory at once.
  options_.micro_batch_sizes = {4};
  absl::StatusOr<Profile> segments = Run({4});
  ASSERT_TRUE(segments.ok()) << segments.status();
  absl::StatusOr<Profile> whole =
      ProfileWholeModel(gpt2::Gpt2StageBuilder(config_, 11), config_.num_layers, Inputs, options_);
  ASSERT_TRUE(whole.ok()) << whole.status();
  int64_t graphs = 0, working = 0, peaks = 0;
  for (const auto& segment : segments->compute) {
    const SegmentMeasurement& m = segment.at(4);
    graphs += m.graph_memory_bytes;
    working = std::max(working, m.activation_memory_bytes - m.graph_memory_bytes + m.output_bytes);
    peaks += m.activation_memory_bytes;
  }
  const SegmentMeasurement& stage = whole->compute[0].at(4);
  const double planned = static_cast<double>(graphs + working);
  const double measured = static_cast<double>(stage.activation_memory_bytes);
  RecordProperty("planned", std::to_string(graphs + working));
  RecordProperty("measured", std::to_string(stage.activation_memory_bytes));
  RecordProperty("peaks_summed", std::to_string(peaks));
  EXPECT_NEAR(planned / measured, 1.0, 0.10)
      << "graphs " << graphs << " + working " << working << " against the stage's peak "
      << stage.activation_memory_bytes << " (the peaks summed: " << peaks << ")";
  EXPECT_NEAR(static_cast<double>(graphs) / static_cast<double>(stage.graph_memory_bytes), 1.0,
              0.05);
}

TEST(SegmentJoinsTest, TheWholeLessTheSumOverTheJoins) {
  Profile segments;
  segments.num_segments = 3;
  segments.compute.resize(3);
  for (int k = 0; k < 3; ++k) {
    segments.compute[k][1] = SegmentMeasurement{1.0 + k, 2.0 + k, 1.5 + k};  // F, B, R
    if (k != 1) segments.compute[k][4] = SegmentMeasurement{4, 8, 5};        // not on segment 1
  }
  Profile whole;
  whole.num_segments = 1;
  whole.compute.resize(1);
  whole.compute[0][1] = SegmentMeasurement{5.0, 10.0, 7.5};  // F 6 -> 5, B 9 -> 10, R 7.5 -> 7.5
  whole.compute[0][4] = SegmentMeasurement{20, 30, 25};
  const std::map<int, SegmentJoin> joins = SegmentJoins(whole, segments);
  ASSERT_EQ(joins.size(), 1u);  // size 4 lacks segment 1
  EXPECT_DOUBLE_EQ(joins.at(1).forward_ms, (5.0 - 6.0) / 2);
  EXPECT_DOUBLE_EQ(joins.at(1).backward_ms, (10.0 - 9.0) / 2);
  EXPECT_DOUBLE_EQ(joins.at(1).recompute_ms, 0);
  // One segment has no joins; a whole profile of more than one segment is not a whole model.
  Profile one = segments;
  one.num_segments = 1;
  one.compute.resize(1);
  EXPECT_TRUE(SegmentJoins(whole, one).empty());
  EXPECT_TRUE(SegmentJoins(segments, segments).empty());
}

TEST_F(ProfilerTest, HalfPrecisionStateBytesIncludeFp32Masters) {
  options_.dtype = at::kBFloat16;
  options_.segments = {1};
  absl::StatusOr<Profile> profile = Run({2});
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->dtype, "bfloat16");
  const int64_t count = gpt2::Summarize(config_).segments[1].allocated;
  EXPECT_EQ(profile->statics[1].state_bytes, count * (2 + 2 + 4 + 4 + 8));
  EXPECT_GT(profile->statics[1].optimizer_ms, 0);
  EXPECT_EQ(profile->compute[1].at(2).output_bytes, 2 * kSeq * kHidden * 2);
  EXPECT_EQ(profile->compute[1].at(2).stash_bytes, 2 * kSeq * kHidden * 2);
}

TEST_F(ProfilerTest, OnlyTheChosenSegmentsAreMeasured) {
  options_.segments = {2, 1};
  absl::StatusOr<Profile> profile = Run({1});
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_TRUE(profile->compute[0].empty());
  EXPECT_EQ(profile->statics[0].parameter_count, 0);
  EXPECT_EQ(profile->statics[0].optimizer_ms, 0);
  EXPECT_GT(profile->statics[1].optimizer_ms, 0);
  EXPECT_EQ(profile->compute[1].size(), 1u);
  EXPECT_EQ(profile->compute[2].size(), 1u);
  EXPECT_EQ(lines_.size(), 2u);
}

// What bounds a large model's profile (gpt2-8.3b on one GPU): the profiler builds one segment
// at a time and drops it before the next, so the parameters alive at once never exceed the
// largest segment's, whichever segments are measured (even the last alone, whose input shape is
// learned by building the earlier segments one by one).
TEST_F(ProfilerTest, BuildsOneSegmentAtATimeSoMemoryIsBoundedByTheLargestSegment) {
  const StageBuilder inner = gpt2::Gpt2StageBuilder(config_, 11);
  auto live = std::make_shared<int64_t>(0);
  int64_t peak_live = 0;
  std::vector<SegmentRange> built;
  const StageBuilder counting = [&](SegmentRange range) {
    built.push_back(range);
    std::shared_ptr<StageModule> stage = inner(range);
    int64_t parameters = 0;
    for (const at::Tensor& p : stage->parameters()) parameters += p.numel();
    *live += parameters;
    peak_live = std::max(peak_live, *live);
    // The same stage, with a deleter that counts its parameters out when the profiler drops it.
    return std::shared_ptr<StageModule>(
        stage.get(), [stage, live, parameters](StageModule*) { *live -= parameters; });
  };
  int64_t largest_segment = 0;
  for (int k = 0; k < config_.num_layers; ++k) {
    int64_t parameters = 0;
    for (const at::Tensor& p : inner(SegmentRange{k, k})->parameters()) parameters += p.numel();
    largest_segment = std::max(largest_segment, parameters);
  }
  for (const std::vector<int>& segments : {std::vector<int>{}, std::vector<int>{2}}) {
    built.clear();
    peak_live = 0;
    options_.segments = segments;
    options_.micro_batch_sizes = {1, 2};
    absl::StatusOr<Profile> profile =
        ProfileSegments(counting, config_.num_layers, Inputs, options_, nullptr);
    ASSERT_TRUE(profile.ok()) << profile.status();
    ASSERT_FALSE(built.empty());
    for (const SegmentRange& range : built) EXPECT_EQ(range.first, range.last);
    EXPECT_GT(peak_live, 0);
    EXPECT_LE(peak_live, largest_segment);
    EXPECT_EQ(*live, 0);  // every stage was dropped
  }
}

TEST_F(ProfilerTest, AddToExistingMeasuresOnlyMissingPairs) {
  absl::StatusOr<Profile> first = Run({1});
  ASSERT_TRUE(first.ok()) << first.status();
  lines_.clear();
  absl::StatusOr<Profile> second = Run({1, 2}, &*first);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(lines_.size(), 3u);
  for (const std::string& line : lines_) EXPECT_THAT(line, HasSubstr("micro-batch 2:"));
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(second->compute[k].count(1), 0u);
    EXPECT_EQ(second->compute[k].count(2), 1u);
  }
  // Merged, size 1 keeps the first call's values bit for bit.
  Profile merged = *first;
  ASSERT_TRUE(MergeProfile(*second, merged).ok());
  EXPECT_EQ(merged.CommonMicroBatchSizes(), (std::vector<int>{1, 2}));
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(merged.compute[k].at(1).forward_ms, first->compute[k].at(1).forward_ms);
    EXPECT_EQ(merged.compute[k].at(1).backward_ms, first->compute[k].at(1).backward_ms);
  }
  // Nothing missing: nothing measured.
  lines_.clear();
  absl::StatusOr<Profile> third = Run({1, 2}, &merged);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(lines_.empty());
  EXPECT_TRUE(third->compute[0].empty());
}

TEST_F(ProfilerTest, BadOptionsNameTheProblem) {
  EXPECT_THAT(std::string(Run({}).status().message()), HasSubstr("no micro-batch sizes given"));
  EXPECT_THAT(std::string(Run({2, 0}).status().message()),
              HasSubstr("micro-batch size 0 must be at least 1"));
  options_.segments = {3};
  EXPECT_THAT(std::string(Run({1}).status().message()),
              HasSubstr("segment 3 does not exist: the model has 3 segments (0 to 2)"));
  options_.segments = {-1};
  EXPECT_THAT(std::string(Run({1}).status().message()), HasSubstr("segment -1 does not exist"));
  options_.segments = {};
  options_.timed_passes = 0;
  EXPECT_THAT(std::string(Run({1}).status().message()), HasSubstr("timed_passes=0"));
  options_.timed_passes = 1;
  options_.rounds = 0;
  EXPECT_THAT(std::string(Run({1}).status().message()), HasSubstr("rounds=0 must be at least 1"));
  options_.rounds = 1;
  options_.dtype = at::kDouble;
  EXPECT_THAT(std::string(Run({1}).status().message()), HasSubstr("is not supported"));
  options_.dtype = at::kFloat;
  Profile other;
  other.num_segments = 2;
  other.dtype = "float32";
  other.statics.resize(2);
  other.compute.resize(2);
  EXPECT_THAT(std::string(Run({1}, &other).status().message()),
              HasSubstr("the existing profile has 2 segments in float32, but this model has 3"));
  EXPECT_TRUE(lines_.empty());
}

// A two-segment stage of one linear layer per segment (width x width) that logs every Forward:
// whether it built a graph and the random number it drew (as dropout would), and can stall one
// call, so that a test sees how the profiler runs and times its passes.
struct ForwardLog {
  std::vector<bool> with_graph;
  std::vector<double> drawn;
  int stall_call = -1;  // index into the calls: that call sleeps kStall first
};

constexpr auto kStall = std::chrono::milliseconds(300);

class RecordingStage : public StageModule {
 public:
  RecordingStage(SegmentRange range, std::shared_ptr<ForwardLog> log, int64_t width)
      : range_(range), log_(std::move(log)) {
    weight_ = register_parameter("weight", at::randn({width, width}) * 0.1);
  }
  SegmentRange segments() const override { return range_; }
  int num_segments() const override { return 2; }
  torch::Tensor Forward(const torch::Tensor& activation, const TensorMap& inputs) override {
    if (static_cast<int>(log_->drawn.size()) == log_->stall_call) {
      std::this_thread::sleep_for(kStall);
    }
    log_->with_graph.push_back(at::GradMode::is_enabled());
    const at::Tensor noise = at::rand({1});
    log_->drawn.push_back(noise.item<double>());
    const at::Tensor x = range_.first == 0 ? inputs.at("x") : activation;
    const at::Tensor y = at::matmul(x, weight_) + noise;
    return range_.last == 1 ? y.pow(2).mean() : y;
  }
  std::vector<SharedWeight> shared_weights() const override { return {}; }
  int SegmentOf(const std::string&) const override { return range_.first; }
  bool DecaysWeight(const std::string&) const override { return true; }

 private:
  SegmentRange range_;
  std::shared_ptr<ForwardLog> log_;
  at::Tensor weight_;
};

absl::StatusOr<Profile> ProfileRecording(const std::shared_ptr<ForwardLog>& log,
                                         const ProfilerOptions& options, int64_t width = 8) {
  const StageBuilder builder = [log, width](SegmentRange range) {
    return std::make_shared<RecordingStage>(range, log, width);
  };
  const InputMaker inputs = [width](int b) {
    TensorMap map;
    map["x"] = at::randn({b, width});
    return map;
  };
  return ProfileSegments(builder, 2, inputs, options, nullptr);
}

ProfilerOptions SegmentZeroAtSizeOne(int warmup, int timed) {
  ProfilerOptions options;
  options.micro_batch_sizes = {1};
  options.segments = {0};
  options.warmup_passes = warmup;
  options.timed_passes = timed;
  return options;
}

TEST(ProfilerPassesTest, OneSettlingPassThenTheWarmUpThenTheTimedPasses) {
  for (const auto& [warmup, timed] : {std::make_pair(0, 1), std::make_pair(2, 3)}) {
    SCOPED_TRACE(testing::Message() << "warmup " << warmup << ", timed " << timed);
    auto log = std::make_shared<ForwardLog>();
    absl::StatusOr<Profile> profile = ProfileRecording(log, SegmentZeroAtSizeOne(warmup, timed));
    ASSERT_TRUE(profile.ok()) << profile.status();
    const int passes = 1 + warmup + timed;
    // Each pass is F (no graph) then R (graph); one more R measures the memory.
    ASSERT_EQ(log->with_graph.size(), static_cast<size_t>(2 * passes + 1));
    for (int i = 0; i < passes; ++i) {
      EXPECT_FALSE(log->with_graph[2 * i]) << "call " << 2 * i;
      EXPECT_TRUE(log->with_graph[2 * i + 1]) << "call " << 2 * i + 1;
    }
    EXPECT_TRUE(log->with_graph.back());
    EXPECT_EQ(profile->compute[0].at(1).timed_passes, timed);
    EXPECT_EQ(profile->compute[0].at(1).forward_cold_ms, 0);  // too small to time cold
  }
}

TEST(ProfilerPassesTest, ASegmentThatCouldStayInTheCacheIsTimedColdToo) {
  // 1280 x 1280 float32 weights: 6.25 MiB, twice that with the gradient, which could stay in a
  // cache of 6.25 MiB or more (CacheEvictor::WorthEvicting). The tiny 8 x 8 segments of the other
  // tests run no cold passes (OneSettlingPassThenTheWarmUpThenTheTimedPasses).
  constexpr int64_t kWidth = 1280;
  const CacheEvictor evictor(c10::Device(c10::kCPU));
  if (!evictor.WorthEvicting(2 * kWidth * kWidth * 4 + kWidth * 4)) {
    GTEST_SKIP() << "this machine's last-level cache (" << evictor.cache_bytes()
                 << " bytes) is too small for the segment to stay in it";
  }
  auto log = std::make_shared<ForwardLog>();
  absl::StatusOr<Profile> profile = ProfileRecording(log, SegmentZeroAtSizeOne(0, 3), kWidth);
  ASSERT_TRUE(profile.ok()) << profile.status();
  // The settling pass and 3 timed (F, R each), the memory's R, then 3 cold passes.
  ASSERT_EQ(log->with_graph.size(), static_cast<size_t>(2 * 4 + 1 + 2 * 3));
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(log->with_graph[9 + 2 * i]) << "cold pass " << i;
    EXPECT_TRUE(log->with_graph[9 + 2 * i + 1]) << "cold pass " << i;
  }
  const SegmentMeasurement& m = profile->compute[0].at(1);
  EXPECT_GT(m.forward_cold_ms, 0);
  EXPECT_GT(m.recompute_cold_ms, 0);
  EXPECT_GT(m.backward_cold_ms, 0);
  EXPECT_EQ(m.timed_passes, 3);
  EXPECT_EQ(profile->cache_bytes, evictor.cache_bytes());
}

TEST(ProfilerPassesTest, TheRecomputeReplaysItsForwardsRandomNumbersAsTheExecutorDoes) {
  auto log = std::make_shared<ForwardLog>();
  absl::StatusOr<Profile> profile = ProfileRecording(log, SegmentZeroAtSizeOne(1, 3));
  ASSERT_TRUE(profile.ok()) << profile.status();
  const int passes = 1 + 1 + 3;
  for (int i = 0; i < passes; ++i) {
    // R draws what its F drew (the saved state restored) ...
    EXPECT_EQ(log->drawn[2 * i + 1], log->drawn[2 * i]) << "pass " << i;
    // ... and puts the live state back: the next F draws a new number.
    if (i + 1 < passes) {
      EXPECT_NE(log->drawn[2 * i + 2], log->drawn[2 * i]) << "pass " << i;
    }
  }
}

TEST(ProfilerPassesTest, EachRoundRunsEveryPassAgainAndASlowRoundDoesNotMoveTheTime) {
  auto log = std::make_shared<ForwardLog>();
  ProfilerOptions options = SegmentZeroAtSizeOne(0, 1);
  options.rounds = 3;
  std::vector<std::string> lines;
  options.progress = [&lines](const std::string& line) { lines.push_back(line); };
  // Per round: settling F R, timed F R, then one more R for the memory: 5 calls. Stall the
  // first round's timed F.
  log->stall_call = 2;
  absl::StatusOr<Profile> profile = ProfileRecording(log, options);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(log->with_graph.size(), 3u * 5u);
  const SegmentMeasurement& m = profile->compute[0].at(1);
  EXPECT_EQ(m.timed_passes, 3);
  const double stall_ms = std::chrono::duration<double, std::milli>(kStall).count();
  EXPECT_THAT(m.forward_ms, Lt(stall_ms / 3));  // the median of the three rounds
  EXPECT_GE(m.forward_spread_ms, stall_ms * 0.9);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[0], HasSubstr("round 1 of 3: segment 0 of 2, micro-batch 1: forward "));
  EXPECT_THAT(lines[2], HasSubstr("round 3 of 3: segment 0 of 2"));
  EXPECT_THAT(lines[2], HasSubstr("3 of 3 measured"));
}

// One round's profile of one segment at sizes 1 and 2 (size 2 only where `with_two`), with
// forward times `f` and the step work `gradient`.
Profile Round(double f, double spread, int64_t memory, double gradient, bool with_two = true) {
  Profile p;
  p.num_segments = 1;
  p.dtype = "float32";
  p.statics.resize(1);
  p.statics[0].parameter_count = 10;
  p.statics[0].gradient_ms = gradient;
  p.statics[0].optimizer_ms = 2 * gradient;
  p.statics[0].step_memory_bytes = memory / 4;
  p.compute.resize(1);
  SegmentMeasurement m;
  m.forward_ms = f;
  m.recompute_ms = f + 1;
  m.backward_ms = 2 * f;
  m.forward_spread_ms = spread;
  m.timed_passes = 7;
  m.activation_memory_bytes = memory;
  m.graph_memory_bytes = memory / 2;
  m.output_bytes = 5;
  p.compute[0][1] = m;
  if (with_two) p.compute[0][2] = m;
  return p;
}

TEST(MedianOfRoundsTest, KeepsTheMedianRoundOfEachTime) {
  absl::StatusOr<Profile> combined =
      MedianOfRounds({Round(10, 0.5, 100, 3), Round(30, 0.2, 300, 1), Round(12, 0.1, 200, 2)});
  ASSERT_TRUE(combined.ok()) << combined.status();
  const SegmentMeasurement& m = combined->compute[0].at(1);
  EXPECT_DOUBLE_EQ(m.forward_ms, 12);
  EXPECT_DOUBLE_EQ(m.recompute_ms, 13);
  EXPECT_DOUBLE_EQ(m.backward_ms, 24);
  EXPECT_DOUBLE_EQ(m.forward_spread_ms, 20);  // the range of the rounds' times, 10 to 30
  EXPECT_DOUBLE_EQ(m.recompute_spread_ms, 20);
  EXPECT_EQ(m.timed_passes, 21);
  EXPECT_EQ(m.activation_memory_bytes, 300);              // the largest
  EXPECT_EQ(m.graph_memory_bytes, 150);                   // the largest
  EXPECT_EQ(combined->statics[0].step_memory_bytes, 75);  // the largest
  EXPECT_EQ(m.output_bytes, 5);
  EXPECT_DOUBLE_EQ(combined->statics[0].gradient_ms, 2);
  EXPECT_DOUBLE_EQ(combined->statics[0].optimizer_ms, 4);
  EXPECT_EQ(combined->statics[0].parameter_count, 10);
  EXPECT_TRUE(ValidateProfile(*combined).ok());
}

TEST(MedianOfRoundsTest, ColdTimesAreTheMedianOfTheRoundsThatMeasuredThem) {
  std::vector<Profile> rounds = {Round(10, 0.5, 100, 3), Round(30, 0.2, 300, 1),
                                 Round(12, 0.1, 200, 2), Round(11, 0.1, 200, 2)};
  const double cold[] = {14, 40, 0, 16};  // the third round did not time it cold
  for (size_t i = 0; i < rounds.size(); ++i) {
    SegmentMeasurement& m = rounds[i].compute[0].at(1);
    m.forward_cold_ms = cold[i];
    m.recompute_cold_ms = cold[i] > 0 ? cold[i] + 1 : 0;
    m.backward_cold_ms = 2 * cold[i];
  }
  absl::StatusOr<Profile> combined = MedianOfRounds(rounds);
  ASSERT_TRUE(combined.ok()) << combined.status();
  const SegmentMeasurement& m = combined->compute[0].at(1);
  EXPECT_DOUBLE_EQ(m.forward_cold_ms, 16);  // of 14, 16 and 40
  EXPECT_DOUBLE_EQ(m.recompute_cold_ms, 17);
  EXPECT_DOUBLE_EQ(m.backward_cold_ms, 32);
  EXPECT_EQ(MedianOfRounds({Round(10, 0.5, 100, 3)})->compute[0].at(1).forward_cold_ms, 0);
}

TEST(MedianOfRoundsTest, ALargerSpreadWithinARoundIsKeptAndTwoRoundsAverage) {
  absl::StatusOr<Profile> combined = MedianOfRounds({Round(10, 5, 1, 1), Round(11, 0.1, 1, 3)});
  ASSERT_TRUE(combined.ok()) << combined.status();
  EXPECT_DOUBLE_EQ(combined->compute[0].at(1).forward_ms, 10.5);
  EXPECT_DOUBLE_EQ(combined->compute[0].at(1).forward_spread_ms, 5);
  EXPECT_DOUBLE_EQ(combined->statics[0].gradient_ms, 2);
}

TEST(MedianOfRoundsTest, AStepWorkLeftUnmeasuredInARoundIsLeftOut) {
  Profile out_of_memory = Round(10, 0, 1, 0);  // gradient_ms and optimizer_ms 0
  absl::StatusOr<Profile> combined =
      MedianOfRounds({Round(10, 0, 1, 3), out_of_memory, Round(10, 0, 1, 5)});
  ASSERT_TRUE(combined.ok()) << combined.status();
  EXPECT_DOUBLE_EQ(combined->statics[0].gradient_ms, 4);  // of 3 and 5, not 0, 3 and 5
  EXPECT_DOUBLE_EQ(combined->statics[0].optimizer_ms, 8);
}

TEST(MedianOfRoundsTest, ASizeMissingFromARoundIsLeftOut) {
  absl::StatusOr<Profile> combined =
      MedianOfRounds({Round(10, 0, 1, 1), Round(10, 0, 1, 1, /*with_two=*/false)});
  ASSERT_TRUE(combined.ok()) << combined.status();
  EXPECT_EQ(combined->compute[0].count(1), 1u);
  EXPECT_EQ(combined->compute[0].count(2), 0u);
}

TEST(MedianOfRoundsTest, RefusesNoRoundsAndRoundsOfOtherModels) {
  EXPECT_THAT(std::string(MedianOfRounds({}).status().message()), HasSubstr("no rounds given"));
  Profile other = Round(1, 0, 1, 1);
  other.num_segments = 2;
  other.compute.resize(2);
  other.statics.resize(2);
  EXPECT_THAT(std::string(MedianOfRounds({Round(1, 0, 1, 1), other}).status().message()),
              HasSubstr("a round has 2 segments where the first has 1"));
}

TEST(ProfilerPassesTest, ASlowRepetitionShowsInTheSpreadNotInTheTime) {
  auto log = std::make_shared<ForwardLog>();
  // Calls: settling F R, warm-up F R, then timed F R F R F R: stall the second timed F.
  log->stall_call = 2 * (1 + 1) + 2;
  absl::StatusOr<Profile> profile = ProfileRecording(log, SegmentZeroAtSizeOne(1, 3));
  ASSERT_TRUE(profile.ok()) << profile.status();
  const SegmentMeasurement& m = profile->compute[0].at(1);
  const double stall_ms = std::chrono::duration<double, std::milli>(kStall).count();
  // A mean over the three timed passes would be above stall_ms / 3.
  EXPECT_THAT(m.forward_ms, Lt(stall_ms / 3));
  EXPECT_GE(m.forward_spread_ms, stall_ms * 0.9);
}

}  // namespace
}  // namespace varuna
