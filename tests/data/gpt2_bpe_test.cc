// Unit tests of GPT-2's byte-level BPE tokenizer on small hand-made vocabularies (GPT-2's real
// files are the parity test's). Expected ids and pieces are worked out by hand from GPT-2's
// regex and the merges below.
#include "data/gpt2_bpe.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string WriteFile(const std::string& name, const std::string& content) {
  std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  return path;
}

void AppendUtf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// GPT-2's bytes_to_unicode, written out again: the token string of each byte.
std::array<std::string, 256> ByteTokens() {
  std::array<std::string, 256> tokens;
  uint32_t next = 0x100;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    AppendUtf8(printable ? b : next++, &tokens[b]);
  }
  return tokens;
}

// `token` as a JSON string; with `ascii`, non-ASCII characters as \u escapes (as OpenAI's
// encoder.json), otherwise as UTF-8 (as Hugging Face's vocab.json).
std::string JsonString(const std::string& token, bool ascii) {
  std::string out = "\"";
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = token[i];
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x80 && ascii) {
      // A 2-byte sequence: GPT-2's byte alphabet is below U+0800, and no other occurs here.
      const uint32_t code = ((c & 0x1F) << 6) | (token[++i] & 0x3F);
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\u%04x", code);
      out += escape;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// A vocab.json: one entry per line, in the order given, ids as given.
std::string VocabJson(const std::vector<std::pair<std::string, int>>& entries, bool ascii) {
  std::string json = "{";
  for (size_t i = 0; i < entries.size(); ++i) {
    json += (i == 0 ? "\n" : ",\n") + JsonString(entries[i].first, ascii) + ": " +
            std::to_string(entries[i].second);
  }
  return json + "\n}\n";
}

// The 256 byte tokens, id = byte value, then `extra` tokens with ids 256, 257, ...
std::vector<std::pair<std::string, int>> VocabEntries(const std::vector<std::string>& extra) {
  std::vector<std::pair<std::string, int>> entries;
  const std::array<std::string, 256> bytes = ByteTokens();
  for (int b = 0; b < 256; ++b) entries.emplace_back(bytes[b], b);
  for (const std::string& token : extra) {
    entries.emplace_back(token, static_cast<int>(entries.size()));
  }
  return entries;
}

// The hand-made tokenizer of most tests. Merges by rank, with the merged token's id:
//   0 "b c" -> 256, 1 "a b" -> 257, 2 "Ġ a" -> 258, 3 "a bc" -> 259, 4 "' t" -> 260,
//   5 "o n" -> 261, 6 "d on" -> 262, 7 "Ġ Ġ" -> 263, 8 "Ċ Ċ" -> 264, 9 "1 2" -> 265,
//   10 "< |" -> 267; and "<|endoftext|>" = 266.
constexpr int kBc = 256, kAb = 257, kSpaceA = 258, kAbc = 259, kQuoteT = 260, kDon = 262,
              kTwoSpaces = 263, kTwoNewlines = 264, kTwelve = 265, kEod = 266, kOpen = 267;

const std::vector<std::string> kExtraTokens = {"bc", "ab", "Ġa", "abc",           "'t", "on", "don",
                                               "ĠĠ", "ĊĊ", "12", "<|endoftext|>", "<|"};
constexpr const char* kMerges =
    "#version: 0.2\nb c\na b\nĠ a\na bc\n' t\no n\nd on\nĠ Ġ\nĊ Ċ\n1 2\n< |\n";

class Gpt2BpeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    vocab_file_ = WriteFile("vocab.json", VocabJson(VocabEntries(kExtraTokens), true));
    merge_file_ = WriteFile("merges.txt", kMerges);
  }

  void SetUp() override {
    auto loaded = Gpt2BpeTokenizer::Load(vocab_file_, merge_file_);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = std::move(*loaded);
  }

  std::vector<int> Encode(std::string_view text) const { return tokenizer_->Encode(text); }

  static std::string vocab_file_;
  static std::string merge_file_;
  std::unique_ptr<Gpt2BpeTokenizer> tokenizer_;
};

std::string Gpt2BpeTest::vocab_file_;
std::string Gpt2BpeTest::merge_file_;

