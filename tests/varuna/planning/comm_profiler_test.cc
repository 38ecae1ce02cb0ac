// Proves the communication profiler between real processes on 127.0.0.1 over Gloo: with 2 and
// 3 processes every rank returns the same profile, its curves have the requested sizes sorted
// and deduplicated with positive times that grow from the smallest to the largest message,
// all-reduce has every ring size 2..world, and gpus_per_node decides which transfer curve is
// filled. In one process: a world of one rank gives empty curves, and bad options are refused
// with messages that name them.
//
// The test binary is also the worker: the parent serves the TCP store on a free port and
// re-executes itself with --worker=profile once per rank (tests/util/subprocess.h).

#include "varuna/planning/comm_profiler.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/util/subprocess.h"
#include "varuna/launch/host.h"

namespace {

using ::testing::HasSubstr;
using varuna::CommProfile;
using varuna::CommProfileOptions;
using varuna::CostCurve;
using varuna::MeasureCommunication;
using varuna::comm::World;
using varuna::comm::WorldOptions;
using varuna::testing::ExitInfo;

constexpr int kCommFailed = 3;

// Unsorted, with a duplicate: the profile must come back sorted and deduplicated. The largest
// size is 16 MiB, not 1 MiB: on a loaded 2-core machine a small Gloo all-reduce among 3
// processes can take several milliseconds of scheduling delay, as long as a 1 MiB one.
const std::vector<int64_t> kRequestedSizes = {1 << 24, 1024, 65536, 1024};
const std::vector<int64_t> kSizes = {1024, 65536, 1 << 24};

// ---- a profile as one line of text, exact to the bit ----------------------------------

using Curves = std::map<std::string, std::vector<std::pair<int64_t, double>>>;

std::string CurveText(const CostCurve& curve) {
  std::string text;
  for (const auto& [bytes, ms] : curve.points) {
    char number[32];
    std::snprintf(number, sizeof(number), "%.17g", ms);
    absl::StrAppend(&text, text.empty() ? "" : ",", bytes, ":", number);
  }
  return text;
}

std::string ProfileText(const CommProfile& p) {
  std::string text = absl::StrCat("within=", CurveText(p.send_within_node),
                                  " across=", CurveText(p.send_across_nodes));
  for (const auto& [ring, curve] : p.allreduce) {
    absl::StrAppend(&text, " ring", ring, "=", CurveText(curve));
  }
  return text;
}

Curves ParseProfile(const std::string& text) {
  Curves curves;
  for (absl::string_view field : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
    std::vector<std::pair<int64_t, double>>& points = curves[kv.first];
    for (absl::string_view point : absl::StrSplit(kv.second, ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> bm = absl::StrSplit(point, ':');
      int64_t bytes = 0;
      double ms = 0;
      EXPECT_TRUE(absl::SimpleAtoi(bm.first, &bytes) && absl::SimpleAtod(bm.second, &ms)) << point;
      points.emplace_back(bytes, ms);
    }
  }
  return curves;
}

// The "PROFILE gpn=<g> ..." line of a worker's output, without its prefix.
std::string ProfileLine(const std::string& output, int gpus_per_node) {
  const std::string prefix = absl::StrCat("PROFILE gpn=", gpus_per_node, " ");
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StartsWith(line, prefix)) return std::string(line.substr(prefix.size()));
  }
  ADD_FAILURE() << "no line starting with \"" << prefix << "\" in\n" << output;
  return "";
}

// ---- worker side ------------------------------------------------------------------------

int RunWorker(const std::map<std::string, std::string>& args) {
  at::set_num_threads(1);
  WorldOptions options;
  options.rank = std::stoi(args.at("rank"));
  options.world_size = std::stoi(args.at("world_size"));
  options.master_port = std::stoi(args.at("port"));
  options.store_is_external = true;
  options.timeout = std::chrono::seconds(30);
  absl::StatusOr<std::unique_ptr<World>> world = World::Join(options);
  if (!world.ok()) {
    std::cerr << "join failed: " << world.status() << std::endl;
    std::_Exit(kCommFailed);
  }
  for (int gpus_per_node : {1, options.world_size}) {
    CommProfileOptions profile_options;
    profile_options.message_bytes = kRequestedSizes;
    profile_options.gpus_per_node = gpus_per_node;
    absl::StatusOr<CommProfile> profile = MeasureCommunication(**world, profile_options);
    if (!profile.ok()) {
      std::cerr << "profiling failed: " << profile.status() << std::endl;
      std::_Exit(kCommFailed);
    }
    std::cout << "PROFILE gpn=" << gpus_per_node << " " << ProfileText(*profile) << std::endl;
  }
  return 0;
}

// ---- test side --------------------------------------------------------------------------

// Runs `n` workers and returns each rank's output.
std::vector<ExitInfo> RunProfileJob(int n) {
  c10d::TCPStoreOptions store_options;
  store_options.port = 0;  // the OS picks a free one
  store_options.isServer = true;
  store_options.waitWorkers = false;
  store_options.timeout = std::chrono::seconds(60);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", store_options);
  const std::string port = std::to_string(store->getPort());
  const std::vector<varuna::testing::Process> processes =
      varuna::testing::SpawnRanks("profile", n, [&](int) {
        return std::vector<std::string>{"--world_size=" + std::to_string(n), "--port=" + port};
      });
  return varuna::testing::WaitAll(processes, std::chrono::seconds(90));
}

void ExpectGrowingCurve(const std::string& name, const std::vector<std::pair<int64_t, double>>& c) {
  ASSERT_EQ(c.size(), kSizes.size()) << name;
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].first, kSizes[i]) << name;
    EXPECT_TRUE(std::isfinite(c[i].second) && c[i].second > 0) << name << " " << c[i].second;
  }
  EXPECT_GT(c.back().second, c.front().second)
      << name << ": " << kSizes.back() << " bytes should take longer than " << kSizes.front();
}

