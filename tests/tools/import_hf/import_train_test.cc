// Training from imported and earlier weights, as a user runs it: pretrain_gpt2 makes a checkpoint
// of the tiny model; export_hf -> import_hf -> export_hf gives the same model.safetensors; the
// weights-only checkpoint import_hf writes is refused without --finetune or --no-load-optim
// (naming both) and trains with --finetune from iteration 0, its shape taken by
// --use-checkpoint-args; --finetune evaluates the loaded weights at iteration 0 to the loss the
// saving run logged for them and starts a fresh LR schedule and data position; --no-load-optim
// keeps the iteration; another --hidden-size is named with both values.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"
#include "tools/export_hf/hf_export.h"
#include "tools/import_hf/hf_import.h"
#include "varuna/io/json.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Plus;
using testing::Result;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A metrics field of the line of `iteration` (of `split`, or a training step when empty), as
// JSON text; "" if absent.
std::string Field(const Result& r, int64_t iteration, const std::string& key,
                  const std::string& split = "") {
  for (const auto& line : r.metrics) {
    const auto* it = varuna::json::Find(line, "iteration");
    const auto* s = varuna::json::Find(line, "split");
    if (it == nullptr || it->get<int64_t>() != iteration) continue;
    if (split.empty() != (s == nullptr)) continue;
    if (s != nullptr && s->get<std::string>() != split) continue;
    if (const auto* value = varuna::json::Find(line, key)) return varuna::json::Serialize(*value);
  }
  return "";
}

class ImportTrainTest : public testing::TrainerTest {
 protected:
  // The tiny model without dropout, with `extra` flags; `shape` false leaves out the shape flags
  // (for --use-checkpoint-args).
  std::vector<std::string> Model(const std::vector<std::string>& extra, bool shape = true) const {
    std::vector<std::string> flags;
    for (const std::string& flag : TinyModel()) {
      const bool is_shape =
          flag.rfind("--num-layers", 0) == 0 || flag.rfind("--hidden-size", 0) == 0 ||
          flag.rfind("--num-attention-heads", 0) == 0 || flag.rfind("--seq-length", 0) == 0 ||
          flag.rfind("--max-position-embeddings", 0) == 0;
      if (flag.rfind("--eval-interval", 0) == 0 || (is_shape && !shape)) continue;
      flags.push_back(flag);
    }
    return Plus(Plus(flags, {"--hidden-dropout=0", "--attention-dropout=0"}), extra);
  }

  // A run of 4 iterations saved to dir_/ckpt, evaluated at its end on 2 validation batches.
  Result Pretrain() const {
    return Run(Model({"--train-iters=4", "--eval-interval=4", "--eval-iters=2",
                      "--save=" + dir_ + "/ckpt"}),
               "pretrain");
  }

  // export_hf of `checkpoint` into `out`, then import_hf of that into `imported`.
  void ExportAndImport(const std::string& checkpoint, const std::string& out,
                       const std::string& imported) const {
    tools::HfExportOptions export_options;
    export_options.checkpoint = checkpoint;
    export_options.output_dir = out;
    absl::StatusOr<tools::HfExportSummary> exported = tools::ExportHuggingFace(export_options);
    ASSERT_TRUE(exported.ok()) << exported.status();
    tools::HfImportOptions import_options;
    import_options.input_dir = out;
    import_options.output_dir = imported;
    absl::StatusOr<tools::HfImportSummary> summary = tools::ImportHuggingFace(import_options);
    ASSERT_TRUE(summary.ok()) << summary.status();
  }
};

