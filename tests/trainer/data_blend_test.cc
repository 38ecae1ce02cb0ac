// Megatron's data blends end to end, as a user runs them: `--data-path 0.3 A 0.7 B` trains,
// logs each dataset's share and the index progress lines, reuses the cached indices on the
// next run; a run stopped in the middle of the blend and resumed is the run that never
// stopped (bitwise losses and the same consumed samples), and resumes under another layout
// within fp32 tolerance; per-split paths train; two datasets of one file name share a
// --data-cache-path; datasets of different tokenizers are named. The two datasets hold
// different tokens, so a mix-up between them shows.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/dataset_tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using testing::ConsumedSamples;
using ::testing::HasSubstr;
using testing::Losses;
using testing::Plus;
using testing::Result;

class DataBlendTest : public testing::TrainerTest {
 protected:
  void SetUp() override {
    TrainerTest::SetUp();
    fs::create_directories(dir_ + "/second");
    second_ = testing::MakeDataset(dir_ + "/second", /*seed=*/1);
    ASSERT_NE(Bytes(data_ + ".bin"), Bytes(second_ + ".bin"));
  }

  static std::string Bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // The tiny model without its --data-path, plus `extra`.
  std::vector<std::string> Model(const std::vector<std::string>& extra) const {
    std::vector<std::string> flags;
    for (const std::string& flag : TinyModel()) {
      if (flag.rfind("--data-path=", 0) != 0) flags.push_back(flag);
    }
    return Plus(flags, extra);
  }

  std::vector<std::string> Blend() const { return {"--data-path", "0.3", data_, "0.7", second_}; }

  std::string second_;
};

TEST_F(DataBlendTest, ABlendTrainsLogsItsSharesAndReusesItsCache) {
  const auto flags = Model(Plus({"--train-iters=5"}, Blend()));
  Result first = Run(flags, "first");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  // Global batch 4 x 5 steps = 20 samples: 6 and 14, asked as ceil(x * 1.005) = 7 and 15.
  EXPECT_THAT(first.exit.output,
              HasSubstr("> building the train blend index of 20 samples over 2 datasets ...\n"));
  EXPECT_THAT(first.exit.output, HasSubstr("> ... done in "));
  EXPECT_THAT(first.exit.output,
              HasSubstr("> building the train sample and shuffle indices of " + data_));
  EXPECT_THAT(first.exit.output,
              HasSubstr("train: blend of 20 samples of 16 tokens over 2 datasets: 30.0% of " +
                        data_ + " (6 of its "));
  EXPECT_THAT(first.exit.output, HasSubstr(", 70.0% of " + second_ + " (14 of its "));
  EXPECT_EQ(Losses(first).size(), 5u);

  Result again = Run(flags, "again");
  ASSERT_EQ(again.exit.code, 0) << Describe(again);
  EXPECT_THAT(again.exit.output,
              HasSubstr("> loaded the train blend index of 20 samples over 2 datasets from "));
  EXPECT_THAT(again.exit.output, ::testing::Not(HasSubstr("> building the")));
  EXPECT_EQ(Losses(first), Losses(again));
}

// Both datasets are named synthetic_text_document (in two directories): with one
// --data-cache-path and equal weights (so each is asked for the same 11 samples), each still
// gets its own index files, and a second run loads them all.
TEST_F(DataBlendTest, DatasetsOfOneFileNameShareACacheDirectory) {
  const std::string cache = dir_ + "/cache";
  fs::create_directories(cache);
  const auto flags = Model({"--train-iters=5", "--data-cache-path=" + cache, "--data-path", "0.5",
                            data_, "0.5", second_});
  Result first = Run(flags, "first");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  const std::string stem = "synthetic_text_document_train_indexmap_11ns_16sl_7s_0x";
  const std::string suffix = "_doc_idx.npy";
  int train_indices = 0;
  for (const auto& entry : fs::directory_iterator(cache)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem, 0) == 0 && name.size() == stem.size() + 8 + suffix.size() &&
        name.compare(stem.size() + 8, suffix.size(), suffix) == 0) {
      ++train_indices;
    }
  }
  EXPECT_EQ(train_indices, 2);
  Result again = Run(flags, "again");
  ASSERT_EQ(again.exit.code, 0) << Describe(again);
  EXPECT_THAT(again.exit.output, ::testing::Not(HasSubstr("> building the")));
  EXPECT_EQ(Losses(first), Losses(again));
}

// --train-samples=10 with a global batch of 4: 2 iterations, but the blend (and each dataset's
// index) is sized by the 10 samples, as Megatron sizes it.
TEST_F(DataBlendTest, TrainSamplesSizeTheBlend) {
  Result r = Run(Model(Plus({"--train-samples=10"}, Blend())), "samples");
  ASSERT_EQ(r.exit.code, 0) << Describe(r);
  EXPECT_THAT(r.exit.output,
              HasSubstr("> building the train blend index of 10 samples over 2 datasets ...\n"));
  EXPECT_EQ(Losses(r).size(), 2u);
}

