#include "data/gpt_index.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "data/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varuna/io/crc32c.h"

namespace data {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::string MakeDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::vector<int64_t> Values(const NpyArray& array) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < array.size(); ++i) out.push_back(array.Get(i));
  return out;
}

GptIndexOptions Options(const std::string& name, int64_t num_samples, int64_t seq_length) {
  GptIndexOptions options;
  options.name = name;
  options.num_samples = num_samples;
  options.seq_length = seq_length;
  options.seed = 1234;
  return options;
}

// The tokens of sample j when token i of document d is 100 * d + i.
std::vector<int64_t> SampleTokens(const GptIndex& index, int64_t j) {
  std::vector<int64_t> tokens;
  index.ForEachSpan(j, [&](int64_t doc, int64_t offset, int64_t count) {
    for (int64_t i = 0; i < count; ++i) tokens.push_back(100 * doc + offset + i);
  });
  return tokens;
}

TEST(GptNumEpochsTest, SmallestEpochCountCoveringSamplesPlusOneToken) {
  EXPECT_EQ(GptNumEpochs(15, 4, 3), 1);  // 3 * 4 + 1 = 13 <= 15
  EXPECT_EQ(GptNumEpochs(15, 4, 4), 2);  // 17 > 15
  EXPECT_EQ(GptNumEpochs(16, 5, 3), 1);  // exactly 16
  EXPECT_EQ(GptNumEpochs(15, 5, 3), 2);  // 16 > 15: the extra label token needs an epoch
  EXPECT_EQ(GptNumEpochs(8, 3, 6), 3);   // 19 tokens from 8 per epoch
  EXPECT_EQ(GptNumEpochs(10, 4, 0), 1);
}

// Documents of lengths 5, 3, 7 in order (no shuffling), tokens d0 = t0..t4, d1 = t5..t7,
// d2 = t8..t14. Worked by hand:
//   seq_len 4 (5 tokens per sample):
//     sample 0: t0..t4            = all of d0                 -> ends at (0, 4)
//     sample 1: t4 t5 t6 t7 t8    = d0[4], all of d1, d2[0]   -> ends at (2, 0)  (3 documents)
//     sample 2: t8..t12           = d2[0..4]                  -> ends at (2, 4)
//   seq_len 3 (4 tokens per sample):
//     sample 0: t0..t3 -> (0, 3);  sample 1: t3 t4 t5 t6 -> (1, 1)  (2 documents)
//     sample 2: t6 t7 t8 t9 -> (2, 1);  sample 3: t9..t12 -> (2, 4)
TEST(BuildSampleIdxTest, HandComputedWalk) {
  const std::vector<int32_t> sizes = {5, 3, 7};
  const std::vector<int32_t> doc_idx = {0, 1, 2};
  EXPECT_THAT(BuildSampleIdx<int32_t>(sizes, doc_idx, 4, 1, 15),
              ElementsAre(0, 0, 0, 4, 2, 0, 2, 4));
  EXPECT_THAT(BuildSampleIdx<int64_t>(sizes, doc_idx, 3, 1, 15),
              ElementsAre(0, 0, 0, 3, 1, 1, 2, 1, 2, 4));
}

