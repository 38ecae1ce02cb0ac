#include "varuna/planning/auto_config.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varuna/pipeline/schedule.h"

namespace varuna {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

// A constant cost: `ms` at any message size.
CostCurve Flat(double ms) {
  CostCurve curve;
  curve.points = {{1, ms}, {int64_t{1} << 40, ms}};
  return curve;
}

// A synthetic profile: `segments` equal segments measured at `sizes`; a segment at micro-batch b
// takes forward (1 + b) ms, recompute the same, backward twice that; it keeps 1 MiB * b of
// activations, sends and stashes 1 KiB * b, and holds `state_bytes` of state. Hops cost `hop_ms`
// within and across nodes, all-reduces `allreduce_ms` on rings 2..16.
Profile MakeProfile(int segments, std::vector<int> sizes, double hop_ms, double allreduce_ms,
                    int64_t state_bytes = 1 << 20) {
  Profile profile;
  profile.model = "{}";
  profile.device = "cpu";
  profile.dtype = "float32";
  profile.num_segments = segments;
  profile.statics.assign(segments, SegmentStatic{1000, state_bytes});
  profile.compute.resize(segments);
  for (int k = 0; k < segments; ++k) {
    for (int b : sizes) {
      SegmentMeasurement m;
      m.forward_ms = 1 + b;
      m.recompute_ms = 1 + b;
      m.backward_ms = 2 * (1 + b);
      m.activation_memory_bytes = int64_t{b} << 20;
      m.output_bytes = k + 1 < segments ? int64_t{b} << 10 : 0;
      m.stash_bytes = int64_t{b} << 10;
      profile.compute[k][b] = m;
    }
  }
  profile.send_within_node = Flat(hop_ms);
  profile.send_across_nodes = Flat(hop_ms);
  for (int ring = 2; ring <= 16; ++ring) profile.allreduce[ring] = Flat(allreduce_ms);
  return profile;
}

ClusterSpec Cluster(int nodes, int gpus_per_node, int64_t memory = 64 * kGiB) {
  ClusterSpec cluster;
  cluster.nodes = nodes;
  cluster.gpus_per_node = gpus_per_node;
  cluster.gpu_memory_bytes = memory;
  return cluster;
}

AutoConfigOptions Options(int64_t global_batch, double memory_fraction = 1.0) {
  AutoConfigOptions options;
  options.global_batch = global_batch;
  options.memory_fraction = memory_fraction;
  return options;
}

int64_t Peak(const Candidate& c) {
  return *std::max_element(c.simulation.peak_memory_bytes.begin(),
                           c.simulation.peak_memory_bytes.end());
}

std::vector<SegmentRange> Ranges(std::vector<std::pair<int, int>> pairs) {
  std::vector<SegmentRange> ranges;
  for (auto [first, last] : pairs) ranges.push_back(SegmentRange{first, last});
  return ranges;
}

TEST(BalancedPartitionTest, EqualCostsSplitEvenly) {
  EXPECT_EQ(BalancedPartition(std::vector<double>(8, 1.5), 4),
            Ranges({{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(BalancedPartition(std::vector<double>(6, 1.0), 3), Ranges({{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(BalancedPartition(std::vector<double>(5, 1.0), 1), Ranges({{0, 4}}));
  EXPECT_EQ(BalancedPartition(std::vector<double>(3, 1.0), 3), Ranges({{0, 0}, {1, 1}, {2, 2}}));
}

TEST(BalancedPartitionTest, HeavyLastSegmentGetsAStageOfItsOwn) {
  // Six layers of cost 1 and a head of cost 4 (GPT-2's LM head): the head stands alone.
  EXPECT_EQ(BalancedPartition({1, 1, 1, 1, 1, 1, 4}, 3), Ranges({{0, 1}, {2, 5}, {6, 6}}));
  // A lighter head shares a stage, but with fewer segments than the others.
  const std::vector<SegmentRange> ranges = BalancedPartition({1, 1, 1, 1, 1, 1, 1, 2.5}, 3);
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges.back().last, 7);
  EXPECT_LT(ranges.back().size(), ranges.front().size());
}

TEST(BalancedPartitionTest, RejectsImpossiblePartCounts) {
  EXPECT_TRUE(BalancedPartition({1, 2}, 0).empty());
  EXPECT_TRUE(BalancedPartition({1, 2}, 3).empty());
  EXPECT_TRUE(BalancedPartition({}, 1).empty());
}

// Every split of `cost` into `parts` ranges, as the list of range ends, in lexicographic order.
void EnumerateSplits(int n, int parts, int first, std::vector<int>& ends,
                     const std::function<void(const std::vector<int>&)>& visit) {
  if (parts == 0) {
    if (first == n) visit(ends);
    return;
  }
  for (int last = first; last <= n - parts; ++last) {
    ends.push_back(last);
    EnumerateSplits(n, parts - 1, last + 1, ends, visit);
    ends.pop_back();
  }
}

TEST(BalancedPartitionTest, MatchesBruteForceOnSmallInputs) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> value(0, 9);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + trial % 7;
    std::vector<double> cost(n);
    for (double& c : cost) c = value(rng);
    for (int parts = 1; parts <= n; ++parts) {
      double best = std::numeric_limits<double>::infinity();
      std::vector<int> best_ends;
      std::vector<int> ends;
      EnumerateSplits(n, parts, 0, ends, [&](const std::vector<int>& split) {
        double largest = 0;
        int first = 0;
        for (int last : split) {
          double sum = 0;
          for (int k = first; k <= last; ++k) sum += cost[k];
          largest = std::max(largest, sum);
          first = last + 1;
        }
        if (largest < best) {  // strict: keeps the earliest optimal split
          best = largest;
          best_ends = split;
        }
      });
      const std::vector<SegmentRange> ranges = BalancedPartition(cost, parts);
      ASSERT_EQ(static_cast<int>(ranges.size()), parts);
      std::vector<int> got_ends;
      int expected_first = 0;
      for (const SegmentRange& range : ranges) {
        EXPECT_EQ(range.first, expected_first);
        got_ends.push_back(range.last);
        expected_first = range.last + 1;
      }
      EXPECT_EQ(got_ends, best_ends) << "trial " << trial << " parts " << parts;
    }
  }
}

TEST(SearchConfigurationsTest, ExpensiveAllReduceFavoursDeepPipelines) {
  const Profile profile = MakeProfile(8, {1, 2, 4, 8}, /*hop_ms=*/0.01, /*allreduce_ms=*/1000);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 8), Options(64));
  ASSERT_TRUE(result.ok()) << result.status();
  const Candidate& best = result->front();
  EXPECT_EQ(best.pipeline_stages, 8);
  EXPECT_EQ(best.data_parallel, 1);
  EXPECT_EQ(best.stages.size(), 8u);
  EXPECT_EQ(best.num_micro_batches, (64 + best.micro_batch - 1) / best.micro_batch);
}

TEST(SearchConfigurationsTest, FreeAllReduceAndExpensiveHopsFavourDataParallelism) {
  const Profile profile = MakeProfile(8, {1, 2, 4, 8}, /*hop_ms=*/1000, /*allreduce_ms=*/0);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(2, 4), Options(64));
  ASSERT_TRUE(result.ok()) << result.status();
  const Candidate& best = result->front();
  EXPECT_EQ(best.pipeline_stages, 1);
  EXPECT_EQ(best.data_parallel, 8);
  EXPECT_EQ(best.micro_batch, 8);  // the per-replica batch in one micro-batch
  EXPECT_EQ(best.num_micro_batches, 1);
  EXPECT_EQ(best.stages, Ranges({{0, 7}}));
  // P = 1, m = 1: one forward and one backward of all eight segments at b = 8, no recompute.
  EXPECT_DOUBLE_EQ(best.simulation.minibatch_ms, 8 * (9 + 18));
}

TEST(SearchConfigurationsTest, HopsAcrossNodesUseTheirOwnCost) {
  Profile profile = MakeProfile(4, {1, 2}, /*hop_ms=*/0, /*allreduce_ms=*/0);
  profile.send_across_nodes = Flat(500);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(2, 2), Options(4));
  ASSERT_TRUE(result.ok()) << result.status();
  for (const Candidate& c : *result) {
    // P = 2 keeps each pipeline inside a node; P = 3 and 4 cross between ranks 1 and 2.
    if (c.pipeline_stages >= 3) {
      EXPECT_GT(c.simulation.minibatch_ms, 1000) << "P=" << c.pipeline_stages;
    } else {
      EXPECT_LT(c.simulation.minibatch_ms, 500) << "P=" << c.pipeline_stages;
    }
  }
}

TEST(SearchConfigurationsTest, MemoryCapThatForbidsOneStageMakesAPipelineWin) {
  // Eight segments of 1 GiB state: P = 1 needs 8 GiB, P = 2 about 4 GiB.
  const Profile profile = MakeProfile(8, {1, 2}, /*hop_ms=*/0, /*allreduce_ms=*/0, kGiB);
  absl::StatusOr<std::vector<Candidate>> unlimited =
      SearchConfigurations(profile, Cluster(1, 4), Options(8));
  ASSERT_TRUE(unlimited.ok()) << unlimited.status();
  EXPECT_EQ(unlimited->front().pipeline_stages, 1);

  absl::StatusOr<std::vector<Candidate>> capped =
      SearchConfigurations(profile, Cluster(1, 4, 6 * kGiB), Options(8, 0.9));
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_GE(capped->front().pipeline_stages, 2);
  for (const Candidate& c : *capped) {
    EXPECT_NE(c.pipeline_stages, 1);
    EXPECT_LE(static_cast<double>(Peak(c)), 0.9 * 6 * kGiB);
  }
}

TEST(SearchConfigurationsTest, MicroBatchesThatDoNotFitAreDropped) {
  Profile profile = MakeProfile(2, {1, 2, 4, 8}, /*hop_ms=*/0, /*allreduce_ms=*/0);
  for (auto& segment : profile.compute) {
    for (auto& [b, m] : segment) m.activation_memory_bytes = b * kGiB;
  }
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 2, 5 * kGiB), Options(16));
  ASSERT_TRUE(result.ok()) << result.status();
  bool saw_two = false;
  for (const Candidate& c : *result) {
    EXPECT_LE(c.micro_batch, 2) << "P=" << c.pipeline_stages;
    saw_two = saw_two || c.micro_batch == 2;
  }
  EXPECT_TRUE(saw_two);
}

