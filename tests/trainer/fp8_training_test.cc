// FP8 training end to end, as a user runs it (--fp8-format=hybrid on the CPU, where LibTorch
// emulates the FP8 GEMM): bad FP8 flags and shapes FP8 cannot take exit 2 with the reason; the
// loss falls; a run stopped and resumed is the run that never stopped, bitwise, its amax
// histories and scales restored from the checkpoint's "<linear>.fp8.<role>.<field>" entries;
// the inspector lists those entries and the Hugging Face export leaves them out; a history
// length other than the checkpoint's is refused naming both; two replicas agree on
// the global amax (their scales are the one-process run's, bitwise); a checkpoint of 1 x 2
// resumes under 2 stages, where Varuna's recomputing schedule gives bitwise GPipe's losses (a
// recomputed forward records the same amaxes).
#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"
#include "tools/export_hf/hf_export.h"
#include "tools/inspect_checkpoint/checkpoint_report.h"
#include "varuna/checkpoint/files.h"
#include "varuna/io/safetensors.h"

namespace trainer {
namespace {

using ::testing::HasSubstr;
using testing::LauncherLayout;
using testing::Losses;
using ::testing::Not;
using testing::Plus;
using testing::Result;

class Fp8TrainingTest : public testing::TrainerTest {
 protected:
  // The tiny model (hidden 32, sequence 16: multiples of 16) in FP8, without dropout, with the
  // given extra flags.
  std::vector<std::string> Model(const std::vector<std::string>& extra) const {
    std::vector<std::string> flags;
    for (const std::string& flag : TinyModel()) {
      if (flag != "--batch-size=4") flags.push_back(flag);
    }
    return Plus(
        flags, Plus({"--fp8-format=hybrid", "--hidden-dropout=0", "--attention-dropout=0"}, extra));
  }
};

// The FP8 state tensors of a checkpoint's segment, by name.
std::map<std::string, at::Tensor> Fp8State(const std::string& dir, int64_t iteration, int segment) {
  std::map<std::string, at::Tensor> out;
  absl::StatusOr<varuna::CheckpointData> data = varuna::ReadCheckpoint(dir, iteration, {segment});
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return out;
  for (const auto& [name, tensor] : data->segments.at(segment)) {
    if (absl::StrContains(name, ".fp8.")) out[name] = tensor;
  }
  return out;
}

TEST_F(Fp8TrainingTest, BadFlagsAndShapesExitTwo) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--fp8-format=e5m2"}, "--fp8-format: "},
      {{"--fp8-format=hybrid", "--fp8-amax-compute-algo=mean"}, "--fp8-amax-compute-algo: "},
      {{"--fp8-format=hybrid", "--fp8-amax-history-len=0"}, "--fp8-amax-history-len=0 must be"},
      {{"--fp8-format=hybrid", "--fp8-margin=-1"}, "--fp8-margin=-1 must be at least 0"},
      {{"--fp8-margin=1"}, "which is off: add --fp8-format=hybrid"},
      {{"--fp8-format=hybrid", "--hidden-size=40"},
       "--fp8-format needs --hidden-size to be a multiple of 16"},
      {{"--fp8-format=hybrid", "--batch-size=3", "--seq-length=8", "--max-position-embeddings=16"},
       "a micro-batch of 3 x 8 = 24 tokens is not"},
      {{"--fp8-linears=linear_fc1"},
       "--fp8-linears chooses which linears compute in FP8, which "
       "is off: add --fp8-format=hybrid"},
      {{"--fp8-format=hybrid", "--fp8-linears=linear_fc3"},
       "--fp8-linears=linear_fc3: \"linear_fc3\" is not a linear; give all, auto, or a comma "
       "list of linear_qkv, linear_proj, linear_fc1 and linear_fc2"},
      {{"--fp8-format=hybrid", "--fp8-linears=linear_qkv,linear_qkv"}, "is named twice"},
      {{"--fp8-format=hybrid", "--fp8-linears=auto", "--deterministic"},
       "--fp8-linears=auto chooses by a timing at start-up"},
      {{"--fp8-format=hybrid", "--fp8-linears=auto", "--profiling"},
       "--fp8-linears=auto with --profiling: a profile times one fixed model"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> flags;
    for (const std::string& flag : TinyModel()) {
      if (flag != "--batch-size=4") flags.push_back(flag);
    }
    bool batch_given = false;
    for (const std::string& flag : c.flags) batch_given |= absl::StartsWith(flag, "--batch-size");
    if (!batch_given) flags.push_back("--batch-size=4");
    Result r = Run(Plus(flags, Plus({"--train-iters=1"}, c.flags)), "bad");
    EXPECT_EQ(r.exit.code, 2) << c.message << "\n" << Describe(r);
    EXPECT_THAT(r.exit.output, HasSubstr(c.message));
  }
}

// 40 steps in FP8 and in float32 from the same weights on the same data: the FP8 loss falls as
// the float32 one does and ends within 1% of it.
TEST_F(Fp8TrainingTest, LossFallsAsTheFloat32ModelsDoes) {
  const auto common = Model({"--train-iters=40", "--batch-size=4"});
  std::vector<std::string> float32;
  for (const std::string& flag : common) {
    if (flag != "--fp8-format=hybrid") float32.push_back(flag);
  }
  Result fp8 = Run(common, "fp8");
  ASSERT_EQ(fp8.exit.code, 0) << Describe(fp8);
  Result reference = Run(float32, "float32");
  ASSERT_EQ(reference.exit.code, 0) << Describe(reference);
  const auto a = Losses(fp8), b = Losses(reference);
  ASSERT_EQ(a.size(), 40u);
  ASSERT_EQ(b.size(), 40u);
  const double first = std::stod(a.at(1)), last = std::stod(a.at(40));
  const double reference_last = std::stod(b.at(40));
  std::printf("fp8 %s -> %s; float32 %s -> %s\n", a.at(1).c_str(), a.at(40).c_str(),
              b.at(1).c_str(), b.at(40).c_str());
  EXPECT_LT(last, first - 1.0) << "the loss does not fall";
  EXPECT_NEAR(last, reference_last, 0.01 * reference_last);
  EXPECT_NE(a.at(40), b.at(40));  // FP8 did run
}

// --fp8-linears: only the named linears compute in FP8 and hold FP8 state, the log says which,
// and a run with all four resumes from that checkpoint, the other linears' state fresh. auto on
// the CPU is all four (nothing to measure).
TEST_F(Fp8TrainingTest, OnlyTheNamedLinearsComputeInFp8) {
  const std::string ckpt = dir_ + "/ckpt";
  Result some = Run(Model({"--train-iters=2", "--batch-size=4", "--save=" + ckpt,
                           "--fp8-linears=linear_fc2,linear_qkv"}),
                    "some");
  ASSERT_EQ(some.exit.code, 0) << Describe(some);
  EXPECT_THAT(some.exit.output, HasSubstr("> fp8 linears: linear_qkv, linear_fc2 (--fp8-linears)"));
  const auto state = Fp8State(ckpt, 2, 0);
  EXPECT_EQ(state.size(), 2u * 9u);  // two linears of layer 0, nine tensors each
  for (const auto& [name, tensor] : state) {
    EXPECT_TRUE(absl::StartsWith(name, "h.0.attn.c_attn.fp8.") ||
                absl::StartsWith(name, "h.0.mlp.c_proj.fp8."))
        << name;
  }
  Result all =
      Run(Model({"--train-iters=3", "--batch-size=4", "--load=" + ckpt, "--save=" + ckpt + "_all"}),
          "all");
  ASSERT_EQ(all.exit.code, 0) << Describe(all);
  EXPECT_THAT(all.exit.output, HasSubstr("> fp8 linears: all four (--fp8-linears)"));
  EXPECT_THAT(all.exit.output, HasSubstr("model state tensors (h.0.attn.c_proj.fp8."));
  EXPECT_THAT(all.exit.output, HasSubstr("they start fresh"));
  // And back: the state of the linears that leave FP8 is left out, and the log says so.
  Result fewer = Run(Model({"--train-iters=4", "--batch-size=4", "--load=" + ckpt + "_all",
                            "--fp8-linears=linear_qkv"}),
                     "fewer");
  ASSERT_EQ(fewer.exit.code, 0) << Describe(fewer);
  EXPECT_THAT(fewer.exit.output,
              HasSubstr("model state tensors of the checkpoint (h.0.attn.c_proj.fp8."));
  EXPECT_THAT(fewer.exit.output, HasSubstr("): left out"));

  Result automatic =
      Run(Model({"--train-iters=1", "--batch-size=4", "--fp8-linears=auto"}), "auto");
  ASSERT_EQ(automatic.exit.code, 0) << Describe(automatic);
  EXPECT_THAT(automatic.exit.output,
              HasSubstr("> fp8 linears: all four (auto: on the CPU LibTorch emulates"));
}

TEST_F(Fp8TrainingTest, AResumedRunIsTheUnbrokenOne) {
  const auto common = Model({"--train-iters=8", "--batch-size=4"});
  const std::string ckpt = dir_ + "/ckpt";
  Result straight = Run(common, "straight");
  ASSERT_EQ(straight.exit.code, 0) << Describe(straight);
  EXPECT_THAT(straight.exit.output, HasSubstr("> fp8: hybrid (E4M3 forward, E5M2 gradients)"));
  Result first = Run(Plus(common, {"--save=" + ckpt, "--exit-interval=4"}), "first");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  Result second = Run(Plus(common, {"--load=" + ckpt}), "second");
  ASSERT_EQ(second.exit.code, 0) << Describe(second);
  EXPECT_THAT(second.exit.output, Not(HasSubstr("start fresh")));

  const auto a = Losses(straight), b = Losses(first), c = Losses(second);
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 4u);
  ASSERT_EQ(c.size(), 4u);
  for (int64_t i = 1; i <= 4; ++i) EXPECT_EQ(a.at(i), b.at(i)) << "iteration " << i;
  for (int64_t i = 5; i <= 8; ++i) EXPECT_EQ(a.at(i), c.at(i)) << "iteration " << i;

