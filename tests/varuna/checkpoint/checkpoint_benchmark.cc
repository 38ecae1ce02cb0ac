// Checkpoint benchmark (manual; not a test): how fast the checkpoint writer puts a GPT-2 355M
// training state on disk, against dd on the same disk, and what --shard gains with D=2.
//
//   bazel run -c opt //tests/varuna/checkpoint:checkpoint_benchmark
//       [-- --dir=/some/dir --repeats=2]
//
// The state is what Varuna::checkpoint writes for --preset (default gpt2-355m, --vocab_size
// 50257, padded): per parameter of every segment (gpt2::SegmentParameters) three fp32 tensors,
// "<name>", "<name>.exp_avg", "<name>.exp_avg_sq", from at::randn (--seed). In a private
// directory under --dir (default $TEST_TMPDIR, else /tmp; removed at the end) it measures:
//   1. dd if=/dev/zero bs=16M conv=fsync of the same size (rounded up to 16 MiB), timed from
//      outside, before and after the checkpoint writes (the disk's drift shows as two runs);
//   2. one rank writing the state unsharded (world size 1): CheckpointWriter("").Write with one
//      part per segment, then FinalizeCheckpoint; --repeats times by one worker process;
//   3. D=2: two worker processes (this binary re-executed) holding the same state, unsharded
//      (replica 0 writes every segment, replica 1 only its marker) and sharded (each replica
//      writes its AssignShards half as segment_<k>.shard_<r>), as Varuna::RankShare does;
//      --repeats times each, alternating which goes first.
// Each kind (dd, each worker) first writes once untimed: here the first write after fresh
// memory was allocated ran 2-3x slower than the next ones (a VM's first touch of guest pages).
// A checkpoint run is timed from the release of the writing ranks (after rank 0's
// BeginCheckpoint and a file barrier) until rank 0's FinalizeCheckpoint returns. Every
// safetensors file is fsynced before its rename (dd fsyncs its output), so the numbers are disk
// writes, not page-cache copies. Each checkpoint is verified (sizes) and deleted, and sync(2)
// runs before the next run. Refuses to start when --dir has less free space than 2.5x the
// state, or the machine less available memory than two states. `--help` lists the flags with
// their defaults; a bad flag exits 2.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
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
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/gpt2/config.h"
#include "models/gpt2/parameter_names.h"
#include "tests/util/subprocess.h"
#include "varuna/checkpoint/files.h"
#include "varuna/checkpoint/writer.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/io/json.h"
#include "varuna/io/safetensors.h"