TEST(SearchConfigurationsTest, RankingIsSortedAndCoversTheSpace) {
  const Profile profile = MakeProfile(4, {1, 2, 4}, /*hop_ms=*/0.5, /*allreduce_ms=*/3);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 4), Options(16));
  ASSERT_TRUE(result.ok()) << result.status();
  // P in {1,2,3,4} with D = 4,2,1,1, three sizes each, all within the replica batch.
  EXPECT_EQ(result->size(), 12u);
  for (size_t i = 1; i < result->size(); ++i) {
    EXPECT_LE((*result)[i - 1].simulation.minibatch_ms, (*result)[i].simulation.minibatch_ms);
  }
  for (const Candidate& c : *result) {
    EXPECT_LE(c.pipeline_stages * c.data_parallel, 4);
    ASSERT_EQ(static_cast<int>(c.stages.size()), c.pipeline_stages);
    EXPECT_EQ(c.stages.front().first, 0);
    EXPECT_EQ(c.stages.back().last, 3);
  }
}

TEST(SearchConfigurationsTest, OneStageOneGpuWorks) {
  const Profile profile = MakeProfile(1, {1, 2, 4}, /*hop_ms=*/0, /*allreduce_ms=*/0);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 1), Options(4));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->size(), 3u);
  const Candidate& best = result->front();
  EXPECT_EQ(best.pipeline_stages, 1);
  EXPECT_EQ(best.data_parallel, 1);
  EXPECT_EQ(best.micro_batch, 4);
  // m (F + B) with no recompute: b = 4 is 1 * (5 + 10), b = 2 is 2 * (3 + 6), b = 1 is 4 * 6.
  EXPECT_DOUBLE_EQ(best.simulation.minibatch_ms, 15);
  EXPECT_DOUBLE_EQ((*result)[1].simulation.minibatch_ms, 18);
  EXPECT_DOUBLE_EQ((*result)[2].simulation.minibatch_ms, 24);
}