TEST_F(ImportTrainTest, ExportImportExportGivesTheSameModelFile) {
  Result pretrain = Pretrain();
  ASSERT_EQ(pretrain.exit.code, 0) << Describe(pretrain);
  ExportAndImport(dir_ + "/ckpt", dir_ + "/hf1", dir_ + "/imported");
  tools::HfExportOptions again;
  again.checkpoint = dir_ + "/imported";
  again.output_dir = dir_ + "/hf2";
  absl::StatusOr<tools::HfExportSummary> exported = tools::ExportHuggingFace(again);
  ASSERT_TRUE(exported.ok()) << exported.status();
  const std::string first = ReadBytes(dir_ + "/hf1/model.safetensors");
  EXPECT_GT(first.size(), 1000u);
  EXPECT_TRUE(first == ReadBytes(dir_ + "/hf2/model.safetensors"));
  // config.json may differ in bos/eos: without a tokenizer export_hf takes the last id of the
  // vocabulary it knows, and an export of the padded rows does not record the real size.
}

TEST_F(ImportTrainTest, FinetuneStartsAtIterationZeroWithTheLoadedWeights) {
  Result pretrain = Pretrain();
  ASSERT_EQ(pretrain.exit.code, 0) << Describe(pretrain);
  const std::string saved_loss = Field(pretrain, 4, "val_loss", "validation");
  ASSERT_NE(saved_loss, "");
  Result finetune = Run(Model({"--train-iters=4", "--exit-interval=1", "--eval-interval=4",
                               "--eval-iters=2", "--load=" + dir_ + "/ckpt", "--finetune"}),
                        "finetune");
  ASSERT_EQ(finetune.exit.code, 0) << Describe(finetune);
  EXPECT_THAT(finetune.exit.output, HasSubstr("--finetune: the weights of " + dir_ +
                                              "/ckpt at iteration 4; starting "
                                              "at iteration 0"));
  // The loaded weights, evaluated before any step, give the loss the saving run logged for them.
  EXPECT_EQ(Field(finetune, 0, "val_loss", "validation"), saved_loss);
  // Iteration 1 is the first step: a fresh data position and a fresh LR schedule.
  EXPECT_EQ(Field(finetune, 1, "consumed_samples"), "4");
  EXPECT_EQ(Field(finetune, 1, "lr"), Field(pretrain, 1, "lr"));
  EXPECT_NE(Field(finetune, 1, "lm_loss"), Field(pretrain, 1, "lm_loss"));

  Result continued = Run(Model({"--train-iters=6", "--eval-interval=0", "--load=" + dir_ + "/ckpt",
                                "--no-load-optim", "--no-load-rng"}),
                         "no_load_optim");
  ASSERT_EQ(continued.exit.code, 0) << Describe(continued);
  EXPECT_THAT(continued.exit.output,
              AllOf(HasSubstr("resumed from"), HasSubstr("--no-load-optim: a fresh optimizer"),
                    HasSubstr("--no-load-rng")));
  EXPECT_EQ(Field(continued, 4, "consumed_samples"), "");
  EXPECT_EQ(Field(continued, 5, "consumed_samples"), "20");
  // A fresh optimizer has taken no step, so the LR schedule (which counts its steps) starts
  // again, as Megatron's fresh scheduler does: iteration 5 has the first step's learning rate.
  ASSERT_NE(Field(pretrain, 1, "lr"), "");
  EXPECT_EQ(Field(continued, 5, "lr"), Field(pretrain, 1, "lr"));
  EXPECT_NE(Field(continued, 5, "lr"), Field(pretrain, 4, "lr"));
}