// Two epochs of the same documents, doc_idx = d0 d1 d2 d0 d1 d2 (positions 0..5), seq_len 4,
// (30 - 1) / 4 = 7 samples. After the three samples above:
//   sample 3: d2[4..6], d0[0..1]     = (2,4) -> (3,1)   (crosses into the second epoch)
//   sample 4: d0[1..4], d1[0]        = (3,1) -> (4,0)
//   sample 5: d1[0..2], d2[0..1]     = (4,0) -> (5,1)
//   sample 6: d2[1..5]               = (5,1) -> (5,5)
TEST(GptIndexTest, HandComputedSamplesAcrossDocumentsAndEpochs) {
  const std::vector<int32_t> sizes = {5, 3, 7};
  const std::vector<int32_t> doc_idx = {0, 1, 2, 0, 1, 2};
  const std::vector<int32_t> sample_idx = BuildSampleIdx<int32_t>(sizes, doc_idx, 4, 2, 15);
  EXPECT_THAT(sample_idx, ElementsAre(0, 0, 0, 4, 2, 0, 2, 4, 3, 1, 4, 0, 5, 1, 5, 5));
  absl::StatusOr<GptIndex> index = GptIndex::FromArrays(
      sizes, {0, 3}, Options("train", 5, 4), NpyArray::FromVector(doc_idx, {6}),
      NpyArray::FromVector(sample_idx, {8, 2}),
      NpyArray::FromVector(std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6}, {7}), "hand");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->size(), 7);
  EXPECT_EQ(index->num_epochs(), 2);
  EXPECT_THAT(SampleTokens(*index, 0), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(SampleTokens(*index, 1), ElementsAre(4, 100, 101, 102, 200));
  EXPECT_THAT(SampleTokens(*index, 2), ElementsAre(200, 201, 202, 203, 204));
  EXPECT_THAT(SampleTokens(*index, 3), ElementsAre(204, 205, 206, 0, 1));
  EXPECT_THAT(SampleTokens(*index, 4), ElementsAre(1, 2, 3, 4, 100));
  EXPECT_THAT(SampleTokens(*index, 5), ElementsAre(100, 101, 102, 200, 201));
  EXPECT_THAT(SampleTokens(*index, 6), ElementsAre(201, 202, 203, 204, 205));

  // The pieces of the three-document sample, and the shuffle applied first.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> pieces;
  index->ForEachSpan(1, [&](int64_t d, int64_t o, int64_t n) { pieces.emplace_back(d, o, n); });
  EXPECT_THAT(pieces, ElementsAre(std::make_tuple(0, 4, 1), std::make_tuple(1, 0, 3),
                                  std::make_tuple(2, 0, 1)));
  absl::StatusOr<GptIndex> reversed = GptIndex::FromArrays(
      sizes, {0, 3}, Options("train", 5, 4), NpyArray::FromVector(doc_idx, {6}),
      NpyArray::FromVector(sample_idx, {8, 2}),
      NpyArray::FromVector(std::vector<uint32_t>{6, 5, 4, 3, 2, 1, 0}, {7}), "hand");
  ASSERT_TRUE(reversed.ok()) << reversed.status();
  EXPECT_THAT(SampleTokens(*reversed, 5), ElementsAre(4, 100, 101, 102, 200));
}

// Golden arrays printed by tests/data/gpt_index_golden.py: Megatron's construction restated
// in Python with NumPy 2.4's RandomState(1234).
const std::vector<int32_t> kGoldenSizes = {5, 3, 7, 2, 9, 4, 6, 1, 8, 3, 0, 5};

TEST(GptIndexTest, BuildMatchesMegatronWithNumpy) {
  const std::string dir = MakeDir("golden");
  const std::string prefix = dir + "/corpus_text_document";
  // train: documents [0, 9), 45 tokens, 10 samples of 4 asked -> 1 epoch, 11 samples.
  absl::StatusOr<GptIndex> train =
      GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, Options("train", 10, 4));
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_FALSE(train->loaded_from_cache());
  EXPECT_EQ(train->num_epochs(), 1);
  EXPECT_EQ(train->size(), 11);
  EXPECT_EQ(train->doc_idx().dtype(), NpyDtype::kInt32);
  EXPECT_EQ(train->sample_idx().dtype(), NpyDtype::kInt32);
  EXPECT_EQ(train->shuffle_idx().dtype(), NpyDtype::kUInt32);
  EXPECT_THAT(Values(train->doc_idx()), ElementsAre(8, 2, 1, 0, 7, 4, 5, 6, 3));
  EXPECT_THAT(Values(train->sample_idx()), ElementsAreArray({0, 0, 0, 4, 1, 0, 1, 4, 2, 1, 3, 2,
                                                             5, 0, 5, 4, 5, 8, 6, 3, 7, 3, 8, 1}));
  EXPECT_THAT(Values(train->shuffle_idx()), ElementsAre(9, 3, 5, 10, 4, 8, 0, 2, 6, 7, 1));

  // valid: documents [9, 12) of lengths 3, 0, 5 (an empty one), 6 samples of 3 -> 3 epochs.
  absl::StatusOr<GptIndex> valid =
      GptIndex::BuildOrLoad(prefix, kGoldenSizes, {9, 12}, Options("valid", 6, 3));
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_EQ(valid->num_epochs(), 3);
  EXPECT_THAT(Values(valid->doc_idx()), ElementsAre(11, 11, 10, 9, 10, 10, 11, 9, 9));
  EXPECT_THAT(Values(valid->sample_idx()),
              ElementsAre(0, 0, 0, 3, 1, 1, 1, 4, 3, 2, 6, 2, 7, 0, 8, 0));
  EXPECT_THAT(Values(valid->shuffle_idx()), ElementsAre(5, 0, 3, 4, 2, 6, 1));

  // The cache files carry Megatron's names, then the CRC of the prefix and range, and NumPy's
  // bytes.
  const GptIndexPaths paths = GptIndexCachePaths(prefix, {0, 9}, Options("train", 10, 4));
  const std::string source = prefix + " documents [0, 9)";
  const std::string stem = prefix + "_train_indexmap_10ns_4sl_1234s_" +
                           varuna::Crc32cToHex(varuna::Crc32c(source.data(), source.size())) + "_";
  EXPECT_EQ(paths.doc_idx, stem + "doc_idx.npy");
  EXPECT_EQ(paths.sample_idx, stem + "sample_idx.npy");
  EXPECT_EQ(paths.shuffle_idx, stem + "shuffle_idx.npy");
  absl::StatusOr<NpyArray> shuffle = NpyArray::Load(paths.shuffle_idx);
  ASSERT_TRUE(shuffle.ok()) << shuffle.status();
  EXPECT_EQ(shuffle->dtype(), NpyDtype::kUInt32);
  EXPECT_THAT(Values(*shuffle), ElementsAre(9, 3, 5, 10, 4, 8, 0, 2, 6, 7, 1));
  EXPECT_EQ(NpyArray::Load(paths.sample_idx)->shape(), (std::vector<int64_t>{12, 2}));
}