TEST(SearchConfigurationsTest, OneStageChargesEachMicroBatchAndEachStepCostOnce) {
  // Three segments in one stage, m micro-batches of b: each micro-batch costs the sum of the
  // segments' F + B once (no recompute, no per-micro-batch extra), the step adds the segments'
  // gradient passes and Adam steps once each, and no bucket copies (D = 1).
  Profile profile = MakeProfile(3, {1, 4}, /*hop_ms=*/0, /*allreduce_ms=*/0);
  for (SegmentStatic& s : profile.statics) {
    s.gradient_ms = 0.5;
    s.optimizer_ms = 0.25;
    s.bucket_ms = 100;
  }
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 1), Options(8));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->size(), 2u);
  for (const Candidate& c : *result) {
    const int b = c.micro_batch;
    SCOPED_TRACE(absl::StrFormat("b=%d", b));
    ASSERT_EQ(c.num_micro_batches, 8 / b);
    const double per_micro_batch = 3 * ((1.0 + b) + 2 * (1.0 + b));
    EXPECT_DOUBLE_EQ(c.simulation.minibatch_ms, (8 / b) * per_micro_batch + 3 * 0.5 + 3 * 0.25);
    EXPECT_DOUBLE_EQ(c.simulation.stage_busy_ms[0], (8 / b) * per_micro_batch);
  }
}

TEST(SearchConfigurationsTest, GradientPassAddsBucketCopiesOnlyWithReplicas) {
  const Profile plain = MakeProfile(2, {1, 2}, /*hop_ms=*/0.5, /*allreduce_ms=*/2);
  Profile with_pass = plain;
  for (SegmentStatic& s : with_pass.statics) {
    s.gradient_ms = 1;
    s.bucket_ms = 10;
  }
  auto times = [](const Profile& p) {
    std::map<std::tuple<int, int, int>, double> ms;
    absl::StatusOr<std::vector<Candidate>> all = SearchConfigurations(p, Cluster(1, 2), Options(4));
    EXPECT_TRUE(all.ok()) << all.status();
    for (const Candidate& c : *all) {
      ms[{c.pipeline_stages, c.data_parallel, c.micro_batch}] = c.simulation.minibatch_ms;
    }
    return ms;
  };
  const auto before = times(plain), after = times(with_pass);
  ASSERT_EQ(before.size(), after.size());
  for (const auto& [key, ms] : before) {
    const auto [p, d, b] = key;
    SCOPED_TRACE(absl::StrFormat("P=%d D=%d b=%d", p, d, b));
    // P=1 x D=2: one stage of both segments, 2 x (1 + 10) ms; P=2 x D=1: 1 ms per stage.
    EXPECT_DOUBLE_EQ(after.at(key), ms + (p == 1 ? 22 : 1));
  }
}

TEST(SearchConfigurationsTest, OptimizerStepAddsTheSlowestStagesSum) {
  // Segments step in 3 ms and 1 ms: one stage steps in 4 ms, two stages in parallel in 3 ms.
  const Profile plain = MakeProfile(2, {1, 2}, /*hop_ms=*/0.5, /*allreduce_ms=*/2);
  Profile with_optimizer = plain;
  with_optimizer.statics[0].optimizer_ms = 3;
  with_optimizer.statics[1].optimizer_ms = 1;
  absl::StatusOr<std::vector<Candidate>> before =
      SearchConfigurations(plain, Cluster(1, 2), Options(4));
  absl::StatusOr<std::vector<Candidate>> after =
      SearchConfigurations(with_optimizer, Cluster(1, 2), Options(4));
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(before->size(), after->size());
  std::map<std::tuple<int, int, int>, double> plain_ms;
  for (const Candidate& c : *before) {
    plain_ms[{c.pipeline_stages, c.data_parallel, c.micro_batch}] = c.simulation.minibatch_ms;
  }
  int one_stage = 0;
  int two_stages = 0;
  for (const Candidate& c : *after) {
    SCOPED_TRACE(
        absl::StrFormat("P=%d D=%d b=%d", c.pipeline_stages, c.data_parallel, c.micro_batch));
    const auto key = std::make_tuple(c.pipeline_stages, c.data_parallel, c.micro_batch);
    ASSERT_EQ(plain_ms.count(key), 1u);
    EXPECT_DOUBLE_EQ(c.simulation.minibatch_ms,
                     plain_ms.at(key) + (c.pipeline_stages == 1 ? 4.0 : 3.0));
    (c.pipeline_stages == 1 ? one_stage : two_stages)++;
  }
  EXPECT_GT(one_stage, 0);
  EXPECT_GT(two_stages, 0);
}

TEST(SearchConfigurationsTest, GlobalBatchNotDivisibleByDSkipsThatD) {
  const Profile profile = MakeProfile(4, {1, 2}, /*hop_ms=*/0, /*allreduce_ms=*/0);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 4), Options(6));
  ASSERT_TRUE(result.ok()) << result.status();
  bool saw_two = false;
  for (const Candidate& c : *result) {
    EXPECT_NE(c.data_parallel, 4);
    EXPECT_EQ(6 % c.data_parallel, 0);
    saw_two = saw_two || c.data_parallel == 2;
  }
  EXPECT_TRUE(saw_two);
}

TEST(SearchConfigurationsTest, MicroBatchesLargerThanTheReplicaBatchAreSkipped) {
  const Profile profile = MakeProfile(2, {1, 2, 4, 8}, /*hop_ms=*/0, /*allreduce_ms=*/0);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 2), Options(4));
  ASSERT_TRUE(result.ok()) << result.status();
  for (const Candidate& c : *result) {
    EXPECT_LE(c.micro_batch, 4 / c.data_parallel);
  }
}

TEST(SearchConfigurationsErrorsTest, BadClusterOrBatchIsNamed) {
  const Profile profile = MakeProfile(2, {1}, 0, 0);
  auto error = [&](const ClusterSpec& cluster, const AutoConfigOptions& options) {
    absl::StatusOr<std::vector<Candidate>> result = SearchConfigurations(profile, cluster, options);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(result.status().message());
  };
  EXPECT_THAT(error(Cluster(0, 1), Options(4)), HasSubstr("nodes=0"));
  EXPECT_THAT(error(Cluster(1, 0), Options(4)), HasSubstr("gpus_per_node=0"));
  EXPECT_THAT(error(Cluster(1, 1, 0), Options(4)), HasSubstr("gpu_memory_bytes=0"));
  EXPECT_THAT(error(Cluster(1, 1), Options(0)), HasSubstr("global_batch=0"));
  EXPECT_THAT(error(Cluster(1, 1), Options(4, 0)), HasSubstr("memory_fraction=0"));
  // One segment on two GPUs: only P = 1, D = 2, and 3 sequences do not split over 2 replicas.
  const Profile one = MakeProfile(1, {1}, 0, 0);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(one, Cluster(1, 2), Options(3));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("global_batch=3"));
}