TEST_F(Gpt2BpeTest, LoadsVocabularyAndSpecialIds) {
  EXPECT_EQ(tokenizer_->vocab_size(), 268);
  EXPECT_EQ(tokenizer_->eod_id(), kEod);
  EXPECT_EQ(tokenizer_->pad_id(), -1);
  EXPECT_EQ(tokenizer_->IdToPiece(kSpaceA), "Ġa");
  EXPECT_EQ(tokenizer_->IdToPiece(' '), "Ġ");
  EXPECT_EQ(tokenizer_->IdToPiece('\n'), "Ċ");
  EXPECT_EQ(tokenizer_->IdToPiece('"'), "\"");
  EXPECT_EQ(tokenizer_->IdToPiece(0xAD), "Ń");  // the last of the 68 remapped bytes
  EXPECT_EQ(tokenizer_->IdToPiece(kEod), "<|endoftext|>");
  EXPECT_EQ(tokenizer_->IdToPiece(-1), "");
  EXPECT_EQ(tokenizer_->IdToPiece(268), "");
  EXPECT_EQ(tokenizer_->vocab_file(), vocab_file_);
  EXPECT_EQ(tokenizer_->merge_file(), merge_file_);
}

TEST_F(Gpt2BpeTest, MergesByRankNotLeftToRight) {
  // a b c: "b c" (rank 0) goes before "a b" (rank 1), then "a bc" (rank 3). Left to right
  // would give "ab" + "c".
  EXPECT_THAT(Encode("abc"), ElementsAre(kAbc));
  // Equal ranks: the leftmost first. a b c a b c -> a bc a bc -> abc abc.
  EXPECT_THAT(Encode("abcabc"), ElementsAre(kAbc, kAbc));
  EXPECT_THAT(Encode("ab"), ElementsAre(kAb));
  EXPECT_THAT(Encode("abab"), ElementsAre(kAb, kAb));
  EXPECT_THAT(Encode("ca"), ElementsAre('c', 'a'));
}

TEST_F(Gpt2BpeTest, ContractionsAreTheirOwnPieces) {
  EXPECT_THAT(Encode("don't"), ElementsAre(kDon, kQuoteT));
  // Uppercase is no contraction: "'" and "T" are separate pieces.
  EXPECT_THAT(Encode("'T"), ElementsAre('\'', 'T'));
  // After a space, the apostrophe joins the space: " '" then "t".
  EXPECT_THAT(Encode(" 't"), ElementsAre(' ', '\'', 't'));
}

TEST_F(Gpt2BpeTest, SpacesJoinTheFollowingWord) {
  EXPECT_THAT(Encode(" a"), ElementsAre(kSpaceA));
  // "   a": the whitespace run gives up its last space, which joins the word: "  " + " a".
  EXPECT_THAT(Encode("   a"), ElementsAre(kTwoSpaces, kSpaceA));
  // At the end of the text the run is whole.
  EXPECT_THAT(Encode("a  "), ElementsAre('a', kTwoSpaces));
  EXPECT_THAT(Encode(" "), ElementsAre(' '));
}

TEST_F(Gpt2BpeTest, NewlineAndTabRuns) {
  // "a", "\n\n", "\n", "b": a newline never joins a word (` ?` is U+0020 only).
  EXPECT_THAT(Encode("a\n\n\nb"), ElementsAre('a', kTwoNewlines, '\n', 'b'));
  EXPECT_THAT(Encode("\n\n"), ElementsAre(kTwoNewlines));
  EXPECT_THAT(Encode("\t\tx"), ElementsAre('\t', '\t', 'x'));
  // " \t" before a word: " " (run minus its last char), then "\t" alone, then "a".
  EXPECT_THAT(Encode(" \ta"), ElementsAre(' ', '\t', 'a'));
}

TEST_F(Gpt2BpeTest, NoBreakSpaceIsWhitespaceButNotTheOptionalSpace) {
  // U+00A0 (C2 A0) is \s but not U+0020: a piece of its own.
  EXPECT_THAT(Encode("a\u00a0b"), ElementsAre('a', 0xC2, 0xA0, 'b'));
  EXPECT_THAT(Encode("\u00a0 a"), ElementsAre(0xC2, 0xA0, kSpaceA));
}

TEST_F(Gpt2BpeTest, DigitsAndPunctuation) {
  EXPECT_THAT(Encode(" 123"), ElementsAre(' ', kTwelve, '3'));  // one piece " 123"
  EXPECT_THAT(Encode("a12"), ElementsAre('a', kTwelve));
  EXPECT_THAT(Encode("ab!?"), ElementsAre(kAb, '!', '?'));
}

