#include "data/tokenizer.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/tiny_corpus.h"

namespace data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using ::data::tiny_corpus::MakeSentences;
using ::data::tiny_corpus::TempPath;
using ::data::tiny_corpus::TrainTinyTokenizer;

class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(TrainTinyTokenizer("tiny", 500), ModelFile()); }

  static std::string ModelFile() { return TempPath("tiny.model"); }
};

TEST_F(TokenizerTest, LoadsTrainedModelWithSpecialIds) {
  auto tokenizer = LoadTokenizer(ModelFile());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const Tokenizer& t = **tokenizer;
  EXPECT_EQ(t.vocab_size(), 500);
  EXPECT_EQ(t.eod_id(), 2);
  EXPECT_EQ(t.IdToPiece(t.eod_id()), "</s>");
  EXPECT_EQ(t.pad_id(), 3);
  EXPECT_EQ(t.IdToPiece(0), "<unk>");
  EXPECT_EQ(t.IdToPiece(4), "<0x00>");  // byte fallback pieces follow the specials
  EXPECT_EQ(t.IdToPiece(500), "");
  EXPECT_EQ(t.kind(), TokenizerKind::kSentencePiece);
  EXPECT_EQ(t.files(), std::vector<std::string>{ModelFile()});
}

// Megatron's tokenizer flags: the kind named or inferred, and every contradiction named.
TEST(TokenizerKindTest, FollowsMegatronsFlags) {
  auto kind = [](const TokenizerSpec& spec) { return TokenizerKindOf(spec); };
  EXPECT_EQ(*kind({}), std::nullopt);
  EXPECT_EQ(*kind({"", "t.model", "", ""}), TokenizerKind::kSentencePiece);
  EXPECT_EQ(*kind({"SentencePieceTokenizer", "t.model", "", ""}), TokenizerKind::kSentencePiece);
  EXPECT_EQ(*kind({"", "", "v.json", "m.txt"}), TokenizerKind::kGpt2Bpe);
  EXPECT_EQ(*kind({"GPT2BPETokenizer", "", "v.json", "m.txt"}), TokenizerKind::kGpt2Bpe);
  auto error = [&](const TokenizerSpec& spec) {
    return std::string(kind(spec).status().message());
  };
  EXPECT_THAT(error({"BertWordPieceLowerCase", "", "", ""}),
              HasSubstr("--tokenizer-type=BertWordPieceLowerCase is not a tokenizer type"));
  EXPECT_THAT(error({"", "t.model", "v.json", "m.txt"}), HasSubstr("name two tokenizers"));
  EXPECT_THAT(error({"GPT2BPETokenizer", "", "v.json", ""}),
              HasSubstr("GPT2BPETokenizer needs both --vocab-file"));
  EXPECT_THAT(error({"", "", "", "m.txt"}), HasSubstr("GPT2BPETokenizer needs both --vocab-file"));
  EXPECT_THAT(error({"SentencePieceTokenizer", "", "", ""}),
              HasSubstr("--tokenizer-type=SentencePieceTokenizer needs --tokenizer-model"));
  EXPECT_THAT(error({"GPT2BPETokenizer", "", "", ""}),
              HasSubstr("GPT2BPETokenizer needs both --vocab-file"));
  EXPECT_THAT(std::string(LoadTokenizer(TokenizerSpec{}).status().message()),
              HasSubstr("no tokenizer given"));
}

TEST_F(TokenizerTest, EncodeDecodeRoundTripKeepsTextExactly) {
  auto tokenizer = LoadTokenizer(ModelFile());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const Tokenizer& t = **tokenizer;
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog.",
      "  two leading spaces,  double  spaces and a trailing one ",
      "line one\nline two\n\n\tindented with a tab",
      "Unicode: caf\xc3\xa9, \xe6\x97\xa5\xe6\x9c\xac, \xf0\x9f\x99\x82 and digits 12345",
      "",
  };
  for (const std::string& text : texts) {
    const std::vector<int> ids = t.Encode(text);
    for (int id : ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, t.vocab_size());
      EXPECT_NE(id, 0) << "no <unk> with byte fallback, in: " << text;
    }
    EXPECT_EQ(t.Decode(ids), text);
  }
  // Common words become single pieces, so English encodes shorter than its bytes.
  const std::string english = "the cat sleeps under the warm sun";
  EXPECT_LT(t.Encode(english).size(), english.size() / 2);
  EXPECT_TRUE(t.Encode("").empty());
}

TEST_F(TokenizerTest, DecodeDropsControlIdsAndMapsOutOfRangeIdsToUnknown) {
  auto tokenizer = LoadTokenizer(ModelFile());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const Tokenizer& t = **tokenizer;
  std::vector<int> ids = t.Encode("the dog");
  ids.push_back(t.eod_id());
  EXPECT_EQ(t.Decode(ids), "the dog");
  const std::string unknown = t.Decode({0});
  EXPECT_FALSE(unknown.empty());
  EXPECT_EQ(t.Decode({t.vocab_size() + 5}), unknown);
  EXPECT_EQ(t.Decode({-1}), unknown);
}

