// Benchmark (not a test): how fast //data:preprocess_data tokenizes, in MB/s of text, in one
// run on one machine, side by side:
//  - GPT-2's byte-level BPE alone, one thread: data::Gpt2BpeTokenizer::Encode over the
//    documents' texts, against tiktoken's encode_ordinary and Hugging Face `tokenizers`'
//    encode_batch (on one thread) and encode, run by gpt2_bpe_speed.py as a subprocess;
//  - data::Preprocess with GPT-2's files, with 1 worker and with --workers, on the corpus and on
//    the corpus read --copies times over in one run (so that loading GPT-2's files, a fixed
//    cost of every run, weighs less), and Preprocess's reader thread alone (DocumentReader:
//    reading and parsing the input, no tokenizing), which bounds it;
//  - for reference, data::Preprocess with a SentencePiece model, with 1 worker and with
//    --workers, and Debian's `spm_encode --output_format=id` on the same documents.
//
//   bazel run -c opt //tests/data:preprocess_benchmark -- [--input=corpus.jsonl]
//       [--tokenizer-model=tok.model] [--gpt2-dir=DIR] [--workers=N] [--copies=10]
//       [--repeats=5]
//
// Without --input it reads the bundled corpus data/corpus/fortunes.jsonl; without --gpt2-dir,
// GPT-2's files from ./setup.sh's .deps/gpt2 (@gpt2_bpe); without --tokenizer-model it first
// trains an 8000-piece SentencePiece BPE model on the corpus. Python (--python, 3.11 for the
// pinned wheels) imports tiktoken and tokenizers from ./setup.sh's .deps/site-packages.
//
// Every figure is the median of --repeats runs. The tokenizers alone are timed over texts
// already in memory, each repeat with a fresh tokenizer, so no cache of merged words is warm.
// Preprocess is timed as a whole: reading the input, tokenizing, writing the .bin/.idx dataset
// (EOD after each document). spm_encode reads one document per line (newlines inside a
// document replaced by spaces, since it encodes line by line) with --extra_options=eos, and
// writes text ids; its time is the process's. MB/s is UTF-8 bytes of the documents' texts per
// second; Preprocess's rows also give MB/s of the input file (JSON, with its escapes). The
// table starts with the date, the machine and its load average, since the figures are only as
// good as the machine was quiet. `--help` lists the flags with their defaults; a bad flag exits
// 2, a failed run 1.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/document_reader.h"
#include "data/gpt2_bpe.h"
#include "data/preprocess.h"
#include "data/tokenizer_status.h"
#include "varuna/flags/flag_parser.h"