int64_t MtimeNs(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

TEST(GptIndexTest, SecondBuildLoadsTheCacheWithoutRewriting) {
  const std::string dir = MakeDir("reuse");
  const std::string prefix = dir + "/data";
  const GptIndexOptions options = Options("train", 10, 4);
  absl::StatusOr<GptIndex> first = GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->loaded_from_cache());
  const GptIndexPaths paths = GptIndexCachePaths(prefix, {0, 9}, options);
  const int64_t mtime = MtimeNs(paths.shuffle_idx);
  const int64_t doc_mtime = MtimeNs(paths.doc_idx);
  ASSERT_GT(mtime, 0);
  usleep(20000);
  absl::StatusOr<GptIndex> second = GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->loaded_from_cache());
  EXPECT_EQ(MtimeNs(paths.shuffle_idx), mtime);
  EXPECT_EQ(MtimeNs(paths.doc_idx), doc_mtime);
  EXPECT_EQ(Values(second->doc_idx()), Values(first->doc_idx()));
  EXPECT_EQ(Values(second->sample_idx()), Values(first->sample_idx()));
  EXPECT_EQ(Values(second->shuffle_idx()), Values(first->shuffle_idx()));
  // Another seed is another index, in other files.
  GptIndexOptions reseeded = options;
  reseeded.seed = 1;
  absl::StatusOr<GptIndex> third = GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, reseeded);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->loaded_from_cache());
  EXPECT_NE(Values(third->shuffle_idx()), Values(first->shuffle_idx()));
}

TEST(GptIndexTest, ProgressSaysBuildingAndItsTimeOrOneLineWhenLoaded) {
  const std::string prefix = MakeDir("progress") + "/data";
  std::vector<std::string> lines;
  GptIndexOptions options = Options("train", 10, 4);
  options.progress = [&lines](const std::string& line) { lines.push_back(line); };
  ASSERT_TRUE(GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options).ok());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "> building the train sample and shuffle indices of " + prefix +
                          " (9 documents, " + std::to_string([] {
                            int64_t tokens = 0;
                            for (int d = 0; d < 9; ++d) tokens += kGoldenSizes[d];
                            return tokens;
                          }()) +
                          " tokens) ...");
  EXPECT_THAT(lines[1], HasSubstr("> ... done in "));
  EXPECT_THAT(lines[1], HasSubstr(" s: "));
  // Loaded: one line, with the samples the index holds (11; 10 were asked for).
  lines.clear();
  ASSERT_TRUE(GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options).ok());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "> loaded the train sample index of 11 samples from " +
                          GptIndexCachePaths(prefix, {0, 9}, options).shuffle_idx);
}

