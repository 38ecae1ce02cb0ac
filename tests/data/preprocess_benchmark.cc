// Benchmark (not a test): tokenizing throughput of Preprocess (//data:preprocess_data) with
// N workers and with 1 worker, against Debian's `spm_encode --output_format=id` on the same
// documents, in one run on one machine.
//
//   bazel run -c opt //tests/data:preprocess_benchmark -- [--input=corpus.jsonl]
//       [--tokenizer-model=tok.model] [--workers=N] [--repeats=3]
//
// Without --input it reads the bundled corpus data/corpus/fortunes.jsonl. Without
// --tokenizer-model it first trains an 8000-piece BPE model on the corpus. spm_encode reads
// one document per line (newlines inside a document replaced by spaces, since it encodes
// line by line) and appends the EOD (--extra_options=eos), so both sides produce one EOD per
// document. Each timing is the best of --repeats runs and includes reading the input and
// writing the output (a .bin/.idx dataset for Preprocess, text ids for spm_encode). `--help`
// lists the flags with their defaults; a bad flag exits 2.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/document_reader.h"
#include "data/preprocess.h"
#include "data/tokenizer_status.h"
#include "varuna/flags/flag_parser.h"

namespace {

// The command line, with its defaults.
struct Flags {
  std::string input;
  std::string tokenizer_model;
  int workers = 0;
  int repeats = 3;
};

// Registers the flags on `parser`; parsing writes them into `flags`, which must outlive it.
void Register(varuna::FlagParser& parser, Flags& flags) {
  parser.Add("input", &flags.input,
             "Corpus (.jsonl or text); default: the bundled fortunes.jsonl.");
  parser.Add("tokenizer-model", &flags.tokenizer_model, "SentencePiece model; default: train one.");
  parser.Add("workers", &flags.workers, "Workers of the parallel run; 0: one per hardware thread.");
  parser.Add("repeats", &flags.repeats, "Runs per configuration; the best time counts.");
  parser.SetMinimum("workers", 0);
  parser.SetMinimum("repeats", 1);
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "preprocess_benchmark: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  varuna::FlagParser parser;
  Register(parser, flags);
  if (std::optional<int> exit = parser.ParseMain(
          "preprocess_benchmark",
          "Tokenizing throughput of Preprocess against spm_encode.\nExample: preprocess_benchmark "
          "--repeats=5",
          argc, argv)) {
    return *exit;
  }
  // The bundled corpus is a runfile; user paths are relative to where `bazel run` started.
  std::string input = flags.input;
  std::string model = flags.tokenizer_model;
  char cwd[4096];
  const std::string runfiles = ::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".";
  if (input.empty()) input = runfiles + "/data/corpus/fortunes.jsonl";
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr) {
    if (::chdir(dir) != 0) return Fail(std::string("cannot chdir to ") + dir);
  }
  const int workers = flags.workers > 0
                          ? flags.workers
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int repeats = flags.repeats;

  char dir_template[] = "/tmp/preprocess_benchmark.XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) return Fail("cannot create a temporary directory");
  const std::string dir = dir_template;
  std::printf("corpus: %s\n", input.c_str());

  if (model.empty()) {
    data::TokenizerTrainOptions options;
    options.model_prefix = dir + "/tok";
    options.vocab_size = 8000;
    options.num_threads = workers;
    data::DocumentSentences sentences({input}, "text");
    const auto start = std::chrono::steady_clock::now();
    const absl::Status trained = data::TrainTokenizer(options, &sentences);
    if (!trained.ok()) return Fail(std::string(trained.message()));
    model = options.model_prefix + ".model";
    std::printf("tokenizer: trained an 8000-piece BPE model in %.2f s (%d threads)\n",
                Seconds(start), workers);
  }
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer = data::LoadTokenizer(model);
  if (!tokenizer.ok()) return Fail(std::string(tokenizer.status().message()));
  std::printf("tokenizer: %s (%d pieces)\n", model.c_str(), (*tokenizer)->vocab_size());

  // The same documents for spm_encode, one per line.
  const std::string spm_input = dir + "/documents.txt";
  int64_t documents = 0;
  {
    auto reader = data::DocumentReader::Open(input, "text");
    if (!reader.ok()) return Fail(std::string(reader.status().message()));
    std::ofstream out(spm_input);
    std::string text;
    while (true) {
      absl::StatusOr<bool> more = (*reader)->Next(&text);
      if (!more.ok()) return Fail(std::string(more.status().message()));
      if (!*more) break;
      std::replace(text.begin(), text.end(), '\n', ' ');
      std::replace(text.begin(), text.end(), '\r', ' ');
      out << text << '\n';
      ++documents;
    }
  }

  struct Row {
    std::string name;
    double seconds;
    int64_t tokens;
  };
  std::vector<Row> rows;
  int64_t input_bytes = 0;
  for (int run_workers : {workers, 1}) {
    data::PreprocessOptions options;
    options.input_files = {input};
    options.output_prefix = dir + "/out" + std::to_string(run_workers);
    options.tokenizer.model_file = model;
    options.workers = run_workers;
    double best = 1e30;
    int64_t tokens = 0;
    for (int r = 0; r < repeats; ++r) {
      absl::StatusOr<data::PreprocessStats> stats = data::Preprocess(options);
      if (!stats.ok()) return Fail(std::string(stats.status().message()));
      best = std::min(best, stats->seconds);
      tokens = stats->tokens;
      input_bytes = stats->input_bytes;
    }
    rows.push_back(
        {"Preprocess, " + std::to_string(run_workers) + " worker" + (run_workers == 1 ? "" : "s"),
         best, tokens});
  }
  {
    const std::string spm_output = dir + "/ids.txt";
    const std::string command = "spm_encode --model=" + model +
                                " --output_format=id --extra_options=eos --input=" + spm_input +
                                " --output=" + spm_output;
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      const int status = std::system(command.c_str());
      const double seconds = Seconds(start);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return Fail("spm_encode failed (is Debian's sentencepiece package installed?): " + command);
      }
      best = std::min(best, seconds);
    }
    int64_t tokens = 0;
    std::ifstream ids(spm_output);
    std::string id;
    while (ids >> id) ++tokens;
    rows.push_back({"spm_encode (1 process)", best, tokens});
  }

  std::printf("documents: %lld, input: %.2f MB, best of %d runs, %u hardware threads\n",
              static_cast<long long>(documents), input_bytes / 1e6, repeats,
              std::thread::hardware_concurrency());
  std::printf("%-26s %10s %12s %14s %10s\n", "", "seconds", "tokens", "tokens/s", "vs spm");
  const double spm_rate = rows.back().tokens / rows.back().seconds;
  for (const Row& row : rows) {
    const double rate = row.tokens / row.seconds;
    std::printf("%-26s %10.3f %12lld %14.0f %9.2fx\n", row.name.c_str(), row.seconds,
                static_cast<long long>(row.tokens), rate, rate / spm_rate);
  }
  std::printf(
      "note: spm_encode encodes each document as one line (newlines replaced by spaces), so "
      "its token count differs slightly.\n");
  std::string cleanup = "rm -rf " + dir;
  if (std::system(cleanup.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
  return 0;
}
