// Gradient-reduce benchmark (manual; not a test): the step time of a data-parallel job with the
// replicas' gradient all-reduce overlapped with the last backward (VarunaOptions::
// overlap_grad_reduce, the default) against the synchronous reduce after the pipeline, in one
// run, on the CPU over Gloo.
//
//   bazel run -c opt //tests/varuna:grad_reduce_benchmark [-- --replicas=2 --steps=10]
//
// It re-executes this binary as the workers of a --stages x --replicas job (one thread each,
// OMP_NUM_THREADS=1), once per mode and --rounds times alternating (overlapped, synchronous,
// overlapped, ...), so that drift in the machine's load hits both alike. Each job trains a
// GPT-2 (fp32, no dropout, Adam) on the same synthetic batches for --warmup + --steps steps; a
// step's time is the slowest rank's wall time of Varuna::step. It prints each mode's mean and
// median step time over all timed steps of all rounds, the ratios synchronous / overlapped, and
// how many buckets started inside the last backward. `--help` lists the flags.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model.h"
#include "tests/util/subprocess.h"
#include "tests/varuna/local_job.h"
#include "varuna/comm/world.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/launch/host.h"
#include "varuna/varuna.h"

namespace varuna {
namespace {

namespace fs = std::filesystem;

struct BenchFlags {
  int num_layers = 4;
  int hidden_size = 256;
  int num_attention_heads = 4;
  int seq_length = 64;
  int vocab_size = 8192;
  int chunk_size = 2;
  int micro_batches = 4;
  int stages = 1;
  int replicas = 2;
  int warmup = 2;
  int steps = 10;
  int rounds = 2;
  double bucket_mb = 4;  // fp32 MiB per bucket
};

void Register(FlagParser& parser, BenchFlags& f) {
  parser.Add("num_layers", &f.num_layers, "GPT-2 layers", "4");
  parser.Add("hidden_size", &f.hidden_size, "hidden size", "256");
  parser.Add("num_attention_heads", &f.num_attention_heads, "attention heads", "4");
  parser.Add("seq_length", &f.seq_length, "tokens per sequence", "64");
  parser.Add("vocab_size", &f.vocab_size, "vocabulary (not padded)", "8192");
  parser.Add("chunk_size", &f.chunk_size, "sequences per micro-batch", "2");
  parser.Add("micro_batches", &f.micro_batches, "micro-batches per replica per step", "4");
  parser.Add("stages", &f.stages, "pipeline stages", "1");
  parser.Add("replicas", &f.replicas, "data-parallel replicas", "2");
  parser.Add("warmup", &f.warmup, "untimed steps per job", "2");
  parser.Add("steps", &f.steps, "timed steps per job", "10");
  parser.Add("rounds", &f.rounds, "jobs per mode, alternating", "2");
  parser.Add("bucket_mb", &f.bucket_mb, "gradient bucket size, fp32 MiB", "4");
  for (const char* name :
       {"num_layers", "hidden_size", "num_attention_heads", "seq_length", "vocab_size",
        "chunk_size", "micro_batches", "stages", "replicas", "steps", "rounds"}) {
    parser.SetMinimum(name, 1);
  }
  parser.SetMinimum("warmup", 0);
  parser.SetMinimum("bucket_mb", 0, FlagParser::Bound::kExclusive);
}

std::vector<std::string> FlagArgs(const BenchFlags& f) {
  return {absl::StrCat("--num_layers=", f.num_layers),
          absl::StrCat("--hidden_size=", f.hidden_size),
          absl::StrCat("--num_attention_heads=", f.num_attention_heads),
          absl::StrCat("--seq_length=", f.seq_length),
          absl::StrCat("--vocab_size=", f.vocab_size),
          absl::StrCat("--chunk_size=", f.chunk_size),
          absl::StrCat("--micro_batches=", f.micro_batches),
          absl::StrCat("--stages=", f.stages),
          absl::StrCat("--replicas=", f.replicas),
          absl::StrCat("--warmup=", f.warmup),
          absl::StrCat("--steps=", f.steps),
          absl::StrCat("--rounds=", f.rounds),
          absl::StrCat("--bucket_mb=", f.bucket_mb)};
}

gpt2::Gpt2Config ModelOf(const BenchFlags& f) {
  gpt2::Gpt2Config model;
  model.num_layers = f.num_layers;
  model.hidden_size = f.hidden_size;
  model.num_attention_heads = f.num_attention_heads;
  model.seq_length = f.seq_length;
  model.max_position_embeddings = f.seq_length;
  model.vocab_size = f.vocab_size;
  model.make_vocab_size_divisible_by = 1;
  model.hidden_dropout = 0;
  model.attention_dropout = 0;
  return model;
}

// One replica's batch of step `step`: random tokens, labels, an all-ones mask, positions.
TensorMap ReplicaBatch(const BenchFlags& f, int step, int replica) {
  const int64_t batch = static_cast<int64_t>(f.chunk_size) * f.micro_batches;
  const int64_t seq = f.seq_length;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1000 + 97 * step + replica);
  at::Tensor tokens = at::randint(0, f.vocab_size, {batch, seq + 1}, gen, at::kLong);
  return {{"input_ids", tokens.narrow(1, 0, seq).contiguous()},
          {"labels", tokens.narrow(1, 1, seq).contiguous()},
          {"loss_mask", at::ones({batch, seq}, at::kFloat)},
          {"position_ids", at::arange(seq, at::kLong).repeat({batch, 1})}};
}

absl::StatusOr<BenchFlags> ParseFlags(const std::vector<std::string>& args) {
  BenchFlags flags;
  FlagParser parser;
  Register(parser, flags);
  if (absl::Status status = parser.Parse(args); !status.ok()) return status;
  if (parser.help_requested()) {
    std::printf(
        "grad_reduce_benchmark: overlapped vs synchronous gradient all-reduce, CPU step time\n"
        "Flags:\n%s",
        parser.Help().c_str());
    std::exit(0);
  }
  if (flags.stages > flags.num_layers) {
    return absl::InvalidArgumentError("--stages must be at most --num_layers");
  }
  return flags;
}

// Worker: trains, writes "seconds started_in_backward buckets" per timed step.
int RunWorker(const std::map<std::string, std::string>& args) {
  at::set_num_threads(1);
  std::vector<std::string> flag_args;
  for (const auto& [name, value] : args) {
    if (name != "worker" && name != "rank" && name != "port" && name != "out" &&
        name != "overlap") {
      flag_args.push_back("--" + name + "=" + value);
    }
  }
  absl::StatusOr<BenchFlags> flags = ParseFlags(flag_args);
  if (!flags.ok()) {
    std::fprintf(stderr, "worker flags: %s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  const BenchFlags& f = *flags;
  const int rank = std::stoi(args.at("rank"));
  const int world_size = f.stages * f.replicas;
  VarunaOptions options;
  options.stage_map = StageMap::Uniform(f.stages, f.replicas);
  options.rank = rank;
  options.batch_size = f.chunk_size * f.micro_batches;
  options.chunk_size = f.chunk_size;
  options.overlap_grad_reduce = args.at("overlap") == "1";
  options.grad_bucket_elements = static_cast<int64_t>(f.bucket_mb * (1 << 20) / 4);
  auto joined = testing::JoinLocalJob(rank, world_size, std::stoi(args.at("port")),
                                      std::chrono::seconds(120));
  if (!joined.ok()) {
    std::fprintf(stderr, "join: %s\n", std::string(joined.status().message()).c_str());
    return 3;
  }
  std::unique_ptr<comm::World> world = std::move(*joined);
  options.world = world.get();
  at::manual_seed(5);
  const gpt2::Gpt2Config model = ModelOf(f);
  auto engine = Varuna::Create(gpt2::Gpt2StageBuilder(model, 42), model.num_layers, options);
  if (!engine.ok()) {
    std::fprintf(stderr, "create: %s\n", std::string(engine.status().message()).c_str());
    return 4;
  }
  Varuna& v = **engine;
  AdamOptions adam;
  adam.lr = 1e-4;
  if (!v.set_optimizer(std::make_unique<Adam>(v.parameters(), adam), {}).ok()) return 5;
  std::ofstream out(args.at("out") + "/result_" + std::to_string(rank) + ".txt");
  for (int step = 0; step < f.warmup + f.steps; ++step) {
    const TensorMap batch = ReplicaBatch(f, step, v.replica());
    const auto start = std::chrono::steady_clock::now();
    auto result = v.step(batch);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result.ok()) {
      std::fprintf(stderr, "step: %s\n", std::string(result.status().message()).c_str());
      return 6;
    }
    if (step >= f.warmup) {
      out << seconds << " " << v.grad_buckets_started_in_backward() << " " << v.grad_buckets()
          << "\n";
    }
  }
  return 0;
}

struct JobResult {
  std::vector<double> slowest;   // per timed step
  int started = 0, buckets = 0;  // rank 0's, last step
};

absl::StatusOr<JobResult> RunJob(const BenchFlags& f, bool overlap, const std::string& out) {
  fs::create_directories(out);
  const int port = FreeTcpPort();
  const int world_size = f.stages * f.replicas;
  std::vector<testing::Process> processes;
  for (int rank = 0; rank < world_size; ++rank) {
    std::vector<std::string> argv = {testing::SelfPath(),
                                     "--worker=bench",
                                     "--rank=" + std::to_string(rank),
                                     "--port=" + std::to_string(port),
                                     "--out=" + out,
                                     std::string("--overlap=") + (overlap ? "1" : "0")};
    for (const std::string& arg : FlagArgs(f)) argv.push_back(arg);
    processes.push_back(testing::Spawn(argv, out + "/rank" + std::to_string(rank) + ".log",
                                       {{"OMP_NUM_THREADS", "1"}, {"MKL_NUM_THREADS", "1"}}));
  }
  const auto exits = testing::WaitAll(processes, std::chrono::minutes(10));
  for (const auto& e : exits) {
    if (!e.exited || e.code != 0) {
      return absl::InternalError(absl::StrCat("job failed:\n", testing::Describe(exits)));
    }
  }
  JobResult job;
  job.slowest.assign(f.steps, 0);
  for (int rank = 0; rank < world_size; ++rank) {
    std::ifstream in(out + "/result_" + std::to_string(rank) + ".txt");
    for (int step = 0; step < f.steps; ++step) {
      double seconds = 0;
      int started = 0, buckets = 0;
      if (!(in >> seconds >> started >> buckets)) {
        return absl::InternalError(absl::StrCat(out, " rank ", rank, ": missing step ", step));
      }
      job.slowest[step] = std::max(job.slowest[step], seconds);
      if (rank == 0) {
        job.started = started;
        job.buckets = buckets;
      }
    }
  }
  return job;
}

int RunParent(int argc, char** argv) {
  absl::StatusOr<BenchFlags> flags = ParseFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!flags.ok()) {
    std::fprintf(stderr, "%s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  const BenchFlags& f = *flags;
  const std::string dir = (fs::temp_directory_path() / "varuna_grad_reduce_benchmark").string();
  fs::remove_all(dir);
  std::map<bool, std::vector<double>> steps;
  std::map<bool, JobResult> last;
  for (int round = 0; round < f.rounds; ++round) {
    for (const bool overlap : {true, false}) {
      absl::StatusOr<JobResult> job =
          RunJob(f, overlap, absl::StrCat(dir, "/round", round, overlap ? "_overlap" : "_sync"));
      if (!job.ok()) {
        std::fprintf(stderr, "%s\n", std::string(job.status().message()).c_str());
        return 1;
      }
      steps[overlap].insert(steps[overlap].end(), job->slowest.begin(), job->slowest.end());
      last[overlap] = *job;
    }
  }
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / v.size();
  };
  auto stddev = [&](const std::vector<double>& v) {
    const double m = mean(v);
    double sum = 0;
    for (double x : v) sum += (x - m) * (x - m);
    return std::sqrt(sum / v.size());
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  const gpt2::Gpt2Config model = ModelOf(f);
  int64_t params = 0;
  {
    gpt2::Gpt2Stage stage(model, SegmentRange{0, model.num_layers - 1}, 42);
    for (const auto& p : stage.parameters()) params += p.numel();
  }
  std::printf(
      "%d x %d (stages x replicas), GPT-2 %d layers, hidden %d, seq %d, vocab %d: %.2fM "
      "parameters; %d micro-batches of %d per replica; buckets of %.1f MiB\n",
      f.stages, f.replicas, f.num_layers, f.hidden_size, f.seq_length, f.vocab_size, params / 1e6,
      f.micro_batches, f.chunk_size, f.bucket_mb);
  std::printf("%-12s %10s %10s %10s %6s %22s\n", "mode", "mean ms", "median ms", "stddev", "steps",
              "buckets in backward");
  for (const bool overlap : {true, false}) {
    std::printf("%-12s %10.1f %10.1f %10.1f %6zu %15d of %d\n",
                overlap ? "overlapped" : "synchronous", 1e3 * mean(steps[overlap]),
                1e3 * median(steps[overlap]), 1e3 * stddev(steps[overlap]), steps[overlap].size(),
                last[overlap].started, last[overlap].buckets);
  }
  std::printf("synchronous / overlapped step time: %.3f (means), %.3f (medians)\n",
              mean(steps[false]) / mean(steps[true]), median(steps[false]) / median(steps[true]));
  return 0;
}

}  // namespace
}  // namespace varuna

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) return varuna::RunWorker(*args);
  return varuna::RunParent(argc, argv);
}
