#include "data/pretraining_sampler.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int64_t> Step(const PretrainingSampler& sampler, int64_t consumed) {
  absl::StatusOr<std::vector<int64_t>> samples = sampler.StepSamples(consumed);
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *samples : std::vector<int64_t>{};
}

// D = 2 replicas of batch 3: a global batch of 6 per step; 20 samples hold 3 whole steps.
TEST(PretrainingSamplerTest, TwoReplicasSplitEachGlobalBatch) {
  absl::StatusOr<PretrainingSampler> r0 = PretrainingSampler::Create(20, 3, 0, 2);
  absl::StatusOr<PretrainingSampler> r1 = PretrainingSampler::Create(20, 3, 1, 2);
  ASSERT_TRUE(r0.ok() && r1.ok());
  EXPECT_EQ(r0->global_batch_size(), 6);
  EXPECT_EQ(r0->num_steps(), 3);
  EXPECT_THAT(Step(*r0, 0), ElementsAre(0, 1, 2));
  EXPECT_THAT(Step(*r1, 0), ElementsAre(3, 4, 5));
  EXPECT_THAT(Step(*r0, 6), ElementsAre(6, 7, 8));
  EXPECT_THAT(Step(*r1, 6), ElementsAre(9, 10, 11));
  EXPECT_THAT(Step(*r0, 12), ElementsAre(12, 13, 14));
  EXPECT_THAT(Step(*r1, 12), ElementsAre(15, 16, 17));
  // Resuming mid-run (consumed samples from a checkpoint) continues the same sequence.
  EXPECT_THAT(Step(*r1, 7), ElementsAre(10, 11, 12));
  // 18 + 6 > 20: the incomplete last batch is never used.
  absl::StatusOr<std::vector<int64_t>> past = r0->StepSamples(18);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(past.status().message(), HasSubstr("needs [18, 18 + 6) but the dataset has 20"));
}

TEST(PretrainingSamplerTest, BadArgumentsAreRejected) {
  EXPECT_THAT(PretrainingSampler::Create(10, 0, 0, 1).status().message(),
              HasSubstr("batch size 0"));
  EXPECT_THAT(PretrainingSampler::Create(10, 2, 2, 2).status().message(),
              HasSubstr("rank 2 is not in [0, 2)"));
  EXPECT_THAT(PretrainingSampler::Create(-1, 2, 0, 2).status().message(),
              HasSubstr("total_samples -1"));
  absl::StatusOr<PretrainingSampler> sampler = PretrainingSampler::Create(10, 2, 0, 1);
  ASSERT_TRUE(sampler.ok());
  EXPECT_THAT(sampler->StepSamples(-2).status().message(), HasSubstr("consumed_samples -2"));
}

}  // namespace
}  // namespace data
