#include "varuna/pipeline/stage_map.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna {
namespace {

using ::testing::HasSubstr;

TEST(StageMapTest, ParsesVarunaFormat) {
  absl::StatusOr<StageMap> map = StageMap::Parse("0,4;1,5;2,6;3,7;");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->num_stages(), 4);
  EXPECT_EQ(map->num_replicas(), 2);
  EXPECT_EQ(map->rank(1, 1), 5);
  EXPECT_EQ(map->Position(6).stage, 2);
  EXPECT_EQ(map->Position(6).replica, 1);
  EXPECT_EQ(map->ToString(), "0,4;1,5;2,6;3,7;");
  EXPECT_EQ(StageMap::Parse("0")->ToString(), "0;");
  EXPECT_EQ(StageMap::Uniform(2, 2).ToString(), "0,2;1,3;");
}

TEST(StageMapTest, RejectsBadMaps) {
  EXPECT_THAT(std::string(StageMap::Parse("").status().message()), HasSubstr("it is empty"));
  EXPECT_THAT(std::string(StageMap::Parse("0,1;2").status().message()),
              HasSubstr("stage 0 has 2 replicas but stage 1 has 1"));
  EXPECT_THAT(std::string(StageMap::Parse("0;0").status().message()),
              HasSubstr("rank 0 appears twice"));
  EXPECT_THAT(std::string(StageMap::Parse("0;5").status().message()),
              HasSubstr("rank 5 is out of range for 2 ranks"));
  EXPECT_THAT(std::string(StageMap::Parse("0;x").status().message()),
              HasSubstr("stage 1 has \"x\", which is not a rank"));
  EXPECT_THAT(std::string(StageMap::Parse("0;x").status().message()),
              HasSubstr("--stage_to_rank_map=\"0;x\""));
}

}  // namespace
}  // namespace varuna
