// Pipeline benchmark (manual; not a test): step time and activation memory of the three pipeline
// schedules (varuna, gpipe, 1f1b), one process of one thread per stage, on the CPU.
//
//   bazel run -c opt //tests/varuna:pipeline_benchmark [-- --steps=8 --schedules=varuna,gpipe]
//
// For each schedule it trains a GPT-2 (fp32, dropout on, Adam) on the same synthetic global
// batches once in one process (P=1) and once split into --stages processes (P=2 by default, one
// replica), re-executing this binary as the workers (tests/util/subprocess.h) with
// OMP_NUM_THREADS=1, and prints a step-time table and a memory table:
//   * step time: the mean over --steps timed steps (after --warmup steps) of the slowest rank's
//     wall time of Varuna::step, for P=1 and P=2; the measured speed-up; the ideal
//     P*m/(m+P-1) for m micro-batches, and the same for stages of unequal model FLOPs (the last
//     one holds the LM head); SimulateSchedule's speed-up (P * makespan(P=1) / makespan(P),
//     recompute included) and bubble fraction (F=1, B=2, R=1 per stage);
//   * memory per stage: the peak resident memory (VmHWM) of the worker minus its resident memory
//     right after building the model and optimizer (so it also counts gradients and the code
//     pages the first step touches), and the peak within a measured step minus the resident
//     memory before it (activations, stashed inputs and transient gradients only), next to
//     SimulateSchedule's peak graphs and live micro-batches per stage.
// Peaks come from /proc/self/status after resetting VmHWM through /proc/self/clear_refs, not
// from getrusage's ru_maxrss, which survives exec and so starts at the parent's peak. Memory is
// measured in separate runs (1 warm-up + 1 measured step) whose workers fix glibc's mmap
// threshold (--mmap_threshold bytes, default 64 KiB; 0 keeps glibc's adaptive default), so a
// freed tensor leaves the resident set at once and the numbers follow live memory rather than
// the allocator's retained heap. That costs page faults (about 45% slower steps here), so the
// timing runs keep the default allocator.
//
// On a machine with C cores, compare P=1 against P <= C: every process has one thread.
// `--help` lists the flags with their defaults; a bad flag or value exits 2.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "models/gpt2/config.h"
#include "models/gpt2/flops.h"
#include "models/gpt2/model.h"
#include "tests/util/subprocess.h"
#include "tests/varuna/local_job.h"
#include "varuna/comm/world.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/launch/host.h"
#include "varuna/pipeline/schedule.h"
#include "varuna/varuna.h"

