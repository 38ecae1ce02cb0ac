// Profiles written before the JSON library became nlohmann/json still load. testdata/old_profile
// holds a profile of two segments written by the earlier code (commit b244ef4, its own JSON
// library) with WriteProfile.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varuna/planning/profile.h"

namespace varuna {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::Pair;

constexpr char kTestData[] = "tests/varuna/planning/testdata/old_profile";

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void ExpectMeasurement(const SegmentMeasurement& m, double forward, double backward,
                       double recompute, int64_t activation, int64_t output, int64_t stash) {
  EXPECT_EQ(m.forward_ms, forward);
  EXPECT_EQ(m.backward_ms, backward);
  EXPECT_EQ(m.recompute_ms, recompute);
  EXPECT_EQ(m.activation_memory_bytes, activation);
  EXPECT_EQ(m.output_bytes, output);
  EXPECT_EQ(m.stash_bytes, stash);
}

TEST(OldProfileTest, ReadsWithTheExactValuesAndWritesTheSameFiles) {
  absl::StatusOr<Profile> p = ReadProfile(kTestData);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->model, R"({"num_layers":2,"hidden_size":64})");
  EXPECT_EQ(p->device, "cpu");
  EXPECT_EQ(p->dtype, "float32");
  ASSERT_EQ(p->num_segments, 2);
  ASSERT_EQ(p->statics.size(), 2u);
  EXPECT_EQ(p->statics[0].parameter_count, 1000);
  EXPECT_EQ(p->statics[0].state_bytes, 16000);
  EXPECT_EQ(p->statics[0].optimizer_ms, 0.25);
  EXPECT_EQ(p->statics[0].gradient_ms, 0.125);
  EXPECT_EQ(p->statics[0].bucket_ms, 0.0625);
  EXPECT_EQ(p->statics[1].parameter_count, 2000);
  EXPECT_EQ(p->statics[1].state_bytes, 32000);
  EXPECT_EQ(p->statics[1].optimizer_ms, 0.5);
  EXPECT_EQ(p->statics[1].gradient_ms, 0.375);
  EXPECT_EQ(p->statics[1].bucket_ms, 0.1);
  ASSERT_EQ(p->compute.size(), 2u);
  ASSERT_EQ(p->compute[0].size(), 2u);
  ExpectMeasurement(p->compute[0].at(1), 0.5, 1.125, 0.6, 500, 4096, 2048);
  ExpectMeasurement(p->compute[0].at(2), 0.9, 1.925, 1.0, 900, 8192, 4096);
  ASSERT_EQ(p->compute[1].size(), 1u);
  ExpectMeasurement(p->compute[1].at(1), 1.5, 3.125, 1.6, 1500, 0, 2048);
  EXPECT_THAT(p->send_within_node.points, ElementsAre(Pair(1024, 0.01), Pair(65536, 0.2)));
  EXPECT_THAT(p->send_across_nodes.points,
              ElementsAre(Pair(1024, 0.1), Pair(65536, 2.5), Pair(1 << 20, 30.0)));
  ASSERT_EQ(p->allreduce.size(), 2u);
  EXPECT_THAT(p->allreduce.at(2).points, ElementsAre(Pair(1 << 20, 1.5), Pair(1 << 24, 20.0)));
  EXPECT_THAT(p->allreduce.at(4).points, ElementsAre(Pair(1 << 20, 2.25)));

  // Writing what was read gives back the same files.
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/rewritten");
  fs::remove_all(dir);
  ASSERT_TRUE(WriteProfile(*p, dir).ok());
  for (const char* name : {"profile.json", "segment_0.json", "segment_1.json"}) {
    EXPECT_EQ(ReadText(dir + "/" + name), ReadText(absl::StrCat(kTestData, "/", name))) << name;
  }
}

}  // namespace
}  // namespace varuna