TEST(SearchConfigurationsErrorsTest, SegmentWithoutMeasurementsIsNamed) {
  Profile profile = MakeProfile(3, {1, 2}, 0, 0);
  profile.compute[2].clear();
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 1), Options(4));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("segment 2"));
}

TEST(SearchConfigurationsErrorsTest, MissingAllReduceRingSkipsOnlyThatWidth) {
  Profile profile = MakeProfile(2, {1, 2}, 0, 1);
  profile.allreduce.erase(4);
  std::vector<std::string> skipped;
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 4), Options(8), &skipped);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->empty());
  for (const Candidate& c : *result) EXPECT_EQ(c.data_parallel, 2);  // P=2 x D=2 only
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("P=1 D=4: "));
  EXPECT_THAT(skipped[0], HasSubstr("ring size 4"));

  // With 1 segment only P=1 exists, so nothing can be priced: the error names the ring.
  Profile one = MakeProfile(1, {1, 2}, 0, 1);
  one.allreduce.erase(4);
  result = SearchConfigurations(one, Cluster(1, 4), Options(8));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("ring size 4"));
}

TEST(SearchConfigurationsErrorsTest, MissingCrossNodeSendsSkipPipelinesAcrossNodes) {
  Profile profile = MakeProfile(2, {1, 2}, 1, 1);
  profile.send_across_nodes.points.clear();
  std::vector<std::string> skipped;
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(2, 1), Options(4), &skipped);
  ASSERT_TRUE(result.ok()) << result.status();
  for (const Candidate& c : *result) EXPECT_EQ(c.pipeline_stages, 1);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("P=2 D=1: "));
  EXPECT_THAT(skipped[0], HasSubstr("send_across_nodes"));

  // Without the ring of 2 either, no configuration remains: the first gap is named.
  profile.allreduce.erase(2);
  result = SearchConfigurations(profile, Cluster(2, 1), Options(4));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("ring size 2"));
}

TEST(SearchConfigurationsErrorsTest, NothingFitsGivesSmallestPeakAndMemory) {
  const Profile profile = MakeProfile(4, {1, 2}, 0, 0, kGiB);
  absl::StatusOr<std::vector<Candidate>> all =
      SearchConfigurations(profile, Cluster(1, 2), Options(4));
  ASSERT_TRUE(all.ok()) << all.status();
  int64_t smallest = std::numeric_limits<int64_t>::max();
  for (const Candidate& c : *all) smallest = std::min(smallest, Peak(c));

  const int64_t memory = 2 * kGiB;  // less than two segments' state
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 2, memory), Options(4, 0.5));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(),
              HasSubstr("smallest simulated peak is " + std::to_string(smallest) + " bytes"));
  EXPECT_THAT(result.status().message(), HasSubstr(std::to_string(memory / 2) + " bytes"));
}

TEST(SimulateCandidateTest, RepricesAChosenCandidateOnAnotherMeasurement) {
  const Profile first = MakeProfile(4, {1, 2}, /*hop_ms=*/0.5, /*allreduce_ms=*/2);
  absl::StatusOr<std::vector<Candidate>> found =
      SearchConfigurations(first, Cluster(1, 2), Options(8));
  ASSERT_TRUE(found.ok()) << found.status();
  for (const Candidate& c : *found) {
    SCOPED_TRACE(
        absl::StrFormat("P=%d D=%d b=%d", c.pipeline_stages, c.data_parallel, c.micro_batch));
    // On the profile it was found with: the search's own simulation.
    absl::StatusOr<SimulationResult> same = SimulateCandidate(first, Cluster(1, 2), Options(8), c);
    ASSERT_TRUE(same.ok()) << same.status();
    EXPECT_DOUBLE_EQ(same->minibatch_ms, c.simulation.minibatch_ms);
    // On a measurement where every compute time doubled (hops, all-reduce unchanged): its stage
    // split is kept, and it costs more.
    Profile slower = first;
    for (auto& segment : slower.compute) {
      for (auto& [b, m] : segment) {
        m.forward_ms *= 2;
        m.recompute_ms *= 2;
        m.backward_ms *= 2;
      }
    }
    absl::StatusOr<SimulationResult> repriced =
        SimulateCandidate(slower, Cluster(1, 2), Options(8), c);
    ASSERT_TRUE(repriced.ok()) << repriced.status();
    EXPECT_GT(repriced->minibatch_ms, c.simulation.minibatch_ms);
    EXPECT_DOUBLE_EQ(repriced->stage_busy_ms[0], 2 * c.simulation.stage_busy_ms[0]);
  }
}

TEST(SimulateCandidateTest, RefusesASplitOfAnotherModelAndAnUnmeasuredSize) {
  const Profile profile = MakeProfile(4, {1, 2}, /*hop_ms=*/0.5, /*allreduce_ms=*/2);
  Candidate c;
  c.pipeline_stages = 2;
  c.data_parallel = 1;
  c.micro_batch = 2;
  c.num_micro_batches = 4;
  c.stages = Ranges({{0, 1}, {2, 2}});  // segment 3 left out
  EXPECT_THAT(
      std::string(SimulateCandidate(profile, Cluster(1, 2), Options(8), c).status().message()),
      HasSubstr("do not split the profile's 4 segments in order"));
  c.stages = Ranges({{0, 3}, {0, 3}});  // every segment twice
  EXPECT_THAT(
      std::string(SimulateCandidate(profile, Cluster(1, 2), Options(8), c).status().message()),
      HasSubstr("do not split the profile's 4 segments in order"));
  c.pipeline_stages = 3;
  c.stages = Ranges({{0, 1}, {2, 3}, {1, 3}});
  EXPECT_THAT(
      std::string(SimulateCandidate(profile, Cluster(1, 3), Options(8), c).status().message()),
      HasSubstr("do not split the profile's 4 segments in order"));
  c.pipeline_stages = 2;
  c.stages = Ranges({{0, 1}, {2, 3}});
  EXPECT_TRUE(SimulateCandidate(profile, Cluster(1, 2), Options(8), c).ok());
  c.data_parallel = 2;
  EXPECT_THAT(
      std::string(SimulateCandidate(profile, Cluster(1, 2), Options(8), c).status().message()),
      HasSubstr("P=2 x D=2 needs more GPUs than the cluster's 2"));
  c.data_parallel = 1;
  c.micro_batch = 4;
  EXPECT_THAT(
      std::string(SimulateCandidate(profile, Cluster(1, 2), Options(8), c).status().message()),
      HasSubstr("profile segment 0 has no measurement at micro-batch 4"));
}