namespace varuna {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kDdBlock = int64_t{16} << 20;  // dd bs=16M
constexpr auto kDeadline = std::chrono::minutes(10);

// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine.
int64_t NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// The benchmark's command line, with its defaults.
struct BenchmarkFlags {
  std::string dir;  // "": $TEST_TMPDIR, else /tmp
  std::string preset = "gpt2-355m";
  int vocab_size = 50257;
  int64_t seed = 1234;
  int repeats = 2;
};

// Registers the flags on `parser`; parsing writes them into `flags`, which must outlive it.
void Register(FlagParser& parser, BenchmarkFlags& flags) {
  parser.Add("dir", &flags.dir,
             "where the private work directory goes (empty: $TEST_TMPDIR, else /tmp)");
  parser.Add("preset", &flags.preset, "the GPT-2 preset whose training state is written");
  parser.Add("vocab_size", &flags.vocab_size, "the vocabulary (padded in the model)", "50257");
  parser.Add("seed", &flags.seed, "seed of the state's at::randn", "1234");
  parser.Add("repeats", &flags.repeats, "timed runs of each kind, 1 to 10", "2");
  parser.SetMinimum("vocab_size", 1);
  parser.SetMaximum("vocab_size", 1 << 30);
  parser.SetMinimum("seed", 0);
  parser.SetMinimum("repeats", 1);
  parser.SetMaximum("repeats", 10);
}

// The model whose training state is benchmarked, from --preset and --vocab_size.
absl::StatusOr<gpt2::Gpt2Config> ModelConfig(const std::string& preset, int vocab_size) {
  absl::StatusOr<gpt2::Gpt2Config> config = gpt2::PresetConfig(preset);
  if (!config.ok()) return config.status();
  config->vocab_size = vocab_size;
  if (absl::Status status = config->Validate(); !status.ok()) return status;
  return config;
}

// Bytes of the state: three fp32 tensors per parameter.
int64_t StateBytes(const gpt2::Gpt2Config& config) {
  int64_t bytes = 0;
  for (int s = 0; s < config.num_layers; ++s) {
    for (const gpt2::ParameterSpec& p : gpt2::SegmentParameters(config, s)) {
      bytes += 3 * 4 * p.numel();
    }
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------
// Worker role: build the state, then write it once per mode, timed.

struct Entry {
  int segment;
  std::string name;
  at::Tensor tensor;
};

// Every tensor of every segment, in segment and registration order (the optimizer's order).
std::vector<Entry> BuildState(const gpt2::Gpt2Config& config, uint64_t seed) {
  at::manual_seed(seed);
  std::vector<Entry> entries;
  for (int s = 0; s < config.num_layers; ++s) {
    for (const gpt2::ParameterSpec& p : gpt2::SegmentParameters(config, s)) {
      for (const char* suffix : {"", ".exp_avg", ".exp_avg_sq"}) {
        entries.push_back({s, p.name + suffix, at::randn(p.shape, at::kFloat)});
      }
    }
  }
  return entries;
}

// What `rank` writes, as Varuna::RankShare builds it for one stage holding every segment.
RankCheckpoint Share(const std::vector<Entry>& entries, int num_segments, const std::string& save,
                     int64_t iteration, int rank, int world, bool sharded) {
  std::vector<int> writer(entries.size(), 0);
  if (sharded) {
    std::vector<int64_t> bytes;
    for (const Entry& e : entries) bytes.push_back(e.tensor.numel() * 4);
    writer = AssignShards(bytes, world);
  }
  std::map<int, NamedTensors> mine;
  for (size_t k = 0; k < entries.size(); ++k) {
    if (writer[k] == rank)
      mine[entries[k].segment].emplace_back(entries[k].name, entries[k].tensor);
  }
  RankCheckpoint share;
  share.save_dir = save;
  share.iteration = iteration;
  share.rank = rank;
  share.world_size = world;
  share.state = json::Value::object();
  for (int segment = 0; segment < num_segments; ++segment) {
    auto it = mine.find(segment);
    if (it == mine.end() && rank != 0) continue;
    RankCheckpoint::Part part;
    part.segment = segment;
    part.shard = sharded ? rank : -1;
    if (it != mine.end()) part.tensors = std::move(it->second);
    share.parts.push_back(std::move(part));
  }
  return share;
}

// Polls until every path exists; DeadlineExceeded naming the first missing one after kDeadline.
absl::Status WaitForFiles(const std::vector<std::string>& paths, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& path : paths) {
    while (!fs::exists(path)) {
      if (std::chrono::steady_clock::now() - start > kDeadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("waited 10 minutes for ", path, " (", what, "): another worker failed?"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return absl::OkStatus();
}

// A barrier of `world` workers through files in `sync_dir`.
absl::Status Barrier(const std::string& sync_dir, const std::string& name, int rank, int world) {
  std::ofstream(absl::StrCat(sync_dir, "/", name, ".rank", rank)).put('\n');
  std::vector<std::string> paths;
  for (int r = 0; r < world; ++r) paths.push_back(absl::StrCat(sync_dir, "/", name, ".rank", r));
  return WaitForFiles(paths, "barrier " + name);
}

int64_t FileBytes(const std::string& path) {
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  return error ? 0 : static_cast<int64_t>(size);
}

// User plus system CPU time of this process so far, in seconds.
double CpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// Bytes of every regular file under `dir`.
int64_t TreeBytes(const std::string& dir) {
  int64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) bytes += static_cast<int64_t>(e.file_size());
  }
  return bytes;
}

// Worker flags: --rank, --world, --preset, --vocab_size, --seed, --save (checkpoint
// directory), --sync (barrier files), --result (output file), --modes (unsharded,sharded).
// Result lines: "build <seconds>", then per mode "<mode> <start_ns> <write_end_ns>
// <finalize_end_ns or 0> <bytes of this rank's files> <checkpoint bytes or 0> <CPU seconds of
// its Write>".
absl::Status RunWorker(const std::map<std::string, std::string>& args) {
  at::set_num_threads(1);
  absl::StatusOr<gpt2::Gpt2Config> config =
      ModelConfig(args.at("preset"), std::stoi(args.at("vocab_size")));
  if (!config.ok()) return config.status();
  const int rank = std::stoi(args.at("rank"));
  const int world = std::stoi(args.at("world"));
  const std::string save = args.at("save");
  const std::string sync_dir = args.at("sync");
  std::ofstream result(args.at("result"));

  const int64_t build_start = NowNs();
  const std::vector<Entry> entries = BuildState(*config, std::stoull(args.at("seed")));
  result << "build " << (NowNs() - build_start) * 1e-9 << "\n" << std::flush;

  int64_t iteration = 0;
  std::stringstream modes(args.at("modes"));
  for (std::string mode; std::getline(modes, mode, ',');) {
    ++iteration;
    const bool sharded = mode == "sharded";
    const std::string dir = absl::StrCat(save, "/", CheckpointDirName(iteration));
    if (rank == 0) {
      ::sync();  // the previous measurement's deletions and any other dirty pages
      if (absl::Status status = BeginCheckpoint(save, iteration); !status.ok()) return status;
    }
    RankCheckpoint share =
        Share(entries, config->num_layers, save, iteration, rank, world, sharded);
    std::vector<std::string> mine;
    for (const RankCheckpoint::Part& part : share.parts) {
      mine.push_back(absl::StrCat(dir, "/", SegmentFileName(part.segment, part.shard)));
    }
    if (absl::Status status = Barrier(sync_dir, absl::StrCat("start", iteration), rank, world);
        !status.ok()) {
      return status;
    }

    const int64_t start = NowNs();
    const double cpu_start = CpuSeconds();
    CheckpointWriter writer("");
    if (absl::Status status = writer.Write(std::move(share)); !status.ok()) return status;
    const int64_t write_end = NowNs();
    const double write_cpu = CpuSeconds() - cpu_start;
    int64_t finalize_end = 0;
    int64_t total = 0;
    if (rank == 0) {
      std::vector<std::string> markers;
      for (int r = 0; r < world; ++r)
        markers.push_back(save + "/" + CheckpointDirName(iteration) + "/" + RankMarkerName(r));
      if (absl::Status status = WaitForFiles(markers, "rank markers"); !status.ok()) return status;
      if (absl::Status status = FinalizeCheckpoint(save, iteration, world, json::Value::object(),
                                                   json::Value::object());
          !status.ok()) {
        return status;
      }
      finalize_end = NowNs();
      if (absl::Status status = VerifyCheckpoint(save, iteration); !status.ok()) return status;
      total = TreeBytes(dir);
    }
    int64_t own = 0;
    for (const std::string& path : mine) own += FileBytes(path);
    result << mode << " " << start << " " << write_end << " " << finalize_end << " " << own << " "
           << total << " " << write_cpu << "\n"
           << std::flush;
    if (rank == 0) fs::remove_all(dir);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Parent: dd, the worker runs, dd again, then the table.

struct ModeResult {
  std::string mode;
  int64_t start = 0, write_end = 0, finalize_end = 0, own_bytes = 0, total_bytes = 0;
  double write_cpu = 0;
};
struct WorkerResult {
  double build_seconds = 0;
  std::vector<ModeResult> runs;  // in the order of --modes
};

absl::StatusOr<WorkerResult> ReadResult(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": no worker result"));
  WorkerResult r;
  std::string key;
  while (in >> key) {
    if (key == "build") {
      in >> r.build_seconds;
      continue;
    }
    ModeResult m;
    m.mode = key;
    in >> m.start >> m.write_end >> m.finalize_end >> m.own_bytes >> m.total_bytes >> m.write_cpu;
    r.runs.push_back(m);
  }
  return r;
}

// Runs `world` workers writing `modes` (comma-separated) into `work`/<name>; their results, by
// rank.
absl::StatusOr<std::vector<WorkerResult>> RunWorkers(const std::string& work,
                                                     const std::string& name, int world,
                                                     const std::string& modes,
                                                     const BenchmarkFlags& flags) {
  const std::string base = absl::StrCat(work, "/", name);
  fs::create_directories(base + "/sync");
  std::vector<testing::Process> processes;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv = {testing::SelfPath(),
                                     "--worker=write",
                                     absl::StrCat("--rank=", r),
                                     absl::StrCat("--world=", world),
                                     "--preset=" + flags.preset,
                                     absl::StrCat("--vocab_size=", flags.vocab_size),
                                     absl::StrCat("--seed=", flags.seed),
                                     "--save=" + base + "/save",
                                     "--sync=" + base + "/sync",
                                     absl::StrCat("--result=", base, "/result", r, ".txt"),
                                     "--modes=" + modes};
    processes.push_back(testing::Spawn(argv, absl::StrCat(base, "/rank", r, ".log"),
                                       {{"OMP_NUM_THREADS", "1"}, {"MKL_NUM_THREADS", "1"}}));
  }
  const std::vector<testing::ExitInfo> exits = testing::WaitAll(processes, kDeadline);
  for (const testing::ExitInfo& e : exits) {
    if (!e.exited || e.code != 0) {
      return absl::InternalError(
          absl::StrCat(name, ": a worker failed:\n", testing::Describe(exits)));
    }
  }
  std::vector<WorkerResult> results;
  const size_t expected = std::count(modes.begin(), modes.end(), ',') + 1;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<WorkerResult> result = ReadResult(absl::StrCat(base, "/result", r, ".txt"));
    if (!result.ok()) return result.status();
    if (result->runs.size() != expected) {
      return absl::InternalError(absl::StrCat(name, " rank ", r, " reported ", result->runs.size(),
                                              " writes, expected ", expected));
    }
    results.push_back(*std::move(result));
  }
  fs::remove_all(base);
  return results;
}

// One method's measurements.
struct Row {
  std::string method;
  int64_t bytes = 0;              // of one run
  std::vector<double> seconds;    // per run
  std::vector<std::string> note;  // per rank: bytes written, Write wall and CPU time (means)

  double mean() const {
    double sum = 0;
    for (double s : seconds) sum += s;
    return sum / seconds.size();
  }
};

// Adds the worker runs of `mode` to `row`: each from the earliest rank's start to rank 0's
// FinalizeCheckpoint.
void AddCheckpointRuns(const std::vector<WorkerResult>& results, const std::string& mode,
                       Row& row) {
  const size_t n = results[0].runs.size();
  std::vector<double> wall(results.size(), 0), cpu(results.size(), 0);
  std::vector<int64_t> own(results.size(), 0);
  int count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (results[0].runs[i].mode != mode) continue;
    ++count;
    int64_t start = INT64_MAX;
    for (size_t r = 0; r < results.size(); ++r) {
      const ModeResult& m = results[r].runs[i];
      start = std::min(start, m.start);
      wall[r] += (m.write_end - m.start) * 1e-9;
      cpu[r] += m.write_cpu;
      own[r] = m.own_bytes;
    }
    row.bytes = results[0].runs[i].total_bytes;
    row.seconds.push_back((results[0].runs[i].finalize_end - start) * 1e-9);
  }
  for (size_t r = 0; r < results.size(); ++r) {
    row.note.push_back(absl::StrFormat("r%d %.2f GB, Write %.1f s, CPU %.1f s", r, own[r] * 1e-9,
                                       wall[r] / count, cpu[r] / count));
  }
}

// dd of `blocks` x 16 MiB from /dev/zero into `work`/dd.bin with a final fsync, timed from
// outside; the file is removed afterwards.
absl::StatusOr<double> RunDd(const std::string& work, int64_t blocks) {
  const std::string dd = fs::exists("/bin/dd") ? "/bin/dd" : "/usr/bin/dd";
  ::sync();
  const int64_t start = NowNs();
  const std::vector<testing::Process> process = {
      testing::Spawn({dd, "if=/dev/zero", "of=" + work + "/dd.bin", "bs=16M",
                      absl::StrCat("count=", blocks), "conv=fsync"},
                     work + "/dd.log")};
  const std::vector<testing::ExitInfo> exit = testing::WaitAll(process, kDeadline);
  const double seconds = (NowNs() - start) * 1e-9;
  fs::remove(work + "/dd.bin");
  if (!exit[0].exited || exit[0].code != 0) {
    return absl::InternalError(absl::StrCat(dd, " failed:\n", testing::Describe(exit)));
  }
  return seconds;
}

int64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return -1;
}