TEST_F(Gpt2BpeTest, EmojiAndCjkAreBytes) {
  EXPECT_THAT(Encode("😀"), ElementsAre(0xF0, 0x9F, 0x98, 0x80));
  EXPECT_THAT(Encode("日本"), ElementsAre(0xE6, 0x97, 0xA5, 0xE6, 0x9C, 0xAC));
  EXPECT_THAT(Encode(" 日"), ElementsAre(' ', 0xE6, 0x97, 0xA5));
}

TEST_F(Gpt2BpeTest, EndOfTextInTheTextIsOrdinaryText) {
  // Pieces "<|", "endoftext", "|>"; never the EOD id.
  EXPECT_THAT(Encode("<|endoftext|>"),
              ElementsAre(kOpen, 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', '>'));
  EXPECT_THAT(Encode("a<|endoftext|>b"), Not(::testing::Contains(kEod)));
}

TEST_F(Gpt2BpeTest, EmptyTextHasNoIds) { EXPECT_THAT(Encode(""), IsEmpty()); }

TEST_F(Gpt2BpeTest, InvalidUtf8BytesAreOtherCharacters) {
  EXPECT_THAT(Encode("a\xff"
                     "b"),
              ElementsAre('a', 0xFF, 'b'));
  // A truncated sequence: each byte on its own, both "other", so one piece with " ".
  EXPECT_THAT(Encode(" \xe6\x97"), ElementsAre(' ', 0xE6, 0x97));
  EXPECT_EQ(tokenizer_->Decode(Encode("x\xc3(\xed\xa0\x80\xf4\x90\x80\x80")),
            "x\xc3(\xed\xa0\x80\xf4\x90\x80\x80");
}

TEST_F(Gpt2BpeTest, DecodeRoundTripsAndSkipsEodAndUnknownIds) {
  for (const std::string text : {"abc don't  a\n\n\tb", "<|endoftext|>", "日本語 😀 ½ ²", "",
                                 " \u00a0\u3000 x", "\xff\xfe\x80", "'s 're 'LL \r\n"}) {
    EXPECT_EQ(tokenizer_->Decode(Encode(text)), text);
  }
  EXPECT_EQ(tokenizer_->Decode({kAbc, kEod, -1, 268, 1 << 30, kSpaceA}), "abc a");
  EXPECT_EQ(tokenizer_->Decode({}), "");
}

TEST_F(Gpt2BpeTest, EncodeAgreesAcrossThreads) {
  const std::vector<std::string> texts = {"abc abc don't", "a\n\n\nb  ab", "日本 123 <|x|>"};
  std::vector<std::vector<int>> expected;
  for (const std::string& text : texts) expected.push_back(Encode(text));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          if (tokenizer_->Encode(texts[i]) != expected[i]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

// Per-thread caches belong to one tokenizer: a later tokenizer with other merges (perhaps at
// the same address) gets its own.
TEST_F(Gpt2BpeTest, CachesAreNotSharedBetweenTokenizers) {
  EXPECT_THAT(Encode("abc"), ElementsAre(kAbc));
  tokenizer_.reset();
  const std::string merges = WriteFile("merges_ab_only.txt", "a b\n");
  for (int i = 0; i < 3; ++i) {
    auto other = Gpt2BpeTokenizer::Load(vocab_file_, merges);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_THAT((*other)->Encode("abc"), ElementsAre(kAb, 'c'));
  }
  auto first = Gpt2BpeTokenizer::Load(vocab_file_, merge_file_);
  auto second = Gpt2BpeTokenizer::Load(vocab_file_, merges);
  ASSERT_TRUE(first.ok() && second.ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT((*first)->Encode("abc"), ElementsAre(kAbc));
    EXPECT_THAT((*second)->Encode("abc"), ElementsAre(kAb, 'c'));
  }
}

TEST(Gpt2BpeLoadTest, AcceptsUtf8VocabAndMergesWithoutVersionLineOrFinalNewline) {
  const std::string vocab = WriteFile("utf8_vocab.json", VocabJson(VocabEntries(kExtraTokens),
                                                                   /*ascii=*/false));
  const std::string merges = WriteFile("bare_merges.txt", "b c\na b\nĠ a\na bc");
  auto tokenizer = Gpt2BpeTokenizer::Load(vocab, merges);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_THAT((*tokenizer)->Encode("abc a"), ElementsAre(kAbc, kSpaceA));
  EXPECT_EQ((*tokenizer)->IdToPiece(kSpaceA), "Ġa");
}

TEST(Gpt2BpeLoadTest, EmptyMergesGiveBytes) {
  const std::string vocab = WriteFile("v_empty.json", VocabJson(VocabEntries(kExtraTokens), true));
  auto tokenizer = Gpt2BpeTokenizer::Load(vocab, WriteFile("empty_merges.txt", ""));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_THAT((*tokenizer)->Encode("abc"), ElementsAre('a', 'b', 'c'));
}

// The message of loading `vocab` and `merges` (file contents), which must fail.
std::string LoadError(const std::string& vocab, const std::string& merges,
                      absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  static int count = 0;
  const std::string n = std::to_string(count++);
  const auto loaded = Gpt2BpeTokenizer::Load(WriteFile("e" + n + "_vocab.json", vocab),
                                             WriteFile("e" + n + "_merges.txt", merges));
  EXPECT_FALSE(loaded.ok());
  if (loaded.ok()) return "";
  EXPECT_EQ(loaded.status().code(), code) << loaded.status();
  return std::string(loaded.status().message());
}

TEST(Gpt2BpeLoadTest, MissingFilesAreNotFound) {
  const std::string vocab = WriteFile("ok_vocab.json", VocabJson(VocabEntries(kExtraTokens), true));
  const std::string merges = WriteFile("ok_merges.txt", kMerges);
  const std::string missing = TempPath("no_such_file.json");
  auto loaded = Gpt2BpeTokenizer::Load(missing, merges);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(loaded.status().message()),
              AllOf(HasSubstr(missing), HasSubstr("vocab.json")));
  loaded = Gpt2BpeTokenizer::Load(vocab, missing);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(loaded.status().message()),
              AllOf(HasSubstr(missing), HasSubstr("merges.txt")));
}

TEST(Gpt2BpeLoadTest, RejectsVocabularyThatIsNotAnObjectOfIds) {
  const std::string fix = "one JSON object mapping each token string to its id";
  EXPECT_THAT(LoadError("[1, 2]", ""),
              AllOf(HasSubstr("vocab.json:1:1: expected '{'"), HasSubstr(fix)));
  EXPECT_THAT(LoadError("{\"a\": 0,\n \"b\": \"x\"}", ""),
              AllOf(HasSubstr("vocab.json:2:7: the id of token \"b\" is '\"...'"),
                    HasSubstr("not a non-negative integer"), HasSubstr(fix)));
  EXPECT_THAT(LoadError("{\"a\": 0,\n\"b\": -1}", ""),
              HasSubstr("vocab.json:2:6: the id of token \"b\" is negative"));
  EXPECT_THAT(LoadError("{\"a\": 1.5}", ""), HasSubstr("is a fraction or has an exponent"));
  EXPECT_THAT(LoadError("{\"a\": 99999999999}", ""), HasSubstr("is too large"));
  EXPECT_THAT(LoadError("{\"a\": 0,\n\"b\" 1}", ""), HasSubstr("vocab.json:2:5: expected ':'"));
  EXPECT_THAT(LoadError("{\"a\": 0} x", ""),
              HasSubstr("vocab.json:1:10: unexpected text after the object"));
  EXPECT_THAT(LoadError("{\"a\": 0", ""), HasSubstr("(found the end of the file)"));
  EXPECT_THAT(LoadError("{\"\\q\": 0}", ""), HasSubstr("vocab.json:1:3: invalid escape \\q"));
  EXPECT_THAT(LoadError("{\"\\ud800\": 0}", ""), HasSubstr("unpaired surrogate"));
  EXPECT_THAT(LoadError("{\"\xff\": 0}", ""), HasSubstr("vocab.json:1:3: invalid UTF-8"));
}

TEST(Gpt2BpeLoadTest, RejectsRepeatedTokensAndIds) {
  EXPECT_THAT(LoadError("{\"a\": 0,\n\"b\": 1,\n\"a\": 2}", ""),
              AllOf(HasSubstr("vocab.json:3:1: token \"a\" appears a second time (first "),
                    HasSubstr("vocab.json:1:2)")));
  EXPECT_THAT(LoadError("{\"a\": 0,\n\"b\": 1,\n\"c\": 1}", ""),
              AllOf(HasSubstr("vocab.json:3:1: token \"c\" has id 1, the id of token \"b\" ("),
                    HasSubstr("vocab.json:2:1) too")));
}

TEST(Gpt2BpeLoadTest, RejectsIdsThatAreNotDense) {
  std::vector<std::pair<std::string, int>> entries = VocabEntries({"<|endoftext|>"});
  entries.back().second = 300;  // 257 entries: ids must be 0..256
  EXPECT_THAT(LoadError(VocabJson(entries, true), ""),
              AllOf(HasSubstr("vocab.json:258:1: token \"<|endoftext|>\" has id 300"),
                    HasSubstr("must be 0..256")));
}

TEST(Gpt2BpeLoadTest, RequiresEndOfTextAndEveryByteToken) {
  EXPECT_THAT(LoadError(VocabJson(VocabEntries({"ab"}), true), ""),
              AllOf(HasSubstr("vocab.json: no token \"<|endoftext|>\""), HasSubstr("end-of-doc")));
  std::vector<std::pair<std::string, int>> entries = VocabEntries({"<|endoftext|>"});
  entries[' '].first = "Ġx";  // no token for the space byte
  EXPECT_THAT(LoadError(VocabJson(entries, true), ""),
              AllOf(HasSubstr("no token \"Ġ\" for the byte 0x20"),
                    HasSubstr("a token for each of the 256 bytes")));
}

TEST(Gpt2BpeLoadTest, RejectsBadMergeLines) {
  const std::string vocab = VocabJson(VocabEntries(kExtraTokens), true);
  const std::string fix = "one merge \"A B\" per line";
  EXPECT_THAT(LoadError(vocab, "#version: 0.2\nb c\na b c\n"),
              AllOf(HasSubstr("merges.txt:3: \"a b c\" is not a merge"), HasSubstr(fix)));
  EXPECT_THAT(LoadError(vocab, "b c\nab\n"), HasSubstr("merges.txt:2: \"ab\" is not a merge"));
  EXPECT_THAT(LoadError(vocab, "b c\n\na b\n"), HasSubstr("merges.txt:2: \"\" is not a merge"));
  EXPECT_THAT(LoadError(vocab, "b  c\n"), HasSubstr("merges.txt:1: \"b  c\" is not a merge"));
  EXPECT_THAT(LoadError(vocab, "#version: 0.2\r\nb c\r\n"),
              HasSubstr("merges.txt:2: the line ends with a carriage return"));
  EXPECT_THAT(LoadError(vocab, "b c\na zz\n"),
              AllOf(HasSubstr("merges.txt:2: the merge \"a zz\" names \"zz\", which is not in"),
                    HasSubstr("vocab.json")));
  EXPECT_THAT(LoadError(vocab, "a c\n"),
              HasSubstr("merges.txt:1: the merge \"a c\" makes \"ac\", which is not in"));
  EXPECT_THAT(LoadError(vocab, "b c\na b\nb c\n"),
              HasSubstr("merges.txt:3: the merge \"b c\" repeats the one on line 1"));
}

// ---- The pre-tokenizer: pieces worked out from the regex.

std::vector<std::string> Pieces(std::string_view text) {
  std::vector<std::string> pieces;
  for (std::string_view piece : Gpt2BpeTokenizer::PreTokenize(text)) pieces.emplace_back(piece);
  return pieces;
}

TEST(Gpt2PreTokenizeTest, FollowsGpt2Regex) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"", {}},
      {"Hello world", {"Hello", " world"}},
      {"Hello  world", {"Hello", " ", " world"}},
      {"don't", {"don", "'t"}},
      {"DON'T", {"DON", "'", "T"}},
      {"we'll've they're I'm he'd it's",
       {"we", "'ll", "'ve", " they", "'re", " I", "'m", " he", "'d", " it", "'s"}},
      {"'r 'l ''s", {"'", "r", " '", "l", " ''", "s"}},
      {" 's", {" '", "s"}},
      {"a\n\nb", {"a", "\n", "\n", "b"}},
      {"a\n\n", {"a", "\n\n"}},
      {"x \ty", {"x", " ", "\t", "y"}},
      {"  \n  x", {"  \n ", " x"}},
      {"a  ", {"a", "  "}},
      {" ", {" "}},
      {"\t\tx", {"\t", "\t", "x"}},
      {"hello!!! world...", {"hello", "!!!", " world", "..."}},
      {"a1b2 34", {"a", "1", "b", "2", " 34"}},
      {"x²! ½! ٣٤! Ⅻ!", {"x", "²", "!", " ½", "!", " ٣٤", "!", " Ⅻ", "!"}},  // No, Nd, Nl
      {"日本語 テスト", {"日本語", " テスト"}},
      {"hi😀! 😀", {"hi", "😀!", " 😀"}},
      {"e\u0301", {"e", "\u0301"}},        // a combining mark is not \p{L}
      {"a\u00a0b", {"a", "\u00a0", "b"}},  // NBSP is \s, not the optional space
      {"\u00a0 b", {"\u00a0", " b"}},
      {"a\u3000\u2028b", {"a", "\u3000", "\u2028", "b"}},
      {"a\u0085b", {"a", "\u0085", "b"}},  // NEL is White_Space
      {" \u200bx", {" \u200b", "x"}},      // ZERO WIDTH SPACE is not
      {" \x1cx", {" \x1c", "x"}},          // nor are the information separators
      {"<|endoftext|>", {"<|", "endoftext", "|>"}},
      {"a\xff"
       "b",
       {"a", "\xff", "b"}},
      {" \xff\xfe x", {" \xff\xfe", " x"}},
      {"\xc3 \xc3\xa9", {"\xc3", " \xc3\xa9"}},  // a lone lead byte, then " é"
  };
  for (const auto& [text, pieces] : cases) {
    EXPECT_EQ(Pieces(text), pieces) << "text: \"" << text << "\"";
  }
}