namespace {

// The command line, with its defaults.
struct Flags {
  std::string input;
  std::string tokenizer_model;
  std::string gpt2_dir;
  std::string python_path;
  std::string python = "python3";
  int workers = 0;
  int copies = 10;
  int repeats = 5;
};

// Registers the flags on `parser`; parsing writes them into `flags`, which must outlive it.
void Register(varuna::FlagParser& parser, Flags& flags) {
  parser.Add("input", &flags.input,
             "Corpus (.jsonl or text); default: the bundled fortunes.jsonl.");
  parser.Add("tokenizer-model", &flags.tokenizer_model, "SentencePiece model; default: train one.");
  parser.Add("gpt2-dir", &flags.gpt2_dir,
             "Folder of gpt2-vocab.json, gpt2-merges.txt, gpt2.tiktoken; default: @gpt2_bpe.");
  parser.Add("python-path", &flags.python_path,
             "Where tiktoken and tokenizers are installed; default: .deps/site-packages.");
  parser.Add("python", &flags.python, "Python 3.11 for tiktoken and tokenizers.");
  parser.Add("workers", &flags.workers,
             "Workers of the parallel runs; 0: one per hardware thread.");
  parser.Add("copies", &flags.copies,
             "Preprocess GPT-2 BPE also on the input this many times over; 1: only once.");
  parser.Add("repeats", &flags.repeats, "Runs per configuration; the median counts.");
  parser.SetMinimum("workers", 0);
  parser.SetMinimum("copies", 1);
  parser.SetMinimum("repeats", 1);
}

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU seconds of this process, all threads.
double ProcessCpuSeconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// CPU seconds of this process's waited-for children.
double ChildrenCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// One line of the table: a median over repeats.
struct Row {
  std::string name;
  int threads = 1;          // tokenizing threads
  double seconds = 0;       // median wall time
  int64_t tokens = 0;       // per run (EOD included where the tool appends it)
  int64_t text_bytes = 0;   // UTF-8 bytes of the texts tokenized per run
  int64_t input_bytes = 0;  // bytes of the input file read, 0 when timed over texts in memory
  double cpu_per_wall = 0;  // CPU seconds over wall seconds, summed over the repeats
};

// Runs `prepare` (untimed; returns absl::StatusOr<State>) and then `run` on its state (timed;
// returns absl::StatusOr<int64_t>, the tokens) `repeats` times: the median wall time, the
// tokens of the last run, and the CPU time (this process's and its waited-for children's) over
// the wall time.
template <typename Prepare, typename Run>
absl::StatusOr<Row> Measure(std::string name, int threads, int repeats, Prepare prepare, Run run) {
  Row row{std::move(name), threads};
  std::vector<double> walls;
  double wall_sum = 0, cpu_sum = 0;
  for (int r = 0; r < repeats; ++r) {
    auto state = prepare();
    if (!state.ok()) return state.status();
    const double cpu = ProcessCpuSeconds() + ChildrenCpuSeconds();
    const Clock::time_point start = Clock::now();
    absl::StatusOr<int64_t> tokens = run(*state);
    const double wall = Seconds(start);
    if (!tokens.ok()) return tokens.status();
    cpu_sum += ProcessCpuSeconds() + ChildrenCpuSeconds() - cpu;
    wall_sum += wall;
    walls.push_back(wall);
    row.tokens = *tokens;
  }
  row.seconds = Median(walls);
  row.cpu_per_wall = cpu_sum / wall_sum;
  return row;
}

// Measure with nothing to prepare: `run` takes no arguments.
template <typename Run>
absl::StatusOr<Row> Measure(std::string name, int threads, int repeats, Run run) {
  return Measure(
      std::move(name), threads, repeats, [] { return absl::StatusOr<bool>(true); },
      [&](bool) { return run(); });
}

// The CPU model, /proc/cpuinfo's first "model name", or "unknown".
std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double one = 0, five = 0, fifteen = 0;
  in >> one >> five >> fifteen;
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f %.2f %.2f", one, five, fifteen);
  return text;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M UTC", &tm);
  return text;
}

