// Tests of varuna/profiler.h on a tiny GPT-2 on the CPU.
#include "varuna/planning/compute_profiler.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model.h"
#include "models/gpt2/summary.h"

namespace varuna {
namespace {

using ::testing::HasSubstr;

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
  }
  ASSERT_EQ(lines_.size(), 6u);
  EXPECT_THAT(lines_[0], HasSubstr("segment 0 of 3, micro-batch 1: forward "));
  EXPECT_THAT(lines_[5], HasSubstr("segment 2 of 3, micro-batch 4"));
  EXPECT_THAT(lines_[5], HasSubstr("6 of 6 measured, about 0 s left"));
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

}  // namespace
}  // namespace varuna