namespace varuna {
namespace {

namespace fs = std::filesystem;

// The benchmark's command line, with its defaults.
struct BenchFlags {
  int num_layers = 8;
  int hidden_size = 256;
  int num_attention_heads = 4;
  int seq_length = 128;
  int vocab_size = 4096;
  double dropout = 0.1;
  int chunk_size = 2;
  int micro_batches = 8;
  int warmup = 2;
  int steps = 8;
  int stages = 2;
  std::string schedules = "varuna,gpipe,1f1b";
  int64_t mmap_threshold = 65536;
};

// Registers the flags on `parser`; parsing writes them into `f`, which must outlive it.
void Register(FlagParser& parser, BenchFlags& f) {
  parser.Add("num_layers", &f.num_layers, "GPT-2 layers", "8");
  parser.Add("hidden_size", &f.hidden_size, "hidden size", "256");
  parser.Add("num_attention_heads", &f.num_attention_heads, "attention heads", "4");
  parser.Add("seq_length", &f.seq_length, "tokens per sequence", "128");
  parser.Add("vocab_size", &f.vocab_size, "vocabulary (not padded)", "4096");
  parser.Add("dropout", &f.dropout, "hidden and attention dropout, in [0, 1)", "0.1");
  parser.Add("chunk_size", &f.chunk_size, "sequences per micro-batch", "2");
  parser.Add("micro_batches", &f.micro_batches, "micro-batches per global batch", "8");
  parser.Add("warmup", &f.warmup, "untimed steps before the timed ones", "2");
  parser.Add("steps", &f.steps, "timed steps", "8");
  parser.Add("stages", &f.stages, "pipeline stages (processes) of the P>1 runs", "2");
  parser.Add("schedules", &f.schedules, "comma-separated: varuna, gpipe, 1f1b");
  parser.Add("mmap_threshold", &f.mmap_threshold,
             "glibc's mmap threshold in the memory runs, bytes (0: glibc's adaptive default)",
             "65536");
  for (const char* name : {"num_layers", "hidden_size", "num_attention_heads", "seq_length",
                           "vocab_size", "chunk_size", "micro_batches", "steps", "stages"}) {
    parser.SetMinimum(name, 1);
  }
  parser.SetMinimum("warmup", 0);
  parser.SetMinimum("mmap_threshold", 0);
  parser.SetMinimum("dropout", 0);
  parser.SetMaximum("dropout", 1, FlagParser::Bound::kExclusive);
}

// The flags as --name=value arguments, for the workers (which parse them with Register).
std::vector<std::string> FlagArgs(const BenchFlags& f) {
  char dropout[32];
  const std::to_chars_result written =
      std::to_chars(dropout, dropout + sizeof(dropout), f.dropout);  // shortest exact form
  return {absl::StrCat("--num_layers=", f.num_layers),
          absl::StrCat("--hidden_size=", f.hidden_size),
          absl::StrCat("--num_attention_heads=", f.num_attention_heads),
          absl::StrCat("--seq_length=", f.seq_length),
          absl::StrCat("--vocab_size=", f.vocab_size),
          absl::StrCat("--dropout=", std::string(dropout, written.ptr)),
          absl::StrCat("--chunk_size=", f.chunk_size),
          absl::StrCat("--micro_batches=", f.micro_batches),
          absl::StrCat("--warmup=", f.warmup),
          absl::StrCat("--steps=", f.steps),
          absl::StrCat("--stages=", f.stages),
          absl::StrCat("--schedules=", f.schedules),
          absl::StrCat("--mmap_threshold=", f.mmap_threshold)};
}

struct BenchConfig {
  gpt2::Gpt2Config model;
  int chunk_size = 0;
  int micro_batches = 0;
  int warmup = 0;
  int steps = 0;
  int stages = 0;
  std::vector<ScheduleKind> schedules;
  int64_t mmap_threshold = 0;
  BenchFlags flags;  // what it was made from
  int global_batch() const { return chunk_size * micro_batches; }
};

// Checks the flags' ranges and combinations and builds the configuration; InvalidArgument
// naming the flag.
absl::StatusOr<BenchConfig> MakeConfig(const BenchFlags& f) {
  BenchConfig config;
  config.flags = f;
  gpt2::Gpt2Config& model = config.model;
  model.num_layers = f.num_layers;
  model.hidden_size = f.hidden_size;
  model.num_attention_heads = f.num_attention_heads;
  model.seq_length = f.seq_length;
  model.max_position_embeddings = model.seq_length;
  model.vocab_size = f.vocab_size;
  model.make_vocab_size_divisible_by = 1;
  model.hidden_dropout = f.dropout;
  model.attention_dropout = f.dropout;
  if (absl::Status status = model.Validate(); !status.ok()) return status;
  config.chunk_size = f.chunk_size;
  config.micro_batches = f.micro_batches;
  config.warmup = f.warmup;
  config.steps = f.steps;
  config.stages = f.stages;
  config.mmap_threshold = f.mmap_threshold;
  if (config.stages > model.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stages=", config.stages, " exceeds --num_layers=", model.num_layers,
                     ": every stage needs at least one layer; lower --stages"));
  }
  const std::vector<std::string> schedules = absl::StrSplit(f.schedules, ',');
  for (const std::string& name : schedules) {
    absl::StatusOr<ScheduleKind> kind = ParseScheduleKind(name);
    if (!kind.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--schedules: ", kind.status().message()));
    }
    config.schedules.push_back(*kind);
  }
  return config;
}

// Field `name` ("VmRSS", "VmHWM") of /proc/self/status in KiB; -1 if it cannot be read.
int64_t ProcStatusKib(const std::string& name) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + ":", 0) == 0) return std::atoll(line.c_str() + name.size() + 1);
  }
  return -1;
}

// Resets VmHWM to the current VmRSS (Linux >= 4.0); false if the kernel refused.
bool ResetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

// Global batch `step`: random tokens, labels, an all-ones loss mask and positions.
TensorMap GlobalBatch(const BenchConfig& config, int step) {
  const int64_t batch = config.global_batch();
  const int64_t seq = config.model.seq_length;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1000 + step);
  at::Tensor tokens = at::randint(0, config.model.vocab_size, {batch, seq + 1}, gen, at::kLong);
  return {{"input_ids", tokens.narrow(1, 0, seq).contiguous()},
          {"labels", tokens.narrow(1, 1, seq).contiguous()},
          {"loss_mask", at::ones({batch, seq}, at::kFloat)},
          {"position_ids", at::arange(seq, at::kLong).repeat({batch, 1})}};
}

