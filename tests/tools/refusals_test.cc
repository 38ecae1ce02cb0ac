// Every program's refusals name the flag or the file at fault, and what to do. Each row runs one
// of the six programs (train_tokenizer, preprocess_data, pretrain_gpt2, export_hf,
// inspect_checkpoint, launch) as a user does, in a directory of its own with the same input
// files, and checks the exit status (2 for a bad command line, 1 for other errors), that stderr
// holds "<program>: error: " and the row's text (the flag or path given and a phrase of the fix),
// and that the refused run created or changed nothing on disk (no model, no .bin/.idx, no
// export folder, no temporary file).
//
// pretrain_gpt2 has three rows only: its own table is PretrainGpt2Test.BadInputsNameTheProblem.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/subprocess.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::varuna::testing::ExitInfo;
using ::varuna::testing::Process;

// `path` (e.g. "data/train_tokenizer") in the test's runfiles, as an absolute path.
std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const fs::path root = srcdir != nullptr && *srcdir != '\0' ? fs::path(srcdir) / "varuna" : ".";
  return fs::absolute(root / path).string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every file and directory under `dir`, with each file's size: what a run may not change.
std::map<std::string, uintmax_t> Snapshot(const fs::path& dir) {
  std::map<std::string, uintmax_t> entries;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir)) {
    entries[fs::relative(entry.path(), dir).string()] =
        entry.is_regular_file() ? entry.file_size() : 0;
  }
  return entries;
}

std::string Listing(const std::map<std::string, uintmax_t>& entries) {
  std::string out;
  for (const auto& [name, size] : entries) out += name + " (" + std::to_string(size) + ")\n";
  return out;
}

// A training text of 120 lines of lowercase words: a few dozen distinct characters, enough
// pieces for a 300-piece model.
std::string Corpus() {
  const std::vector<std::string> words = {"the",  "quick", "brown", "fox",   "jumps", "over",
                                          "lazy", "dog",   "and",   "cat",   "runs",  "far",
                                          "away", "from",  "home",  "while", "birds", "sing"};
  std::string text;
  for (int line = 0; line < 120; ++line) {
    for (int w = 0; w < 8; ++w) {
      text += (w == 0 ? "" : " ") + words[(line * 7 + w * 3 + line / 5) % words.size()];
    }
    text += "\n";
  }
  return text;
}

struct Row {
  std::string program;  // its runfile path, e.g. "data/train_tokenizer"
  std::vector<std::string> args;
  int exit_code;
  // Texts stderr must hold: the flag or file named, and a phrase of the fix. "{dir}" stands
  // for the row's directory (the programs name relative paths resolved against it).
  std::vector<std::string> message;
};