void Progress(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// The parent: checks the flags' ranges, then measures and prints the table.
absl::Status RunBenchmark(const BenchmarkFlags& flags) {
  absl::StatusOr<gpt2::Gpt2Config> config = ModelConfig(flags.preset, flags.vocab_size);
  if (!config.ok()) return config.status();
  const int64_t state = StateBytes(*config);
  const int repeats = flags.repeats;  // in [1, 10] (Register)

  const char* tmp = std::getenv("TEST_TMPDIR");
  fs::path dir = !flags.dir.empty() ? flags.dir : tmp != nullptr ? tmp : "/tmp";
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (dir.is_relative() && cwd != nullptr) dir = fs::path(cwd) / dir;
  std::error_code error;
  fs::create_directories(dir, error);
  struct statvfs disk;
  if (error || statvfs(dir.c_str(), &disk) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--dir=", dir.string(), " cannot be created or read: pass a writable dir"));
  }
  const double free_bytes = static_cast<double>(disk.f_bavail) * disk.f_frsize;
  if (free_bytes < 2.5 * state) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--dir=%s has %.1f GB free; the benchmark needs 2.5x the %.2f GB state (%.1f GB): choose "
        "a --dir on a disk with more room or a smaller --preset",
        dir.string(), free_bytes * 1e-9, state * 1e-9, 2.5 * state * 1e-9));
  }
  const int64_t memory = MemAvailableBytes();
  if (memory >= 0 && memory < 2 * state + (int64_t{1} << 30)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%.1f GB of memory available; two workers holding the %.2f GB state need %.1f GB: free "
        "memory or pass a smaller --preset",
        memory * 1e-9, state * 1e-9, (2 * state + (int64_t{1} << 30)) * 1e-9));
  }
  std::string work = (dir / "checkpoint_benchmark.XXXXXX").string();
  if (::mkdtemp(work.data()) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create a directory in --dir=", dir.string(), ": is it writable?"));
  }
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } cleanup{work};
  Progress(absl::StrFormat(
      "checkpoint benchmark: %s (vocab %d -> %d), state %.3f GB, %d "
      "repeats, in %s",
      flags.preset, config->vocab_size, config->padded_vocab_size(), state * 1e-9, repeats, work));

  // Every measurement is preceded by an untimed warm-up of the same kind: on this kind of VM
  // the first write after memory was allocated runs 2-3x slower (see the footnote).
  // dd: warm-up, then before and after the checkpoint writes, to bracket the disk's drift.
  const int64_t blocks = (state + kDdBlock - 1) / kDdBlock;
  Row dd_row{"dd bs=16M conv=fsync (before, after)", blocks * kDdBlock};
  absl::StatusOr<double> dd_warmup = RunDd(work, blocks);
  if (!dd_warmup.ok()) return dd_warmup.status();
  absl::StatusOr<double> dd = RunDd(work, blocks);
  if (!dd.ok()) return dd.status();
  dd_row.seconds.push_back(*dd);
  Progress(absl::StrFormat("dd: warm-up %.1f s, %.1f s", *dd_warmup, *dd));

  // One rank, unsharded, `repeats` times by one worker after its warm-up write.
  std::vector<std::string> one_modes(repeats + 1, "unsharded");
  one_modes[0] = "warmup";
  absl::StatusOr<std::vector<WorkerResult>> one =
      RunWorkers(work, "one_rank", 1, absl::StrJoin(one_modes, ","), flags);
  if (!one.ok()) return one.status();
  Row one_row{"1 rank, unsharded"};
  AddCheckpointRuns(*one, "unsharded", one_row);
  Progress(absl::StrFormat("1 rank: %.1f s (state built in %.1f s)", one_row.mean(),
                           (*one)[0].build_seconds));

  // D=2 by the same two workers, unsharded and sharded alternating (u,s,s,u,u,s,...) so that
  // neither always goes first.
  std::vector<std::string> two_modes = {"warmup"};
  for (int i = 0; i < repeats; ++i) {
    two_modes.push_back(i % 2 == 0 ? "unsharded" : "sharded");
    two_modes.push_back(i % 2 == 0 ? "sharded" : "unsharded");
  }
  absl::StatusOr<std::vector<WorkerResult>> two =
      RunWorkers(work, "two_ranks", 2, absl::StrJoin(two_modes, ","), flags);
  if (!two.ok()) return two.status();
  Row unsharded_row{"D=2, unsharded (replica 0 writes all)"};
  Row sharded_row{"D=2, sharded (AssignShards halves)"};
  AddCheckpointRuns(*two, "unsharded", unsharded_row);
  AddCheckpointRuns(*two, "sharded", sharded_row);
  Progress(absl::StrFormat("D=2: unsharded %.1f s, sharded %.1f s", unsharded_row.mean(),
                           sharded_row.mean()));

  dd = RunDd(work, blocks);
  if (!dd.ok()) return dd.status();
  dd_row.seconds.push_back(*dd);

  const std::vector<Row> rows = {dd_row, one_row, unsharded_row, sharded_row};
  std::printf("\n%-38s %11s %8s %6s %6s  %-16s %s\n", "method", "bytes", "seconds", "GB/s", "vs dd",
              "runs (s)", "per rank: bytes written, mean Write wall and CPU time");
  const double dd_rate = dd_row.bytes / dd_row.mean();
  for (const Row& r : rows) {
    const double rate = r.bytes / r.mean();
    std::vector<std::string> runs;
    for (double s : r.seconds) runs.push_back(absl::StrFormat("%.2f", s));
    std::printf("%-38s %11lld %8.2f %6.3f %6.2f  %-16s %s\n", r.method.c_str(),
                static_cast<long long>(r.bytes), r.mean(), rate * 1e-9, rate / dd_rate,
                absl::StrJoin(runs, " ").c_str(), absl::StrJoin(r.note, "; ").c_str());
  }
  std::printf("\nsharded vs unsharded (D=2): %.2fx speed-up (mean times)\n",
              unsharded_row.mean() / sharded_row.mean());
  Row one_warmup, two_warmup;
  AddCheckpointRuns(*one, "warmup", one_warmup);
  AddCheckpointRuns(*two, "warmup", two_warmup);
  std::printf(
      "GB = 1e9 bytes; seconds = mean of the runs. Checkpoint rows: from the release of the "
      "writing ranks to rank 0's FinalizeCheckpoint, every file fsynced; CPU = user + system time "
      "of the writing process. State build (at::randn, 1 thread): %.1f s per worker. Untimed "
      "warm-ups (the first write of each kind; unsharded for the workers): dd %.2f s, 1-rank "
      "worker %.2f s, D=2 workers %.2f s.\n",
      (*one)[0].build_seconds, *dd_warmup, one_warmup.mean(), two_warmup.mean());
  return absl::OkStatus();
}

}  // namespace
}  // namespace varuna

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) {
    const absl::Status status = varuna::RunWorker(*args);
    if (!status.ok()) {
      std::fprintf(stderr, "checkpoint_benchmark worker: %s\n", status.ToString().c_str());
      return 1;
    }
    return 0;
  }
  varuna::BenchmarkFlags flags;
  varuna::FlagParser parser;
  varuna::Register(parser, flags);
  if (std::optional<int> exit = parser.ParseMain(
          "checkpoint_benchmark",
          "Checkpoint writing speed of a GPT-2 training state, against dd on the same disk.\n"
          "Example: checkpoint_benchmark --dir=/some/dir --repeats=2",
          argc, argv)) {
    return *exit;
  }
  const absl::Status status = varuna::RunBenchmark(flags);
  if (!status.ok()) {
    std::fprintf(stderr, "checkpoint_benchmark: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