// Worker: builds its stage, runs warm-up and timed steps, writes result_<rank>.txt to --out.
int RunWorker(const std::map<std::string, std::string>& args) {
  at::set_num_threads(1);
  BenchFlags flags;
  FlagParser parser;
  Register(parser, flags);
  std::vector<std::string> flag_args;
  for (const std::string& name : parser.Names()) {
    if (auto it = args.find(name); it != args.end()) {
      flag_args.push_back("--" + name + "=" + it->second);
    }
  }
  absl::Status status = parser.Parse(flag_args);
  absl::StatusOr<BenchConfig> parsed =
      status.ok() ? MakeConfig(flags) : absl::StatusOr<BenchConfig>(status);
  if (!parsed.ok()) {
    std::fprintf(stderr, "worker flags: %s\n", std::string(parsed.status().message()).c_str());
    return 2;
  }
  const BenchConfig& config = *parsed;
  const int rank = std::stoi(args.at("rank"));
  const int P = std::stoi(args.at("pipeline"));
  std::unique_ptr<comm::World> world;
  VarunaOptions options;
  options.stage_map = StageMap::Uniform(P, 1);
  options.rank = rank;
  options.batch_size = config.global_batch();
  options.chunk_size = config.chunk_size;
  options.schedule = *ParseScheduleKind(args.at("schedule"));
  auto joined =
      testing::JoinLocalJob(rank, P, std::stoi(args.at("port")), std::chrono::seconds(120));
  if (!joined.ok()) {
    std::fprintf(stderr, "join: %s\n", std::string(joined.status().message()).c_str());
    return 3;
  }
  world = std::move(*joined);
  options.world = world.get();
  at::manual_seed(5);
  auto engine =
      Varuna::Create(gpt2::Gpt2StageBuilder(config.model, 42), config.model.num_layers, options);
  if (!engine.ok()) {
    std::fprintf(stderr, "create: %s\n", std::string(engine.status().message()).c_str());
    return 4;
  }
  Varuna& v = **engine;
  AdamOptions adam;
  adam.lr = 1e-4;
  if (absl::Status status = v.set_optimizer(std::make_unique<Adam>(v.parameters(), adam), {});
      !status.ok()) {
    std::fprintf(stderr, "set_optimizer: %s\n", std::string(status.message()).c_str());
    return 5;
  }
  std::vector<TensorMap> batches;
  for (int step = 0; step < config.warmup + config.steps; ++step) {
    batches.push_back(GlobalBatch(config, step));
  }
  const int64_t rss_built = ProcStatusKib("VmRSS");
  const bool reset_ok = ResetPeakRss();
  int64_t rss_before_timed = 0, peak_warmup = 0;
  std::vector<double> seconds;
  double last_loss = 0;
  for (int step = 0; step < config.warmup + config.steps; ++step) {
    if (step == config.warmup) {
      peak_warmup = ProcStatusKib("VmHWM");
      rss_before_timed = ProcStatusKib("VmRSS");
      ResetPeakRss();
    }
    const auto start = std::chrono::steady_clock::now();
    auto result = v.step(batches[step]);
    const auto end = std::chrono::steady_clock::now();
    if (!result.ok()) {
      std::fprintf(stderr, "step: %s\n", std::string(result.status().message()).c_str());
      return 6;
    }
    last_loss = result->loss;
    if (step >= config.warmup)
      seconds.push_back(std::chrono::duration<double>(end - start).count());
  }
  const int64_t peak_timed = ProcStatusKib("VmHWM");
  std::ofstream out(args.at("out") + "/result_" + std::to_string(rank) + ".txt");
  out << "segments " << v.segments().first << " " << v.segments().last << "\n"
      << "rss_built " << rss_built << "\n"
      << "peak_since_built " << std::max(peak_warmup, peak_timed) << "\n"
      << "rss_before_timed " << rss_before_timed << "\n"
      << "peak_timed " << peak_timed << "\n"
      << "reset_ok " << (reset_ok ? 1 : 0) << "\n"
      << "loss " << last_loss << "\n"
      << "seconds";
  for (double s : seconds) out << " " << s;
  out << "\n";
  return out ? 0 : 7;
}

