#include "data/preprocess.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data/dataset_tokenizer.h"
#include "data/indexed_dataset.h"
#include "data/tokenizer_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/tiny_corpus.h"
#include "varuna/io/json.h"

namespace data {
namespace {

using ::data::tiny_corpus::MakeSentences;
using ::data::tiny_corpus::TempPath;
using ::data::tiny_corpus::TrainTinyTokenizer;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// No dataset and no temporary file of `output_prefix` exists.
void ExpectNoOutput(const std::string& output_prefix) {
  const std::string prefix = DatasetPrefix(output_prefix, "text");
  for (const char* suffix : {".bin", ".idx", ".bin.tmp", ".idx.tmp"}) {
    EXPECT_FALSE(Exists(prefix + suffix)) << prefix + suffix;
  }
}

std::string JsonLine(const std::string& text) {
  varuna::json::Value object = varuna::json::Value::object();
  object["text"] = text;
  object["source"] = "test";
  return varuna::json::Serialize(object) + "\n";
}

// `count` documents of 1 to 4 sentences; some span several lines.
std::vector<std::string> MakeDocuments(int count, uint32_t seed) {
  const std::vector<std::string> sentences = MakeSentences(count * 4, seed);
  std::vector<std::string> documents;
  size_t next = 0;
  for (int i = 0; i < count; ++i) {
    std::string document;
    const int n = 1 + i % 4;
    for (int s = 0; s < n; ++s) {
      if (s > 0) document += (i % 3 == 0) ? "\n" : " ";
      document += sentences[next++];
    }
    documents.push_back(document);
  }
  return documents;
}

class PreprocessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(TrainTinyTokenizer("pre_tok", 500)); }
  static void TearDownTestSuite() { delete model_; }

  void SetUp() override {
    ASSERT_FALSE(model_->empty());
    auto tokenizer = LoadTokenizer(*model_);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
  }

  PreprocessOptions Options(std::vector<std::string> inputs, const std::string& output) {
    PreprocessOptions options;
    options.input_files = std::move(inputs);
    options.output_prefix = TempPath(output);
    options.tokenizer.model_file = *model_;
    options.workers = 2;
    return options;
  }

  // The dataset holds exactly Encode(document) + EOD for each document, in order.
  void ExpectDataset(const std::string& prefix, const std::vector<std::string>& documents,
                     bool eod = true) {
    auto dataset = IndexedDataset::Open(prefix, tokenizer_->vocab_size());
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    EXPECT_EQ((*dataset)->dtype(), TokenDtype::kUInt16);
    ASSERT_EQ((*dataset)->num_documents(), static_cast<int64_t>(documents.size()));
    ASSERT_EQ((*dataset)->num_sequences(), static_cast<int64_t>(documents.size()));
    for (size_t i = 0; i < documents.size(); ++i) {
      std::vector<int32_t> expected = tokenizer_->Encode(documents[i]);
      if (eod) expected.push_back(tokenizer_->eod_id());
      std::vector<int32_t> actual((*dataset)->sequence_length(static_cast<int64_t>(i)));
      (*dataset)->Read(static_cast<int64_t>(i), 0, static_cast<int64_t>(actual.size()),
                       actual.data());
      EXPECT_EQ(actual, expected) << "document " << i << ": " << documents[i];
    }
  }

