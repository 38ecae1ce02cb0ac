// preprocess_data: tokenizes text into a Megatron indexed dataset, like Megatron's
// tools/preprocess_data.py.
//
//   bazel run //data:preprocess_data -- --input=data/corpus/fortunes.jsonl
//       --output-prefix=/tmp/fortunes --tokenizer-model=/tmp/tok.model
//
// writes /tmp/fortunes_text_document.bin and .idx; with GPT-2's tokenizer, as Megatron's recipes:
//   ... --tokenizer-type=GPT2BPETokenizer --vocab-file=gpt2-vocab.json --merge-file=gpt2-merges.txt
//   Flags (varuna::FlagParser) take dashes or
// underscores, `--flag=value` or `--flag value`; `--help` lists them with their defaults.
// Relative paths are resolved against the directory `bazel run` was started from. Exit status:
// 0 on success (the dataset prefix printed) and after --help, 1 when preprocessing fails,
// 2 on a bad command line.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "data/preprocess.h"
#include "data/tokenizer_status.h"
#include "varuna/flags/flag_parser.h"

namespace {

constexpr char kUsage[] =
    "Tokenizes text into a Megatron indexed dataset (.bin/.idx).\nExample: preprocess_data "
    "--input=corpus.jsonl --output-prefix=out/corpus --tokenizer-model=tok.model\n"
    "     or: preprocess_data --input=corpus.jsonl --output-prefix=out/corpus "
    "--tokenizer-type=GPT2BPETokenizer --vocab-file=gpt2-vocab.json --merge-file=gpt2-merges.txt";

// Registers the flags on `parser`: --input into `input` (comma-separated), the others into
// `options`, whose values are the defaults. Both must outlive the parser.
void Register(varuna::FlagParser& parser, std::string& input, data::PreprocessOptions& options) {
  parser.Add("input", &input,
             "Comma-separated input files: *.jsonl/*.json hold one JSON object per line with the "
             "text in the --json-keys field; other files are plain text, documents separated by "
             "blank lines.");
  parser.Add("output-prefix", &options.output_prefix,
             "Writes <output-prefix>_<json-keys>_document.bin and .idx.");
  parser.Add("tokenizer-type", &options.tokenizer.type,
             "SentencePieceTokenizer or GPT2BPETokenizer; empty: the kind of the files given.");
  parser.Add("tokenizer-model", &options.tokenizer.model_file,
             "SentencePiece model file (make one with //data:train_tokenizer).");
  parser.Add("vocab-file", &options.tokenizer.vocab_file,
             "GPT-2 BPE: vocab.json (./setup.sh puts GPT-2's in .deps/gpt2/gpt2-vocab.json).");
  parser.Add("merge-file", &options.tokenizer.merge_file,
             "GPT-2 BPE: merges.txt (./setup.sh puts GPT-2's in .deps/gpt2/gpt2-merges.txt).");
  parser.Add("json-keys", &options.json_key, "The JSON field that holds each document's text.");
  parser.Add("append-eod", &options.append_eod,
             "Append the tokenizer's end-of-document id after every document "
             "(--no-append-eod to turn off).");
  parser.Add("workers", &options.workers, "Tokenizing threads; 0 means one per hardware thread.",
             "4");
  parser.Add("log-interval", &options.log_interval,
             "Print progress (documents, MB/s, share of the input done, time left) every this "
             "many documents (0: not by count).",
             "10000");
  parser.Add("log-seconds", &options.log_seconds,
             "Print progress also when this many seconds have passed since the last line "
             "(0: only every --log-interval documents).",
             "10");
  // data::Preprocess checks these too, for its other callers; here a bad value is a bad command
  // line (exit status 2).
  parser.SetMinimum("workers", 0);
  parser.SetMinimum("log-interval", 0);
  parser.SetMinimum("log-seconds", 0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string input;
  data::PreprocessOptions options;
  varuna::FlagParser parser;
  Register(parser, input, options);
  std::vector<std::string> positional;
  if (std::optional<int> exit =
          parser.ParseMain("preprocess_data", kUsage, argc, argv, &positional)) {
    return *exit;
  }
  if (!positional.empty()) {
    std::fprintf(stderr,
                 "preprocess_data: error: unexpected argument '%s': all inputs go in --input, "
                 "comma-separated (e.g. --input=%s)\n",
                 positional[0].c_str(), positional[0].c_str());
    return 2;
  }
  // Which tokenizer the flags name is a question of the command line (exit 2); whether its
  // files are good, of the files (exit 1).
  absl::StatusOr<std::optional<data::TokenizerKind>> kind =
      data::TokenizerKindOf(options.tokenizer);
  if (!kind.ok() || !kind->has_value()) {
    std::fprintf(stderr, "preprocess_data: error: %s\n",
                 kind.ok() ? "no tokenizer given: pass --tokenizer-model=FILE (SentencePiece), or "
                             "--vocab-file=gpt2-vocab.json --merge-file=gpt2-merges.txt (GPT-2 BPE)"
                           : std::string(kind.status().message()).c_str());
    return 2;
  }
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr) {
    if (::chdir(dir) != 0) std::perror(dir);
  }

  options.input_files = absl::StrSplit(input, ',', absl::SkipEmpty());
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