TEST(GptIndexTest, CacheDirectoryKeepsTheDataDirectoryUntouched) {
  const std::string data_dir = MakeDir("readonly_data");
  const std::string cache_dir = MakeDir("index_cache");
  GptIndexOptions options = Options("test", 3, 4);
  options.cache_dir = cache_dir;
  const GptIndexPaths paths = GptIndexCachePaths(data_dir + "/my_text_document", {0, 3}, options);
  EXPECT_THAT(paths.doc_idx, ::testing::StartsWith(
                                 cache_dir + "/my_text_document_test_indexmap_3ns_4sl_1234s_0x"));
  absl::StatusOr<GptIndex> index =
      GptIndex::BuildOrLoad(data_dir + "/my_text_document", kGoldenSizes, {0, 3}, options);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(MtimeNs(paths.sample_idx) > 0, true);
  GptIndexOptions beside_the_data = options;
  beside_the_data.cache_dir.clear();
  EXPECT_EQ(
      MtimeNs(GptIndexCachePaths(data_dir + "/my_text_document", {0, 3}, beside_the_data).doc_idx),
      -1);

  options.cache_dir = data_dir + "/does/not/exist";
  absl::StatusOr<GptIndex> unwritable =
      GptIndex::BuildOrLoad(data_dir + "/my_text_document", kGoldenSizes, {0, 3}, options);
  ASSERT_FALSE(unwritable.ok());
  EXPECT_THAT(unwritable.status().message(), HasSubstr(data_dir + "/does/not/exist/my_text"));
  EXPECT_THAT(unwritable.status().message(), HasSubstr("cache directory"));
}

// Two datasets of one file name in different directories (--data-path 0.5 x/a 0.5 y/a) with one
// --data-cache-path: each gets its own cache files, built once and then loaded.
TEST(GptIndexTest, DatasetsOfOneFileNameShareACacheDirectoryWithoutClashing) {
  const std::string x = MakeDir("clash_x") + "/a_text_document";
  const std::string y = MakeDir("clash_y") + "/a_text_document";
  const std::vector<int32_t> y_sizes = {4, 4, 9, 1, 2, 7, 3, 3, 5, 6, 8, 2, 2, 4, 1};
  GptIndexOptions options = Options("train", 8, 4);
  options.cache_dir = MakeDir("clash_cache");
  const GptIndexPaths x_paths = GptIndexCachePaths(x, {0, 12}, options);
  const GptIndexPaths y_paths = GptIndexCachePaths(y, {0, 15}, options);
  EXPECT_NE(x_paths.doc_idx, y_paths.doc_idx);
  EXPECT_NE(x_paths.sample_idx, y_paths.sample_idx);
  EXPECT_NE(x_paths.shuffle_idx, y_paths.shuffle_idx);
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<GptIndex> a = GptIndex::BuildOrLoad(x, kGoldenSizes, {0, 12}, options);
    ASSERT_TRUE(a.ok()) << a.status();
    absl::StatusOr<GptIndex> b = GptIndex::BuildOrLoad(y, y_sizes, {0, 15}, options);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->loaded_from_cache(), round == 1);
    EXPECT_EQ(b->loaded_from_cache(), round == 1);
    EXPECT_EQ(a->doc_idx().size(), 12 * a->num_epochs());
    EXPECT_EQ(b->doc_idx().size(), 15 * b->num_epochs());
  }
  EXPECT_GT(MtimeNs(x_paths.shuffle_idx), 0);
  EXPECT_GT(MtimeNs(y_paths.shuffle_idx), 0);
}

// One dataset as a whole (--train-data-path A) and split (--data-path A): the same name, sample
// count, sequence length and seed, but other documents, so other cache files.
TEST(GptIndexTest, OneDatasetWholeAndSplitHasTwoIndices) {
  const std::string prefix = MakeDir("whole_and_split") + "/a_text_document";
  const GptIndexOptions options = Options("train", 8, 4);
  EXPECT_NE(GptIndexCachePaths(prefix, {0, 12}, options).doc_idx,
            GptIndexCachePaths(prefix, {0, 9}, options).doc_idx);
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<GptIndex> whole = GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 12}, options);
    ASSERT_TRUE(whole.ok()) << whole.status();
    absl::StatusOr<GptIndex> split = GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options);
    ASSERT_TRUE(split.ok()) << split.status();
    EXPECT_EQ(whole->loaded_from_cache(), round == 1);
    EXPECT_EQ(split->loaded_from_cache(), round == 1);
    int64_t highest = 0;
    for (int64_t i = 0; i < split->doc_idx().size(); ++i) {
      highest = std::max(highest, split->doc_idx().Get(i));
    }
    EXPECT_EQ(highest, 8);
  }
}

void Overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TEST(GptIndexTest, BadCacheFileIsNamedWithAdviceToDeleteIt) {
  const std::string dir = MakeDir("badcache");
  const std::string prefix = dir + "/data";
  const GptIndexOptions options = Options("train", 10, 4);
  const GptIndexPaths paths = GptIndexCachePaths(prefix, {0, 9}, options);
  ASSERT_TRUE(GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options).ok());

  // Not a .npy file at all.
  Overwrite(paths.sample_idx, "garbage");
  absl::StatusOr<GptIndex> index = GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options);
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(index.status().message(), HasSubstr(paths.sample_idx + ": not a valid .npy"));
  EXPECT_THAT(index.status().message(), HasSubstr("delete " + paths.doc_idx));

  // A valid .npy whose samples do not fit the data: all rows (0, 0), one-token samples.
  ASSERT_TRUE(
      WriteNpy(paths.sample_idx, NpyArray::FromVector(std::vector<int32_t>(24, 0), {12, 2})).ok());
  index = GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options);
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(), HasSubstr(paths.sample_idx + ": sample 0"));
  EXPECT_THAT(index.status().message(), HasSubstr("to have the index rebuilt"));

  // A shuffle that is not a permutation.
  std::remove(paths.sample_idx.c_str());
  ASSERT_TRUE(GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options).ok());
  ASSERT_TRUE(
      WriteNpy(paths.shuffle_idx, NpyArray::FromVector(std::vector<uint32_t>(11, 3), {11})).ok());
  index = GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options);
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(), HasSubstr(paths.shuffle_idx + ": entry 1 = 3"));

  // doc_idx of another split.
  std::remove(paths.shuffle_idx.c_str());
  ASSERT_TRUE(GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options).ok());
  ASSERT_TRUE(WriteNpy(paths.doc_idx,
                       NpyArray::FromVector(std::vector<int32_t>{9, 10, 11, 0, 1, 2, 3, 4, 5}, {9}))
                  .ok());
  index = GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options);
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(), HasSubstr(paths.doc_idx + ": entry 0 = 9"));
  EXPECT_THAT(index.status().message(), HasSubstr("another --split"));

  // A document twice in one epoch (and another missing).
  ASSERT_TRUE(WriteNpy(paths.doc_idx,
                       NpyArray::FromVector(std::vector<int32_t>{0, 0, 2, 3, 4, 5, 6, 7, 8}, {9}))
                  .ok());
  index = GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options);
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(), HasSubstr(paths.doc_idx + ": entry 1 = 0"));
  EXPECT_THAT(index.status().message(), HasSubstr("taken once per epoch"));

  // Wrong shape.
  ASSERT_TRUE(WriteNpy(paths.doc_idx, NpyArray::FromVector(std::vector<int32_t>{0, 1}, {2})).ok());
  index = GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options);
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(), HasSubstr("expected int32 of shape [9]"));
}

TEST(GptIndexTest, BadOptionsAreRejected) {
  const std::string prefix = MakeDir("badoptions") + "/data";
  GptIndexOptions options = Options("train", 10, 0);
  EXPECT_THAT(GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options).status().message(),
              HasSubstr("seq_length 0 must be >= 1"));
  options = Options("valid", 10, 4);
  EXPECT_THAT(GptIndex::BuildOrLoad(prefix, kGoldenSizes, {9, 9}, options).status().message(),
              HasSubstr("documents [9, 9) are not a non-empty range"));
  EXPECT_THAT(GptIndex::BuildOrLoad(prefix, kGoldenSizes, {5, 13}, options).status().message(),
              HasSubstr("inside the dataset's 12 documents"));
  EXPECT_THAT(GptIndex::BuildOrLoad(prefix, kGoldenSizes, {10, 11}, options).status().message(),
              HasSubstr("hold no tokens"));
  options.num_samples = -1;
  EXPECT_THAT(GptIndex::BuildOrLoad(prefix, kGoldenSizes, {0, 9}, options).status().message(),
              HasSubstr("num_samples -1"));
}

}  // namespace
}  // namespace data