struct RankResult {
  int first_segment = 0, last_segment = 0;
  int64_t rss_built = 0, peak_since_built = 0, rss_before_timed = 0, peak_timed = 0;
  bool reset_ok = false;
  double loss = 0;
  std::vector<double> seconds;
};

struct RunResult {
  std::vector<RankResult> ranks;
  double mean_seconds = 0;    // per step, slowest rank
  double stddev_seconds = 0;  // over the timed steps
};

absl::StatusOr<RankResult> ReadRankResult(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " was not written by its worker"));
  RankResult r;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "segments") fields >> r.first_segment >> r.last_segment;
    if (key == "rss_built") fields >> r.rss_built;
    if (key == "peak_since_built") fields >> r.peak_since_built;
    if (key == "rss_before_timed") fields >> r.rss_before_timed;
    if (key == "peak_timed") fields >> r.peak_timed;
    if (key == "reset_ok") fields >> r.reset_ok;
    if (key == "loss") fields >> r.loss;
    if (key == "seconds") {
      for (double s; fields >> s;) r.seconds.push_back(s);
    }
  }
  return r;
}

// The two kinds of run: timing (glibc's allocator as it is, --warmup + --steps steps) and
// memory (mmap threshold fixed so resident memory tracks live tensors, 1 + 1 steps).
enum class RunKind { kTiming, kMemory };

// Runs one layout of `P` worker processes for `schedule` and collects their results.
absl::StatusOr<RunResult> RunLayout(const BenchConfig& config, ScheduleKind schedule, int P,
                                    RunKind kind, const std::string& dir) {
  const bool memory = kind == RunKind::kMemory;
  const int steps = memory ? 1 : config.steps;
  const std::string out =
      absl::StrCat(dir, "/", ScheduleKindName(schedule), "_p", P, memory ? "_memory" : "_timing");
  fs::create_directories(out);
  std::map<std::string, std::string> env = {{"OMP_NUM_THREADS", "1"}, {"MKL_NUM_THREADS", "1"}};
  if (memory && config.mmap_threshold > 0) {
    env["MALLOC_MMAP_THRESHOLD_"] = std::to_string(config.mmap_threshold);
  }
  const int port = FreeTcpPort();
  std::vector<testing::Process> processes;
  for (int rank = 0; rank < P; ++rank) {
    std::vector<std::string> argv = {testing::SelfPath(),
                                     "--worker=bench",
                                     "--rank=" + std::to_string(rank),
                                     "--pipeline=" + std::to_string(P),
                                     "--port=" + std::to_string(port),
                                     "--out=" + out,
                                     std::string("--schedule=") + ScheduleKindName(schedule)};
    for (const std::string& arg : FlagArgs(config.flags)) argv.push_back(arg);
    if (memory) {  // Later arguments win (WorkerArgs).
      argv.push_back("--warmup=1");
      argv.push_back("--steps=1");
    }
    processes.push_back(testing::Spawn(argv, out + "/rank" + std::to_string(rank) + ".log", env));
  }
  const auto exits = testing::WaitAll(processes, std::chrono::minutes(5));
  for (const auto& e : exits) {
    if (!e.exited || e.code != 0) {
      return absl::InternalError(absl::StrCat("P=", P, " ", ScheduleKindName(schedule),
                                              memory ? " memory" : " timing", " run failed:\n",
                                              testing::Describe(exits)));
    }
  }
  RunResult run;
  for (int rank = 0; rank < P; ++rank) {
    absl::StatusOr<RankResult> r = ReadRankResult(out + "/result_" + std::to_string(rank) + ".txt");
    if (!r.ok()) return r.status();
    if (static_cast<int>(r->seconds.size()) != steps) {
      return absl::InternalError(absl::StrCat(out, " rank ", rank, " timed ", r->seconds.size(),
                                              " steps, expected ", steps));
    }
    run.ranks.push_back(*r);
  }
  std::vector<double> slowest(steps, 0);
  for (const RankResult& r : run.ranks) {
    for (int i = 0; i < steps; ++i) slowest[i] = std::max(slowest[i], r.seconds[i]);
  }
  for (double s : slowest) run.mean_seconds += s / steps;
  for (double s : slowest) {
    run.stddev_seconds += (s - run.mean_seconds) * (s - run.mean_seconds) / steps;
  }
  run.stddev_seconds = std::sqrt(run.stddev_seconds);
  return run;
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double one = 0, five = 0;
  in >> one >> five;
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f (1 min) %.2f (5 min)", one, five);
  return text;
}

