// GptData sizes its splits as Megatron (2020) does, so that the same data gives the same
// validation and test samples.
#include "trainer/gpt_data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
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
  const std::string base = prefix + "_";
  EXPECT_TRUE(Exists(base + "train_indexmap_150ns_16sl_1234s_doc_idx.npy"));
  EXPECT_TRUE(Exists(base + "valid_indexmap_36ns_16sl_1234s_doc_idx.npy"));
  EXPECT_TRUE(Exists(base + "test_indexmap_12ns_16sl_1234s_doc_idx.npy"));
}

TEST(GptDataTest, WithoutAnIntervalTheValidationIndexHoldsOneEvaluation) {
  GptDataOptions options = Options(MakeCorpus("one_evaluation"));
  options.eval_interval = 0;
  auto data = GptData::Open(options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(Exists(options.data_prefix + "_valid_indexmap_12ns_16sl_1234s_doc_idx.npy"));
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

}  // namespace
}  // namespace trainer
