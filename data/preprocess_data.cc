// preprocess_data: tokenizes text into a Megatron indexed dataset, like Megatron's
// tools/preprocess_data.py.
//
//   bazel run //data:preprocess_data -- --input=data/corpus/fortunes.jsonl
//       --output-prefix=/tmp/fortunes --tokenizer-model=/tmp/tok.model
//
// writes /tmp/fortunes_text_document.bin and .idx. Flags take dashes or underscores.
// Relative paths are resolved against the directory `bazel run` was started from.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "data/dashed_flags.h"
#include "data/preprocess.h"

ABSL_FLAG(std::string, input, "",
          "Comma-separated input files: *.jsonl/*.json hold one JSON object per line with the "
          "text in the --json-keys field; other files are plain text, documents separated by "
          "blank lines.");
ABSL_FLAG(std::string, output_prefix, "",
          "Writes <output-prefix>_<json-keys>_document.bin and .idx.");
ABSL_FLAG(std::string, tokenizer_model, "",
          "SentencePiece model file (make one with //data:train_tokenizer).");
ABSL_FLAG(std::string, json_keys, "text", "The JSON field that holds each document's text.");
ABSL_FLAG(bool, append_eod, true,
          "Append the tokenizer's end-of-document id after every document "
          "(--append-eod=false to turn off).");
ABSL_FLAG(int, workers, 0, "Tokenizing threads; 0 means one per hardware thread.");
ABSL_FLAG(int64_t, log_interval, 10000, "Print progress every this many documents.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Tokenizes text into a Megatron indexed dataset (.bin/.idx).\nExample: preprocess_data "
      "--input=corpus.jsonl --output-prefix=out/corpus --tokenizer-model=tok.model");
  std::vector<std::string> storage;
  std::vector<char*> args = data::UnderscoreFlagNames(argc, argv, &storage);
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()) - 1, args.data());
  if (positional.size() > 1) {
    std::fprintf(stderr, "preprocess_data: unexpected argument '%s'; all inputs go in --input\n",
                 positional[1]);
    return 2;
  }
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr) {
    if (::chdir(dir) != 0) std::perror(dir);
  }

  data::PreprocessOptions options;
  options.input_files = absl::StrSplit(absl::GetFlag(FLAGS_input), ',', absl::SkipEmpty());
  options.output_prefix = absl::GetFlag(FLAGS_output_prefix);
  options.tokenizer_model = absl::GetFlag(FLAGS_tokenizer_model);
  options.json_key = absl::GetFlag(FLAGS_json_keys);
  options.append_eod = absl::GetFlag(FLAGS_append_eod);
  options.workers = absl::GetFlag(FLAGS_workers);
  options.log_interval = absl::GetFlag(FLAGS_log_interval);
  options.log = &std::cerr;
  absl::StatusOr<data::PreprocessStats> stats = data::Preprocess(options);
  if (!stats.ok()) {
    std::fprintf(stderr, "preprocess_data: error: %s\n",
                 std::string(stats.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", stats->dataset_prefix.c_str());
  return 0;
}
