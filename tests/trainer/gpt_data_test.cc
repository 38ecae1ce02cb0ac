// GptData sizes its splits as Megatron (2020) does, so that the same data gives the same
// validation and test samples, and sizes blends as Megatron's BlendedMegatronDatasetBuilder.
#include "trainer/gpt_data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/gpt_index.h"
#include "data/indexed_dataset.h"
#include "data/npy.h"
#include "data/split.h"
#include "gtest/gtest.h"

namespace trainer {
namespace {

// 400 documents of 7 to 61 tokens in a fresh directory; returns the prefix.
std::string MakeCorpus(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  mkdir(dir.c_str(), 0755);
  const std::string prefix = dir + "/corpus_text_document";
  auto builder = data::IndexedDatasetBuilder::Create(prefix, data::TokenDtype::kUInt16);
  EXPECT_TRUE(builder.ok()) << builder.status();
  for (int d = 0; d < 400; ++d) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 7 + (d * 13) % 55; ++i) tokens.push_back((d * 31 + i) % 500);
    EXPECT_TRUE((*builder)->AddDocument(tokens).ok());
  }
  EXPECT_TRUE((*builder)->Finish().ok());
  return prefix;
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Documents of MakeCorpus's 400 in `split` of --split=80,15,5 (Options' split).
data::DocumentRange Range(data::Split split) {
  return (*data::SplitDocuments("80,15,5", 400))[static_cast<int>(split)];
}
constexpr data::DocumentRange kWhole = {0, 400};

// The doc_idx cache file of the `name` index ("train", "valid", "test") of `samples` samples of
// `documents` of the dataset at `prefix` (sequence 16, seed 1234, next to the data).
std::string DocIdx(const std::string& prefix, data::DocumentRange documents,
                   const std::string& name, int64_t samples) {
  data::GptIndexOptions index;
  index.name = name;
  index.num_samples = samples;
  index.seq_length = 16;
  index.seed = 1234;
  return data::GptIndexCachePaths(prefix, documents, index).doc_idx;
}

GptDataOptions Options(const std::string& prefix) {
  GptDataOptions options;
  options.data_prefix = prefix;
  options.vocab_size = 512;
  options.split = "80,15,5";
  options.seq_length = 16;
  options.batch_size = 3;
  options.dp_size = 2;
  options.train_iters = 25;
  options.eval_iters = 2;
  options.eval_interval = 10;
  return options;
}

TEST(GptDataTest, SizesTheValidationIndexForEveryEvaluationAsMegatronDoes) {
  const std::string prefix = MakeCorpus("megatron_sizes");
  auto data = GptData::Open(Options(prefix));
  ASSERT_TRUE(data.ok()) << data.status();
  // Global batch 6: train 25 x 6; validation (25 / 10 + 1) x 2 x 6 = 36; test 2 x 6. The
  // cached index files carry the sample counts in Megatron's names.
  EXPECT_TRUE(Exists(DocIdx(prefix, Range(data::Split::kTrain), "train", 150)));
  EXPECT_TRUE(Exists(DocIdx(prefix, Range(data::Split::kValid), "valid", 36)));
  EXPECT_TRUE(Exists(DocIdx(prefix, Range(data::Split::kTest), "test", 12)));
}