TEST(FormatCandidatesTest, ShowsTheRequestedRows) {
  const Profile profile = MakeProfile(4, {1, 2}, 0.5, 3);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 4), Options(8));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_GE(result->size(), 3u);
  const std::string table = FormatCandidates(*result, 2);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 3);  // header + 2 rows
  EXPECT_THAT(table, HasSubstr("time_ms"));
  EXPECT_THAT(table, HasSubstr("stages"));
  const Candidate& best = result->front();
  EXPECT_THAT(table, HasSubstr(absl::StrFormat("%12.3f", best.simulation.minibatch_ms)));
  std::string boundaries;
  for (const SegmentRange& r : best.stages) {
    if (!boundaries.empty()) boundaries += "|";
    boundaries += r.first == r.last ? std::to_string(r.first)
                                    : std::to_string(r.first) + "-" + std::to_string(r.last);
  }
  EXPECT_THAT(table, HasSubstr(boundaries));
  const std::string all_rows = FormatCandidates(*result, 100);
  EXPECT_EQ(std::count(all_rows.begin(), all_rows.end(), '\n'),
            static_cast<std::ptrdiff_t>(result->size()) + 1);
  const std::string header_only = FormatCandidates(*result, 0);
  EXPECT_EQ(std::count(header_only.begin(), header_only.end(), '\n'), 1);
}

// The model's terms (docs/profiling.md, "What the simulator charges") on profiles whose F, R and
// B differ, so that charging the wrong one shows.
Profile DistinctTimes(int segments, int b) {
  Profile profile = MakeProfile(segments, {b}, /*hop_ms=*/0, /*allreduce_ms=*/0);
  for (auto& sizes : profile.compute) {
    sizes[b].forward_ms = 1;    // F: graph-free forward
    sizes[b].recompute_ms = 5;  // R: forward with a graph
    sizes[b].backward_ms = 2;
  }
  return profile;
}

TEST(SimulatorTermsTest, OneStageChargesTheGraphForwardAndBackwardButNeverFOrAnExtraR) {
  // P = 1 (the H100 run's choice): the schedule recomputes nothing; each micro-batch is one
  // forward with a graph (R's measurement) and one backward, over every segment.
  const Profile profile = DistinctTimes(3, 2);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 1), Options(8));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->size(), 1u);
  const Candidate& c = result->front();
  EXPECT_EQ(c.num_micro_batches, 4);
  EXPECT_DOUBLE_EQ(c.simulation.stage_busy_ms[0], 4 * 3 * (5.0 + 2.0));
  EXPECT_DOUBLE_EQ(c.simulation.minibatch_ms, 4 * 3 * (5.0 + 2.0));
}

TEST(SimulatorTermsTest, AStageKeepsEveryGraphAndOneSegmentsWorkingMemory) {
  // Three segments at b = 4 (peaks 4 MiB each): their graphs keep 1, 2 and 3 MiB, so their
  // backwards need 3, 2 and 1 MiB more at their peaks, the first two also the gradient they
  // receive (4 KiB, their output's size). One stage, two micro-batches one after the other:
  // the state less the fp32 master gradients (released: D = 1), one stash, every graph, and the
  // largest working memory once (not the peaks summed).
  constexpr int64_t kMiB = int64_t{1} << 20;
  Profile profile = MakeProfile(3, {4}, /*hop_ms=*/0, /*allreduce_ms=*/0);
  for (int k = 0; k < 3; ++k) profile.compute[k].at(4).graph_memory_bytes = (k + 1) * kMiB;
  absl::StatusOr<std::vector<Candidate>> found =
      SearchConfigurations(profile, Cluster(1, 1), Options(8));
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->size(), 1u);
  const Candidate& one = found->front();
  ASSERT_EQ(one.simulation.peak_graphs[0], 1);
  ASSERT_EQ(one.simulation.peak_stashed[0], 1);
  constexpr int64_t kReleased = 3 * 1000 * 4;        // 1000 parameters a segment, 4 bytes each
  constexpr int64_t kWorking = 3 * kMiB + 4 * 1024;  // segment 0's, with its received gradient
  EXPECT_EQ(Peak(one),
            3 * kMiB /* state */ - kReleased + 4 * 1024 /* stash */ + 6 * kMiB + kWorking);
  // The step's temporaries count only where they top the micro-batches' peak: the largest
  // segment's, over the whole state.
  profile.statics[1].step_memory_bytes = 7 * kMiB;
  profile.statics[2].step_memory_bytes = 8 * kMiB;
  absl::StatusOr<SimulationResult> step =
      SimulateCandidate(profile, Cluster(1, 1), Options(8), one);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->peak_memory_bytes[0], Peak(one));  // 8 MiB + state < the micro-batches' peak
  profile.statics[2].step_memory_bytes = 20 * kMiB;
  step = SimulateCandidate(profile, Cluster(1, 1), Options(8), one);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->peak_memory_bytes[0], 3 * kMiB + 20 * kMiB);
  profile.statics[1].step_memory_bytes = profile.statics[2].step_memory_bytes = 0;
  // A profile without the split (written before it was measured) keeps each whole peak.
  profile.compute[1].at(4).graph_memory_bytes = 0;
  absl::StatusOr<SimulationResult> older =
      SimulateCandidate(profile, Cluster(1, 1), Options(8), one);
  ASSERT_TRUE(older.ok()) << older.status();
  EXPECT_EQ(older->peak_memory_bytes[0],
            3 * kMiB - kReleased + 4 * 1024 + (1 + 4 + 3) * kMiB + kWorking);
}

