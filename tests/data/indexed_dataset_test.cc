#include "data/indexed_dataset.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Bytes = std::vector<uint8_t>;

std::string TempPrefix(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

Bytes ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Three documents of lengths 3, 0 and 2 with uint16 tokens {5, 258, 65535}, {}, {7, 1},
// written out by hand from the format description (docs/formats.md 1a/1b).
const Bytes kGoldenIdx = {
    'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0,  // magic
    1,   0,   0,   0,   0,   0,   0,   0,     // version 1
    8,                                        // dtype code 8 = uint16
    3,   0,   0,   0,   0,   0,   0,   0,     // 3 sequences
    4,   0,   0,   0,   0,   0,   0,   0,     // 4 document-index entries
    3,   0,   0,   0,                         // lengths: 3
    0,   0,   0,   0,                         //          0
    2,   0,   0,   0,                         //          2
    0,   0,   0,   0,   0,   0,   0,   0,     // pointers (bytes): 0
    6,   0,   0,   0,   0,   0,   0,   0,     //                   6
    6,   0,   0,   0,   0,   0,   0,   0,     //                   6
    0,   0,   0,   0,   0,   0,   0,   0,     // document index: 0
    1,   0,   0,   0,   0,   0,   0,   0,     //                 1
    2,   0,   0,   0,   0,   0,   0,   0,     //                 2
    3,   0,   0,   0,   0,   0,   0,   0,     //                 3
};
const Bytes kGoldenBin = {5, 0, 2, 1, 0xff, 0xff, 7, 0, 1, 0};
// Offsets into kGoldenIdx.
constexpr size_t kVersionAt = 9, kDtypeAt = 17, kCountAt = 18, kLengthsAt = 34, kPointersAt = 46,
                 kDocIndexAt = 70;

void WriteGolden(const std::string& prefix, Bytes idx = kGoldenIdx, Bytes bin = kGoldenBin) {
  WriteBytes(prefix + ".idx", idx);
  WriteBytes(prefix + ".bin", bin);
}

std::vector<int32_t> ReadAll(const IndexedDataset& dataset, int64_t sequence) {
  std::vector<int32_t> tokens(dataset.sequence_length(sequence), -1);
  dataset.Read(sequence, 0, static_cast<int64_t>(tokens.size()), tokens.data());
  return tokens;
}

TEST(IndexedDatasetBuilderTest, WritesMegatronLayoutByteForByte) {
  const std::string prefix = TempPrefix("golden_written");
  auto builder = IndexedDatasetBuilder::Create(prefix, TokenDtype::kUInt16);
  ASSERT_TRUE(builder.ok()) << builder.status();
  ASSERT_TRUE((*builder)->AddDocument({5, 258, 65535}).ok());
  ASSERT_TRUE((*builder)->AddDocument({}).ok());
  ASSERT_TRUE((*builder)->AddDocument({7, 1}).ok());
  EXPECT_EQ((*builder)->num_documents(), 3);
  EXPECT_EQ((*builder)->num_tokens(), 5);
  ASSERT_TRUE((*builder)->Finish().ok());
  EXPECT_EQ(ReadBytes(prefix + ".idx"), kGoldenIdx);
  EXPECT_EQ(ReadBytes(prefix + ".bin"), kGoldenBin);
  EXPECT_FALSE(Exists(prefix + ".idx.tmp"));
  EXPECT_FALSE(Exists(prefix + ".bin.tmp"));
}

TEST(IndexedDatasetTest, ReadsHandWrittenMegatronFiles) {
  const std::string prefix = TempPrefix("golden_read");
  WriteGolden(prefix);
  auto dataset = IndexedDataset::Open(prefix, /*vocab_size=*/65536);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const IndexedDataset& d = **dataset;
  EXPECT_EQ(d.num_sequences(), 3);
  EXPECT_EQ(d.num_documents(), 3);
  EXPECT_EQ(d.num_tokens(), 5);
  EXPECT_EQ(d.dtype(), TokenDtype::kUInt16);
  EXPECT_EQ(d.prefix(), prefix);
  EXPECT_THAT(d.document_index(), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(d.sequence_length(0), 3);
  EXPECT_EQ(d.sequence_length(1), 0);
  EXPECT_EQ(d.sequence_length(2), 2);
  EXPECT_THAT(ReadAll(d, 0), ElementsAre(5, 258, 65535));
  EXPECT_THAT(ReadAll(d, 1), ElementsAre());
  EXPECT_THAT(ReadAll(d, 2), ElementsAre(7, 1));
  int32_t middle[2] = {-1, -1};
  d.Read(0, 1, 2, middle);
  EXPECT_THAT(middle, ElementsAre(258, 65535));
}

TEST(IndexedDatasetTest, ReadsIndexWithTrailingModesArray) {
  const std::string prefix = TempPrefix("golden_modes");
  Bytes idx = kGoldenIdx;
  idx.insert(idx.end(), {0, 0, 0});  // one int8 mode per sequence
  WriteGolden(prefix, idx);
  auto dataset = IndexedDataset::Open(prefix, 0);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_THAT(ReadAll(**dataset, 2), ElementsAre(7, 1));
}

TEST(IndexedDatasetTest, ReadsMultiSequenceDocuments) {
  // Megatron data made with sentence splitting: documents {seq 0, seq 1} and {seq 2}.
  const std::string prefix = TempPrefix("two_docs");
  Bytes idx = kGoldenIdx;
  idx[26] = 3;  // 3 document-index entries: 0, 2, 3
  idx.erase(idx.begin() + kDocIndexAt + 8, idx.begin() + kDocIndexAt + 16);
  idx[kDocIndexAt + 8] = 2;
  WriteGolden(prefix, idx);
  auto dataset = IndexedDataset::Open(prefix, 0);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ((*dataset)->num_documents(), 2);
  EXPECT_EQ((*dataset)->num_sequences(), 3);
  EXPECT_THAT((*dataset)->document_index(), ElementsAre(0, 2, 3));
}

void ExpectRoundTrip(TokenDtype dtype, const std::vector<std::vector<int32_t>>& documents) {
  const std::string prefix = TempPrefix(std::string("round_trip_") + TokenDtypeName(dtype));
  auto builder = IndexedDatasetBuilder::Create(prefix, dtype);
  ASSERT_TRUE(builder.ok()) << builder.status();
  for (const auto& document : documents) ASSERT_TRUE((*builder)->AddDocument(document).ok());
  ASSERT_TRUE((*builder)->Finish().ok());
  auto dataset = IndexedDataset::Open(prefix, 0);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ((*dataset)->dtype(), dtype);
  ASSERT_EQ((*dataset)->num_documents(), static_cast<int64_t>(documents.size()));
  for (size_t i = 0; i < documents.size(); ++i) {
    EXPECT_EQ(ReadAll(**dataset, static_cast<int64_t>(i)), documents[i]) << "document " << i;
  }
  EXPECT_EQ(ReadBytes(prefix + ".bin").size() % TokenDtypeSize(dtype), 0u);
}

TEST(IndexedDatasetTest, RoundTripUInt16) {
  ExpectRoundTrip(TokenDtype::kUInt16, {{0, 1, 65535}, {42}, {}, {300, 301, 302, 303}});
}

TEST(IndexedDatasetTest, RoundTripInt32) {
  ExpectRoundTrip(TokenDtype::kInt32, {{70000, 0, 2147483647}, {}, {5, 6}});
}

// The scan against the vocabulary notes the largest id, which tells a dataset made with a
// smaller tokenizer from the one given; without the scan it is unknown.
TEST(IndexedDatasetTest, TheVocabularyScanFindsTheLargestId) {
  const std::string prefix = TempPrefix("largest");
  auto builder = IndexedDatasetBuilder::Create(prefix, TokenDtype::kUInt16);
  ASSERT_TRUE(builder.ok()) << builder.status();
  for (const std::vector<int32_t>& document :
       std::vector<std::vector<int32_t>>{{3, 4095, 7}, {}, {4000, 12}}) {
    ASSERT_TRUE((*builder)->AddDocument(document).ok());
  }
  ASSERT_TRUE((*builder)->Finish().ok());
  auto scanned = IndexedDataset::Open(prefix, 8000);
  ASSERT_TRUE(scanned.ok()) << scanned.status();
  EXPECT_EQ((*scanned)->largest_token_id(), 4095);
  auto unscanned = IndexedDataset::Open(prefix, 0);
  ASSERT_TRUE(unscanned.ok()) << unscanned.status();
  EXPECT_EQ((*unscanned)->largest_token_id(), -1);
}

TEST(IndexedDatasetTest, RoundTripOtherDtypes) {
  ExpectRoundTrip(TokenDtype::kUInt8, {{0, 255}, {7}});
  ExpectRoundTrip(TokenDtype::kInt8, {{0, 127}, {7}});
  ExpectRoundTrip(TokenDtype::kInt16, {{32767, 1}});
  ExpectRoundTrip(TokenDtype::kInt64, {{2147483647, 3}, {9}});
}

TEST(IndexedDatasetTest, BestFittingDtypeFollowsMegatron) {
  EXPECT_EQ(BestFittingDtype(50257), TokenDtype::kUInt16);
  EXPECT_EQ(BestFittingDtype(65499), TokenDtype::kUInt16);
  EXPECT_EQ(BestFittingDtype(65500), TokenDtype::kInt32);
  EXPECT_EQ(TokenDtypeSize(TokenDtype::kUInt16), 2);
  EXPECT_EQ(TokenDtypeSize(TokenDtype::kInt64), 8);
}

TEST(IndexedDatasetTest, FingerprintIsStableAndTracksTheIndex) {
  const std::string a = TempPrefix("fingerprint_a");
  const std::string b = TempPrefix("fingerprint_b");
  WriteGolden(a);
  WriteGolden(b);
  auto first = IndexedDataset::Open(a, 0);
  auto same = IndexedDataset::Open(b, 0);
  ASSERT_TRUE(first.ok() && same.ok());
  EXPECT_EQ((*first)->Fingerprint(), (*same)->Fingerprint());
  EXPECT_NE((*first)->Fingerprint(), 0u);

  // Lengths 3, 0, 2 -> 2, 1, 2: a different index, a different fingerprint.
  Bytes idx = kGoldenIdx;
  idx[kLengthsAt] = 2;
  idx[kLengthsAt + 4] = 1;
  idx[kPointersAt + 8] = 4;
  idx[kPointersAt + 16] = 6;
  const std::string c = TempPrefix("fingerprint_c");
  WriteGolden(c, idx);
  auto other = IndexedDataset::Open(c, 0);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE((*other)->Fingerprint(), (*first)->Fingerprint());
}

TEST(IndexedDatasetDeathTest, ReadOutOfRangeAborts) {
  const std::string prefix = TempPrefix("death");
  WriteGolden(prefix);
  auto dataset = IndexedDataset::Open(prefix, 0);
  ASSERT_TRUE(dataset.ok());
  int32_t out[4];
  EXPECT_DEATH((*dataset)->Read(0, 2, 2, out), "Read of tokens \\[2, 4\\) of sequence 0");
  EXPECT_DEATH((*dataset)->Read(3, 0, 0, out), "sequence 3 out of range");
}

// ---- Validation on Open: each corruption of the golden files gives its own message.

struct Corruption {
  std::string name;
  Bytes idx;
  Bytes bin;
  int64_t vocab_size;
  absl::StatusCode code;
  std::string file;  // ".idx" or ".bin": the file the message must name
  std::string problem;
};

void PrintTo(const Corruption& corruption, std::ostream* os) { *os << corruption.name; }

Bytes With(Bytes bytes, size_t at, std::vector<uint8_t> values) {
  for (size_t i = 0; i < values.size(); ++i) bytes[at + i] = values[i];
  return bytes;
}

Bytes Truncated(Bytes bytes, size_t size) {
  bytes.resize(size);
  return bytes;
}

class CorruptDatasetTest : public ::testing::TestWithParam<Corruption> {};

TEST_P(CorruptDatasetTest, OpenNamesFileAndProblem) {
  const Corruption& c = GetParam();
  const std::string prefix = TempPrefix("corrupt_" + c.name);
  WriteGolden(prefix, c.idx, c.bin);
  auto dataset = IndexedDataset::Open(prefix, c.vocab_size);
  ASSERT_FALSE(dataset.ok());
  EXPECT_EQ(dataset.status().code(), c.code) << dataset.status();
  EXPECT_THAT(std::string(dataset.status().message()),
              AllOf(HasSubstr(prefix + c.file), HasSubstr(c.problem)));
}

INSTANTIATE_TEST_SUITE_P(
    AllCorruptions, CorruptDatasetTest,
    ::testing::Values(
        Corruption{"bad_magic", With(kGoldenIdx, 0, {'T', 'N', 'T'}), kGoldenBin, 0,
                   absl::StatusCode::kDataLoss, ".idx", "not a Megatron MMIDIDX index"},
        Corruption{"empty_idx",
                   {},
                   kGoldenBin,
                   0,
                   absl::StatusCode::kDataLoss,
                   ".idx",
                   "re-run //data:preprocess_data"},
        Corruption{"truncated_header", Truncated(kGoldenIdx, 20), kGoldenBin, 0,
                   absl::StatusCode::kDataLoss, ".idx", "truncated header"},
        Corruption{"bad_version", With(kGoldenIdx, kVersionAt, {2}), kGoldenBin, 0,
                   absl::StatusCode::kUnimplemented, ".idx", "unsupported index version 2"},
        Corruption{"float_dtype", With(kGoldenIdx, kDtypeAt, {6}), kGoldenBin, 0,
                   absl::StatusCode::kDataLoss, ".idx",
                   "dtype code 6 is not an integer token dtype"},
        Corruption{"unknown_dtype", With(kGoldenIdx, kDtypeAt, {9}), kGoldenBin, 0,
                   absl::StatusCode::kDataLoss, ".idx",
                   "dtype code 9 is not an integer token dtype"},
        Corruption{"truncated_index", Truncated(kGoldenIdx, kGoldenIdx.size() - 8), kGoldenBin, 0,
                   absl::StatusCode::kDataLoss, ".idx", "need 102 bytes but the file has 94"},
        Corruption{"huge_count", With(kGoldenIdx, kCountAt + 7, {0x10}), kGoldenBin, 0,
                   absl::StatusCode::kDataLoss, ".idx", "the counts in the header"},
        Corruption{"negative_length", With(kGoldenIdx, kLengthsAt + 4, {0xff, 0xff, 0xff, 0xff}),
                   kGoldenBin, 0, absl::StatusCode::kDataLoss, ".idx",
                   "sequence 1 has negative length -1"},
        Corruption{"pointer_mismatch", With(kGoldenIdx, kPointersAt + 8, {4}), kGoldenBin, 0,
                   absl::StatusCode::kDataLoss, ".idx", "pointer of sequence 1 is 4, expected 6"},
        Corruption{"pointer_outside_bin", With(kGoldenIdx, kLengthsAt + 8, {9}), kGoldenBin, 0,
                   absl::StatusCode::kDataLoss, ".bin", "pointer outside the .bin"},
        Corruption{"bin_too_short", kGoldenIdx, Truncated(kGoldenBin, 8), 0,
                   absl::StatusCode::kDataLoss, ".bin", "sequence 2 ends at byte 10"},
        Corruption{"bin_too_long", kGoldenIdx, With(Truncated(kGoldenBin, 12), 10, {0, 0}), 0,
                   absl::StatusCode::kDataLoss, ".bin", "has 12 bytes but"},
        Corruption{"doc_index_not_from_zero", With(kGoldenIdx, kDocIndexAt, {1}), kGoldenBin, 0,
                   absl::StatusCode::kDataLoss, ".idx", "document index starts with 1, not 0"},
        Corruption{"doc_index_decreasing", With(kGoldenIdx, kDocIndexAt + 16, {0}), kGoldenBin, 0,
                   absl::StatusCode::kDataLoss, ".idx", "document index decreases at entry 2"},
        Corruption{"doc_index_short_of_end", With(kGoldenIdx, kDocIndexAt + 24, {2}), kGoldenBin, 0,
                   absl::StatusCode::kDataLoss, ".idx",
                   "document index ends at 2, not at the sequence count 3"},
        Corruption{"token_outside_vocab", kGoldenIdx, kGoldenBin, 1000,
                   absl::StatusCode::kInvalidArgument, ".bin",
                   "sequence 0 holds token id 65535 at position 2, outside the vocabulary [0, "
                   "1000): the tokenizer or --vocab-size does not match the data"}),
    [](const ::testing::TestParamInfo<Corruption>& info) { return info.param.name; });

TEST(IndexedDatasetTest, MissingFilesAreNotFound) {
  const std::string prefix = TempPrefix("missing");
  auto none = IndexedDataset::Open(prefix, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status().message()),
              AllOf(HasSubstr("cannot open dataset file " + prefix + ".idx"),
                    HasSubstr("//data:preprocess_data")));

  WriteBytes(prefix + ".idx", kGoldenIdx);
  auto no_bin = IndexedDataset::Open(prefix, 0);
  ASSERT_FALSE(no_bin.ok());
  EXPECT_EQ(no_bin.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(no_bin.status().message()), HasSubstr(prefix + ".bin"));
}

// ---- Builder errors.

TEST(IndexedDatasetBuilderTest, RejectsTokensThatDoNotFitTheDtype) {
  const std::string prefix = TempPrefix("too_big");
  auto builder = IndexedDatasetBuilder::Create(prefix, TokenDtype::kUInt16);
  ASSERT_TRUE(builder.ok());
  ASSERT_TRUE((*builder)->AddDocument({1, 2}).ok());
  absl::Status status = (*builder)->AddDocument({3, 65536});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("token id 65536 at position 1 of document 1"),
                    HasSubstr("does not fit the dataset dtype uint16"), HasSubstr(prefix)));
  // The builder is now unusable and says so.
  EXPECT_THAT(std::string((*builder)->Finish().message()), HasSubstr("after an earlier error"));

  auto negative = IndexedDatasetBuilder::Create(TempPrefix("negative"), TokenDtype::kInt32);
  ASSERT_TRUE(negative.ok());
  EXPECT_THAT(std::string((*negative)->AddDocument({-1}).message()),
              HasSubstr("token id -1 at position 0 of document 0"));
}