  // Nine tensors per linear of layer 0 in segment 0, with the layer's recorded scales.
  const auto state = Fp8State(ckpt, 4, 0);
  EXPECT_EQ(state.size(), 4u * 9u);
  ASSERT_EQ(state.count("h.0.attn.c_attn.fp8.input.amax_history"), 1u);
  EXPECT_EQ(state.at("h.0.attn.c_attn.fp8.input.amax_history").numel(), 1);
  EXPECT_NE(state.at("h.0.mlp.c_fc.fp8.weight.scale").item<float>(), 1.0f);  // updated

  // The inspector lists the FP8 entries; the Hugging Face export leaves them out.
  tools::InspectOptions inspect;
  inspect.path = ckpt;
  inspect.iteration = 4;
  inspect.list_tensors = true;
  const tools::CheckpointInspection inspection = tools::InspectCheckpoint(inspect);
  EXPECT_TRUE(inspection.status.ok()) << inspection.status;
  EXPECT_THAT(inspection.report, HasSubstr("h.1.mlp.c_proj.fp8.grad_output.scale_inv"));
  tools::HfExportOptions exported;
  exported.checkpoint = ckpt;
  exported.output_dir = dir_ + "/hf";
  absl::StatusOr<tools::HfExportSummary> summary = tools::ExportHuggingFace(exported);
  ASSERT_TRUE(summary.ok()) << summary.status();
  absl::StatusOr<varuna::SafetensorsFile> model =
      varuna::ReadSafetensors(dir_ + "/hf/model.safetensors");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_NE(model->Find("transformer.h.0.mlp.c_fc.weight"), nullptr);
  for (const auto& [name, tensor] : model->tensors) {
    EXPECT_FALSE(absl::StrContains(name, "fp8")) << name;
  }

