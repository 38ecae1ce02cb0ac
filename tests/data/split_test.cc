#include "data/split.h"

#include <array>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::testing::HasSubstr;

std::array<int64_t, 4> Boundaries(const std::string& split, int64_t size) {
  absl::StatusOr<SplitRanges> ranges = SplitDocuments(split, size);
  EXPECT_TRUE(ranges.ok()) << ranges.status();
  if (!ranges.ok()) return {-1, -1, -1, -1};
  EXPECT_EQ((*ranges)[0].end, (*ranges)[1].begin);
  EXPECT_EQ((*ranges)[1].end, (*ranges)[2].begin);
  return {(*ranges)[0].begin, (*ranges)[1].begin, (*ranges)[2].begin, (*ranges)[2].end};
}

// Expected values printed by tests/data/gpt_index_golden.py (Megatron's
// get_train_valid_test_split_ restated in Python, which rounds half to even and shifts every
// boundary after the first by the rounding excess).
TEST(SplitDocumentsTest, MatchesMegatronRounding) {
  EXPECT_EQ(Boundaries("949,50,1", 1000), (std::array<int64_t, 4>{0, 949, 999, 1000}));
  EXPECT_EQ(Boundaries("949,50,1", 12), (std::array<int64_t, 4>{0, 11, 12, 12}));
  EXPECT_EQ(Boundaries("98,2,0", 100), (std::array<int64_t, 4>{0, 98, 100, 100}));
  EXPECT_EQ(Boundaries("1", 7), (std::array<int64_t, 4>{0, 7, 7, 7}));
  // 2.5 rounds to 2 (half to even): [0, 2, 4, 4], then everything moves by +1.
  EXPECT_EQ(Boundaries("1,1", 5), (std::array<int64_t, 4>{0, 3, 5, 5}));
  // 3.33 rounds to 3 three times: [0, 3, 6, 9], then +1 each.
  EXPECT_EQ(Boundaries("1/1/1", 10), (std::array<int64_t, 4>{0, 4, 7, 10}));
  EXPECT_EQ(Boundaries("969, 30, 1", 17), (std::array<int64_t, 4>{0, 16, 17, 17}));
  EXPECT_EQ(Boundaries("0.5,0.25,0.25", 3), (std::array<int64_t, 4>{0, 1, 2, 3}));
  EXPECT_EQ(Boundaries("2,1,1", 2), (std::array<int64_t, 4>{0, 2, 2, 2}));
  EXPECT_EQ(Boundaries("949,50,1", 0), (std::array<int64_t, 4>{0, 0, 0, 0}));
}

TEST(SplitDocumentsTest, ParseNormalises) {
  absl::StatusOr<std::array<double, 3>> weights = ParseSplit("6/3/1");
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_DOUBLE_EQ((*weights)[0], 0.6);
  EXPECT_DOUBLE_EQ((*weights)[1], 0.3);
  EXPECT_DOUBLE_EQ((*weights)[2], 0.1);
  weights = ParseSplit("3");
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ(*weights, (std::array<double, 3>{1.0, 0.0, 0.0}));
}

TEST(SplitDocumentsTest, BadStringsNameTheValueAndProblem) {
  struct Case {
    const char* split;
    const char* problem;
  };
  for (const Case& c :
       {Case{"949,x,1", "'x' is not a number"}, Case{"", "is not a number"},
        Case{"1,,1", "'' is not a number"}, Case{"1,2,3,4", "has 4 weights"},
        Case{"-1,2", "is negative"}, Case{"0,0,0", "sum to 0"}, Case{"nan,1", "is not a number"},
        Case{"1,inf", "is not a number"}, Case{"949,50/1", "is not a number"}}) {
    absl::StatusOr<SplitRanges> ranges = SplitDocuments(c.split, 100);
    ASSERT_FALSE(ranges.ok()) << c.split;
    EXPECT_EQ(ranges.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ranges.status().message(), HasSubstr(std::string("--split='") + c.split + "'"));
    EXPECT_THAT(ranges.status().message(), HasSubstr(c.problem)) << c.split;
  }
}

TEST(SplitDocumentsTest, RangesThatRunBackwardsAreRejected) {
  // Rounding gives [0, 0, 2, 4]; shifting by -1 would make train [0, -1).
  absl::StatusOr<SplitRanges> ranges = SplitDocuments("0,1,1", 3);
  ASSERT_FALSE(ranges.ok());
  EXPECT_THAT(ranges.status().message(), HasSubstr("run backwards"));
  EXPECT_THAT(ranges.status().message(), HasSubstr("[0, -1, 1, 3]"));
  EXPECT_FALSE(SplitDocuments("1", -1).ok());
}

TEST(SplitNumSamplesTest, MegatronSizing) {
  absl::StatusOr<std::array<int64_t, 3>> samples = SplitNumSamples(100, 10, 5, 8);
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ((*samples)[0], 800);               // 100 iterations x 8
  EXPECT_EQ((*samples)[1], (10 + 1) * 5 * 8);  // 11 evaluations of 5 iterations
  EXPECT_EQ((*samples)[2], 40);
  samples = SplitNumSamples(95, 10, 2, 4);
  ASSERT_TRUE(samples.ok());
  EXPECT_EQ((*samples)[1], (9 + 1) * 2 * 4);
}

TEST(SplitNumSamplesTest, BadValuesNameTheFlag) {
  EXPECT_THAT(SplitNumSamples(-1, 10, 5, 8).status().message(), HasSubstr("--train-iters=-1"));
  EXPECT_THAT(SplitNumSamples(1, 0, 5, 8).status().message(), HasSubstr("--eval-interval=0"));
  EXPECT_THAT(SplitNumSamples(1, 1, -5, 8).status().message(), HasSubstr("--eval-iters=-5"));
  EXPECT_THAT(SplitNumSamples(1, 1, 5, 0).status().message(), HasSubstr("global batch size 0"));
  EXPECT_THAT(SplitNumSamples(int64_t{1} << 62, 1, 5, 8).status().message(), HasSubstr("overflow"));
  EXPECT_STREQ(SplitName(Split::kValid), "valid");
}

}  // namespace
}  // namespace data