TEST_F(TokenizerTest, TrainsFromASentenceSource) {
  class Sentences : public SentenceSource {
   public:
    bool Next(std::string* sentence) override {
      if (next_ >= sentences_.size()) return false;
      *sentence = sentences_[next_++];
      return true;
    }
    std::string error() const override { return ""; }

   private:
    std::vector<std::string> sentences_ = MakeSentences(300);
    size_t next_ = 0;
  } source;
  TokenizerTrainOptions options;
  options.model_prefix = TempPath("from_source");
  options.vocab_size = 400;
  options.model_type = "unigram";
  options.num_threads = 1;
  const absl::Status status = TrainTokenizer(options, &source);
  ASSERT_TRUE(status.ok()) << status;
  auto tokenizer = LoadTokenizer(TempPath("from_source.model"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), 400);
  EXPECT_EQ((*tokenizer)->Decode((*tokenizer)->Encode("Birds sing.\n")), "Birds sing.\n");
}

TEST_F(TokenizerTest, SourceErrorFailsTraining) {
  class Broken : public SentenceSource {
   public:
    bool Next(std::string* sentence) override { return false; }
    std::string error() const override { return "input.jsonl line 3: invalid JSON"; }
  } source;
  TokenizerTrainOptions options;
  options.model_prefix = TempPath("broken");
  options.vocab_size = 400;
  const absl::Status status = TrainTokenizer(options, &source);
  EXPECT_THAT(std::string(status.message()), HasSubstr("input.jsonl line 3: invalid JSON"));
}

TEST(TokenizerErrorTest, MissingModelFileNamesFileAndHowToMakeOne) {
  const std::string missing = TempPath("no_such.model");
  auto tokenizer = LoadTokenizer(missing);
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      std::string(tokenizer.status().message()),
      AllOf(HasSubstr(missing), HasSubstr("does not exist"), HasSubstr("//data:train_tokenizer")));
  EXPECT_THAT(std::string(LoadTokenizer("").status().message()),
              HasSubstr("--tokenizer-model is empty"));
}

TEST(TokenizerErrorTest, FileThatIsNotAModelIsRejected) {
  const std::string garbage = TempPath("garbage.model");
  std::ofstream(garbage) << "this is not a protobuf";
  auto tokenizer = LoadTokenizer(garbage);
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tokenizer.status().message()),
              AllOf(HasSubstr("cannot load tokenizer model " + garbage),
                    HasSubstr("//data:train_tokenizer")));
}

TEST(TokenizerErrorTest, ModelWithoutEosIsRejected) {
  const std::string corpus = TempPath("no_eos_corpus.txt");
  std::ofstream out(corpus);
  for (const std::string& sentence : MakeSentences(200)) out << sentence << "\n";
  out.close();
  TokenizerTrainOptions options;
  options.input_files = {corpus};
  options.model_prefix = TempPath("no_eos");
  options.vocab_size = 400;
  options.eos_id = -1;
  options.num_threads = 1;
  ASSERT_TRUE(TrainTokenizer(options).ok());
  auto tokenizer = LoadTokenizer(TempPath("no_eos.model"));
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_THAT(std::string(tokenizer.status().message()),
              AllOf(HasSubstr(TempPath("no_eos.model")), HasSubstr("no end-of-document piece")));
}

TEST(TokenizerErrorTest, BadTrainingOptionsAreNamed) {
  TokenizerTrainOptions options;
  options.model_prefix = TempPath("bad");
  options.input_files = {TempPath("missing_corpus.txt")};
  EXPECT_THAT(std::string(TrainTokenizer(options).message()),
              AllOf(HasSubstr(TempPath("missing_corpus.txt")), HasSubstr("does not exist")));

  options.model_type = "word2vec";
  EXPECT_THAT(std::string(TrainTokenizer(options).message()),
              HasSubstr("--model-type=word2vec is not supported: use bpe or unigram"));

  const std::string corpus = TempPath("small_corpus.txt");
  std::ofstream(corpus) << "just a few words\n";
  options.model_type = "bpe";
  options.input_files = {corpus};
  options.vocab_size = 5000;
  EXPECT_THAT(std::string(TrainTokenizer(options).message()),
              AllOf(HasSubstr("training of " + TempPath("bad") + ".model failed"),
                    HasSubstr("--vocab-size=5000")));
}

TEST(TokenizerErrorTest, EmptyInputSaysThereIsNoText) {
  TokenizerTrainOptions options;
  options.model_prefix = TempPath("empty");
  const std::string empty = TempPath("empty_corpus.txt");
  std::ofstream(empty) << "\n\n";
  options.input_files = {empty};
  EXPECT_THAT(std::string(TrainTokenizer(options).message()),
              AllOf(HasSubstr("the training input holds no text"), HasSubstr(empty)));
}

}  // namespace
}  // namespace data