  static std::string* model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

std::string* PreprocessTest::model_ = nullptr;

TEST_F(PreprocessTest, PlainTextDocumentsAreBlocksOfLines) {
  const std::string input = TempPath("plain.txt");
  WriteFile(input,
            "The cat sleeps.\nThe dog runs.\n\n\n"
            "Birds sing in green trees.\n  \t\n"
            "Fresh bread\r\nand fish.\r\n");
  PreprocessOptions options = Options({input}, "plain");
  auto stats = Preprocess(options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->dataset_prefix, TempPath("plain_text_document"));
  ExpectDataset(stats->dataset_prefix, {"The cat sleeps.\nThe dog runs.",
                                        "Birds sing in green trees.", "Fresh bread\nand fish."});
  EXPECT_EQ(stats->documents, 3);
  EXPECT_EQ(stats->empty_documents, 0);
  EXPECT_EQ(stats->input_bytes, static_cast<int64_t>(ReadFile(input).size()));
  EXPECT_EQ(stats->vocab_size, 500);
}

// preprocess_data records its tokenizer beside the dataset; a tokenizer of another vocabulary
// size is then refused by name, another file of the same size only warned about.
TEST_F(PreprocessTest, RecordsTheTokenizerSoThatAnotherOneIsCaught) {
  const std::string input = TempPath("recorded.txt");
  WriteFile(input, "The cat sleeps.\n\nThe dog runs.\n");
  auto stats = Preprocess(Options({input}, "recorded"));
  ASSERT_TRUE(stats.ok()) << stats.status();
  auto recorded = ReadDatasetTokenizer(stats->dataset_prefix);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  ASSERT_TRUE(recorded->has_value());
  const DatasetTokenizer& record = **recorded;
  EXPECT_EQ(record.vocab_size, 500);
  EXPECT_EQ(record.eod_id, tokenizer_->eod_id());
  EXPECT_EQ(record.kind, TokenizerKind::kSentencePiece);
  EXPECT_EQ(record.files, std::vector<std::string>{*model_});

  auto same = DescribeTokenizer(*tokenizer_);
  ASSERT_TRUE(same.ok()) << same.status();
  std::string warning;
  EXPECT_TRUE(CheckDatasetTokenizer(stats->dataset_prefix, record, *same, &warning).ok());
  EXPECT_EQ(warning, "");

  const std::string other_model = TrainTinyTokenizer("other_tok", 600);
  auto other_tokenizer = LoadTokenizer(other_model);
  ASSERT_TRUE(other_tokenizer.ok()) << other_tokenizer.status();
  auto other = DescribeTokenizer(**other_tokenizer);
  ASSERT_TRUE(other.ok()) << other.status();
  const absl::Status refused =
      CheckDatasetTokenizer(stats->dataset_prefix, record, *other, nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(refused.message()),
      AllOf(HasSubstr("was tokenized with SentencePieceTokenizer (" + *model_ + "), 500 ids"),
            HasSubstr("SentencePieceTokenizer (" + other_model + "), 600 ids"),
            HasSubstr("Pass --tokenizer-model=" + *model_)));

  // Another kind is refused by name, whatever its size.
  DatasetTokenizer bpe = *same;
  bpe.kind = TokenizerKind::kGpt2Bpe;
  bpe.files = {"/g/vocab.json", "/g/merges.txt"};
  EXPECT_THAT(
      std::string(CheckDatasetTokenizer(stats->dataset_prefix, bpe, *same, nullptr).message()),
      AllOf(HasSubstr("was tokenized with GPT2BPETokenizer (/g/vocab.json, /g/merges.txt)"),
            HasSubstr("Pass --tokenizer-type=GPT2BPETokenizer --vocab-file=/g/vocab.json "
                      "--merge-file=/g/merges.txt")));
  // The record of either kind reads back as written; a record of the first format (SentencePiece
  // only) still reads.
  ASSERT_TRUE(WriteDatasetTokenizer(stats->dataset_prefix, bpe).ok());
  auto bpe_back = ReadDatasetTokenizer(stats->dataset_prefix);
  ASSERT_TRUE(bpe_back.ok() && bpe_back->has_value()) << bpe_back.status();
  EXPECT_EQ((*bpe_back)->kind, TokenizerKind::kGpt2Bpe);
  EXPECT_EQ((*bpe_back)->files, bpe.files);
  EXPECT_EQ((*bpe_back)->crc32c, bpe.crc32c);
  WriteFile(DatasetTokenizerPath(stats->dataset_prefix),
            "{\"format\": \"varuna-dataset-tokenizer/1\", \"tokenizer_model\": \"/m/t.model\", "
            "\"tokenizer_crc32c\": \"0000abcd\", \"vocab_size\": 500, \"eod_id\": 2}");
  auto first = ReadDatasetTokenizer(stats->dataset_prefix);
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status();
  EXPECT_EQ((*first)->kind, TokenizerKind::kSentencePiece);
  EXPECT_EQ((*first)->files, std::vector<std::string>{"/m/t.model"});
  EXPECT_EQ((*first)->crc32c, 0xabcdu);

  DatasetTokenizer copy = *other;
  copy.vocab_size = 500;
  EXPECT_TRUE(CheckDatasetTokenizer(stats->dataset_prefix, record, copy, &warning).ok());
  EXPECT_THAT(warning, HasSubstr("make sure it is the same tokenizer"));

  // A damaged record is named; no record (Megatron's own data) is nothing to check.
  WriteFile(DatasetTokenizerPath(stats->dataset_prefix), "{\"format\": 1}");
  auto damaged = ReadDatasetTokenizer(stats->dataset_prefix);
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      std::string(damaged.status().message()),
      HasSubstr(DatasetTokenizerPath(stats->dataset_prefix) + " is not a tokenizer record"));
  auto none = ReadDatasetTokenizer(TempPath("no_such_dataset"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(PreprocessTest, JsonLinesAndTextFilesInInputOrder) {
  const std::vector<std::string> documents = MakeDocuments(6, 7);
  const std::string jsonl = TempPath("docs.jsonl");
  WriteFile(jsonl, JsonLine(documents[0]) + "\n" + JsonLine(documents[1]) + JsonLine("") +
                       JsonLine(documents[2]));
  const std::string text = TempPath("docs.txt");
  WriteFile(text, documents[3] + "\n\n" + documents[4]);
  const std::string json = TempPath("more.json");
  WriteFile(json, JsonLine(documents[5]));
  auto stats = Preprocess(Options({jsonl, text, json}, "mixed"));
  ASSERT_TRUE(stats.ok()) << stats.status();
  ExpectDataset(stats->dataset_prefix, documents);
  EXPECT_EQ(stats->documents, 6);
  EXPECT_EQ(stats->empty_documents, 1);  // the "" line
  int64_t tokens = 0;
  for (const std::string& document : documents) {
    tokens += static_cast<int64_t>(tokenizer_->Encode(document).size()) + 1;
  }
  EXPECT_EQ(stats->tokens, tokens);
}

TEST_F(PreprocessTest, AppendEodOffAndOtherJsonKey) {
  const std::string input = TempPath("content.jsonl");
  WriteFile(input, "{\"content\": \"The old house.\"}\n{\"content\": \"A happy cat.\"}\n");
  PreprocessOptions options = Options({input}, "content");
  options.json_key = "content";
  options.append_eod = false;
  auto stats = Preprocess(options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->dataset_prefix, TempPath("content_content_document"));
  ExpectDataset(stats->dataset_prefix, {"The old house.", "A happy cat."}, /*eod=*/false);
}

TEST_F(PreprocessTest, OutputIsTheSameForAnyNumberOfWorkers) {
  // Enough documents for several batches, so that workers finish out of order.
  const std::vector<std::string> documents = MakeDocuments(1500, 99);
  std::string lines;
  for (const std::string& document : documents) lines += JsonLine(document);
  const std::string input = TempPath("many.jsonl");
  WriteFile(input, lines);

  PreprocessOptions one = Options({input}, "one_worker");
  one.workers = 1;
  PreprocessOptions four = Options({input}, "four_workers");
  four.workers = 4;
  auto a = Preprocess(one);
  auto b = Preprocess(four);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->workers, 1);
  EXPECT_EQ(b->workers, 4);
  EXPECT_EQ(b->documents, 1500);
  EXPECT_EQ(ReadFile(a->dataset_prefix + ".bin"), ReadFile(b->dataset_prefix + ".bin"));
  EXPECT_EQ(ReadFile(a->dataset_prefix + ".idx"), ReadFile(b->dataset_prefix + ".idx"));
  ExpectDataset(b->dataset_prefix, documents);
}

TEST_F(PreprocessTest, LogsProgressAndSummary) {
  const std::string input = TempPath("log.txt");
  WriteFile(input, "One.\n\nTwo.\n\nThree.\n\nFour.\n\nFive.\n");
  PreprocessOptions options = Options({input}, "log");
  std::ostringstream log;
  options.log = &log;
  options.log_interval = 2;
  auto stats = Preprocess(options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_THAT(log.str(),
              AllOf(HasSubstr("Processed 2 documents ("), HasSubstr("Processed 4 "),
                    HasSubstr(" docs/s, "), HasSubstr(" MB/s, "), HasSubstr(" of 33 B ("),
                    HasSubstr("Wrote " + stats->dataset_prefix +
                              ".bin/.idx: 5 "
                              "documents (0 empty skipped)")));
  // Nothing of the progress goes into the output files: they are the dataset's alone.
  ExpectDataset(stats->dataset_prefix, {"One.", "Two.", "Three.", "Four.", "Five."});
}

TEST(ProgressLineTest, SaysTheShareDoneAndTheTimeLeft) {
  // Without the inputs' size: Megatron's line with the tokens.
  EXPECT_EQ(ProgressLine({12000, 1234567, 2310000, 0, 2.0}),
            "Processed 12000 documents (6000.0 docs/s, 1.16 MB/s, 1234567 tokens)");
  // 4.44 MB of 120 MB in 5 s: 3.7% done, 115.56 MB left at 0.888 MB/s = 130.1 s.
  EXPECT_EQ(ProgressLine({12345, 987654, 4440000, 120000000, 5.0}),
            "Processed 12345 documents (2469.0 docs/s, 0.89 MB/s, 987654 tokens): 4.4 MB of "
            "120.0 MB (3.7%), about 2 min 10 s left");
  // Nothing read yet, or no time passed: no rate to estimate from.
  EXPECT_EQ(ProgressLine({0, 0, 0, 2500, 1.0}),
            "Processed 0 documents (0.0 docs/s, 0.00 MB/s, 0 tokens): 0 B of 2.5 kB (0.0%), time "
            "left unknown");
  EXPECT_THAT(ProgressLine({1, 5, 100, 2500, 0.0}), HasSubstr("(4.0%), time left unknown"));
  // All read.
  EXPECT_THAT(ProgressLine({7, 70, 2500, 2500, 3.0}),
              HasSubstr(": 2.5 kB of 2.5 kB (100.0%), about 0 s left"));
  // 1 GB of 3 GB in 1000 s: 2000 s left.
  EXPECT_THAT(ProgressLine({1, 1, 1000000000, 3000000000, 1000.0}),
              HasSubstr(": 1.00 GB of 3.00 GB (33.3%), about 33 min 20 s left"));

  EXPECT_DOUBLE_EQ(SecondsLeft(25, 100, 10.0), 30.0);
  EXPECT_DOUBLE_EQ(SecondsLeft(100, 100, 10.0), 0.0);
  EXPECT_LT(SecondsLeft(0, 100, 10.0), 0.0);
  EXPECT_LT(SecondsLeft(25, 100, 0.0), 0.0);

  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(999), "999 B");
  EXPECT_EQ(FormatBytes(1000), "1.0 kB");
  EXPECT_EQ(FormatBytes(4500000), "4.5 MB");
  EXPECT_EQ(FormatBytes(1250000000), "1.25 GB");

  EXPECT_EQ(FormatDuration(0), "0 s");
  EXPECT_EQ(FormatDuration(59.4), "59 s");
  EXPECT_EQ(FormatDuration(59.6), "1 min 0 s");
  EXPECT_EQ(FormatDuration(130.1), "2 min 10 s");
  EXPECT_EQ(FormatDuration(3725), "1 h 2 min");
  EXPECT_EQ(FormatDuration(7199), "2 h 0 min");
}

// A clock that reads 0, 2, 4, ... seconds, one step per reading.
std::function<double()> SteppingClock(double* now) {
  return [now] {
    const double reading = *now;
    *now += 2;
    return reading;
  };
}

TEST_F(PreprocessTest, ProgressLinesCountTheInputBytesOfEachDocument) {
  const std::vector<std::string> documents = {"The cat sleeps.", "Birds sing.",
                                              "Fresh bread and fish.", "A dog.", "Trees."};
  std::string text;
  std::vector<int64_t> bytes_after;  // input bytes through each document
  for (const std::string& document : documents) {
    text += JsonLine(document);
    bytes_after.push_back(static_cast<int64_t>(text.size()));
  }
  const std::string input = TempPath("progress.jsonl");
  WriteFile(input, text);
  std::vector<int64_t> tokens_after;
  int64_t tokens = 0;
  for (const std::string& document : documents) {
    tokens += static_cast<int64_t>(tokenizer_->Encode(document).size()) + 1;  // + EOD
    tokens_after.push_back(tokens);
  }
  const int64_t total = static_cast<int64_t>(text.size());

  // Every 2 documents: the clock is read at the start, at each line and at the end.
  PreprocessOptions options = Options({input}, "progress");
  std::ostringstream log;
  double now = 100;
  options.log = &log;
  options.log_interval = 2;
  options.log_seconds = 0;
  options.clock = SteppingClock(&now);
  auto stats = Preprocess(options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_DOUBLE_EQ(stats->seconds, 6.0);
  EXPECT_EQ(stats->input_bytes, total);
  std::istringstream lines(log.str());
  std::string first, second, summary;
  std::getline(lines, first);
  std::getline(lines, second);
  std::getline(lines, summary);
  EXPECT_EQ(first, ProgressLine({2, tokens_after[1], bytes_after[1], total, 2.0}));
  EXPECT_EQ(second, ProgressLine({4, tokens_after[3], bytes_after[3], total, 4.0}));
  char share[128];
  std::snprintf(share, sizeof(share), ": %d B of %d B (%.1f%%), about %s left",
                static_cast<int>(bytes_after[1]), static_cast<int>(total),
                100.0 * bytes_after[1] / total,
                FormatDuration(2.0 * (total - bytes_after[1]) / bytes_after[1]).c_str());
  EXPECT_THAT(first, HasSubstr(share));
  EXPECT_THAT(summary, HasSubstr("Wrote " + stats->dataset_prefix + ".bin/.idx: 5 documents"));

  // By time: a line once 3 s have passed since the last (the clock moves 2 s per document).
  options = Options({input}, "progress_by_time");
  std::ostringstream timed;
  now = 0;
  options.log = &timed;
  options.log_interval = 0;
  options.log_seconds = 3;
  options.clock = SteppingClock(&now);
  stats = Preprocess(options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  std::istringstream timed_lines(timed.str());
  std::getline(timed_lines, first);
  std::getline(timed_lines, second);
  std::getline(timed_lines, summary);
  EXPECT_EQ(first, ProgressLine({2, tokens_after[1], bytes_after[1], total, 4.0}));
  EXPECT_EQ(second, ProgressLine({4, tokens_after[3], bytes_after[3], total, 8.0}));
  EXPECT_THAT(summary, HasSubstr("Wrote " + stats->dataset_prefix + ".bin/.idx: 5 documents"));
  EXPECT_DOUBLE_EQ(stats->seconds, 12.0);
  ExpectDataset(stats->dataset_prefix, documents);
}

TEST_F(PreprocessTest, NegativeLogSecondsIsRefused) {
  PreprocessOptions options = Options({TempPath("unused.txt")}, "negative");
  options.log_seconds = -1;
  auto stats = Preprocess(options);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(stats.status().message()),
              AllOf(HasSubstr("--log-seconds=-1"), HasSubstr("must be >= 0")));
  ExpectNoOutput(TempPath("negative"));
}

TEST_F(PreprocessTest, BadJsonLineNamesFileAndLineAndWritesNothing) {
  const std::string input = TempPath("bad.jsonl");
  WriteFile(input, JsonLine("Fine.") + JsonLine("Also fine.") + "{\"text\": \"oops}\n" +
                       JsonLine("Never read."));
  auto stats = Preprocess(Options({input}, "bad_json"));
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(stats.status().message()),
              AllOf(HasSubstr(input + " line 3: invalid JSON"), HasSubstr("one JSON object")));
  ExpectNoOutput(TempPath("bad_json"));
}

TEST_F(PreprocessTest, BadJsonLateInALargeInputAlsoWritesNothing) {
  std::string lines;
  for (const std::string& document : MakeDocuments(700, 3)) lines += JsonLine(document);
  const std::string input = TempPath("late_bad.jsonl");
  WriteFile(input, lines + "not json\n");
  auto stats = Preprocess(Options({input}, "late_bad"));
  ASSERT_FALSE(stats.ok());
  EXPECT_THAT(std::string(stats.status().message()), HasSubstr(input + " line 701"));
  ExpectNoOutput(TempPath("late_bad"));
}

TEST_F(PreprocessTest, MissingKeyNamesKeyAndLine) {
  const std::string input = TempPath("no_key.jsonl");
  WriteFile(input, JsonLine("Fine.") + "{\"body\": \"x\", \"id\": 3}\n");
  auto stats = Preprocess(Options({input}, "no_key"));
  ASSERT_FALSE(stats.ok());
  EXPECT_THAT(std::string(stats.status().message()),
              AllOf(HasSubstr(input + " line 2: the object has no \"text\" field"),
                    HasSubstr("\"body\", \"id\""), HasSubstr("--json-keys")));
  ExpectNoOutput(TempPath("no_key"));
}

TEST_F(PreprocessTest, NonStringFieldAndNonObjectLineAreRejected) {
  const std::string number = TempPath("number.jsonl");
  WriteFile(number, "{\"text\": 42}\n");
  EXPECT_THAT(std::string(Preprocess(Options({number}, "number")).status().message()),
              HasSubstr(number + " line 1: field \"text\" is a int, not a string"));
  const std::string array = TempPath("array.jsonl");
  WriteFile(array, "[\"text\"]\n");
  EXPECT_THAT(std::string(Preprocess(Options({array}, "array")).status().message()),
              HasSubstr(array + " line 1: expected a JSON object, found a array"));
}

TEST_F(PreprocessTest, MissingInputEmptyInputAndUnwritableOutput) {
  const std::string missing = TempPath("missing.jsonl");
  auto no_file = Preprocess(Options({missing}, "missing"));
  EXPECT_EQ(no_file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(no_file.status().message()),
              AllOf(HasSubstr("input file " + missing), HasSubstr("--input")));
  ExpectNoOutput(TempPath("missing"));

  const std::string empty = TempPath("empty.jsonl");
  WriteFile(empty, "\n" + JsonLine(""));
  auto no_docs = Preprocess(Options({empty}, "empty"));
  EXPECT_EQ(no_docs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_docs.status().message()),
              AllOf(HasSubstr("no documents found in --input=" + empty),
                    HasSubstr("1 empty ones skipped")));
  ExpectNoOutput(TempPath("empty"));

  const std::string good = TempPath("good.txt");
  WriteFile(good, "Some text.\n");
  auto unwritable = Preprocess(Options({good}, "no_such_dir/out"));
  EXPECT_FALSE(unwritable.ok());
  EXPECT_THAT(std::string(unwritable.status().message()),
              AllOf(HasSubstr("cannot create " + TempPath("no_such_dir/out_text_document")),
                    HasSubstr("--output-prefix=" + TempPath("no_such_dir/out"))));

  PreprocessOptions no_model = Options({good}, "no_model");
  no_model.tokenizer.model_file = TempPath("no_such.model");
  EXPECT_EQ(Preprocess(no_model).status().code(), absl::StatusCode::kNotFound);
  ExpectNoOutput(TempPath("no_model"));

  PreprocessOptions two_keys = Options({good}, "two_keys");
  two_keys.json_key = "text,title";
  EXPECT_THAT(std::string(Preprocess(two_keys).status().message()),
              HasSubstr("--json-keys='text,title' must name exactly one field"));
}

TEST_F(PreprocessTest, FailedRunKeepsThePreviousDataset) {
  const std::string input = TempPath("keep.txt");
  WriteFile(input, "First version.\n");
  auto first = Preprocess(Options({input}, "keep"));
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string bin = ReadFile(first->dataset_prefix + ".bin");
  const std::string idx = ReadFile(first->dataset_prefix + ".idx");
  const std::string bad = TempPath("keep_bad.jsonl");
  WriteFile(bad, JsonLine("Second version.") + "{\n");
  ASSERT_FALSE(Preprocess(Options({bad}, "keep")).ok());
  EXPECT_EQ(ReadFile(first->dataset_prefix + ".bin"), bin);
  EXPECT_EQ(ReadFile(first->dataset_prefix + ".idx"), idx);
}

}  // namespace
}  // namespace data
