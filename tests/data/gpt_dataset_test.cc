#include "data/gpt_dataset.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Writes documents of `lengths` whose token i of document d is 100 * d + i.
std::shared_ptr<const IndexedDataset> MakeData(const std::string& name,
                                               const std::vector<int>& lengths) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  mkdir(dir.c_str(), 0755);
  const std::string prefix = dir + "/corpus_text_document";
  auto builder = IndexedDatasetBuilder::Create(prefix, TokenDtype::kUInt16);
  EXPECT_TRUE(builder.ok()) << builder.status();
  for (size_t d = 0; d < lengths.size(); ++d) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < lengths[d]; ++i) tokens.push_back(static_cast<int32_t>(100 * d + i));
    EXPECT_TRUE((*builder)->AddDocument(tokens).ok());
  }
  EXPECT_TRUE((*builder)->Finish().ok());
  auto data = IndexedDataset::Open(prefix, 0);
  EXPECT_TRUE(data.ok()) << data.status();
  return std::shared_ptr<const IndexedDataset>(*std::move(data));
}

std::vector<int32_t> Sample(const GptDataset& dataset, int64_t j) {
  std::vector<int32_t> out(static_cast<size_t>(dataset.seq_length() + 1), -1);
  dataset.Sample(j, out.data());
  return out;
}

// Golden samples printed by tests/data/gpt_index_golden.py: Megatron's GPT2Dataset
// (__getitem__ included) restated in Python over NumPy 2.4's RandomState(1234), for documents
// of lengths 5, 3, 7, 5 samples of 4 tokens asked for (2 epochs, 7 samples built).
TEST(GptDatasetTest, SamplesMatchMegatronInShuffledOrder) {
  std::shared_ptr<const IndexedDataset> data = MakeData("golden", {5, 3, 7});
  GptIndexOptions options;
  options.name = "train";
  options.num_samples = 5;
  options.seq_length = 4;
  options.seed = 1234;
  absl::StatusOr<std::unique_ptr<GptDataset>> dataset = GptDataset::Build(data, {0, 3}, options);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const GptDataset& d = **dataset;
  ASSERT_EQ(d.size(), 7);
  EXPECT_EQ(d.index().num_epochs(), 2);
  EXPECT_THAT(Sample(d, 0), ElementsAre(3, 4, 100, 101, 102));
  EXPECT_THAT(Sample(d, 1), ElementsAre(200, 201, 202, 203, 204));
  EXPECT_THAT(Sample(d, 2), ElementsAre(202, 203, 204, 205, 206));
  EXPECT_THAT(Sample(d, 3), ElementsAre(206, 0, 1, 2, 3));
  EXPECT_THAT(Sample(d, 4), ElementsAre(101, 102, 200, 201, 202));
  EXPECT_THAT(Sample(d, 5), ElementsAre(102, 0, 1, 2, 3));
  EXPECT_THAT(Sample(d, 6), ElementsAre(204, 205, 206, 100, 101));

  // Built again from the cache: the same samples.
  absl::StatusOr<std::unique_ptr<GptDataset>> again = GptDataset::Build(data, {0, 3}, options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->index().loaded_from_cache());
  for (int64_t j = 0; j < d.size(); ++j) EXPECT_EQ(Sample(**again, j), Sample(d, j));
}

// A split other than the first keeps the dataset's document ids. Documents 4..7 (lengths 2,
// 1, 1, 3), one sample of 4: 1 epoch, and RandomState(1234) happens to leave doc_idx in order
// (tests/data/gpt_index_golden.py), so the only sample spans four documents.
TEST(GptDatasetTest, LaterSplitUsesItsOwnDocuments) {
  std::shared_ptr<const IndexedDataset> data = MakeData("later", {4, 4, 4, 4, 2, 1, 1, 3});
  GptIndexOptions options;
  options.name = "valid";
  options.num_samples = 1;
  options.seq_length = 4;
  absl::StatusOr<std::unique_ptr<GptDataset>> dataset = GptDataset::Build(data, {4, 8}, options);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ASSERT_EQ((*dataset)->size(), 1);  // (7 - 1) / 4
  EXPECT_THAT(Sample(**dataset, 0), ElementsAre(400, 401, 500, 600, 700));
}

TEST(GptDatasetTest, BadRangeIsRejected) {
  std::shared_ptr<const IndexedDataset> data = MakeData("badrange", {4, 4});
  GptIndexOptions options;
  options.num_samples = 1;
  options.seq_length = 2;
  absl::StatusOr<std::unique_ptr<GptDataset>> dataset = GptDataset::Build(data, {1, 5}, options);
  ASSERT_FALSE(dataset.ok());
  EXPECT_THAT(dataset.status().message(), HasSubstr("documents [1, 5)"));
}

}  // namespace
}  // namespace data
