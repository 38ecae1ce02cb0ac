// End-to-end runs of the //data:train_tokenizer and //data:preprocess_data programs: exit
// status, output files and error messages.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "data/indexed_dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/tiny_corpus.h"

namespace data {
namespace {

using ::data::tiny_corpus::MakeSentences;
using ::data::tiny_corpus::TempPath;
using ::testing::HasSubstr;

struct Result {
  int exit_code;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Runs a program of //data (a data dependency of this test) with `args`.
Result RunTool(const std::string& program, const std::string& args) {
  const std::string out = TempPath("stdout.txt");
  const std::string err = TempPath("stderr.txt");
  const std::string command =
      "data/" + program + " " + args + " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(command.c_str());
  return Result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(out), ReadFile(err)};
}

class DataToolsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::ofstream corpus(TempPath("tools_corpus.jsonl"));
    const auto sentences = MakeSentences(300, 5);
    for (size_t i = 0; i + 1 < sentences.size(); i += 2) {
      corpus << "{\"text\": \"" << sentences[i] << "\\n" << sentences[i + 1] << "\"}\n";
    }
  }
};

TEST_F(DataToolsTest, TrainThenPreprocessWithMegatronFlagSpellings) {
  const std::string corpus = TempPath("tools_corpus.jsonl");
  Result train =
      RunTool("train_tokenizer", "--input=" + corpus + " --model-prefix=" + TempPath("tools_tok") +
                                     " --vocab-size=400 --threads=1");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_THAT(train.out, HasSubstr("Trained a bpe tokenizer with 400 pieces (EOD id 2) on 300 "
                                   "lines of 150 documents"));
  ASSERT_TRUE(Exists(TempPath("tools_tok.model")));

  Result pre =
      RunTool("preprocess_data", "--input " + corpus + " --output-prefix " + TempPath("tools") +
                                     " --tokenizer-model " + TempPath("tools_tok.model") +
                                     " --workers=2 --log-interval=100");
  ASSERT_EQ(pre.exit_code, 0) << pre.err;
  EXPECT_EQ(pre.out, TempPath("tools_text_document") + "\n");
  EXPECT_THAT(pre.err, HasSubstr("Processed 100 documents ("));
  EXPECT_THAT(pre.err, HasSubstr("150 documents (0 empty skipped)"));
  auto dataset = IndexedDataset::Open(TempPath("tools_text_document"), 400);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ((*dataset)->num_documents(), 150);
}

TEST_F(DataToolsTest, HelpListsEveryFlagWithItsDefault) {
  Result train = RunTool("train_tokenizer", "--help");
  EXPECT_EQ(train.exit_code, 0) << train.err;
  EXPECT_THAT(train.out, HasSubstr("Trains a SentencePiece tokenizer."));
  EXPECT_THAT(train.out, HasSubstr("--vocab-size"));
  EXPECT_THAT(train.out, HasSubstr("(default 8000)"));

  Result pre = RunTool("preprocess_data", "--help");
  EXPECT_EQ(pre.exit_code, 0) << pre.err;
  EXPECT_THAT(pre.out, HasSubstr("Tokenizes text into a Megatron indexed dataset"));
  EXPECT_THAT(pre.out, HasSubstr("--log-interval"));
  EXPECT_THAT(pre.out, HasSubstr("(default 10000)"));
}

TEST_F(DataToolsTest, BadInputExitsNonZeroWithTheMessage) {
  const std::string bad = TempPath("tools_bad.jsonl");
  std::ofstream(bad) << "{\"text\": \"fine\"}\n{\"text\": \"broken\n";
  Result train =
      RunTool("train_tokenizer",
              "--input=" + bad + " --model-prefix=" + TempPath("bad_tok") + " --threads=1");
  EXPECT_EQ(train.exit_code, 1);
  EXPECT_THAT(train.err, HasSubstr(bad + " line 2: invalid JSON"));

  Result pre =
      RunTool("preprocess_data", "--input=" + bad + " --output-prefix=" + TempPath("tools_bad") +
                                     " --tokenizer-model=" + TempPath("tools_tok.model"));
  EXPECT_EQ(pre.exit_code, 1);
  EXPECT_THAT(pre.err, HasSubstr("preprocess_data: error: "));
  EXPECT_FALSE(Exists(TempPath("tools_bad_text_document.bin")));

  Result no_model =
      RunTool("preprocess_data", "--input=" + bad + " --output-prefix=" + TempPath("tools_bad") +
                                     " --tokenizer-model=" + TempPath("none.model"));
  EXPECT_EQ(no_model.exit_code, 1);
  EXPECT_THAT(no_model.err, HasSubstr("//data:train_tokenizer"));

  Result unknown_flag = RunTool("preprocess_data", "--no-such-flag=1");
  EXPECT_NE(unknown_flag.exit_code, 0);
  EXPECT_THAT(unknown_flag.err, HasSubstr("unknown flag --no-such-flag"));
}

}  // namespace
}  // namespace data