double Mib(int64_t kib) { return kib / 1024.0; }

// Model FLOPs of the segments [first, last] relative to one layer's, by flops.h's formula: a
// layer counts 1 + s/(6h), the LM head (on the last segment) V/(12h); embeddings count nothing.
double StageWork(const gpt2::Gpt2Config& model, int first, int last) {
  const double h = model.hidden_size;
  double work = (last - first + 1) * (1 + model.seq_length / (6 * h));
  if (last == model.num_layers - 1) work += model.padded_vocab_size() / (12 * h);
  return work;
}

int RunBenchmark(const BenchConfig& config) {
  const int P = config.stages;
  const int m = config.micro_batches;
  char dir_template[] = "/tmp/pipeline_benchmark.XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("mkdtemp /tmp/pipeline_benchmark.XXXXXX");
    return 1;
  }
  const std::string dir = dir_template;
  const std::string load_before = LoadAverage();
  const std::vector<int> layouts = P == 1 ? std::vector<int>{1} : std::vector<int>{1, P};
  // timing[{kind, p}], memory[{kind, p}].
  std::map<std::pair<ScheduleKind, int>, RunResult> timing, memory;
  for (ScheduleKind kind : config.schedules) {
    for (int p : layouts) {
      for (RunKind run_kind : {RunKind::kTiming, RunKind::kMemory}) {
        const bool is_memory = run_kind == RunKind::kMemory;
        std::fprintf(stderr, "running %s P=%d (%s) ...\n", ScheduleKindName(kind), p,
                     is_memory ? "memory" : "timing");
        absl::StatusOr<RunResult> run = RunLayout(config, kind, p, run_kind, dir);
        if (!run.ok()) {
          std::fprintf(stderr, "%s\nlogs in %s\n", std::string(run.status().message()).c_str(),
                       dir.c_str());
          return 1;
        }
        (is_memory ? memory : timing)[{kind, p}] = *run;
      }
    }
  }
  const std::string load_after = LoadAverage();

  const gpt2::Gpt2Config& model = config.model;
  std::printf(
      "GPT-2 %d layers, hidden %d, %d heads, seq %d, vocab %lld, dropout %g; fp32 on the CPU, "
      "Adam\nglobal batch %d = m %d micro-batches x chunk_size %d; %d warm-up + %d timed steps; "
      "one process per stage, 1 thread each (%u cores here)\nload average before %s, after %s\n",
      model.num_layers, model.hidden_size, model.num_attention_heads, model.seq_length,
      static_cast<long long>(model.padded_vocab_size()), model.hidden_dropout,
      config.global_batch(), m, config.chunk_size, config.warmup, config.steps,
      std::thread::hardware_concurrency(), load_before.c_str(), load_after.c_str());
  // The stages of the P-stage runs (the same for every schedule) and their share of the FLOPs.
  const RunResult& any = timing[{config.schedules[0], P}];
  std::vector<double> work;
  double total_work = 0, max_work = 0;
  std::printf("P=%d stages (segments, share of model FLOPs):", P);
  for (const RankResult& r : any.ranks) {
    work.push_back(StageWork(model, r.first_segment, r.last_segment));
    total_work += work.back();
    max_work = std::max(max_work, work.back());
  }
  for (size_t s = 0; s < work.size(); ++s) {
    std::printf(" %d-%d %.0f%%", any.ranks[s].first_segment, any.ranks[s].last_segment,
                100 * work[s] / total_work);
  }
  std::printf("\n\n");

  const double flops = gpt2::TrainingFlopsPerIteration(model, config.global_batch());
  const double ideal = static_cast<double>(P) * m / (m + P - 1);
  // Fill and drain pass through every stage once; the slowest stage paces the other m-1.
  const double ideal_balance = m * total_work / ((m - 1) * max_work + total_work);
  std::printf(
      "Step time (s, mean +- sd over the timed steps of the slowest rank) and speed-up of P=%d "
      "over P=1.\nideal = P*m/(m+P-1); ideal@flops = the same for stages of unequal FLOPs, "
      "m*sum/((m-1)*max+sum);\nsim = SimulateSchedule (F=1, B=2, R=1 per stage): "
      "P*makespan(P=1)/makespan(P) and bubble fraction at P; GFLOP/s = model FLOPs / P=1 time.\n",
      P);
  std::printf("%-8s %15s %15s %8s %6s %11s %8s %10s %8s\n", "schedule", "P=1 s/step",
              absl::StrCat("P=", P, " s/step").c_str(), "speed-up", "ideal", "ideal@flops",
              "sim s-up", "sim bubble", "GFLOP/s");
  for (ScheduleKind kind : config.schedules) {
    const RunResult& one = timing[{kind, 1}];
    const RunResult& many = timing[{kind, P}];
    const ScheduleStats sim1 = SimulateSchedule(kind, 1, m);
    const ScheduleStats simp = SimulateSchedule(kind, P, m);
    std::printf("%-8s %7.3f +- %5.3f %7.3f +- %5.3f %8.2f %6.2f %11.2f %8.2f %10.3f %8.1f\n",
                ScheduleKindName(kind), one.mean_seconds, one.stddev_seconds, many.mean_seconds,
                many.stddev_seconds, one.mean_seconds / many.mean_seconds, ideal, ideal_balance,
                P * sim1.makespan / simp.makespan, simp.bubble_fraction,
                flops / one.mean_seconds / 1e9);
  }

  std::printf(
      "\nMemory per stage (MiB), from separate runs of 1 warm-up + 1 measured step with "
      "MALLOC_MMAP_THRESHOLD_=%lld:\n"
      "  after build = RSS with model + optimizer built; peak-build = peak RSS minus after build "
      "(adds grads and code pages\n  touched by step 1); peak-step = peak RSS of the "
      "measured step minus RSS before it (activations, stashed\n  inputs, transient grads); "
      "timing peak = peak RSS of the timing run (glibc's default allocator);\n  sim graphs / "
      "sim live = SimulateSchedule's most graphs / live micro-batches held at once.\n",
      static_cast<long long>(config.mmap_threshold));
  std::printf("%-8s %2s %5s %8s %11s %10s %9s %12s %10s %8s\n", "schedule", "P", "stage",
              "segments", "after build", "peak-build", "peak-step", "timing peak", "sim graphs",
              "sim live");
  bool reset_ok = true;
  for (ScheduleKind kind : config.schedules) {
    for (int p : layouts) {
      const RunResult& run = memory[{kind, p}];
      const RunResult& timed = timing[{kind, p}];
      const ScheduleStats sim = SimulateSchedule(kind, p, m);
      for (int s = 0; s < p; ++s) {
        const RankResult& r = run.ranks[s];
        reset_ok = reset_ok && r.reset_ok && timed.ranks[s].reset_ok;
        std::printf(
            "%-8s %2d %5d %8s %11.1f %10.1f %9.1f %12.1f %10d %8d\n", ScheduleKindName(kind), p, s,
            absl::StrCat(r.first_segment, "-", r.last_segment).c_str(), Mib(r.rss_built),
            Mib(r.peak_since_built - r.rss_built), Mib(r.peak_timed - r.rss_before_timed),
            Mib(timed.ranks[s].peak_since_built), sim.peak_graphs[s], sim.peak_live_activations[s]);
      }
    }
  }
  if (!reset_ok) {
    std::printf(
        "WARNING: /proc/self/clear_refs refused the VmHWM reset: peaks are lifetime peaks\n");
  }
  // They differ slightly with dropout: each stage process draws dropout from its own stream.
  std::printf("\nlast timed step's loss, P=1 / P=%d:", P);
  for (ScheduleKind kind : config.schedules) {
    std::printf(" %s %.5f/%.5f", ScheduleKindName(kind), timing[{kind, 1}].ranks[0].loss,
                timing[{kind, P}].ranks[0].loss);
  }
  std::printf("\n");
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace varuna

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) return varuna::RunWorker(*args);
  varuna::BenchFlags flags;
  varuna::FlagParser parser;
  varuna::Register(parser, flags);
  if (std::optional<int> exit =
          parser.ParseMain("pipeline_benchmark",
                           "Step time and activation memory of the pipeline schedules on the CPU.\n"
                           "Example: pipeline_benchmark --steps=8 --schedules=varuna,gpipe",
                           argc, argv)) {
    return *exit;
  }
  absl::StatusOr<varuna::BenchConfig> config = varuna::MakeConfig(flags);
  if (!config.ok()) {
    std::fprintf(stderr, "pipeline_benchmark: error: %s\n",
                 std::string(config.status().message()).c_str());
    return 2;
  }
  return varuna::RunBenchmark(*config);
}