  // Another history length: refused, naming both.
  Result other = Run(Plus(common, {"--load=" + ckpt, "--fp8-amax-history-len=4"}), "other");
  EXPECT_NE(other.exit.code, 0);
  EXPECT_THAT(other.exit.output, HasSubstr("fp8.input.amax_history has shape [1] in the "
                                           "checkpoint but [4] in this model"));
}

TEST_F(Fp8TrainingTest, ReplicasAgreeOnTheGlobalAmaxAndMorphToTwoStages) {
  const auto common = Model({"--train-iters=6"});
  const std::string one = dir_ + "/one", two = dir_ + "/two";
  // Iteration 1 of one process and of two replicas: the same weights, the same micro-batches,
  // so the global amax, hence every scale, is the same bitwise (a replica's own amax would not
  // be: each sees half of the batch).
  Result single = Run(Plus(common, {"--batch-size=8", "--chunk_size=2", "--save=" + one,
                                    "--save-interval=1", "--exit-interval=3"}),
                      "single");
  ASSERT_EQ(single.exit.code, 0) << Describe(single);
  Result replicas = Run(Plus(common, {"--save=" + two, "--save-interval=1", "--exit-interval=3"}),
                        "replicas", LauncherLayout(1, 2));
  ASSERT_EQ(replicas.exit.code, 0) << Describe(replicas);
  for (int segment : {0, 1}) {
    const auto a = Fp8State(one, 1, segment), b = Fp8State(two, 1, segment);
    ASSERT_EQ(a.size(), 36u);
    ASSERT_EQ(b.size(), 36u);
    for (const auto& [name, tensor] : a) {
      EXPECT_TRUE(at::equal(tensor, b.at(name))) << name << " " << tensor << " " << b.at(name);
    }
  }

  // The 1 x 2 checkpoint of iteration 3 under 2 stages: Varuna's schedule (recompute) and GPipe
  // (none) give the same losses bitwise, and they continue the two replicas' run.
  Result straight = Run(common, "straight", LauncherLayout(1, 2));
  ASSERT_EQ(straight.exit.code, 0) << Describe(straight);
  const auto expected = Losses(straight);
  ASSERT_EQ(expected.size(), 6u);
  Result varuna =
      Run(Plus(common, {"--load=" + two, "--schedule=varuna"}), "varuna", LauncherLayout(2, 1));
  ASSERT_EQ(varuna.exit.code, 0) << Describe(varuna);
  EXPECT_THAT(varuna.exit.output, HasSubstr("the layout changed"));
  Result gpipe =
      Run(Plus(common, {"--load=" + two, "--schedule=gpipe"}), "gpipe", LauncherLayout(2, 1));
  ASSERT_EQ(gpipe.exit.code, 0) << Describe(gpipe);
  const auto v = Losses(varuna), g = Losses(gpipe);
  ASSERT_EQ(v.size(), 3u);
  ASSERT_EQ(g.size(), 3u);
  for (int64_t i = 4; i <= 6; ++i) {
    EXPECT_EQ(v.at(i), g.at(i)) << "iteration " << i;
    const double x = std::stod(expected.at(i)), y = std::stod(v.at(i));
    EXPECT_NEAR(y, x, 1e-3 * x) << "iteration " << i;
  }
}

}  // namespace
}  // namespace trainer
