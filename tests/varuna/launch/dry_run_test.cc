// The launcher's dry run (--dry_run) planning gpt2-8.3b for clusters of 8 to 64 GPUs of 80 GiB
// from a one-GPU profile, on a SYNTHETIC profile of the 8.3B shape (72 layers, hidden 3072, 32
// heads, sequence 1024, vocabulary 51,200; fp16): the times are made up from a FLOP count at an
// assumed 400 TFLOP/s, the memory from the parameter counts and Megatron's activation formula.
// What is tested is the planner on a model of that size, not a measurement.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "varuna/launch/config.h"
#include "varuna/launch/plan.h"

namespace varuna {
namespace {

using ::testing::HasSubstr;

constexpr int kLayers = 72;
constexpr int64_t kHidden = 3072;
constexpr int64_t kSeq = 1024;
constexpr int64_t kVocab = 51200;
constexpr int64_t kHeads = 32;
constexpr int kGlobalBatch = 128;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Segment k of the synthetic gpt2-8.3b profile: one layer each, the embeddings with layer 0,
// the final LayerNorm and the (tied) LM head copy with layer 71.
Profile Synthetic83bProfile() {
  Profile profile;
  profile.model = "{\"num_layers\": 72, \"hidden_size\": 3072, \"seq_length\": 1024}";
  profile.device = "synthetic";
  profile.dtype = "float16";
  profile.num_segments = kLayers;
  profile.statics.resize(kLayers);
  profile.compute.resize(kLayers);
  const int64_t layer_parameters = 12 * kHidden * kHidden + 13 * kHidden;
  const int64_t embedding_parameters = (kVocab + kSeq) * kHidden;
  const int64_t head_parameters = kVocab * kHidden + 2 * kHidden;
  // Forward FLOPs of one layer per sequence: 24 s h^2 + 4 s^2 h; the LM head 2 s h V.
  const double layer_flops = 24.0 * kSeq * kHidden * kHidden + 4.0 * kSeq * kSeq * kHidden;
  const double head_flops = 2.0 * kSeq * kHidden * kVocab;
  constexpr double kFlopsPerMs = 400e12 / 1e3;
  for (int k = 0; k < kLayers; ++k) {
    int64_t parameters = layer_parameters;
    double flops = layer_flops;
    if (k == 0) parameters += embedding_parameters;
    if (k == kLayers - 1) {
      parameters += head_parameters;
      flops += head_flops;
    }
    SegmentStatic& statics = profile.statics[k];
    statics.parameter_count = parameters;
    statics.state_bytes = parameters * (2 + 2 + 4 + 4 + 8);  // fp16 weight, grad; fp32 copies, Adam
    // The step's work streams the state once: about 20 bytes per parameter at 2 TB/s.
    statics.optimizer_ms = static_cast<double>(parameters) * 20 / 2e9;
    statics.gradient_ms = static_cast<double>(parameters) * 10 / 2e9;
    statics.bucket_ms = static_cast<double>(parameters) * 8 / 2e9;
    for (int b : {1, 2, 4, 8}) {
      SegmentMeasurement m;
      m.forward_ms = 0.05 + b * flops / kFlopsPerMs;
      m.recompute_ms = m.forward_ms;
      m.backward_ms = 0.1 + 2 * b * flops / kFlopsPerMs;
      // Megatron's activation bytes of one layer: s b h (34 + 5 a s / h), fp16.
      m.activation_memory_bytes = static_cast<int64_t>(static_cast<double>(kSeq * b * kHidden) *
                                                       (34.0 + 5.0 * kHeads * kSeq / kHidden));
      if (k == kLayers - 1) m.activation_memory_bytes += 4 * kSeq * b * kVocab;  // fp32 logits
      m.output_bytes = k + 1 < kLayers ? 2 * kSeq * b * kHidden : 0;
      m.stash_bytes = k == 0 ? 8 * kSeq * b : 2 * kSeq * b * kHidden;
      m.timed_passes = 7;
      profile.compute[k][b] = m;
    }
  }
  return profile;
}

LaunchOptions DryRun(int gpus, double intra_gbps, double inter_gbps) {
  LaunchOptions options;
  options.profile_dir = "prof-8.3b";
  options.dry_run = true;
  options.gpu_memory_gb = 80;
  options.gpus_per_node = 8;
  options.nnodes = gpus / 8;
  options.batch_size = kGlobalBatch;
  options.intra_node_gbps = intra_gbps;
  options.inter_node_gbps = inter_gbps;
  return options;
}

int64_t Peak(const Candidate& c) {
  int64_t peak = 0;
  for (int64_t bytes : c.simulation.peak_memory_bytes) peak = std::max(peak, bytes);
  return peak;
}

// One test for the four cluster sizes (each search simulates every P x D x b of 72 segments,
// which takes seconds in a fastbuild).
TEST(DryRunTest, PlansThe83bModelFor8To64GpusSortedWithinMemoryFasterWithMoreGpus) {
  const Profile profile = Synthetic83bProfile();
  double previous_ms = 1e30;
  for (int gpus : {8, 16, 32, 64}) {
    SCOPED_TRACE(gpus);
    absl::StatusOr<LaunchChoice> choice =
        ChooseLaunchConfiguration(profile, DryRun(gpus, 7200, 400));
    ASSERT_TRUE(choice.ok()) << choice.status();
    ASSERT_FALSE(choice->usable.empty());
    // The whole model's state is about 170 GB: it never fits in fewer than three stages of 80 GiB.
    for (const Candidate& c : choice->usable) {
      EXPECT_GT(c.pipeline_stages, 2);
      EXPECT_EQ(c.pipeline_stages * c.data_parallel, gpus);
      EXPECT_LE(static_cast<double>(Peak(c)), 0.9 * 80 * kGiB);
    }
    for (size_t i = 1; i < choice->usable.size(); ++i) {
      EXPECT_LE(choice->usable[i - 1].simulation.minibatch_ms,
                choice->usable[i].simulation.minibatch_ms);
    }
    EXPECT_THAT(choice->plan, HasSubstr("step_ms"));
    EXPECT_THAT(choice->plan, HasSubstr("tokens/s"));
    EXPECT_THAT(choice->plan, HasSubstr("GB/GPU"));
    EXPECT_THAT(choice->plan, HasSubstr("global batch 128 x 1024 tokens"));
    EXPECT_THAT(choice->plan, HasSubstr("within nodes 7200 Gbit/s, between nodes 400 Gbit/s"));
    EXPECT_THAT(choice->plan, HasSubstr("chosen: "));
    // The first row's tokens/s is the batch's tokens over the predicted step.
    const Candidate& best = choice->usable.front();
    const double tokens_per_s = kGlobalBatch * kSeq / (best.simulation.minibatch_ms / 1000);
    EXPECT_THAT(choice->plan, HasSubstr(absl::StrFormat("%12.0f", tokens_per_s)));
    // More GPUs, a shorter step for the same batch.
    EXPECT_LT(best.simulation.minibatch_ms, previous_ms);
    previous_ms = best.simulation.minibatch_ms;
    std::printf("synthetic gpt2-8.3b, %d GPUs:\n%s", gpus, choice->plan.c_str());
  }
}

// Two nodes of 8: with a slow network between them, a data-parallel ring across the nodes costs
// seconds (gigabytes of fp32 gradients per stage), so the planner keeps the gradients off the
// network: a pipeline through both nodes (only activations cross). With a fast network, data
// parallelism over the nodes pays.
TEST(DryRunTest, SlowInterNodeBandwidthFavoursPipelinesOverReplicasAcrossNodes) {
  const Profile profile = Synthetic83bProfile();
  absl::StatusOr<LaunchChoice> slow = ChooseLaunchConfiguration(profile, DryRun(16, 7200, 10));
  absl::StatusOr<LaunchChoice> fast = ChooseLaunchConfiguration(profile, DryRun(16, 7200, 3200));
  ASSERT_TRUE(slow.ok()) << slow.status();
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_EQ(slow->chosen.pipeline_stages, 16) << slow->plan;
  EXPECT_EQ(slow->chosen.data_parallel, 1) << slow->plan;
  EXPECT_GT(fast->chosen.data_parallel, 1) << fast->plan;
  EXPECT_LT(fast->chosen.simulation.minibatch_ms, slow->chosen.simulation.minibatch_ms);
}

TEST(DryRunTest, BandwidthsReplaceTheProfilesCurvesAndTheirAbsenceIsNamed) {
  const Profile profile = Synthetic83bProfile();  // one GPU's profile: no curves at all
  absl::StatusOr<LaunchChoice> without = ChooseLaunchConfiguration(profile, DryRun(16, 0, 0));
  ASSERT_FALSE(without.ok());
  EXPECT_THAT(without.status().message(), HasSubstr("profile"));
  LaunchOptions negative = DryRun(16, -1, 400);
  absl::StatusOr<LaunchChoice> bad = ChooseLaunchConfiguration(profile, negative);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("intra_node_gbps=-1"));
}

// Only the bandwidth within a node given, on two nodes: every P x D of 16 GPUs needs the network
// between the nodes (a pipeline through both, or a ring over replicas on both), which a one-GPU
// profile cannot price: the error names what is missing and the cluster searched.
TEST(DryRunTest, AMissingBandwidthIsNamed) {
  absl::StatusOr<LaunchChoice> choice =
      ChooseLaunchConfiguration(Synthetic83bProfile(), DryRun(16, 7200, 0));
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(choice.status().message(), HasSubstr("--nnodes=2"));
  EXPECT_THAT(choice.status().message(), HasSubstr("within nodes 7200 Gbit/s"));
  EXPECT_THAT(choice.status().message(), HasSubstr("the profile has no"));
}

TEST(DryRunFlagsTest, DryRunNeedsAProfileButNoWorkerProgram) {
  absl::StatusOr<LaunchOptions> options =
      ParseLaunchFlags({"--dry_run", "--profile_dir=p", "--gpu_memory_gb=80", "--batch_size=512",
                        "--intra_node_gbps=7200", "--inter-node-gbps=400"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->dry_run);
  EXPECT_EQ(options->intra_node_gbps, 7200);
  EXPECT_EQ(options->inter_node_gbps, 400);
  EXPECT_TRUE(options->command.empty());

  absl::StatusOr<LaunchOptions> no_profile = ParseLaunchFlags({"--dry_run", "--batch_size=8"});
  ASSERT_FALSE(no_profile.ok());
  EXPECT_THAT(no_profile.status().message(), HasSubstr("--profile_dir"));

  absl::StatusOr<LaunchOptions> negative =
      ParseLaunchFlags({"--dry_run", "--profile_dir=p", "--inter_node_gbps=-3"});
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("inter_node_gbps"));
}

}  // namespace
}  // namespace varuna