void ExpectConsistentProfiles(int n) {
  const std::vector<ExitInfo> exits = RunProfileJob(n);
  const std::string all = varuna::testing::Describe(exits);
  for (const ExitInfo& e : exits) ASSERT_TRUE(e.exited && e.code == 0) << all;

  for (int gpus_per_node : {1, n}) {
    SCOPED_TRACE(absl::StrCat("gpus_per_node=", gpus_per_node));
    const std::string text = ProfileLine(exits[0].output, gpus_per_node);
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(ProfileLine(exits[r].output, gpus_per_node), text) << "rank " << r << " differs";
    }
    const Curves curves = ParseProfile(text);
    std::vector<std::string> names = {"across", "within"};
    for (int ring = 2; ring <= n; ++ring) names.push_back(absl::StrCat("ring", ring));
    std::vector<std::string> got;
    for (const auto& [name, points] : curves) got.push_back(name);
    EXPECT_THAT(got, ::testing::UnorderedElementsAreArray(names)) << text;

    // One node per rank: every pair crosses nodes; one node for all: none does.
    const std::string filled = gpus_per_node == 1 ? "across" : "within";
    const std::string empty = gpus_per_node == 1 ? "within" : "across";
    EXPECT_TRUE(curves.at(empty).empty()) << text;
    ExpectGrowingCurve(filled, curves.at(filled));
    for (int ring = 2; ring <= n; ++ring) {
      const std::string name = absl::StrCat("ring", ring);
      ExpectGrowingCurve(name, curves.at(name));
    }
  }
}

TEST(CommProfilerTest, TwoProcessesAgreeOnSortedGrowingCurves) { ExpectConsistentProfiles(2); }

TEST(CommProfilerTest, ThreeProcessesAgreeOnSortedGrowingCurves) { ExpectConsistentProfiles(3); }

WorldOptions SingleProcess() {
  WorldOptions options;
  options.master_port = varuna::FreeTcpPort();
  options.timeout = std::chrono::seconds(10);
  return options;
}

TEST(CommProfilerTest, ASingleRankWorldGivesEmptyCurves) {
  absl::StatusOr<std::unique_ptr<World>> world = World::Join(SingleProcess());
  ASSERT_TRUE(world.ok()) << world.status();
  CommProfileOptions options;
  options.message_bytes = kSizes;
  absl::StatusOr<CommProfile> profile = MeasureCommunication(**world, options);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_TRUE(profile->send_within_node.points.empty());
  EXPECT_TRUE(profile->send_across_nodes.points.empty());
  EXPECT_TRUE(profile->allreduce.empty());
}

TEST(CommProfilerTest, BadOptionsAreRefusedByName) {
  absl::StatusOr<std::unique_ptr<World>> world = World::Join(SingleProcess());
  ASSERT_TRUE(world.ok()) << world.status();
  const auto error = [&](const CommProfileOptions& options) {
    absl::StatusOr<CommProfile> profile = MeasureCommunication(**world, options);
    EXPECT_FALSE(profile.ok());
    return profile.ok() ? std::string("OK") : profile.status().ToString();
  };
  CommProfileOptions good;
  good.message_bytes = kSizes;

  CommProfileOptions o = good;
  o.message_bytes.clear();
  EXPECT_THAT(error(o), HasSubstr("INVALID_ARGUMENT: communication profile: message_bytes is "
                                  "empty; give at least one message size in bytes"));
  o = good;
  o.message_bytes = {1024, 0};
  EXPECT_THAT(error(o), HasSubstr("message size 0 bytes must be at least 1"));
  o = good;
  o.warmup = -1;
  EXPECT_THAT(error(o), HasSubstr("warmup -1 must be >= 0"));
  o = good;
  o.repeats = 0;
  EXPECT_THAT(error(o), HasSubstr("repeats 0 must be >= 1"));
  o = good;
  o.gpus_per_node = 0;
  EXPECT_THAT(error(o), HasSubstr("gpus_per_node 0 must be >= 1"));
  o = good;
  o.device = c10::Device(c10::kCUDA, 3);  // the world's cuda_device is 0
  EXPECT_THAT(error(o), HasSubstr("device cuda:3 is neither the CPU nor this rank's CUDA device "
                                  "cuda:0"));
  o = good;
  o.device = c10::Device(c10::kMeta);
  EXPECT_THAT(error(o), HasSubstr("device meta is neither the CPU"));
}

TEST(CommProfilerTest, MergeIntoProfileReplacesTheCommunicationCurves) {
  varuna::Profile profile;
  profile.send_within_node.points = {{1, 1.0}, {2, 2.0}};
  profile.send_across_nodes.points = {{1, 5.0}};
  profile.allreduce[2].points = {{1, 3.0}};
  profile.allreduce[4].points = {{1, 4.0}};
  profile.num_segments = 7;
  CommProfile comm;
  comm.send_across_nodes.points = {{8, 0.5}, {16, 0.75}};
  comm.allreduce[2].points = {{8, 0.25}};
  varuna::MergeIntoProfile(comm, profile);
  EXPECT_TRUE(profile.send_within_node.points.empty());
  EXPECT_EQ(profile.send_across_nodes.points, comm.send_across_nodes.points);
  ASSERT_EQ(profile.allreduce.size(), 1u);
  EXPECT_EQ(profile.allreduce[2].points, comm.allreduce[2].points);
  EXPECT_EQ(profile.num_segments, 7);
}

}  // namespace

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) return RunWorker(*args);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