TEST(SimulatorTermsTest, OnlyAStageWithoutReplicasReleasesItsMasterGradients) {
  // Varuna::step frees the fp32 master gradients (4 bytes a parameter) for the micro-batches
  // when the stage has no data-parallel buckets (D = 1); with D > 1 they are the buckets.
  Profile profile = MakeProfile(2, {2}, /*hop_ms=*/0, /*allreduce_ms=*/1, /*state_bytes=*/kGiB);
  for (SegmentStatic& s : profile.statics) s.parameter_count = 50'000'000;  // 200 MB each
  for (auto& segment : profile.compute) segment.at(2).activation_memory_bytes = kGiB;
  const int64_t activations = 2 * kGiB;  // two segments' graphs at b = 2
  bool saw_one = false, saw_two = false;
  std::vector<Candidate> found;
  for (int gpus : {1, 2}) {
    absl::StatusOr<std::vector<Candidate>> on =
        SearchConfigurations(profile, Cluster(1, gpus, 64 * kGiB), Options(8));
    ASSERT_TRUE(on.ok()) << on.status();
    found.insert(found.end(), on->begin(), on->end());
  }
  for (const Candidate& c : found) {
    if (c.pipeline_stages != 1) continue;
    SCOPED_TRACE(absl::StrFormat("D=%d", c.data_parallel));
    ASSERT_EQ(c.simulation.peak_stashed[0], 1);
    const int64_t stash = int64_t{2} << 10;
    const int64_t released = c.data_parallel == 1 ? 2 * 200'000'000 : 0;
    // Without graph_memory_bytes the whole peaks are kept; the working memory is then only
    // the first segment's received gradient (its output, 2 KiB).
    EXPECT_EQ(Peak(c), 2 * kGiB - released + stash + activations + (int64_t{2} << 10));
    saw_one = saw_one || c.data_parallel == 1;
    saw_two = saw_two || c.data_parallel == 2;
  }
  EXPECT_TRUE(saw_one);
  EXPECT_TRUE(saw_two);
}

TEST(SimulatorTermsTest, OneMicroBatchAStepAlsoReleasesTheModelsGradients) {
  // Varuna::step frees the model's gradients when a step starts; the first backward makes them
  // as it frees its activations. With m = 1 they are never held beside a graph; with m = 2 the
  // first micro-batch's are held through the second. D = 2 (no master gradients released).
  Profile profile = MakeProfile(1, {2, 4}, /*hop_ms=*/0, /*allreduce_ms=*/1, /*state_bytes=*/kGiB);
  profile.statics[0].parameter_count = 50'000'000;  // float32: 200 MB of model gradients
  for (auto& [b, m] : profile.compute[0]) m.activation_memory_bytes = kGiB;
  absl::StatusOr<std::vector<Candidate>> found =
      SearchConfigurations(profile, Cluster(1, 2, 64 * kGiB), Options(8));
  ASSERT_TRUE(found.ok()) << found.status();
  bool saw_one = false, saw_two = false;
  for (const Candidate& c : *found) {
    if (c.pipeline_stages != 1) continue;
    SCOPED_TRACE(absl::StrFormat("b=%d m=%d", c.micro_batch, c.num_micro_batches));
    const int64_t stash = int64_t{c.micro_batch} << 10;
    const int64_t released = c.num_micro_batches == 1 ? 200'000'000 : 0;
    EXPECT_EQ(Peak(c), kGiB - released + stash + kGiB);
    saw_one = saw_one || c.num_micro_batches == 1;
    saw_two = saw_two || c.num_micro_batches == 2;
  }
  EXPECT_TRUE(saw_one);
  EXPECT_TRUE(saw_two);
}

TEST(SimulatorTermsTest, OneMicroBatchsPeakIsTheBackwardsWorstMoment) {
  // Two segments in one stage, one micro-batch (D = 2: no master gradients released). Segment 0
  // keeps a 100 MiB graph, segment 1 (the last, with 200 MB of float32 gradients) a 10 MiB one;
  // each backward needs 1 MiB more. The backward runs segment 1, then segment 0, whose graph
  // is still held beside segment 1's gradients: 100 + 1 MiB + 200 MB, the worst moment.
  constexpr int64_t kMiB = int64_t{1} << 20;
  Profile profile = MakeProfile(2, {2}, /*hop_ms=*/0, /*allreduce_ms=*/1, /*state_bytes=*/kGiB);
  profile.statics[0].parameter_count = 1'000'000;   // 4 MB of gradients
  profile.statics[1].parameter_count = 50'000'000;  // 200 MB
  profile.compute[0].at(2).activation_memory_bytes = 101 * kMiB;
  profile.compute[0].at(2).graph_memory_bytes = 100 * kMiB;
  profile.compute[0].at(2).output_bytes = 0;  // the received gradient left out of this sum
  profile.compute[1].at(2).activation_memory_bytes = 11 * kMiB;
  profile.compute[1].at(2).graph_memory_bytes = 10 * kMiB;
  absl::StatusOr<std::vector<Candidate>> found =
      SearchConfigurations(profile, Cluster(1, 2, 64 * kGiB), Options(4));
  ASSERT_TRUE(found.ok()) << found.status();
  bool saw = false;
  for (const Candidate& c : *found) {
    if (c.pipeline_stages != 1 || c.num_micro_batches != 1) continue;
    saw = true;
    const int64_t gradients = 51'000'000 * 4;
    const int64_t stash = int64_t{2} << 10;
    EXPECT_EQ(Peak(c), 2 * kGiB - gradients + stash + 100 * kMiB + kMiB + 200'000'000);
  }
  EXPECT_TRUE(saw);
}

TEST(SimulatorTermsTest, TheLastStageNeverChargesARecompute) {
  // Two stages, Varuna's schedule: the last stage runs each micro-batch's backward right after
  // its forward, so its forwards keep their graphs (R's time) and it has no recompute task; the
  // first stage runs F, then R before each backward.
  const Profile profile = DistinctTimes(4, 1);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 2), Options(6));
  ASSERT_TRUE(result.ok()) << result.status();
  bool seen = false;
  for (const Candidate& c : *result) {
    if (c.pipeline_stages != 2) continue;
    seen = true;
    const int m = c.num_micro_batches;
    ASSERT_EQ(c.stages.size(), 2u);
    const int last_segments = c.stages[1].size();
    EXPECT_DOUBLE_EQ(c.simulation.stage_busy_ms[1], m * last_segments * (5.0 + 2.0));
    const std::vector<Task> first = BuildSchedule(ScheduleKind::kVaruna, 2, m, 0);
    int recomputes = 0;
    for (const Task& t : first) recomputes += t.kind == TaskKind::kRecompute ? 1 : 0;
    const int first_segments = c.stages[0].size();
    // Forwards followed by a recompute are graph-free (F); the others keep their graph (R).
    EXPECT_DOUBLE_EQ(
        c.simulation.stage_busy_ms[0],
        first_segments * (recomputes * (1.0 + 5.0) + (m - recomputes) * 5.0 + m * 2.0));
  }
  EXPECT_TRUE(seen);
}