TEST_F(DataBlendTest, ResumeInTheMiddleOfABlendContinuesExactly) {
  const auto common = Model(Plus({"--train-iters=6"}, Blend()));
  const std::string ckpt = dir_ + "/ckpt";
  Result straight = Run(common, "straight");
  ASSERT_EQ(straight.exit.code, 0) << Describe(straight);
  Result first = Run(Plus(common, {"--save=" + ckpt, "--exit-interval=3"}), "first");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  Result second = Run(Plus(common, {"--load=" + ckpt}), "second");
  ASSERT_EQ(second.exit.code, 0) << Describe(second);
  EXPECT_THAT(second.exit.output, HasSubstr("resumed from"));

  const auto a = Losses(straight), b = Losses(first), c = Losses(second);
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 3u);
  ASSERT_EQ(c.size(), 3u);
  for (int64_t step = 1; step <= 6; ++step) {
    EXPECT_EQ(a.at(step), step <= 3 ? b.at(step) : c.at(step)) << "step " << step;
  }
  EXPECT_EQ(ConsumedSamples(straight).at(6), ConsumedSamples(second).at(6));
}

TEST_F(DataBlendTest, EachSplitFromItsOwnPaths) {
  Result r =
      Run(Model({"--train-iters=2", "--eval-interval=2", "--eval-iters=1", "--train-data-path", "1",
                 data_, "3", second_, "--valid-data-path", second_}),
          "per_split");
  ASSERT_EQ(r.exit.code, 0) << Describe(r);
  // 8 training samples: 2 and 6; validation (2 / 2 + 1) x 1 x 4 = 8 from the second alone.
  EXPECT_THAT(r.exit.output, HasSubstr("train: blend of 8 samples of 16 tokens over 2 datasets: "
                                       "25.0% of " +
                                       data_ + " (2 of its "));
  EXPECT_THAT(r.exit.output, HasSubstr("; valid: "));
  EXPECT_THAT(r.exit.output, HasSubstr("validation loss at iteration 2"));
}

// A blend's checkpoint resumes under another layout (one process -> two data-parallel
// replicas, the same global batch of 8): the data continues where it stopped, so the losses
// continue within fp32 tolerance.
TEST_F(DataBlendTest, ABlendResumesUnderAnotherLayout) {
  std::vector<std::string> common;
  for (const std::string& flag :
       Model(Plus({"--train-iters=6", "--hidden-dropout=0", "--attention-dropout=0"}, Blend()))) {
    if (flag != "--batch-size=4") common.push_back(flag);
  }
  const std::vector<std::string> alone = {"--batch-size=8", "--chunk_size=2"};
  const std::string ckpt = dir_ + "/ckpt";
  Result straight = Run(Plus(common, alone), "straight");
  ASSERT_EQ(straight.exit.code, 0) << Describe(straight);
  Result first = Run(Plus(Plus(common, alone), {"--save=" + ckpt, "--exit-interval=3"}), "first");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  Result morph = Run(Plus(common, {"--load=" + ckpt}), "morph",
                     {"--nstages=1", "--gpus_per_node=2", "--batch_size=8", "--chunk_size=2",
                      "--master_port=0", "--grace_seconds=5"});
  ASSERT_EQ(morph.exit.code, 0) << Describe(morph);
  EXPECT_THAT(morph.exit.output, HasSubstr("the layout changed"));
  const auto expected = Losses(straight), losses = Losses(morph);
  ASSERT_EQ(expected.size(), 6u);
  ASSERT_EQ(losses.size(), 3u);
  for (int64_t i = 4; i <= 6; ++i) {
    const double x = std::stod(expected.at(i)), y = std::stod(losses.at(i));
    EXPECT_NEAR(y, x, 1e-5 * x) << "iteration " << i;
  }
}

// All datasets of a blend share one tokenizer: without a tokenizer flag, their records are
// checked against each other, and the one that differs is named.
TEST_F(DataBlendTest, DatasetsOfAnotherTokenizerAreNamed) {
  data::DatasetTokenizer record;
  record.kind = data::TokenizerKind::kSentencePiece;
  record.files = {dir_ + "/first.model"};
  record.vocab_size = 50;
  record.eod_id = 0;
  ASSERT_TRUE(data::WriteDatasetTokenizer(data_, record).ok());
  record.files = {dir_ + "/other.model"};
  record.vocab_size = 48;
  ASSERT_TRUE(data::WriteDatasetTokenizer(second_, record).ok());
  Result r = Run(Model(Plus({"--train-iters=1"}, Blend())), "mixed");
  EXPECT_EQ(r.exit.code, 1) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("the datasets of a blend must share one tokenizer, but " +
                                       second_ + " differs from " + data_));
}

}  // namespace
}  // namespace trainer
