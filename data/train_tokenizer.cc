// train_tokenizer: trains the SentencePiece model that //data:preprocess_data and the
// trainer use.
//
//   bazel run //data:train_tokenizer -- --input=data/corpus/fortunes.jsonl
//       --model-prefix=/tmp/tok --vocab-size=8000
//
// writes /tmp/tok.model and /tmp/tok.vocab. Each line of each document is one training
// sentence. Flags (varuna::FlagParser) take dashes or underscores, `--flag=value` or
// `--flag value`; `--help` lists them with their defaults. Relative paths are resolved against
// the directory `bazel run` was started from. Exit status: 0 on success and after --help, 1 when
// training fails, 2 on a bad command line.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "data/document_reader.h"
#include "data/tokenizer_status.h"
#include "varuna/flags/flag_parser.h"

namespace {

constexpr char kUsage[] =
    "Trains a SentencePiece tokenizer.\nExample: train_tokenizer --input=corpus.jsonl "
    "--model-prefix=tok --vocab-size=8000";

// The smallest --vocab-size that can train: with the default byte fallback a model holds the 4
// special pieces, the 256 byte pieces and a piece per distinct character of the input, which
// for the smallest input (one character) is 2: the character and the word start "▁".
constexpr int kMinVocabSize = 262;

// The flags that are not fields of data::TokenizerTrainOptions, with their defaults.
struct ToolFlags {
  std::string input;  // comma-separated
  int threads = 0;    // 0: one per hardware thread
  std::string json_keys = "text";
};

// Registers the flags on `parser`: into `tool`, or into `options`, whose values are the
// defaults. Both must outlive the parser.
void Register(varuna::FlagParser& parser, ToolFlags& tool, data::TokenizerTrainOptions& options) {
  parser.Add("input", &tool.input,
             "Comma-separated training files: *.jsonl/*.json (text in the --json-keys field of "
             "each line) or plain text.");
  parser.Add("model-prefix", &options.model_prefix,
             "Writes <model-prefix>.model and <model-prefix>.vocab.");
  parser.Add("vocab-size", &options.vocab_size,
             "Pieces in the model, including 4 special and 256 byte pieces (at least " +
                 std::to_string(kMinVocabSize) + ").",
             "8000");
  parser.SetMinimum("vocab-size", kMinVocabSize);
  parser.Add("model-type", &options.model_type, "bpe or unigram.");
  parser.Add("threads", &tool.threads, "Training threads; 0 means one per hardware thread.", "4");
  parser.Add("json-keys", &tool.json_keys, "The JSON field that holds each document's text.");
  parser.Add("input-sentence-size", &options.input_sentence_size,
             "Train on at most this many lines, sampled from the input (0: all).", "300000");
  parser.Add("verbose", &options.verbose, "Print SentencePiece's training log.");
  parser.SetMinimum("threads", 0);
  parser.SetMinimum("input-sentence-size", 0);
}

}  // namespace

int main(int argc, char** argv) {
  ToolFlags flags;
  data::TokenizerTrainOptions options;
  varuna::FlagParser parser;
  Register(parser, flags, options);
  std::vector<std::string> positional;
  if (std::optional<int> exit =
          parser.ParseMain("train_tokenizer", kUsage, argc, argv, &positional)) {
    return *exit;
  }
  if (!positional.empty()) {
    std::fprintf(stderr,
                 "train_tokenizer: error: unexpected argument '%s': all inputs go in --input, "
                 "comma-separated (e.g. --input=%s)\n",
                 positional[0].c_str(), positional[0].c_str());
    return 2;
  }
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr) {
    if (::chdir(dir) != 0) std::perror(dir);
  }

  options.input_files = absl::StrSplit(flags.input, ',', absl::SkipEmpty());
  options.num_threads = flags.threads > 0
                            ? flags.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options.input_files.empty()) {
    std::fprintf(stderr,
                 "train_tokenizer: error: no input files (--input is empty): give text or .jsonl "
                 "files, comma-separated, e.g. --input=corpus.jsonl\n");
    return 1;
  }
  if (options.model_prefix.empty()) {
    std::fprintf(stderr,
                 "train_tokenizer: error: --model-prefix is required: e.g. --model-prefix=tok "
                 "writes tok.model and tok.vocab\n");
    return 1;
  }

  const auto start = std::chrono::steady_clock::now();
  data::DocumentSentences sentences(options.input_files, flags.json_keys);
  const absl::Status trained = data::TrainTokenizer(options, &sentences);
  if (!trained.ok()) {
    std::fprintf(stderr, "train_tokenizer: error: %s\n", std::string(trained.message()).c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer =
      data::LoadTokenizer(options.model_prefix + ".model");
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "train_tokenizer: error: %s\n",
                 std::string(tokenizer.status().message()).c_str());
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "Trained a %s tokenizer with %d pieces (EOD id %d) on %lld lines of %lld documents "
      "(at most %lld lines sampled) in %.1f s with %d threads.\nWrote %s.model and %s.vocab\n",
      options.model_type.c_str(), (*tokenizer)->vocab_size(), (*tokenizer)->eod_id(),
      static_cast<long long>(sentences.sentences()), static_cast<long long>(sentences.documents()),
      static_cast<long long>(options.input_sentence_size), seconds, options.num_threads,
      options.model_prefix.c_str(), options.model_prefix.c_str());
  return 0;
}