TEST_F(ImportTrainTest, ImportedWeightsNeedFinetuneAndGiveTheirShape) {
  Result pretrain = Pretrain();
  ASSERT_EQ(pretrain.exit.code, 0) << Describe(pretrain);
  const std::string imported = dir_ + "/imported";
  ExportAndImport(dir_ + "/ckpt", dir_ + "/hf", imported);

  for (const char* flag :
       {"--finetune", "--no-load-optim", "--no-load-rng", "--use-checkpoint-args"}) {
    Result alone = Run(Model({"--train-iters=2", flag}), "alone");
    EXPECT_EQ(alone.exit.code, 2) << flag << "\n" << Describe(alone);
    EXPECT_THAT(alone.exit.output,
                HasSubstr(absl::StrCat(flag, " needs --load=DIR (the checkpoint to load)")));
  }
  Result plain = Run(Model({"--train-iters=2", "--load=" + imported}), "plain");
  EXPECT_EQ(plain.exit.code, 1) << Describe(plain);
  EXPECT_THAT(plain.exit.output, AllOf(HasSubstr("holds weights only"), HasSubstr("--finetune"),
                                       HasSubstr("--no-load-optim")));

  Result tuned = Run(Model({"--train-iters=2", "--eval-interval=2", "--eval-iters=2",
                            "--load=" + imported, "--finetune", "--use-checkpoint-args"},
                           /*shape=*/false),
                     "tuned");
  ASSERT_EQ(tuned.exit.code, 0) << Describe(tuned);
  EXPECT_THAT(tuned.exit.output,
              AllOf(HasSubstr("--use-checkpoint-args: the model of " + imported + "/varuna_ckpt_0"),
                    HasSubstr("--num-layers=2 --hidden-size=32 --num-attention-heads=2 "
                              "--max-position-embeddings=16 --seq-length=16"),
                    HasSubstr("successfully loaded checkpoint")));
  EXPECT_NE(Field(tuned, 0, "val_loss", "validation"), "");
  EXPECT_NE(Field(tuned, 2, "lm_loss"), "");

  Result wider = Run(
      Model({"--train-iters=2", "--hidden-size=64", "--load=" + imported, "--finetune"}), "wider");
  EXPECT_EQ(wider.exit.code, 1) << Describe(wider);
  EXPECT_THAT(wider.exit.output, HasSubstr("--hidden-size: checkpoint 32, now 64"));

  Result conflicting = Run(Model({"--train-iters=2", "--hidden-size=64", "--num-layers=3",
                                  "--load=" + imported, "--finetune", "--use-checkpoint-args"},
                                 /*shape=*/false),
                           "conflicting");
  EXPECT_EQ(conflicting.exit.code, 2) << Describe(conflicting);
  EXPECT_THAT(conflicting.exit.output, AllOf(HasSubstr("--num-layers=3, checkpoint 2"),
                                             HasSubstr("--hidden-size=64, checkpoint 32")));
}

// The weights-only checkpoint loads under 2 stages x 2 replicas (each stage reads its own
// segments; the tied pair's two copies are on different stages): the loaded weights evaluate to
// the loss one process gets, within float rounding.
TEST_F(ImportTrainTest, ImportedWeightsLoadUnderTwoStagesAndTwoReplicas) {
  Result pretrain = Pretrain();
  ASSERT_EQ(pretrain.exit.code, 0) << Describe(pretrain);
  const std::string imported = dir_ + "/imported";
  ExportAndImport(dir_ + "/ckpt", dir_ + "/hf", imported);
  auto flags = [&](bool launched) {
    std::vector<std::string> out;
    for (const std::string& flag :
         Model({"--train-iters=2", "--exit-interval=1", "--eval-interval=2", "--eval-iters=2",
                "--load=" + imported, "--finetune"})) {
      if (!launched || flag != "--batch-size=4") out.push_back(flag);
    }
    if (!launched) out.push_back("--chunk_size=2");
    return out;
  };
  Result one = Run(flags(false), "one");
  ASSERT_EQ(one.exit.code, 0) << Describe(one);
  Result job = Run(flags(true), "two_by_two",
                   {"--nstages=2", "--gpus_per_node=4", "--batch_size=4", "--chunk_size=2",
                    "--master_port=0", "--grace_seconds=5"});
  ASSERT_EQ(job.exit.code, 0) << Describe(job);
  const std::string a = Field(one, 0, "val_loss", "validation");
  const std::string b = Field(job, 0, "val_loss", "validation");
  ASSERT_NE(a, "");
  ASSERT_NE(b, "");
  EXPECT_NEAR(std::stod(b), std::stod(a), 1e-5 * std::stod(a));
  const std::string first = Field(one, 1, "lm_loss"), second = Field(job, 1, "lm_loss");
  ASSERT_NE(first, "");
  EXPECT_NEAR(std::stod(second), std::stod(first), 1e-5 * std::stod(first));
}

}  // namespace
}  // namespace trainer
