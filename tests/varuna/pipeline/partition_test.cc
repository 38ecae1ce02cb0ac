#include "varuna/pipeline/partition.h"

#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna {

void PrintTo(const SegmentRange& range, std::ostream* os) {
  *os << "[" << range.first << "," << range.last << "]";
}

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int> Sizes(const std::vector<SegmentRange>& ranges) {
  std::vector<int> sizes;
  for (const SegmentRange& range : ranges) sizes.push_back(range.size());
  return sizes;
}

TEST(PartitionTest, EvenSplitMatchesVarunasLayout) {
  absl::StatusOr<std::vector<SegmentRange>> ranges = PartitionSegments(24, 4);
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  EXPECT_THAT(*ranges, ElementsAre(SegmentRange{0, 5}, SegmentRange{6, 11}, SegmentRange{12, 17},
                                   SegmentRange{18, 23}));
}

TEST(PartitionTest, ExtraSegmentsGoToTheFirstStages) {
  absl::StatusOr<std::vector<SegmentRange>> ranges = PartitionSegments(10, 4);
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  EXPECT_THAT(Sizes(*ranges), ElementsAre(3, 3, 2, 2));
  EXPECT_THAT(*ranges, ElementsAre(SegmentRange{0, 2}, SegmentRange{3, 5}, SegmentRange{6, 7},
                                   SegmentRange{8, 9}));
  EXPECT_THAT(Sizes(*PartitionSegments(7, 3)), ElementsAre(3, 2, 2));
  EXPECT_THAT(Sizes(*PartitionSegments(5, 5)), ElementsAre(1, 1, 1, 1, 1));
  EXPECT_THAT(*PartitionSegments(3, 1), ElementsAre(SegmentRange{0, 2}));
}

TEST(PartitionTest, CoversEverySegmentOnceWithSizesWithinOne) {
  for (int segments = 1; segments <= 30; ++segments) {
    for (int stages = 1; stages <= segments; ++stages) {
      absl::StatusOr<std::vector<SegmentRange>> ranges = PartitionSegments(segments, stages);
      ASSERT_TRUE(ranges.ok()) << ranges.status();
      ASSERT_EQ(ranges->size(), static_cast<size_t>(stages));
      int next = 0;
      for (size_t s = 0; s < ranges->size(); ++s) {
        const SegmentRange& range = (*ranges)[s];
        EXPECT_EQ(range.first, next) << segments << " segments, " << stages << " stages";
        EXPECT_GE(range.size(), 1);
        // Non-increasing sizes, differing by at most one.
        EXPECT_LE(range.size(), (*ranges)[0].size());
        EXPECT_GE(range.size(), (*ranges)[0].size() - 1);
        if (s > 0) EXPECT_LE(range.size(), (*ranges)[s - 1].size());
        next = range.last + 1;
      }
      EXPECT_EQ(next, segments);
    }
  }
}

TEST(PartitionTest, RejectsBadCounts) {
  EXPECT_EQ(std::string(PartitionSegments(4, 5).status().message()),
            "--nstages=5 is more than the 4 segments (layers) of the model: use at most 4");
  EXPECT_THAT(std::string(PartitionSegments(4, 0).status().message()),
              HasSubstr("--nstages=0 must be at least 1"));
  EXPECT_THAT(std::string(PartitionSegments(4, -2).status().message()),
              HasSubstr("--nstages=-2 must be at least 1"));
  EXPECT_THAT(std::string(PartitionSegments(0, 1).status().message()),
              HasSubstr("the model has 0 segments (layers) to partition: it needs at least 1"));
  EXPECT_EQ(PartitionSegments(0, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace varuna
