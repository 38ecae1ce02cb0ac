#include "varuna/planning/profile.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna {

// For EXPECT_EQ on measurements and on maps of them (found by argument-dependent lookup).
bool operator==(const SegmentMeasurement& a, const SegmentMeasurement& b) {
  return a.forward_ms == b.forward_ms && a.backward_ms == b.backward_ms &&
         a.recompute_ms == b.recompute_ms &&
         a.activation_memory_bytes == b.activation_memory_bytes &&
         a.graph_memory_bytes == b.graph_memory_bytes && a.output_bytes == b.output_bytes &&
         a.stash_bytes == b.stash_bytes && a.timed_passes == b.timed_passes &&
         a.forward_spread_ms == b.forward_spread_ms &&
         a.backward_spread_ms == b.backward_spread_ms &&
         a.recompute_spread_ms == b.recompute_spread_ms && a.forward_cold_ms == b.forward_cold_ms &&
         a.backward_cold_ms == b.backward_cold_ms && a.recompute_cold_ms == b.recompute_cold_ms;
}

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

SegmentMeasurement Measurement(double base) {
  SegmentMeasurement m;
  m.forward_ms = base;
  m.backward_ms = 2 * base + 0.125;
  m.recompute_ms = base + 0.1;
  m.activation_memory_bytes = static_cast<int64_t>(base * 1000);
  m.output_bytes = 4096;
  m.stash_bytes = 2048;
  return m;
}

Profile FullProfile() {
  Profile p;
  p.model = R"({"num_layers":2,"hidden_size":64})";
  p.device = "cpu";
  p.dtype = "float32";
  p.num_segments = 3;
  for (int k = 0; k < 3; ++k) {
    p.statics.push_back(
        {1000 * (k + 1), 16000 * (k + 1), 0.25 * (k + 1), 0.125 * (k + 1), 0.0625 * (k + 1)});
    p.compute.push_back(
        {{1, Measurement(0.5 + k)}, {2, Measurement(0.9 + k)}, {4, Measurement(1.7 + k)}});
  }
  p.send_within_node.points = {{1024, 0.01}, {65536, 0.2}};
  p.send_across_nodes.points = {{1024, 0.1}, {65536, 2.5}, {1 << 20, 30}};
  p.allreduce[2].points = {{1 << 20, 1.5}, {1 << 24, 20}};
  p.allreduce[4].points = {{1 << 20, 2.25}};
  return p;
}

void ExpectEqual(const Profile& a, const Profile& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.num_segments, b.num_segments);
  EXPECT_EQ(a.cache_bytes, b.cache_bytes);
  ASSERT_EQ(a.statics.size(), b.statics.size());
  for (size_t k = 0; k < a.statics.size(); ++k) {
    EXPECT_EQ(a.statics[k].parameter_count, b.statics[k].parameter_count);
    EXPECT_EQ(a.statics[k].state_bytes, b.statics[k].state_bytes);
    EXPECT_EQ(a.statics[k].optimizer_ms, b.statics[k].optimizer_ms);
    EXPECT_EQ(a.statics[k].gradient_ms, b.statics[k].gradient_ms);
    EXPECT_EQ(a.statics[k].bucket_ms, b.statics[k].bucket_ms);
    EXPECT_EQ(a.statics[k].step_memory_bytes, b.statics[k].step_memory_bytes);
  }
  EXPECT_EQ(a.compute, b.compute);
  EXPECT_EQ(a.send_within_node.points, b.send_within_node.points);
  EXPECT_EQ(a.send_across_nodes.points, b.send_across_nodes.points);
  ASSERT_EQ(a.allreduce.size(), b.allreduce.size());
  for (const auto& [ring, curve] : a.allreduce) {
    ASSERT_EQ(b.allreduce.count(ring), 1u);
    EXPECT_EQ(curve.points, b.allreduce.at(ring).points);
  }
  ASSERT_EQ(a.joins.size(), b.joins.size());
  for (const auto& [size, join] : a.joins) {
    ASSERT_EQ(b.joins.count(size), 1u);
    EXPECT_EQ(join.forward_ms, b.joins.at(size).forward_ms);
    EXPECT_EQ(join.recompute_ms, b.joins.at(size).recompute_ms);
    EXPECT_EQ(join.backward_ms, b.joins.at(size).backward_ms);
  }
}

class ProfileFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(Path(name)) << text;
  }
  // Replaces the first `needle` by `replacement` in file `name`.
  void Replace(const std::string& name, const std::string& needle,
               const std::string& replacement) const {
    std::string text = Read(name);
    const size_t at = text.find(needle);
    EXPECT_NE(at, std::string::npos) << needle << " not in " << text;
    if (at != std::string::npos) text.replace(at, needle.size(), replacement);
    Write(name, text);
  }
  // Writes a full profile, then replaces `needle` by `replacement` in file `name`; the error
  // message ReadProfile then gives (expected to be InvalidArgument).
  std::string Corrupt(const std::string& name, const std::string& needle,
                      const std::string& replacement) {
    EXPECT_TRUE(WriteProfile(FullProfile(), dir_).ok());
    Replace(name, needle, replacement);
    absl::StatusOr<Profile> p = ReadProfile(dir_);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(p.status().message());
  }

  std::string dir_;
};

TEST_F(ProfileFilesTest, FullProfileRoundTrips) {
  const Profile p = FullProfile();
  ASSERT_TRUE(WriteProfile(p, dir_ + "/nested/profiles").ok());
  absl::StatusOr<Profile> read = ReadProfile(dir_ + "/nested/profiles");
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectEqual(p, *read);
  EXPECT_THAT(read->CommonMicroBatchSizes(), ElementsAre(1, 2, 4));
}