TEST(Gpt2PreTokenizeTest, PiecesConcatenateToTheText) {
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {" ", "\n", "\t", "\u00a0", "'", "s",    "l",       "A",
                                             "7", "!",  "é",  "日",     "😀", "\xff", "\xe6\x97"};
  for (int i = 0; i < 500; ++i) {
    std::string text;
    for (int n = rng() % 30; n > 0; --n) text += alphabet[rng() % alphabet.size()];
    std::string joined;
    for (std::string_view piece : Gpt2BpeTokenizer::PreTokenize(text)) {
      ASSERT_FALSE(piece.empty());
      joined += piece;
    }
    EXPECT_EQ(joined, text);
  }
}

// ---- Long pieces against a plain quadratic reference.

// A vocabulary over "abcd": the byte tokens, "<|endoftext|>", the powers "aa", "aaaa", ...,
// then random merges of earlier tokens; merge lines in creation order, or shuffled (ranks that
// no longer follow creation order, which the merge order must still respect).
struct RandomBpe {
  std::vector<std::string> extra_tokens;                     // ids 256, 257, ...
  std::vector<std::pair<int, int>> merges;                   // by rank: (left id, right id)
  std::map<std::pair<int, int>, std::pair<int, int>> table;  // pair -> (rank, merged id)
};