TEST(GptDataTest, WithoutAnIntervalTheValidationIndexHoldsOneEvaluation) {
  GptDataOptions options = Options(MakeCorpus("one_evaluation"));
  options.eval_interval = 0;
  auto data = GptData::Open(options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(Exists(DocIdx(options.data_prefix, Range(data::Split::kValid), "valid", 12)));
}

TEST(GptDataTest, EvaluationBatchesAreTheFirstOnesOfTheSplit) {
  const std::string prefix = MakeCorpus("first_batches");
  auto data = GptData::Open(Options(prefix));
  ASSERT_TRUE(data.ok()) << data.status();
  GptDataOptions other_rank = Options(prefix);
  other_rank.dp_rank = 1;
  auto other = GptData::Open(other_rank);
  ASSERT_TRUE(other.ok()) << other.status();
  auto first = (*data)->EvalBatch(data::Split::kValid, 0);
  auto again = (*data)->EvalBatch(data::Split::kValid, 0);
  auto second_replica = (*other)->EvalBatch(data::Split::kValid, 0);
  ASSERT_TRUE(first.ok() && again.ok() && second_replica.ok());
  EXPECT_TRUE(first->at("input_ids").equal(again->at("input_ids")));
  EXPECT_FALSE(first->at("input_ids").equal(second_replica->at("input_ids")));
}

// --data-path 0.3 A 0.7 B: each dataset's index is asked for its share plus 0.5%, per split.
TEST(GptDataTest, ABlendAsksEachDatasetForItsSharePlusTheSurplus) {
  const std::string a = MakeCorpus("blend_a"), b = MakeCorpus("blend_b");
  GptDataOptions options = Options(a);
  options.blend = data::Blend{{a, b}, {3, 7}};
  std::vector<std::string> progress;
  options.progress = [&progress](const std::string& line) { progress.push_back(line); };
  auto data = GptData::Open(options);
  ASSERT_TRUE(data.ok()) << data.status();
  // Train 150: 45 and 105, asked 46 and 106; valid 36: 11 and 26, asked 12 and 27; test 12: 4
  // and 9 (ceil(8.4)), asked 5 and 10.
  const data::DocumentRange train = Range(data::Split::kTrain), valid = Range(data::Split::kValid),
                            test = Range(data::Split::kTest);
  EXPECT_TRUE(Exists(DocIdx(a, train, "train", 46)));
  EXPECT_TRUE(Exists(DocIdx(b, train, "train", 106)));
  EXPECT_TRUE(Exists(DocIdx(a, valid, "valid", 12)));
  EXPECT_TRUE(Exists(DocIdx(b, valid, "valid", 27)));
  EXPECT_TRUE(Exists(DocIdx(a, test, "test", 5)));
  EXPECT_TRUE(Exists(DocIdx(b, test, "test", 10)));
  const std::string described = (*data)->Describe();
  EXPECT_NE(described.find("train: blend of 150 samples of 16 tokens over 2 datasets: 30.0% of " +
                           a + " (45 of its "),
            std::string::npos)
      << described;
  EXPECT_NE(described.find("valid: blend of 37 samples"), std::string::npos) << described;
  EXPECT_NE(described.find("test: blend of 13 samples"), std::string::npos) << described;
  EXPECT_EQ((*data)->datasets().size(), 2u);
  EXPECT_NE((*data)->Fingerprint(), (*data)->indexed().Fingerprint());
  // Two index lines (building, done) per dataset and split, two per blend.
  EXPECT_EQ(progress.size(), 3u * (2 * 2 + 2));
  EXPECT_EQ(progress[4], "> building the train blend index of 150 samples over 2 datasets ...");
  // Batches come from both datasets: the same step twice gives the same tokens.
  auto first = (*data)->TrainBatch(6);
  auto again = (*data)->TrainBatch(6);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_TRUE(first->at("input_ids").equal(again->at("input_ids")));
}

// --train-data-path A --valid-data-path B: each split from the whole of its own dataset; no test.
TEST(GptDataTest, PerSplitPathsTakeWholeDatasets) {
  const std::string a = MakeCorpus("split_a"), b = MakeCorpus("split_b");
  GptDataOptions options = Options(a);
  options.split_blends[0] = data::Blend{{a}, {}};
  options.split_blends[1] = data::Blend{{b}, {2}};  // One weighted prefix: that dataset alone.
  auto data = GptData::Open(options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(Exists(DocIdx(a, kWhole, "train", 150)));
  EXPECT_TRUE(Exists(DocIdx(b, kWhole, "valid", 36)));
  EXPECT_FALSE(Exists(DocIdx(a, kWhole, "valid", 36)));
  EXPECT_FALSE(Exists(DocIdx(a, Range(data::Split::kValid), "valid", 36)));
  EXPECT_TRUE((*data)->has(data::Split::kValid));
  EXPECT_FALSE((*data)->has(data::Split::kTest));
  // All 400 documents of B, not --split's 15% (documents 320 to 379).
  auto doc_idx = data::NpyArray::Load(DocIdx(b, kWhole, "valid", 36));
  ASSERT_TRUE(doc_idx.ok()) << doc_idx.status();
  int64_t lowest = 400, highest = -1;
  for (int64_t i = 0; i < doc_idx->size(); ++i) {
    lowest = std::min(lowest, doc_idx->Get(i));
    highest = std::max(highest, doc_idx->Get(i));
  }
  EXPECT_EQ(lowest, 0);
  EXPECT_EQ(highest, 399);

  // Without validation data, evaluation is refused with the flag to give.
  options.split_blends[1] = data::Blend{};
  auto refused = GptData::Open(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("give --valid-data-path"), std::string::npos);
}

// --data-path A, then --train-data-path A --valid-data-path A: the same dataset split by --split
// and whole, with the same sample counts, in the same directory. Each has its own index files,
// and both runs open (and reopen from the cache).
TEST(GptDataTest, OneDatasetSplitAndWholeKeepsTwoSetsOfIndexFiles) {
  const std::string a = MakeCorpus("split_then_whole");
  GptDataOptions split = Options(a);
  GptDataOptions whole = Options(a);
  whole.split_blends[0] = data::Blend{{a}, {}};
  whole.split_blends[1] = data::Blend{{a}, {}};
  for (int round = 0; round < 2; ++round) {
    auto by_split = GptData::Open(split);
    ASSERT_TRUE(by_split.ok()) << by_split.status();
    auto by_whole = GptData::Open(whole);
    ASSERT_TRUE(by_whole.ok()) << by_whole.status();
    ASSERT_TRUE((*by_split)->TrainBatch(0).ok());
    ASSERT_TRUE((*by_whole)->TrainBatch(0).ok());
  }
  EXPECT_TRUE(Exists(DocIdx(a, Range(data::Split::kTrain), "train", 150)));
  EXPECT_TRUE(Exists(DocIdx(a, kWhole, "train", 150)));
  EXPECT_TRUE(Exists(DocIdx(a, Range(data::Split::kValid), "valid", 36)));
  EXPECT_TRUE(Exists(DocIdx(a, kWhole, "valid", 36)));
}

// --train-samples=10 with a global batch of 4 (2 iterations): Megatron asks the train index for
// the 10 samples themselves, not 2 x 4.
TEST(GptDataTest, TrainSamplesSizeTheTrainIndex) {
  GptDataOptions options = Options(MakeCorpus("train_samples"));
  options.batch_size = 2;
  options.dp_size = 2;
  options.train_iters = 2;
  options.train_samples = 10;
  options.eval_iters = 0;
  auto data = GptData::Open(options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(Exists(DocIdx(options.data_prefix, Range(data::Split::kTrain), "train", 10)));
  EXPECT_FALSE(Exists(DocIdx(options.data_prefix, Range(data::Split::kTrain), "train", 8)));
  EXPECT_TRUE((*data)->TrainBatch(4).ok());
  // Without it, the iterations size it.
  options.train_samples = 0;
  ASSERT_TRUE(GptData::Open(options).ok());
  EXPECT_TRUE(Exists(DocIdx(options.data_prefix, Range(data::Split::kTrain), "train", 8)));
}

}  // namespace
}  // namespace trainer
