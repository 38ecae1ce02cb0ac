// train_tokenizer: trains the SentencePiece model that //data:preprocess_data and the
// trainer use.
//
//   bazel run //data:train_tokenizer -- --input=data/corpus/fortunes.jsonl
//       --model-prefix=/tmp/tok --vocab-size=8000
//
// writes /tmp/tok.model and /tmp/tok.vocab. Each line of each document is one training
// sentence. Flags take dashes or underscores; relative paths are resolved against the
// directory `bazel run` was started from.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "data/dashed_flags.h"
#include "data/document_reader.h"
#include "data/tokenizer_status.h"

ABSL_FLAG(std::string, input, "",
          "Comma-separated training files: *.jsonl/*.json (text in the --json-keys field of "
          "each line) or plain text.");
ABSL_FLAG(std::string, model_prefix, "", "Writes <model-prefix>.model and <model-prefix>.vocab.");
ABSL_FLAG(int, vocab_size, 8000, "Pieces in the model, including 4 special and 256 byte pieces.");
ABSL_FLAG(std::string, model_type, "bpe", "bpe or unigram.");
ABSL_FLAG(int, threads, 0, "Training threads; 0 means one per hardware thread.");
ABSL_FLAG(std::string, json_keys, "text", "The JSON field that holds each document's text.");
ABSL_FLAG(int64_t, input_sentence_size, 300000,
          "Train on at most this many lines, sampled from the input (0: all).");
ABSL_FLAG(bool, verbose, false, "Print SentencePiece's training log.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains a SentencePiece tokenizer.\nExample: train_tokenizer --input=corpus.jsonl "
      "--model-prefix=tok --vocab-size=8000");
  std::vector<std::string> storage;
  std::vector<char*> args = data::UnderscoreFlagNames(argc, argv, &storage);
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()) - 1, args.data());
  if (positional.size() > 1) {
    std::fprintf(stderr, "train_tokenizer: unexpected argument '%s'; all inputs go in --input\n",
                 positional[1]);
    return 2;
  }
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr) {
    if (::chdir(dir) != 0) std::perror(dir);
  }

  data::TokenizerTrainOptions options;
  options.input_files = absl::StrSplit(absl::GetFlag(FLAGS_input), ',', absl::SkipEmpty());
  options.model_prefix = absl::GetFlag(FLAGS_model_prefix);
  options.vocab_size = absl::GetFlag(FLAGS_vocab_size);
  options.model_type = absl::GetFlag(FLAGS_model_type);
  options.num_threads = absl::GetFlag(FLAGS_threads) > 0
                            ? absl::GetFlag(FLAGS_threads)
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.input_sentence_size = absl::GetFlag(FLAGS_input_sentence_size);
  options.verbose = absl::GetFlag(FLAGS_verbose);
  if (options.input_files.empty()) {
    std::fprintf(stderr, "train_tokenizer: error: no input files (--input is empty)\n");
    return 1;
  }
  if (options.model_prefix.empty()) {
    std::fprintf(stderr, "train_tokenizer: error: --model-prefix is required\n");
    return 1;
  }

  const auto start = std::chrono::steady_clock::now();
  data::DocumentSentences sentences(options.input_files, absl::GetFlag(FLAGS_json_keys));
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