RandomBpe MakeRandomBpe(uint32_t seed, bool shuffle) {
  RandomBpe bpe;
  bpe.extra_tokens.push_back("<|endoftext|>");
  std::map<std::string, int> ids;
  std::vector<std::string> strings;  // letter tokens
  for (char c : std::string("abcd")) {
    ids[std::string(1, c)] = static_cast<unsigned char>(c);
    strings.emplace_back(1, c);
  }
  std::vector<std::pair<std::string, std::string>> merge_strings;
  const auto add = [&](const std::string& left, const std::string& right) {
    const std::string merged = left + right;
    if (ids.count(merged) != 0) return;
    ids[merged] = 256 + static_cast<int>(bpe.extra_tokens.size());
    bpe.extra_tokens.push_back(merged);
    strings.push_back(merged);
    merge_strings.emplace_back(left, right);
  };
  for (std::string power = "a"; power.size() < 512; power += power) add(power, power);
  std::mt19937 rng(seed);
  while (merge_strings.size() < 400) {
    const std::string left = strings[rng() % strings.size()];  // copies: add() grows strings
    const std::string right = strings[rng() % strings.size()];
    if (left.size() + right.size() <= 10) add(left, right);
  }
  if (shuffle) std::shuffle(merge_strings.begin(), merge_strings.end(), rng);
  for (const auto& [left, right] : merge_strings) {
    const std::pair<int, int> pair(ids.at(left), ids.at(right));
    bpe.table[pair] = {static_cast<int>(bpe.merges.size()), ids.at(left + right)};
    bpe.merges.push_back(pair);
  }
  return bpe;
}