const std::vector<Row>& Rows() {
  static const auto* rows = new std::vector<Row>{
      // ---- train_tokenizer: corpus.txt -> tok.model, tok.vocab
      {"data/train_tokenizer",
       {"--input=corpus.txt", "--model-prefix=tok", "--vocab-sise=300"},
       2,
       {"unknown flag --vocab-sise (did you mean --vocab-size?)"}},
      {"data/train_tokenizer",
       {"--input=corpus.txt", "--model-prefix=tok", "--vocab-size=many"},
       2,
       {"--vocab-size=many is not an integer", "e.g. --vocab-size=8000"}},
      {"data/train_tokenizer",
       {"--input=corpus.txt", "--model-prefix=tok", "--vocab-size=-1"},
       2,
       {"--vocab-size=-1 must be >= 262", "pass e.g. --vocab-size=8000"}},
      {"data/train_tokenizer",
       {"--input=corpus.txt", "--model-prefix=tok", "--vocab-size=0"},
       2,
       {"--vocab-size=0 must be >= 262", "pass e.g. --vocab-size=8000"}},
      {"data/train_tokenizer",
       {"--input=corpus.txt", "--model-prefix=tok", "--vocab-size=262"},
       1,
       {"--vocab-size=262 is below the", "pass --vocab-size="}},
      {"data/train_tokenizer",
       {"--input=empty.txt", "--model-prefix=tok", "--vocab-size=300"},
       1,
       {"no non-blank line in --input=empty.txt", "give files with text"}},
      {"data/train_tokenizer",
       {"--input=corpus.txt,empty.txt", "--model-prefix=tok", "--vocab-size=300"},
       0,
       {}},  // a blank file beside text is fine (the control row: it writes tok.model)
      {"data/train_tokenizer",
       {"--input=missing.txt", "--model-prefix=tok", "--vocab-size=300"},
       1,
       {"cannot open input file missing.txt", "check --input"}},
      {"data/train_tokenizer",
       {"--input=a_dir", "--model-prefix=tok", "--vocab-size=300"},
       1,
       {"error reading input file a_dir", "check --input"}},
      {"data/train_tokenizer",
       {"--input=corpus.txt", "--model-prefix=no_dir/tok", "--vocab-size=300"},
       1,
       {"no_dir/tok.model", "--model-prefix=no_dir/tok exists and is writable"}},
      {"data/train_tokenizer",
       {"--input=corpus.txt", "--model-prefix=tok", "--model-type=wordpiece"},
       1,
       {"--model-type=wordpiece is not supported", "use bpe or unigram"}},
      {"data/train_tokenizer",
       {"--input=corpus.txt", "--vocab-size=300"},
       1,
       {"--model-prefix is required", "e.g. --model-prefix=tok"}},
      {"data/train_tokenizer",
       {"corpus.txt", "--model-prefix=tok"},
       2,
       {"unexpected argument 'corpus.txt'", "all inputs go in --input"}},

      // ---- preprocess_data: docs.jsonl -> out_text_document.bin, .idx
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--tokenizer-model=tok.model", "--wokers=2"},
       2,
       {"unknown flag --wokers (did you mean --workers?)"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--tokenizer-model=tok.model",
        "--workers=two"},
       2,
       {"--workers=two is not an integer", "e.g. --workers=4"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--tokenizer-model=tok.model", "--workers=-1"},
       2,
       {"--workers=-1 must be >= 0", "pass e.g. --workers=4"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--tokenizer-model=tok.model",
        "--no-append-eod=0"},
       2,
       {"--no-append-eod=0: a negation takes no value", "write --no-append-eod"}},
      {"data/preprocess_data",
       {"--input=missing.jsonl", "--output-prefix=out", "--tokenizer-model=tok.model"},
       1,
       {"input file missing.jsonl does not exist", "check --input"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--tokenizer-model=missing.model"},
       1,
       {"tokenizer model missing.model does not exist", "//data:train_tokenizer"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--tokenizer-model=a_dir"},
       1,
       {"tokenizer model a_dir is a directory", "pass the .model file"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--tokenizer-model=a_file"},
       1,
       {"cannot load tokenizer model a_file", "//data:train_tokenizer"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=no_dir/out", "--tokenizer-model=tok.model"},
       1,
       {"--output-prefix=no_dir/out", "exists and is writable"}},
      {"data/preprocess_data",
       {"--input=empty.txt", "--output-prefix=out", "--tokenizer-model=tok.model"},
       1,
       {"no documents found in --input=empty.txt", "give files with text"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--tokenizer-model=tok.model"},
       1,
       {"--output-prefix is empty", "e.g. --output-prefix=out/corpus"}},
      {"data/preprocess_data",
       {"docs.jsonl", "--output-prefix=out", "--tokenizer-model=tok.model"},
       2,
       {"unexpected argument 'docs.jsonl'", "all inputs go in --input"}},
      // GPT-2's byte-level BPE: flags, then files (vocab.json: the 256 byte tokens and
      // <|endoftext|>).
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--vocab-file=vocab.json"},
       2,
       {"GPT2BPETokenizer needs both --vocab-file=gpt2-vocab.json and --merge-file"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--tokenizer-type=GPT2Tokenizer"},
       2,
       {"--tokenizer-type=GPT2Tokenizer is not a tokenizer type", "use SentencePieceTokenizer"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--tokenizer-model=tok.model",
        "--vocab-file=vocab.json", "--merge-file=merges.txt"},
       2,
       {"name two tokenizers: give the files of one"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--vocab-file=a_file",
        "--merge-file=merges.txt"},
       1,
       {"a_file:1:1: expected '{'"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--vocab-file=vocab.json",
        "--merge-file=bad_merges.txt"},
       1,
       {"bad_merges.txt:2: the merge \"t zz\" names \"zz\"", "vocab.json"}},
      {"data/preprocess_data",
       {"--input=docs.jsonl", "--output-prefix=out", "--vocab-file=vocab.json",
        "--merge-file=missing.txt"},
       1,
       {"missing.txt"}},

      // ---- pretrain_gpt2 (see PretrainGpt2Test.BadInputsNameTheProblem for the rest)
      {"trainer/pretrain_gpt2",
       {"--hiden-size=32", "--save=ckpts"},
       2,
       {"unknown flag --hiden-size (did you mean --hidden-size?)"}},
      {"trainer/pretrain_gpt2",
       {"--num-layers=two", "--save=ckpts"},
       2,
       {"--num-layers=two is not an integer"}},
      {"trainer/pretrain_gpt2",
       {"--tensor-model-parallel-size=2", "--save=ckpts"},
       2,
       {"Megatron's --tensor-model-parallel-size is not supported here",
        "//varuna:launch --nstages=P"}},

      // ---- export_hf CKPT OUT
      {"tools/export_hf/export_hf",
       {"--iteraton=3", "a_dir", "hf"},
       2,
       {"unknown flag --iteraton (did you mean --iteration?)"}},
      {"tools/export_hf/export_hf",
       {"--iteration=last", "a_dir", "hf"},
       2,
       {"--iteration=last is not an integer", "e.g. --iteration=1000"}},
      {"tools/export_hf/export_hf",
       {"--vocab-size=0", "a_dir", "hf"},
       2,
       {"--vocab-size=0 must be >= 1", "or leave --vocab-size out for its default"}},
      {"tools/export_hf/export_hf",
       {"a_dir"},
       2,
       {"expected 2 paths (CKPT OUT), got 1: a_dir", "usage: export_hf CKPT OUT"}},
      {"tools/export_hf/export_hf",
       {"missing_ckpts", "hf"},
       1,
       {"checkpoint {dir}/missing_ckpts is not a directory", "pass a --save directory"}},
      {"tools/export_hf/export_hf",
       {"a_file", "hf"},
       1,
       {"checkpoint {dir}/a_file is not a directory", "pass a --save directory"}},
      {"tools/export_hf/export_hf",
       {"a_dir", "hf"},
       1,
       {"checkpoint {dir}/a_dir has no checkpoint to export"}},
      {"tools/export_hf/export_hf",
       {"a_dir", "a_file"},
       1,
       {"output {dir}/a_file exists and is not an empty directory", "choose a new directory"}},

      // ---- inspect_checkpoint DIR
      {"tools/inspect_checkpoint/inspect_checkpoint",
       {"--tensor", "a_dir"},
       2,
       {"unknown flag --tensor (did you mean --tensors?)"}},
      {"tools/inspect_checkpoint/inspect_checkpoint",
       {"--iteration=x", "a_dir"},
       2,
       {"--iteration=x is not an integer", "e.g. --iteration=1000"}},
      {"tools/inspect_checkpoint/inspect_checkpoint",
       {"--iteration=-2", "a_dir"},
       2,
       {"--iteration=-2 must be >= 0", "or leave --iteration out for its default"}},
      {"tools/inspect_checkpoint/inspect_checkpoint",
       {"missing_ckpts"},
       1,
       {"DIR {dir}/missing_ckpts is not a directory", "pass a --save directory"}},
      {"tools/inspect_checkpoint/inspect_checkpoint",
       {"a_file"},
       1,
       {"DIR {dir}/a_file is not a directory", "pass a --save directory"}},
      {"tools/inspect_checkpoint/inspect_checkpoint",
       {"a_dir"},
       1,
       {"{dir}/a_dir holds no varuna_ckpt_<iteration> directory", "pass the --save directory"}},

      // ---- launch [flags] -- PROGRAM [its flags]
      {"varuna/launch/launch",
       {"--nstage=2", "--chunk_size=1", "--batch_size=4", "--", "/bin/true"},
       2,
       {"unknown launcher flag --nstage", "flags for the workers go after the program"}},
      {"varuna/launch/launch",
       {"--nstages=two", "--chunk_size=1", "--batch_size=4", "--", "/bin/true"},
       2,
       {"--nstages=two is not an integer", "e.g. --nstages=2"}},
      {"varuna/launch/launch",
       {"--nstages=3", "--chunk_size=1", "--batch_size=4", "--gpus_per_node=4", "--", "/bin/true"},
       2,
       {"--nstages=3 does not divide the world size W=4 (--gpus_per_node=4",
        "choose --nstages from {1, 2, 4}"}},
      {"varuna/launch/launch",
       {"--nstages=4", "--chunk_size=1", "--batch_size=4", "--gpus_per_node=2", "--", "/bin/true"},
       2,
       {"--nstages=4 needs at least 4 worker processes", "raise --gpus_per_node or --nnodes"}},
      {"varuna/launch/launch",
       {"--nstages=1", "--chunk_size=1", "--batch_size=4", "--gpus_per_node=0", "--", "/bin/true"},
       2,
       {"--gpus_per_node=0 must be >= 1", "pass e.g. --gpus_per_node=2"}},
      {"varuna/launch/launch",
       {"--nstages=1", "--chunk_size=1", "--batch_size=1", "--gpus_per_node=1", "--",
        "./no_worker"},
       2,
       {"the worker program ./no_worker does not exist", "check the path"}},
      {"varuna/launch/launch",
       {"--nstages=1", "--chunk_size=1", "--batch_size=1", "--gpus_per_node=1", "--", "./a_file"},
       2,
       {"the worker program ./a_file", "is not an executable file", "chmod +x"}},
      {"varuna/launch/launch",
       {"--morph", "--machine_list=machines.txt", "--nstages=1", "--chunk_size=1", "--batch_size=1",
        "--", "/bin/true", "--save=ckpts"},
       2,
       {"--machine_list={dir}/machines.txt", "one host per line"}},
  };
  return *rows;
}

std::string Label(const Row& row) {
  std::string label = fs::path(row.program).filename().string();
  for (const std::string& arg : row.args) label += " " + arg;
  return label;
}

// "train_tokenizer: error: ", or the launcher's "[launch] error: ".
std::string ErrorPrefix(const Row& row) {
  const std::string name = fs::path(row.program).filename().string();
  return name == "launch" ? "[launch] error: " : name + ": error: ";
}

std::string Substitute(std::string text, const std::string& dir) {
  const std::string key = "{dir}";
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at)) {
    text.replace(at, key.size(), dir);
    at += dir.size();
  }
  return text;
}

class RefusalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / "refusals";
    fs::remove_all(root_);
    fs::create_directories(root_ / "logs");
    fs::create_directories(root_ / "inputs" / "a_dir");
    const fs::path inputs = root_ / "inputs";
    std::ofstream(inputs / "corpus.txt") << Corpus();
    std::ofstream(inputs / "empty.txt") << "\n  \n\n";
    std::ofstream docs(inputs / "docs.jsonl");
    docs << "{\"text\": \"the quick brown fox\"}\n{\"text\": \"jumps over the lazy dog\"}\n";
    docs.close();
    std::ofstream(inputs / "a_file") << "neither a directory, a model nor a program\n";
    // A GPT-2 BPE vocabulary of the 256 byte tokens (GPT-2's bytes_to_unicode) and its EOD,
    // one merge, and a merges file naming a token the vocabulary lacks.
    std::ofstream vocab(inputs / "vocab.json");
    vocab << "{";
    int next_char = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const int c = printable ? b : next_char++;
      std::string utf8 = c < 0x80 ? std::string(1, static_cast<char>(c))
                                  : std::string{static_cast<char>(0xC0 | (c >> 6)),
                                                static_cast<char>(0x80 | (c & 0x3F))};
      if (utf8 == "\"" || utf8 == "\\") utf8 = "\\" + utf8;
      vocab << "\"" << utf8 << "\": " << b << ", ";
    }
    vocab << "\"th\": 256, \"<|endoftext|>\": 257}";
    vocab.close();
    std::ofstream(inputs / "merges.txt") << "#version: 0.2\nt h\n";
    std::ofstream(inputs / "bad_merges.txt") << "#version: 0.2\nt zz\n";

    // The tokenizer the preprocess_data rows use, made by the program under test.
    const Process train = varuna::testing::Spawn(
        {Runfile("data/train_tokenizer"), "--input=" + (inputs / "corpus.txt").string(),
         "--model-prefix=" + (inputs / "tok").string(), "--vocab-size=300", "--threads=1"},
        (root_ / "logs" / "tokenizer.log").string());
    const ExitInfo trained = varuna::testing::WaitAll({train}, std::chrono::seconds(60))[0];
    ASSERT_TRUE(trained.exited && trained.code == 0) << varuna::testing::Describe({trained});
    fs::remove(inputs / "tok.vocab");
  }

  fs::path root_;
};

