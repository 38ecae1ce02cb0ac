// data::Gpt2BpeTokenizer on GPT-2's real files (@gpt2_bpe, which ./setup.sh writes from the
// pinned openai-whisper sdist): the vocabulary's size and EOD, and encodings of GPT-2 that are
// well known (the full comparison with Hugging Face and tiktoken is gpt2_bpe_parity_test).
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "data/gpt2_bpe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::testing::ElementsAre;
using ::testing::Not;

// A file of @gpt2_bpe in this test's runfiles.
std::string Gpt2File(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : "..") + "/gpt2_bpe/" + name;
}

class Gpt2BpeFilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = Gpt2BpeTokenizer::Load(Gpt2File("gpt2-vocab.json"), Gpt2File("gpt2-merges.txt"));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = loaded->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }

  static std::vector<int> Encode(const std::string& text) { return tokenizer_->Encode(text); }

  static const Gpt2BpeTokenizer* tokenizer_;
};

const Gpt2BpeTokenizer* Gpt2BpeFilesTest::tokenizer_ = nullptr;

TEST_F(Gpt2BpeFilesTest, HasGpt2sVocabularyAndEod) {
  ASSERT_NE(tokenizer_, nullptr);
  EXPECT_EQ(tokenizer_->vocab_size(), 50257);
  EXPECT_EQ(tokenizer_->eod_id(), 50256);
  EXPECT_EQ(tokenizer_->IdToPiece(50256), "<|endoftext|>");
  EXPECT_EQ(tokenizer_->IdToPiece(262), "Ġthe");
  EXPECT_EQ(tokenizer_->IdToPiece(198), "Ċ");
}

TEST_F(Gpt2BpeFilesTest, EncodesKnownTexts) {
  ASSERT_NE(tokenizer_, nullptr);
  EXPECT_THAT(Encode("Hello world"), ElementsAre(15496, 995));
  EXPECT_THAT(Encode("Hello, world!"), ElementsAre(15496, 11, 995, 0));
  EXPECT_THAT(Encode(" the"), ElementsAre(262));
  EXPECT_THAT(Encode(" Hello"), ElementsAre(18435));
  EXPECT_THAT(Encode("\n"), ElementsAre(198));
  EXPECT_THAT(Encode("\n\n"), ElementsAre(628));
  EXPECT_THAT(Encode("The quick brown fox jumps over the lazy dog."),
              ElementsAre(464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13));
  // Of two leading spaces, the first stands alone: " word" keeps the second.
  EXPECT_THAT(Encode("  word"), ElementsAre(220, 1573));
  EXPECT_THAT(Encode("it's"), ElementsAre(270, 338));
  EXPECT_THAT(Encode(""), ElementsAre());
}

TEST_F(Gpt2BpeFilesTest, EndOfTextInTextIsOrdinaryText) {
  ASSERT_NE(tokenizer_, nullptr);
  EXPECT_THAT(Encode("<|endoftext|>"), Not(ElementsAre(50256)));
  EXPECT_THAT(Encode("<|endoftext|>"), ElementsAre(27, 91, 437, 1659, 5239, 91, 29));
}

TEST_F(Gpt2BpeFilesTest, DecodesWhatItEncodes) {
  ASSERT_NE(tokenizer_, nullptr);
  for (const std::string text :
       {"Hello world", "  leading and trailing  ", "café naïve", "你好，世界", "👍🏽 ok",
        "<|endoftext|>", "line\n\n\tindented"}) {
    EXPECT_EQ(tokenizer_->Decode(Encode(text)), text);
  }
  EXPECT_EQ(tokenizer_->Decode({15496, 995, 50256}), "Hello world");
}

}  // namespace
}  // namespace data