TEST(SimulatorTermsTest, SegmentJoinsAreRecordedButNotCharged) {
  // profile.h SegmentJoin: measured by --profiling, informational (docs/profiling.md, "Segment
  // joins"): a profile with joins predicts what the same profile without them predicts.
  const Profile plain = DistinctTimes(4, 1);
  Profile with_joins = plain;
  with_joins.joins[1] = {-0.25, -0.5, 0.75};
  for (const ClusterSpec& cluster : {Cluster(1, 1), Cluster(1, 2)}) {
    absl::StatusOr<std::vector<Candidate>> a = SearchConfigurations(plain, cluster, Options(6));
    absl::StatusOr<std::vector<Candidate>> b =
        SearchConfigurations(with_joins, cluster, Options(6));
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].simulation.minibatch_ms, (*b)[i].simulation.minibatch_ms);
    }
  }
}

TEST(ColdShareTest, TheFractionOfTheCacheAStreamReplaces) {
  constexpr int64_t kCache = int64_t{32} << 20;
  EXPECT_EQ(ColdShare(0, kCache), 0);  // nothing in between: warm
  EXPECT_EQ(ColdShare(kCache, 0), 0);  // the cache unknown: warm
  EXPECT_DOUBLE_EQ(ColdShare(kCache, kCache), 1 - std::exp(-1.0));
  EXPECT_DOUBLE_EQ(ColdShare(kCache / 2, kCache), 1 - std::exp(-0.5));
  EXPECT_GT(ColdShare(10 * kCache, kCache), 0.9999);
  EXPECT_LE(ColdShare(100 * kCache, kCache), 1.0);
}

// DistinctTimes with cold times (F 1.5, R 7, B 3 against 1, 5, 2 warm) and a cache of 5 MiB. A
// pass over a segment at micro-batch 2 touches 2 x 1000 float32 parameters and its graph (the
// whole 2 MiB peak: the profile has no split).
Profile WithColdTimes(int segments, const std::string& device) {
  Profile profile = DistinctTimes(segments, 2);
  profile.device = device;
  profile.cache_bytes = int64_t{5} << 20;
  for (auto& sizes : profile.compute) {
    sizes[2].forward_cold_ms = 1.5;
    sizes[2].recompute_cold_ms = 7;
    sizes[2].backward_cold_ms = 3;
  }
  return profile;
}

constexpr int64_t kPassBytes = 2 * 1000 * 4 + (int64_t{2} << 20);

// The cold share after `segments` segments' passes stream through WithColdTimes's cache.
double ShareAfter(int segments) { return ColdShare(segments * kPassBytes, int64_t{5} << 20); }

TEST(SimulatorTermsTest, AGraphKeepingStageChargesWhatRunsBetweenASegmentsPasses) {
  // One stage of three segments (P = 1: four micro-batches, each a graph forward, priced by R,
  // and a backward). Segment k's forward follows the k segments before it, which ran since its
  // last backward; its backward follows the 2 - k after it. So R is charged ShareAfter(k) and B
  // ShareAfter(2 - k) of their cold excess, on a CPU and on a GPU alike.
  const double shares = ShareAfter(0) + ShareAfter(1) + ShareAfter(2);
  ASSERT_EQ(ShareAfter(0), 0);
  ASSERT_GT(ShareAfter(2), ShareAfter(1));
  for (const char* device : {"cpu", "NVIDIA H100 80GB HBM3"}) {
    SCOPED_TRACE(device);
    absl::StatusOr<std::vector<Candidate>> result =
        SearchConfigurations(WithColdTimes(3, device), Cluster(1, 1), Options(8));
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->size(), 1u);
    EXPECT_NEAR(result->front().simulation.stage_busy_ms[0],
                4 * (3 * (5.0 + 2.0) + shares * (2 + 1)), 1e-9);
  }
  // Without the cache's size, or with cold times under the warm ones (noise): the warm times.
  Profile unknown = WithColdTimes(3, "cpu");
  unknown.cache_bytes = 0;
  Profile noise = WithColdTimes(3, "cpu");
  for (auto& sizes : noise.compute) {
    sizes[2].recompute_cold_ms = 4;
    sizes[2].backward_cold_ms = 1;
  }
  for (const Profile& profile : {unknown, noise}) {
    absl::StatusOr<std::vector<Candidate>> result =
        SearchConfigurations(profile, Cluster(1, 1), Options(8));
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_DOUBLE_EQ(result->front().simulation.stage_busy_ms[0], 4 * 3 * (5.0 + 2.0));
  }
}

TEST(SimulatorTermsTest, ARecomputingStageRunsItsSegmentsInOrderAndBackwardsInReverse) {
  // Four segments on two ranks of one CPU host, P = 2: stages {0, 1} and {2, 3}, the second
  // segment of each with three times the first's graph (1 and 3 MiB at micro-batch 2). Stage 0
  // recomputes. Each task runs over the stage's segments (pipeline/stage_executor.cc): F and R
  // in order, so the second segment's F and R follow the first's bytes; B in reverse, so the
  // first segment's B follows the second's. The other rank's stream is not counted.
  Profile profile = WithColdTimes(4, "cpu");
  for (int k = 0; k < 4; ++k) {
    profile.compute[k].at(2).activation_memory_bytes = int64_t{k % 2 == 0 ? 1 : 3} << 20;
  }
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 2), Options(8));
  ASSERT_TRUE(result.ok()) << result.status();
  const auto two_stages = std::find_if(result->begin(), result->end(),
                                       [](const Candidate& c) { return c.pipeline_stages == 2; });
  ASSERT_NE(two_stages, result->end());
  ASSERT_EQ(two_stages->stages[0].last, 1);
  const int64_t params = 2 * 1000 * 4;
  const double after_first = ColdShare(params + (int64_t{1} << 20), int64_t{5} << 20);
  const double after_second = ColdShare(params + (int64_t{3} << 20), int64_t{5} << 20);
  ASSERT_GT(after_second, after_first);
  const double f = 2 * 1 + after_first * 0.5;
  const double r = 2 * 5 + after_first * 2;
  const double b = 2 * 2 + after_second * 1;
  // A forward that keeps its graph (no recompute of its micro-batch) is priced as R.
  const std::vector<Task> tasks =
      BuildSchedule(ScheduleKind::kVaruna, 2, two_stages->num_micro_batches, 0);
  ASSERT_TRUE(std::any_of(tasks.begin(), tasks.end(),
                          [](const Task& t) { return t.kind == TaskKind::kRecompute; }));
  double expected = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    switch (tasks[i].kind) {
      case TaskKind::kForward:
        expected += KeepsGraph(tasks, i) ? r : f;
        break;
      case TaskKind::kRecompute:
        expected += r;
        break;
      case TaskKind::kBackward:
        expected += b;
        break;
    }
  }
  EXPECT_NEAR(two_stages->simulation.stage_busy_ms[0], expected, 1e-9);
  // The last stage keeps its graphs: R prices its forwards.
  EXPECT_NEAR(two_stages->simulation.stage_busy_ms[1], two_stages->num_micro_batches * (r + b),
              1e-9);
}