// Runs gpt2_bpe_speed.py and reads its rows; `versions` gets its versions line.
absl::StatusOr<std::vector<Row>> PythonRows(const std::string& command, std::string* versions) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError("cannot start: " + command);
  std::vector<Row> rows;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    std::string line(buffer);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    std::vector<std::string> fields;
    std::istringstream split(line);
    for (std::string field; std::getline(split, field, '\t');) fields.push_back(field);
    if (fields.size() == 3 && fields[0] == "versions") {
      *versions = fields[1] + ", " + fields[2];
    } else if (fields.size() == 6 && fields[0] == "row") {
      Row row{fields[1], 1};
      row.seconds = std::stod(fields[2]);
      row.tokens = std::stoll(fields[4]);
      row.cpu_per_wall = std::stod(fields[5]);
      rows.push_back(row);
    }
  }
  const int status = ::pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || rows.size() != 3) {
    return absl::InternalError(
        "the Python side failed (are tiktoken and tokenizers in .deps/site-packages? run "
        "./setup.sh; --python must be Python 3.11): " +
        command);
  }
  return rows;
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
          "Tokenizing speed of preprocess_data (GPT-2 BPE and SentencePiece) against tiktoken, "
          "Hugging Face tokenizers and spm_encode.\nExample: preprocess_benchmark --repeats=5",
          argc, argv)) {
    return *exit;
  }
  // Runfiles (the bundled corpus, GPT-2's files, the wheels, the Python script) are relative to
  // the runfiles tree; user paths to where `bazel run` started.
  char cwd[4096];
  const std::string workspace = ::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".";
  const std::string runfiles = workspace + "/..";
  std::string input = flags.input;
  std::string model = flags.tokenizer_model;
  std::string gpt2_dir = flags.gpt2_dir;
  std::string python_path = flags.python_path;
  const std::string script = workspace + "/tests/data/gpt2_bpe_speed.py";
  if (input.empty()) input = workspace + "/data/corpus/fortunes.jsonl";
  if (gpt2_dir.empty()) gpt2_dir = runfiles + "/gpt2_bpe";
  if (python_path.empty()) python_path = runfiles + "/libtorch";
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr) {
    if (::chdir(dir) != 0) return Fail(std::string("cannot chdir to ") + dir);
  }
  const int workers = flags.workers > 0
                          ? flags.workers
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int repeats = flags.repeats;
  const std::string load_at_start = LoadAverage();

  char dir_template[] = "/tmp/preprocess_benchmark.XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) return Fail("cannot create a temporary directory");
  const std::string dir = dir_template;

  // The documents' texts: in memory for the tokenizers alone, one per line for spm_encode, and
  // length-prefixed ("<bytes>\n<text>") for the Python side.
  std::vector<std::string> texts;
  int64_t text_bytes = 0;
  const std::string spm_input = dir + "/documents.txt";
  const std::string python_input = dir + "/texts.bin";
  {
    auto reader = data::DocumentReader::Open(input, "text");
    if (!reader.ok()) return Fail(std::string(reader.status().message()));
    std::ofstream spm_out(spm_input, std::ios::binary);
    std::ofstream python_out(python_input, std::ios::binary);
    std::string text;
    while (true) {
      absl::StatusOr<bool> more = (*reader)->Next(&text);
      if (!more.ok()) return Fail(std::string(more.status().message()));
      if (!*more) break;
      python_out << text.size() << '\n' << text;
      text_bytes += static_cast<int64_t>(text.size());
      texts.push_back(text);
      std::replace(text.begin(), text.end(), '\n', ' ');
      std::replace(text.begin(), text.end(), '\r', ' ');
      spm_out << text << '\n';
    }
  }

  std::vector<int> worker_counts = {1};
  if (workers > 1) worker_counts.push_back(workers);
  // Preprocess at 1 worker and at `workers`, reading `input` `copies` times over.
  auto preprocess_rows = [&](const std::string& label, const data::TokenizerSpec& spec, int copies,
                             std::vector<Row>* rows) -> absl::Status {
    for (int run_workers : worker_counts) {
      data::PreprocessOptions options;
      options.input_files.assign(copies, input);
      options.output_prefix = dir + "/out";
      options.tokenizer = spec;
      options.workers = run_workers;
      int64_t input_bytes = 0;
      absl::StatusOr<Row> row =
          Measure(label + (copies > 1 ? " x" + std::to_string(copies) : "") + ", " +
                      std::to_string(run_workers) + " worker" + (run_workers == 1 ? "" : "s"),
                  run_workers, repeats, [&]() -> absl::StatusOr<int64_t> {
                    absl::StatusOr<data::PreprocessStats> stats = data::Preprocess(options);
                    if (!stats.ok()) return stats.status();
                    input_bytes = stats->input_bytes;
                    return stats->tokens;
                  });
      if (!row.ok()) return row.status();
      row->input_bytes = input_bytes;
      row->text_bytes = text_bytes * copies;
      rows->push_back(*row);
    }
    return absl::OkStatus();
  };

  // GPT-2 BPE: ours alone, the Python tokenizers, then Preprocess.
  const data::TokenizerSpec gpt2{"", "", gpt2_dir + "/gpt2-vocab.json",
                                 gpt2_dir + "/gpt2-merges.txt"};
  std::vector<Row> gpt2_rows;
  {
    // A fresh tokenizer each repeat, so its cache of merged words starts empty; loading it is
    // not timed.
    absl::StatusOr<Row> row = Measure(
        "ours: Gpt2BpeTokenizer::Encode", 1, repeats,
        [&] { return data::Gpt2BpeTokenizer::Load(gpt2.vocab_file, gpt2.merge_file); },
        [&](const std::unique_ptr<data::Gpt2BpeTokenizer>& tokenizer) -> absl::StatusOr<int64_t> {
          int64_t tokens = 0;
          for (const std::string& text : texts) tokens += tokenizer->Encode(text).size();
          return tokens;
        });
    if (!row.ok()) return Fail(std::string(row.status().message()));
    row->text_bytes = text_bytes;
    gpt2_rows.push_back(*row);
  }
  // Loading GPT-2's files, which every Preprocess run does first.
  absl::StatusOr<Row> load = Measure("Gpt2BpeTokenizer::Load", 1, repeats, [&] {
    absl::StatusOr<std::unique_ptr<data::Gpt2BpeTokenizer>> tokenizer =
        data::Gpt2BpeTokenizer::Load(gpt2.vocab_file, gpt2.merge_file);
    return tokenizer.ok() ? absl::StatusOr<int64_t>(0) : tokenizer.status();
  });
  if (!load.ok()) return Fail(std::string(load.status().message()));
  std::string versions;
  {
    const std::string command = "PYTHONPATH='" + python_path +
                                "' PYTHONNOUSERSITE=1 RAYON_NUM_THREADS=1 "
                                "TOKENIZERS_PARALLELISM=false '" +
                                flags.python + "' -S '" + script + "' '" + gpt2_dir + "' '" +
                                python_input + "' " + std::to_string(repeats);
    absl::StatusOr<std::vector<Row>> rows = PythonRows(command, &versions);
    if (!rows.ok()) return Fail(std::string(rows.status().message()));
    for (Row& row : *rows) row.text_bytes = text_bytes;
    gpt2_rows.insert(gpt2_rows.end(), rows->begin(), rows->end());
  }
  // gpt2_rows: ours, tiktoken, tokenizers encode_batch, tokenizers encode, then DocumentReader
  // and Preprocess.
  const double tiktoken_rate = gpt2_rows[1].text_bytes / gpt2_rows[1].seconds;
  // Preprocess's reader thread alone, for what bounds Preprocess beside tokenizing.
  {
    absl::StatusOr<Row> row = Measure(
        "DocumentReader alone (no tokenizing)", 1, repeats, [&]() -> absl::StatusOr<int64_t> {
          absl::StatusOr<std::unique_ptr<data::DocumentReader>> reader =
              data::DocumentReader::Open(input, "text");
          if (!reader.ok()) return reader.status();
          std::string text;
          while (true) {
            absl::StatusOr<bool> more = (*reader)->Next(&text);
            if (!more.ok()) return more.status();
            if (!*more) return 0;
          }
        });
    if (!row.ok()) return Fail(std::string(row.status().message()));
    row->text_bytes = text_bytes;
    struct stat file {};
    if (::stat(input.c_str(), &file) == 0) row->input_bytes = file.st_size;
    gpt2_rows.push_back(*row);
  }
  std::vector<int> gpt2_copies = {1};
  if (flags.copies > 1) gpt2_copies.push_back(flags.copies);
  for (int copies : gpt2_copies) {
    if (absl::Status status = preprocess_rows("Preprocess GPT-2 BPE", gpt2, copies, &gpt2_rows);
        !status.ok()) {
      return Fail(std::string(status.message()));
    }
  }

  // SentencePiece, for reference.
  std::string spm_note;
  if (model.empty()) {
    data::TokenizerTrainOptions options;
    options.model_prefix = dir + "/tok";
    options.vocab_size = 8000;
    options.num_threads = workers;
    data::DocumentSentences sentences({input}, "text");
    const Clock::time_point start = Clock::now();
    const absl::Status trained = data::TrainTokenizer(options, &sentences);
    if (!trained.ok()) return Fail(std::string(trained.message()));
    model = options.model_prefix + ".model";
    char text[128];
    std::snprintf(text, sizeof(text), "an 8000-piece BPE model trained on the corpus in %.1f s",
                  Seconds(start));
    spm_note = text;
  } else {
    spm_note = model;
  }
  std::vector<Row> spm_rows;
  data::TokenizerSpec spm;
  spm.model_file = model;
  if (absl::Status status = preprocess_rows("Preprocess SentencePiece", spm, 1, &spm_rows);
      !status.ok()) {
    return Fail(std::string(status.message()));
  }
  {
    const std::string spm_output = dir + "/ids.txt";
    const std::string command = "spm_encode --model=" + model +
                                " --output_format=id --extra_options=eos --input=" + spm_input +
                                " --output=" + spm_output;
    absl::StatusOr<Row> row =
        Measure("spm_encode (1 process)", 1, repeats, [&]() -> absl::StatusOr<int64_t> {
          const int status = std::system(command.c_str());
          if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            return absl::InternalError(
                "spm_encode failed (is Debian's sentencepiece package installed?): " + command);
          }
          int64_t tokens = 0;
          std::ifstream ids(spm_output);
          for (std::string id; ids >> id;) ++tokens;
          return tokens;
        });
    if (!row.ok()) return Fail(std::string(row.status().message()));
    row->text_bytes = text_bytes;
    spm_rows.push_back(*row);
  }

  // The table.
  std::printf("preprocess_benchmark, %s\n", UtcNow().c_str());
  std::printf("machine: nproc %ld, %s; load average %s at the start, %s at the end\n",
              ::sysconf(_SC_NPROCESSORS_ONLN), CpuModel().c_str(), load_at_start.c_str(),
              LoadAverage().c_str());
  std::printf("corpus: %s, %zu documents, %.2f MB of text\n",
              flags.input.empty() ? "data/corpus/fortunes.jsonl" : input.c_str(), texts.size(),
              text_bytes / 1e6);
  std::printf("GPT-2 BPE: %s; %s\n", flags.gpt2_dir.empty() ? "@gpt2_bpe" : gpt2_dir.c_str(),
              versions.c_str());
  std::printf("SentencePiece: %s\n", spm_note.c_str());
  std::printf("median of %d runs; MB/s: MB of text (UTF-8) per second\n\n", repeats);
  std::printf("%-42s %7s %8s %9s %7s %10s %8s %11s\n", "", "threads", "seconds", "tokens", "MB/s",
              "input MB/s", "CPU/wall", "vs tiktoken");
  auto print = [&](const std::vector<Row>& rows) {
    for (const Row& row : rows) {
      const double rate = row.text_bytes / row.seconds;
      char input_rate[32] = "-";
      char tokens[32] = "-";
      if (row.tokens > 0)
        std::snprintf(tokens, sizeof(tokens), "%lld", static_cast<long long>(row.tokens));
      if (row.input_bytes > 0) {
        std::snprintf(input_rate, sizeof(input_rate), "%.2f", row.input_bytes / 1e6 / row.seconds);
      }
      std::printf("  %-40s %7d %8.3f %9s %7.2f %10s %8.2f %10.2fx\n", row.name.c_str(), row.threads,
                  row.seconds, tokens, rate / 1e6, input_rate, row.cpu_per_wall,
                  rate / tiktoken_rate);
    }
  };
  std::printf("GPT-2 BPE, tokenizer alone (texts in memory, cold cache)\n");
  print({gpt2_rows.begin(), gpt2_rows.begin() + 4});
  std::printf("GPT-2 BPE, preprocess_data (read, tokenize, write; EOD after each document)\n");
  print({gpt2_rows.begin() + 4, gpt2_rows.end()});
  std::printf("SentencePiece, for reference\n");
  print(spm_rows);
  std::printf("\nours / tiktoken, one thread, tokenizer alone: %.2fx\n",
              gpt2_rows[1].seconds / gpt2_rows[0].seconds);
  std::printf("Gpt2BpeTokenizer::Load (in every Preprocess GPT-2 run): %.3f s\n", load->seconds);
  if (workers > 1) {
    // Preprocess's rows come in pairs, "<label>, 1 worker" then "<label>, <workers> workers".
    auto speed_up = [&](const Row& one, const Row& many) {
      std::printf("%s, %d workers over 1: %.2fx\n",
                  one.name.substr(0, one.name.rfind(", ")).c_str(), workers,
                  one.seconds / many.seconds);
    };
    for (size_t i = 5; i + 1 < gpt2_rows.size(); i += 2) speed_up(gpt2_rows[i], gpt2_rows[i + 1]);
    speed_up(spm_rows[0], spm_rows[1]);
  }
  std::printf(
      "note: spm_encode encodes each document as one line (newlines replaced by spaces), so "
      "its token count differs slightly.\n");
  std::string cleanup = "rm -rf " + dir;
  if (std::system(cleanup.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
  return 0;
}