TEST(IndexedDatasetBuilderTest, FailedOrAbandonedBuildLeavesNoFiles) {
  const std::string failed = TempPrefix("failed_build");
  {
    auto builder = IndexedDatasetBuilder::Create(failed, TokenDtype::kUInt8);
    ASSERT_TRUE(builder.ok());
    ASSERT_TRUE((*builder)->AddDocument({1, 2, 3}).ok());
    EXPECT_TRUE(Exists(failed + ".bin.tmp"));
    EXPECT_FALSE((*builder)->AddDocument({256}).ok());
  }
  const std::string abandoned = TempPrefix("abandoned_build");
  {
    auto builder = IndexedDatasetBuilder::Create(abandoned, TokenDtype::kUInt16);
    ASSERT_TRUE(builder.ok());
    ASSERT_TRUE((*builder)->AddDocument({1, 2, 3}).ok());
  }
  for (const std::string& prefix : {failed, abandoned}) {
    for (const char* suffix : {".bin", ".idx", ".bin.tmp", ".idx.tmp"}) {
      EXPECT_FALSE(Exists(prefix + suffix)) << prefix + suffix;
    }
  }
}

TEST(IndexedDatasetBuilderTest, AbandonedRebuildKeepsThePreviousDataset) {
  const std::string prefix = TempPrefix("rebuild");
  WriteGolden(prefix);
  {
    auto builder = IndexedDatasetBuilder::Create(prefix, TokenDtype::kUInt16);
    ASSERT_TRUE(builder.ok());
    ASSERT_TRUE((*builder)->AddDocument({9, 9, 9, 9}).ok());
  }
  EXPECT_EQ(ReadBytes(prefix + ".idx"), kGoldenIdx);
  EXPECT_EQ(ReadBytes(prefix + ".bin"), kGoldenBin);
}

TEST(IndexedDatasetBuilderTest, UnwritableDirectoryIsReported) {
  const std::string prefix = TempPrefix("no_such_dir/data");
  auto builder = IndexedDatasetBuilder::Create(prefix, TokenDtype::kUInt16);
  ASSERT_FALSE(builder.ok());
  EXPECT_THAT(std::string(builder.status().message()),
              AllOf(HasSubstr("cannot create " + prefix + ".bin.tmp"),
                    HasSubstr("check that the directory of the output prefix exists")));
}

}  // namespace
}  // namespace data