TEST_F(ProfileFilesTest, PartialProfileRoundTripsWithoutTheMissingSegments) {
  Profile p = FullProfile();
  p.statics[1] = {};
  p.compute[1].clear();
  p.compute[2].erase(2);
  ASSERT_TRUE(WriteProfile(p, dir_).ok());
  EXPECT_EQ(std::ifstream(Path("segment_1.json")).good(), false);
  absl::StatusOr<Profile> read = ReadProfile(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectEqual(p, *read);
  EXPECT_TRUE(read->compute[1].empty());
  EXPECT_TRUE(read->CommonMicroBatchSizes().empty());
  read->compute[1] = {{4, Measurement(1)}};
  EXPECT_THAT(read->CommonMicroBatchSizes(), ElementsAre(4));
}

TEST_F(ProfileFilesTest, StepTimesRoundTripAndAreZeroInOlderFiles) {
  ASSERT_TRUE(WriteProfile(FullProfile(), dir_).ok());
  EXPECT_THAT(Read("segment_1.json"), HasSubstr("\"optimizer_ms\": 0.5"));
  EXPECT_THAT(Read("segment_1.json"), HasSubstr("\"gradient_ms\": 0.25"));
  EXPECT_THAT(Read("segment_1.json"), HasSubstr("\"bucket_ms\": 0.125"));
  absl::StatusOr<Profile> read = ReadProfile(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->statics[1].optimizer_ms, 0.5);
  // A file written before the fields existed: none of them.
  for (const char* field : {"\"optimizer_ms\"", "\"gradient_ms\"", "\"bucket_ms\""}) {
    Replace("segment_1.json", field, absl::StrCat("\"unrelated_", field + 1));
  }
  read = ReadProfile(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->statics[1].optimizer_ms, 0);
  EXPECT_EQ(read->statics[1].gradient_ms, 0);
  EXPECT_EQ(read->statics[1].bucket_ms, 0);
  EXPECT_EQ(read->statics[1].parameter_count, 2000);
  EXPECT_EQ(read->statics[2].optimizer_ms, 0.75);
}

TEST_F(ProfileFilesTest, RepetitionsAndSpreadsRoundTripAndAreAbsentWhereUnknown) {
  Profile p = FullProfile();
  SegmentMeasurement& m = p.compute[1].at(2);
  m.timed_passes = 7;
  m.forward_spread_ms = 0.25;
  m.backward_spread_ms = 0.5;
  m.recompute_spread_ms = 0.125;
  ASSERT_TRUE(WriteProfile(p, dir_).ok());
  EXPECT_THAT(Read("segment_1.json"), HasSubstr("\"timed_passes\": 7"));
  EXPECT_THAT(Read("segment_1.json"), HasSubstr("\"recompute_spread_ms\": 0.125"));
  // Measurements without them (older profiles) are written as before: no such fields.
  EXPECT_THAT(Read("segment_0.json"), Not(HasSubstr("timed_passes")));
  EXPECT_THAT(Read("segment_0.json"), Not(HasSubstr("spread_ms")));
  absl::StatusOr<Profile> read = ReadProfile(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectEqual(p, *read);
  EXPECT_EQ(read->compute[1].at(2).timed_passes, 7);
  EXPECT_EQ(read->compute[1].at(2).backward_spread_ms, 0.5);
  EXPECT_EQ(read->compute[1].at(1).timed_passes, 0);
}

TEST_F(ProfileFilesTest, SegmentJoinsRoundTripMayBeNegativeAndAreAbsentInOlderFiles) {
  Profile p = FullProfile();
  p.joins[1] = {-0.25, -0.125, -0.5};
  p.joins[4] = {0.5, 0.75, 1.25};
  ASSERT_TRUE(WriteProfile(p, dir_).ok());
  EXPECT_THAT(Read("profile.json"), HasSubstr("\"segment_joins\""));
  absl::StatusOr<Profile> read = ReadProfile(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectEqual(p, *read);
  EXPECT_EQ(read->joins.at(1).backward_ms, -0.5);
  // Without joins (older profiles) no field is written, and reading gives none.
  ASSERT_TRUE(WriteProfile(FullProfile(), dir_ + "/old").ok());
  std::ifstream old(dir_ + "/old/profile.json");
  std::stringstream text;
  text << old.rdbuf();
  EXPECT_THAT(text.str(), Not(HasSubstr("segment_joins")));
  read = ReadProfile(dir_ + "/old");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->joins.empty());
  // A join's time may be negative but must be finite; a size appears once.
  Replace("profile.json", "\"backward_ms\": -0.5", "\"backward_ms\": \"fast\"");
  read = ReadProfile(dir_);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(),
              HasSubstr("profile.json: segment_joins[0].\"backward_ms\" is a string"));
  ASSERT_TRUE(WriteProfile(p, dir_).ok());
  Replace("profile.json", "\"micro_batch_size\": 4", "\"micro_batch_size\": 1");
  read = ReadProfile(dir_);
  EXPECT_THAT(read.status().message(),
              HasSubstr("segment_joins[1].\"micro_batch_size\" = 1 appears twice"));
  p.joins[2].forward_ms = std::nan("");
  EXPECT_THAT(ValidateProfile(p).message(),
              HasSubstr("segment join at micro-batch size 2: times (forward nan"));
}

TEST_F(ProfileFilesTest, MissingDirectoryOrProfileJsonIsNotFound) {
  absl::StatusOr<Profile> p = ReadProfile(dir_ + "/nowhere");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(p.status().message(), HasSubstr("nowhere has no profile.json"));
  EXPECT_THAT(p.status().message(), HasSubstr("--profiling"));
}

TEST_F(ProfileFilesTest, MalformedFilesAreNamed) {
  EXPECT_THAT(Corrupt("profile.json", "{", "["), HasSubstr("profile.json is not valid JSON"));
  EXPECT_THAT(Corrupt("segment_2.json", "\"segment\": 2", "\"segment\": 2,"),
              HasSubstr("segment_2.json is not valid JSON"));
  EXPECT_THAT(Corrupt("profile.json", "\"device\"", "\"devise\""),
              HasSubstr("profile.json: \"device\" is missing"));
  EXPECT_THAT(Corrupt("segment_0.json", "\"backward_ms\"", "\"bw\""),
              HasSubstr("segment_0.json: micro_batches[0].\"backward_ms\" is missing"));
  EXPECT_THAT(Corrupt("segment_1.json", "\"forward_ms\": 1.5", "\"forward_ms\": -1.5"),
              HasSubstr("segment_1.json: micro_batches[0].\"forward_ms\" = -1.5 ms is negative"));
  EXPECT_THAT(Corrupt("segment_1.json", "\"forward_ms\": 1.5", "\"forward_ms\": \"fast\""),
              HasSubstr("\"forward_ms\" is a string, expected a double"));
  EXPECT_THAT(Corrupt("segment_1.json", "\"optimizer_ms\": 0.5", "\"optimizer_ms\": -0.5"),
              HasSubstr("segment_1.json: \"optimizer_ms\" = -0.5 ms is negative"));
  EXPECT_THAT(Corrupt("segment_1.json", "\"optimizer_ms\": 0.5", "\"optimizer_ms\": \"slow\""),
              HasSubstr("\"optimizer_ms\" is a string, expected a double"));
  EXPECT_THAT(Corrupt("segment_1.json", "\"segment\": 1", "\"segment\": 0"),
              HasSubstr("segment_1.json: \"segment\" = 0 but the file is for segment 1"));
  EXPECT_THAT(Corrupt("segment_0.json", "\"micro_batch_size\": 2", "\"micro_batch_size\": 1"),
              HasSubstr("\"micro_batch_size\" = 1 appears twice"));
  EXPECT_THAT(Corrupt("profile.json", "\"num_segments\": 3", "\"num_segments\": 0"),
              HasSubstr("\"num_segments\" = 0 is not >= 1"));
  EXPECT_THAT(
      Corrupt("profile.json", "65536", "512"),
      HasSubstr("send_within_node is not sorted by bytes: point 1 (512 bytes) follows 1024"));
  EXPECT_THAT(Corrupt("profile.json", "\"2\":", "\"1\":"),
              HasSubstr("\"allreduce\" key \"1\" is not a ring size >= 2"));
  EXPECT_THAT(Corrupt("profile.json", "\"float32\"", "\"float64\""),
              HasSubstr("dtype = \"float64\" is not one of"));
}

TEST_F(ProfileFilesTest, WriteRefusesAnInvalidProfileAndLeavesNoFiles) {
  Profile p = FullProfile();
  p.compute[0][1].backward_ms = -3;
  absl::Status s = WriteProfile(p, dir_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("segment 0 at micro-batch size 1"));
  EXPECT_FALSE(std::ifstream(Path("profile.json")).good());
}

TEST_F(ProfileFilesTest, ColdTimesAndTheCacheRoundTripAndAreAbsentInOlderFiles) {
  Profile p = FullProfile();
  ASSERT_TRUE(WriteProfile(p, dir_).ok());
  // Without them (older profiles, segments too small to evict for): no such fields, read as 0.
  EXPECT_THAT(Read("profile.json"), Not(HasSubstr("cache_bytes")));
  EXPECT_THAT(Read("segment_1.json"), Not(HasSubstr("cold_ms")));
  absl::StatusOr<Profile> read = ReadProfile(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->cache_bytes, 0);
  EXPECT_EQ(read->compute[1].at(2).forward_cold_ms, 0);

  p.cache_bytes = int64_t{32} << 20;
  SegmentMeasurement& m = p.compute[1].at(2);
  m.forward_cold_ms = 1.25;
  m.backward_cold_ms = 2.5;
  m.recompute_cold_ms = 1.375;
  ASSERT_TRUE(WriteProfile(p, dir_).ok());
  EXPECT_THAT(Read("profile.json"), HasSubstr("\"cache_bytes\": 33554432"));
  EXPECT_THAT(Read("segment_1.json"), HasSubstr("\"recompute_cold_ms\": 1.375"));
  EXPECT_THAT(Read("segment_0.json"), Not(HasSubstr("cold_ms")));
  read = ReadProfile(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectEqual(p, *read);
  EXPECT_EQ(read->compute[1].at(2).backward_cold_ms, 2.5);
}

TEST_F(ProfileFilesTest, GraphMemoryRoundTripsAndIsAbsentInOlderFiles) {
  Profile p = FullProfile();
  p.compute[1].at(2).graph_memory_bytes = 1500;  // of activation_memory_bytes 1900
  ASSERT_TRUE(WriteProfile(p, dir_).ok());
  EXPECT_THAT(Read("segment_1.json"), HasSubstr("\"graph_memory_bytes\": 1500"));
  // Measurements without it (older profiles) are written as before.
  EXPECT_THAT(Read("segment_0.json"), Not(HasSubstr("graph_memory_bytes")));
  absl::StatusOr<Profile> read = ReadProfile(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectEqual(p, *read);
  EXPECT_EQ(read->compute[1].at(2).graph_memory_bytes, 1500);
  EXPECT_EQ(read->compute[1].at(1).graph_memory_bytes, 0);
}

TEST_F(ProfileFilesTest, StepMemoryRoundTripsAndIsAbsentInOlderFiles) {
  Profile p = FullProfile();
  p.statics[2].step_memory_bytes = 4096;
  ASSERT_TRUE(WriteProfile(p, dir_).ok());
  EXPECT_THAT(Read("segment_2.json"), HasSubstr("\"step_memory_bytes\": 4096"));
  EXPECT_THAT(Read("segment_1.json"), Not(HasSubstr("step_memory_bytes")));
  absl::StatusOr<Profile> read = ReadProfile(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->statics[2].step_memory_bytes, 4096);
  EXPECT_EQ(read->statics[1].step_memory_bytes, 0);
}

TEST(ProfileTest, ValidateNamesTheProblem) {
  EXPECT_TRUE(ValidateProfile(FullProfile()).ok());
  auto message = [](const Profile& p) {
    absl::Status s = ValidateProfile(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  Profile p = FullProfile();
  p.num_segments = 0;
  EXPECT_THAT(message(p), HasSubstr("num_segments = 0 must be > 0"));
  p = FullProfile();
  p.statics.pop_back();
  EXPECT_THAT(message(p), HasSubstr("statics has 2 and compute 3 entries for num_segments = 3"));
  p = FullProfile();
  p.compute[2][4].recompute_ms = -0.5;
  EXPECT_THAT(message(p), HasSubstr("segment 2 at micro-batch size 4: times"));
  p = FullProfile();
  p.compute[1][0] = Measurement(1);
  EXPECT_THAT(message(p), HasSubstr("segment 1 at micro-batch size 0: micro-batch sizes"));
  p = FullProfile();
  p.compute[1][2].stash_bytes = -1;
  EXPECT_THAT(message(p), HasSubstr("byte counts must be >= 0"));
  p = FullProfile();
  p.statics[0].step_memory_bytes = -1;
  EXPECT_THAT(message(p), HasSubstr("segment 0: parameter_count, state_bytes and "
                                    "step_memory_bytes must be >= 0"));
  p = FullProfile();
  p.compute[1][2].graph_memory_bytes = -1;
  EXPECT_THAT(message(p), HasSubstr("byte counts must be >= 0"));
  p = FullProfile();
  p.compute[1][2].graph_memory_bytes = 1901;  // activation_memory_bytes is 1900
  EXPECT_THAT(message(p), HasSubstr("segment 1 at micro-batch size 2: graph_memory_bytes (1901) "
                                    "is more than activation_memory_bytes (1900)"));
  p = FullProfile();
  p.compute[1][2].backward_spread_ms = std::nan("");
  EXPECT_THAT(message(p), HasSubstr("segment 1 at micro-batch size 2: timed_passes (0)"));
  p = FullProfile();
  p.compute[1][2].recompute_cold_ms = -1;
  EXPECT_THAT(message(p), HasSubstr("segment 1 at micro-batch size 2: cold times (forward 0, "
                                    "backward 0, recompute -1 ms) must be finite and >= 0"));
  p = FullProfile();
  p.cache_bytes = -1;
  EXPECT_THAT(message(p), HasSubstr("cache_bytes = -1 must be >= 0"));
  p = FullProfile();
  p.statics[1].optimizer_ms = std::nan("");
  EXPECT_THAT(message(p), HasSubstr("segment 1: optimizer_ms = nan must be finite and >= 0"));
  p = FullProfile();
  p.statics[0].bucket_ms = -1;
  EXPECT_THAT(message(p), HasSubstr("segment 0: bucket_ms = -1 must be finite and >= 0"));
  p = FullProfile();
  p.send_across_nodes.points = {{10, 1}, {10, 2}};
  EXPECT_THAT(message(p), HasSubstr("send_across_nodes is not sorted by bytes"));
  p = FullProfile();
  p.allreduce[1].points = {{10, 1}};
  EXPECT_THAT(message(p), HasSubstr("allreduce ring size 1 must be >= 2"));
  p = FullProfile();
  p.allreduce[2].points[0].second = -1;
  EXPECT_THAT(message(p), HasSubstr("allreduce[2] point 0"));
}

TEST(CostCurveTest, InterpolatesExtrapolatesAndClamps) {
  CostCurve curve;
  EXPECT_EQ(curve.Milliseconds(100), 0);  // empty
  curve.points = {{100, 1.0}};
  EXPECT_DOUBLE_EQ(curve.Milliseconds(50), 1.0);  // one point: its time
  EXPECT_DOUBLE_EQ(curve.Milliseconds(500), 1.0);
  curve.points = {{100, 1.0}, {200, 3.0}, {400, 4.0}};
  EXPECT_DOUBLE_EQ(curve.Milliseconds(100), 1.0);
  EXPECT_DOUBLE_EQ(curve.Milliseconds(150), 2.0);
  EXPECT_DOUBLE_EQ(curve.Milliseconds(200), 3.0);
  EXPECT_DOUBLE_EQ(curve.Milliseconds(300), 3.5);
  EXPECT_DOUBLE_EQ(curve.Milliseconds(400), 4.0);
  EXPECT_DOUBLE_EQ(curve.Milliseconds(800), 6.0);  // through the last two points
  EXPECT_DOUBLE_EQ(curve.Milliseconds(75), 0.5);   // through the first two points
  EXPECT_DOUBLE_EQ(curve.Milliseconds(10), 0.0);   // clamped at 0
  EXPECT_DOUBLE_EQ(curve.Milliseconds(0), 0.0);
  EXPECT_DOUBLE_EQ(curve.Milliseconds(-5), 0.0);
  curve.points = {{100, 5.0}, {200, 1.0}};  // falling: clamped beyond the end
  EXPECT_DOUBLE_EQ(curve.Milliseconds(1000), 0.0);
}

TEST(MergeProfileTest, ReplacesAndAdds) {
  Profile base = FullProfile();
  Profile update = FullProfile();
  for (auto& segment : update.compute) segment.clear();
  for (auto& statics : update.statics) statics = {};
  update.compute[1][2] = Measurement(9);   // replaces
  update.compute[1][8] = Measurement(11);  // adds
  update.statics[1] = {7, 70, 1.5};
  update.send_within_node.points = {{512, 0.005}, {65536, 0.3}};
  update.send_across_nodes.points.clear();
  update.allreduce.clear();
  update.allreduce[8].points = {{1 << 20, 4}};
  update.allreduce[2].points = {{1 << 22, 6}};
  base.joins[1] = {1, 2, 3};
  base.joins[2] = {4, 5, 6};
  update.joins[2] = {-1, -2, -3};  // replaces
  update.joins[8] = {7, 8, 9};     // adds
  update.cache_bytes = 1 << 25;
  ASSERT_TRUE(MergeProfile(update, base).ok());
  EXPECT_EQ(base.cache_bytes, 1 << 25);
  update.cache_bytes = 0;  // unknown: the base's stays
  ASSERT_TRUE(MergeProfile(update, base).ok());
  EXPECT_EQ(base.cache_bytes, 1 << 25);
  EXPECT_EQ(base.joins.size(), 3u);
  EXPECT_EQ(base.joins.at(1).forward_ms, 1);  // kept
  EXPECT_EQ(base.joins.at(2).backward_ms, -3);
  EXPECT_EQ(base.joins.at(8).recompute_ms, 8);
  EXPECT_EQ(base.compute[1].at(2), Measurement(9));
  EXPECT_EQ(base.compute[1].at(8), Measurement(11));
  EXPECT_EQ(base.compute[1].at(1), Measurement(1.5));  // kept
  EXPECT_EQ(base.compute[0], FullProfile().compute[0]);
  EXPECT_EQ(base.statics[1].parameter_count, 7);
  EXPECT_EQ(base.statics[1].optimizer_ms, 1.5);
  EXPECT_EQ(base.statics[0].parameter_count, 1000);  // update had nothing for segment 0
  EXPECT_EQ(base.statics[0].optimizer_ms, 0.25);
  EXPECT_THAT(base.send_within_node.points,
              ElementsAre(Pair(512, 0.005), Pair(1024, 0.01), Pair(65536, 0.3)));
  EXPECT_EQ(base.send_across_nodes.points, FullProfile().send_across_nodes.points);
  EXPECT_THAT(base.allreduce[2].points,
              ElementsAre(Pair(1 << 20, 1.5), Pair(1 << 22, 6), Pair(1 << 24, 20)));
  EXPECT_THAT(base.allreduce[8].points, ElementsAre(Pair(1 << 20, 4)));
  EXPECT_EQ(base.allreduce.size(), 3u);
}

TEST(MergeProfileTest, RefusesADifferentModelDeviceDtypeOrSegmentCount) {
  auto refused = [](const Profile& update) {
    Profile base = FullProfile();
    absl::Status s = MergeProfile(update, base);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    ExpectEqual(base, FullProfile());  // untouched
    return std::string(s.message());
  };
  Profile update = FullProfile();
  update.model = "{}";
  EXPECT_THAT(refused(update), HasSubstr("different models: \"{}\" (new)"));
  update = FullProfile();
  update.device = "NVIDIA H200";
  EXPECT_THAT(refused(update), HasSubstr("different devices: \"NVIDIA H200\" (new) vs \"cpu\""));
  update = FullProfile();
  update.dtype = "float16";
  EXPECT_THAT(refused(update), HasSubstr("different dtypes: \"float16\" (new) vs \"float32\""));
  update = FullProfile();
  update.num_segments = 4;
  EXPECT_THAT(refused(update), HasSubstr("different segment counts: \"4\" (new) vs \"3\""));
}

}  // namespace
}  // namespace varuna