std::string MergesText(const RandomBpe& bpe) {
  std::string text = "#version: 0.2\n";
  const auto name = [&](int id) {
    return id < 256 ? std::string(1, static_cast<char>(id)) : bpe.extra_tokens[id - 256];
  };
  for (const auto& [left, right] : bpe.merges) text += name(left) + " " + name(right) + "\n";
  return text;
}

// Merges `word` (letters only) the plain way: find the lowest-ranked adjacent pair, leftmost on
// a tie, merge it, repeat; O(n^2).
std::vector<int> ReferenceBpe(const RandomBpe& bpe, const std::string& word) {
  std::vector<int> symbols(word.begin(), word.end());
  while (true) {
    int best = -1;
    std::pair<int, int> best_merge(0, 0);
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = bpe.table.find({symbols[i], symbols[i + 1]});
      if (it != bpe.table.end() && (best < 0 || it->second.first < best_merge.first)) {
        best = static_cast<int>(i);
        best_merge = it->second;
      }
    }
    if (best < 0) return symbols;
    symbols[best] = best_merge.second;
    symbols.erase(symbols.begin() + best + 1);
  }
}

TEST(Gpt2BpeLongPieceTest, MatchesQuadraticReference) {
  for (const bool shuffle : {false, true}) {
    SCOPED_TRACE(shuffle ? "shuffled ranks" : "ranks in creation order");
    const RandomBpe bpe = MakeRandomBpe(shuffle ? 2 : 1, shuffle);
    const std::string tag = shuffle ? "shuffled" : "ordered";
    auto tokenizer = Gpt2BpeTokenizer::Load(
        WriteFile("random_" + tag + "_vocab.json", VocabJson(VocabEntries(bpe.extra_tokens), true)),
        WriteFile("random_" + tag + "_merges.txt", MergesText(bpe)));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();

    std::mt19937 rng(3);
    std::vector<std::string> words = {std::string(3000, 'a'), std::string(3001, 'a')};
    std::string random_word;
    for (int i = 0; i < 3000; ++i) random_word += "abcd"[rng() % 4];
    words.push_back(random_word);
    // Words of every length around the implementation's thresholds, each twice (the second
    // time from the cache).
    for (int length = 2; length <= 100; ++length) {
      std::string word;
      for (int i = 0; i < length; ++i) word += "abcd"[rng() % 4];
      words.push_back(word);
      words.push_back(word);
    }
    for (const std::string& word : words) {
      const std::vector<int> expected = ReferenceBpe(bpe, word);
      ASSERT_EQ((*tokenizer)->Encode(word), expected) << "word: " << word;
      ASSERT_EQ((*tokenizer)->Decode(expected), word);
    }
    if (!shuffle) {
      // 3000 a's: "aa" x 1500 first (rank 0), merged on up through the powers of two.
      EXPECT_LT((*tokenizer)->Encode(std::string(3000, 'a')).size(), 20u);
    }
  }
}

// More distinct words than a thread's cache holds (it starts over when full).
TEST(Gpt2BpeLongPieceTest, ManyDistinctWordsMatchReference) {
  const RandomBpe bpe = MakeRandomBpe(4, /*shuffle=*/false);
  auto tokenizer = Gpt2BpeTokenizer::Load(
      WriteFile("many_vocab.json", VocabJson(VocabEntries(bpe.extra_tokens), true)),
      WriteFile("many_merges.txt", MergesText(bpe)));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::mt19937 rng(5);
  std::set<std::string> seen;
  std::string text;
  std::vector<int> expected;
  while (seen.size() < 70000) {
    std::string word;
    for (int n = 8 + rng() % 9; n > 0; --n) word += "abcd"[rng() % 4];
    if (!seen.insert(word).second) continue;
    text += word + "\n";
    for (const int id : ReferenceBpe(bpe, word)) expected.push_back(id);
    expected.push_back('\n');
  }
  EXPECT_EQ((*tokenizer)->Encode(text), expected);
  EXPECT_EQ((*tokenizer)->Encode(text), expected);  // again, with what the cache kept
}

}  // namespace
}  // namespace data