// One micro-batch over two stages: F0, the hop, F1 (graph) + B1, the hop back, B0 (R0 runs while
// the gradient travels: the hop is longer). Each hop takes bytes * 8 / (Gbit/s * 1e6) ms.
TEST(SimulatorTermsTest, BandwidthsPriceHopsWithinAndAcrossNodes) {
  Profile profile = MakeProfile(2, {1}, /*hop_ms=*/0, /*allreduce_ms=*/0);
  profile.send_within_node = CostCurve();  // a one-GPU profile has no curves
  profile.send_across_nodes = CostCurve();
  profile.allreduce.clear();
  const double hop = 1024 * 8 / (0.0008 * 1e6);  // 1 KiB at 0.0008 Gbit/s: 10.24 ms
  // F = R = 2, B = 4 per segment at b = 1.
  const double expected = 2 + hop + 2 + 4 + hop + 4;

  ClusterSpec one_node = Cluster(1, 2);
  one_node.intra_node_gbps = 0.0008;
  one_node.inter_node_gbps = 1000;
  absl::StatusOr<std::vector<Candidate>> within =
      SearchConfigurations(profile, one_node, Options(1));
  ASSERT_TRUE(within.ok()) << within.status();
  ASSERT_EQ(within->size(), 1u);
  EXPECT_NEAR(within->front().simulation.minibatch_ms, expected, 1e-9);

  ClusterSpec two_nodes = Cluster(2, 1);
  two_nodes.intra_node_gbps = 1000;
  two_nodes.inter_node_gbps = 0.0008;
  absl::StatusOr<std::vector<Candidate>> across =
      SearchConfigurations(profile, two_nodes, Options(1));
  ASSERT_TRUE(across.ok()) << across.status();
  EXPECT_NEAR(across->front().simulation.minibatch_ms, expected, 1e-9);
  // The slow link is not the one crossed: the hop is nearly free.
  two_nodes.intra_node_gbps = 0.0008;
  two_nodes.inter_node_gbps = 1000;
  across = SearchConfigurations(profile, two_nodes, Options(1));
  ASSERT_TRUE(across.ok()) << across.status();
  EXPECT_LT(across->front().simulation.minibatch_ms, 12.1);
}

// A ring all-reduce of a stage's fp32 gradients (4 bytes per parameter) over D replicas takes
// 2 (D - 1) / D * bytes * 8 / (Gbit/s * 1e6) ms, on the inter-node bandwidth when the replicas
// sit on different nodes.
TEST(SimulatorTermsTest, BandwidthsPriceTheAllReduceRingByWhereTheReplicasSit) {
  Profile profile = MakeProfile(2, {1}, /*hop_ms=*/0, /*allreduce_ms=*/0);
  profile.allreduce.clear();
  const double bytes = 2 * 1000 * 4;  // P = 1: both segments' 1000 parameters
  for (auto [nodes, gpus_per_node, across] :
       {std::make_tuple(1, 4, false), std::make_tuple(2, 2, true), std::make_tuple(4, 1, true)}) {
    SCOPED_TRACE(absl::StrFormat("%d x %d", nodes, gpus_per_node));
    ClusterSpec cluster = Cluster(nodes, gpus_per_node);
    cluster.intra_node_gbps = across ? 1e9 : 0.001;
    cluster.inter_node_gbps = across ? 0.001 : 1e9;
    absl::StatusOr<std::vector<Candidate>> result =
        SearchConfigurations(profile, cluster, Options(4));
    ASSERT_TRUE(result.ok()) << result.status();
    bool seen = false;
    for (const Candidate& c : *result) {
      if (c.pipeline_stages != 1) continue;
      seen = true;
      ASSERT_EQ(c.data_parallel, 4);
      const double allreduce = 2.0 * 3 / 4 * bytes * 8 / (0.001 * 1e6);  // 48 ms
      EXPECT_NEAR(c.simulation.minibatch_ms, c.simulation.stage_finish_ms[0] + allreduce, 1e-9);
    }
    EXPECT_TRUE(seen);
  }
  ClusterSpec bad = Cluster(1, 4);
  bad.inter_node_gbps = -2;
  absl::StatusOr<std::vector<Candidate>> refused = SearchConfigurations(profile, bad, Options(4));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("inter_node_gbps=-2"));
}

TEST(FormatPlanTest, ShowsTokensPerSecondAndMemoryPerGpu) {
  const Profile profile = MakeProfile(4, {1, 2}, 0.5, 3);
  absl::StatusOr<std::vector<Candidate>> result =
      SearchConfigurations(profile, Cluster(1, 4), Options(8));
  ASSERT_TRUE(result.ok()) << result.status();
  const std::string table = FormatPlan(*result, 2, 8 * 1024);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 3);  // header + 2 rows
  const Candidate& best = result->front();
  EXPECT_THAT(table, HasSubstr(absl::StrFormat("%12.0f",
                                               8 * 1024 / (best.simulation.minibatch_ms / 1000))));
  EXPECT_THAT(table, HasSubstr(absl::StrFormat("%10.2f", Peak(best) / 1e9)));
  EXPECT_THAT(FormatPlan(*result, 1, 0), HasSubstr(" - "));
}

}  // namespace
}  // namespace varuna
