// Proves Debian's Abseil and SentencePiece link and work in one program: Abseil's flags,
// strings and Status, and a SentencePiece BPE model trained and used for a round trip.

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/toolchain/spm_train_and_encode.h"

ABSL_FLAG(int, vocab_size, 0, "SentencePiece vocabulary size (set through the test's args)");

namespace {

absl::StatusOr<int> ParsePositive(absl::string_view text) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a positive integer"));
  }
  return value;
}

TEST(AbseilTest, FlagsStringsAndStatusWork) {
  EXPECT_EQ(absl::GetFlag(FLAGS_vocab_size), 300);  // from args in BUILD
  const std::vector<std::string> parts = absl::StrSplit("1,,2,3", ',', absl::SkipEmpty());
  EXPECT_EQ(absl::StrJoin(parts, "+"), "1+2+3");
  EXPECT_EQ(*ParsePositive("42"), 42);
  EXPECT_EQ(ParsePositive("-1").status().ToString(),
            "INVALID_ARGUMENT: '-1' is not a positive integer");
}

TEST(SentencePieceTest, TrainsABpeModelThatRoundTrips) {
  const std::string corpus = ::testing::TempDir() + "corpus.txt";
  {
    std::ofstream out(corpus);
    const std::vector<std::string> words = {"pipeline", "stage", "replica", "gradient",
                                            "micro",    "batch", "cut",     "point",
                                            "of",       "the",   "a",       "model"};
    // Varied enough for a 300-piece vocabulary: every pair of words, and numbered lines.
    for (size_t i = 0; i < words.size(); ++i) {
      for (size_t j = 0; j < words.size(); ++j) {
        out << words[i] << " " << words[j] << " step " << i * words.size() + j
            << " of parallel training for language models\n";
      }
    }
  }
  std::vector<int> ids;
  std::string decoded;
  const std::string text = "pipeline stage gradient of the micro batch";
  const std::string error = varuna::testing::SpmTrainAndRoundTrip(
      corpus, ::testing::TempDir() + "bpe", absl::GetFlag(FLAGS_vocab_size), text, &ids, &decoded);
  ASSERT_EQ(error, "");
  EXPECT_EQ(decoded, text);
  // Frequent corpus words become single pieces: far fewer ids than characters.
  EXPECT_LT(ids.size(), text.size() / 3) << absl::StrJoin(ids, " ");
  for (int id : ids) EXPECT_LT(id, absl::GetFlag(FLAGS_vocab_size));
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);  // takes the --gtest_* flags out first
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