TEST_F(RefusalsTest, EveryRefusalNamesTheFlagOrFileAndChangesNothing) {
  const std::vector<Row>& rows = Rows();
  std::vector<fs::path> dirs;
  std::vector<std::map<std::string, uintmax_t>> before;
  std::vector<std::string> stderr_paths;
  std::vector<Process> processes;
  for (size_t i = 0; i < rows.size(); ++i) {
    const fs::path dir = root_ / ("row" + std::to_string(i));
    fs::copy(root_ / "inputs", dir, fs::copy_options::recursive);
    dirs.push_back(dir);
    before.push_back(Snapshot(dir));
    stderr_paths.push_back((root_ / "logs" / ("row" + std::to_string(i) + ".stderr")).string());
    // In the row's directory, as `bazel run` would start it there; stderr apart from stdout.
    std::vector<std::string> argv = {"/bin/sh", "-c",
                                     "cd \"$BUILD_WORKING_DIRECTORY\" && exec \"$@\" "
                                     "2>\"$REFUSAL_STDERR\"",
                                     "sh", Runfile(rows[i].program)};
    argv.insert(argv.end(), rows[i].args.begin(), rows[i].args.end());
    processes.push_back(varuna::testing::Spawn(
        argv, (root_ / "logs" / ("row" + std::to_string(i) + ".stdout")).string(),
        {{"BUILD_WORKING_DIRECTORY", dir.string()},
         {"REFUSAL_STDERR", stderr_paths.back()},
         {"OMP_NUM_THREADS", "1"}}));
  }
  const std::vector<ExitInfo> exits =
      varuna::testing::WaitAll(processes, std::chrono::seconds(120));

  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    SCOPED_TRACE(Label(row));
    const std::string err = ReadFile(stderr_paths[i]);
    if (!exits[i].exited) {
      ADD_FAILURE() << "it did not exit: " << varuna::testing::Describe({exits[i]}) << err;
      continue;
    }
    EXPECT_EQ(exits[i].code, row.exit_code) << err;
    if (row.exit_code == 0) {
      EXPECT_NE(Snapshot(dirs[i]), before[i]) << "the control row wrote nothing";
      continue;
    }
    EXPECT_THAT(err, HasSubstr(ErrorPrefix(row)));
    for (const std::string& text : row.message) {
      EXPECT_THAT(err, HasSubstr(Substitute(text, dirs[i].string())));
    }
    const std::map<std::string, uintmax_t> after = Snapshot(dirs[i]);
    EXPECT_EQ(after, before[i]) << "the refused run changed its directory; before:\n"
                                << Listing(before[i]) << "after:\n"
                                << Listing(after);
  }
}

}  // namespace
