#include "trainer/profile_mode.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/gpt2/model_record.h"
#include "models/gpt2/summary.h"
#include "trainer/attention_backend.h"
#include "trainer/device_name.h"
#include "trainer/fp8_linear_choice.h"
#include "trainer/setup.h"
#include "varuna/comm/status_agreement.h"
#include "varuna/comm/world.h"
#include "varuna/io/json.h"
#include "varuna/io/user_paths.h"
#include "varuna/planning/comm_profiler.h"
#include "varuna/planning/compute_profiler.h"
#include "varuna/planning/profile.h"

namespace trainer {
namespace {

// "hidden_size: profile 64, now 32; ..." for every model field that differs.
std::string ModelDifferences(const std::string& saved_text, const varuna::json::Value& now) {
  absl::StatusOr<varuna::json::Value> saved = varuna::json::Parse(saved_text);
  if (!saved.ok() || !saved->is_object()) return "the profile's model is not a JSON object";
  std::vector<std::string> differences;
  for (const gpt2::ModelRecordDifference& d : gpt2::ModelRecordDifferences(*saved, now)) {
    differences.push_back(absl::StrCat(d.key, ": profile ", d.saved, ", now ", d.now));
  }
  return absl::StrJoin(differences, "; ");
}

// The profile in options.dir if it is one of this model, device and dtype; nullopt if there is
// none; FailedPrecondition naming the difference for another one.
absl::StatusOr<std::optional<varuna::Profile>> ReadExisting(const ProfileModeOptions& options,
                                                            const varuna::json::Value& model_json,
                                                            const std::string& model,
                                                            const std::string& dtype) {
  absl::StatusOr<varuna::Profile> read = varuna::ReadProfile(options.dir);
  if (absl::IsNotFound(read.status())) return std::optional<varuna::Profile>();
  if (!read.ok()) return read.status();
  std::string difference;
  if (read->model != model) {
    difference = ModelDifferences(read->model, model_json);
    if (difference.empty()) difference = "the model configuration";
  } else if (read->device != options.device_name) {
    difference = absl::StrCat("device: profile ", read->device, ", now ", options.device_name);
  } else if (read->dtype != dtype) {
    difference = absl::StrCat("dtype: profile ", read->dtype, ", now ", dtype);
  }
  if (!difference.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the profile in ", options.dir, " is of another model or device (", difference,
                     "): use another --profile-dir, or the flags that profile was made with"));
  }
  return std::optional<varuna::Profile>(*std::move(read));
}

// A profile of this model with no measurements.
varuna::Profile EmptyProfile(const std::string& model, const std::string& device,
                             const std::string& dtype, int num_segments) {
  varuna::Profile profile;
  profile.model = model;
  profile.device = device;
  profile.dtype = dtype;
  profile.num_segments = num_segments;
  profile.statics.resize(static_cast<size_t>(num_segments));
  profile.compute.resize(static_cast<size_t>(num_segments));
  return profile;
}

// The segments that lack at least one of `sizes` in `existing` (all of them without it).
std::vector<int> MissingSegments(const varuna::Profile* existing, int num_segments,
                                 const std::vector<int>& sizes) {
  std::vector<int> missing;
  for (int k = 0; k < num_segments; ++k) {
    for (int b : sizes) {
      if (existing == nullptr || existing->compute[static_cast<size_t>(k)].count(b) == 0) {
        missing.push_back(k);
        break;
      }
    }
  }
  return missing;
}

std::string RankDir(const std::string& dir, int rank) { return absl::StrCat(dir, "/.rank_", rank); }

// Removes a directory tree when it goes out of scope (a rank's private measurements).
class RemoveOnExit {
 public:
  explicit RemoveOnExit(std::string path) : path_(std::move(path)) {}
  ~RemoveOnExit() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

 private:
  std::string path_;
};

// Rank 0 of a launched run: merges every rank's measurements (<dir>/.rank_<r>) and `comm` into
// `result`, writes it to `dir` and removes every .rank_* directory there.
// Measures the whole model as one stage for the segment joins, where it is small enough to run
// whole on the device (kMaxWholeModelParameters, with its optimizer state); nullopt, with a
// line in the log, where it is not or the measurement failed (the profile then has no joins
// for these sizes, and the simulator charges a stage the sum of its segments).
std::optional<varuna::Profile> MeasureWholeModel(const gpt2::Gpt2Config& config,
                                                 const varuna::StageBuilder& builder,
                                                 const varuna::InputMaker& inputs,
                                                 const varuna::ProfilerOptions& profiler,
                                                 TrainingLog& log) {
  // Weights and gradients (no optimizer state: the whole model's step work is not timed), 4
  // bytes a parameter in half precision, 8 GB for 2e9 parameters, plus every layer's
  // activations at once; on a GPU running out of memory only ends the sizes. On the CPU it
  // would end the process (the kernel's out-of-memory killer): gpt2-small (124M) at most.
  const int64_t limit = profiler.device.is_cuda() ? 2'000'000'000 : 150'000'000;
  const int64_t parameters = gpt2::AllocatedParameters(config, 0, config.num_layers - 1);
  if (config.num_layers < 2) return std::nullopt;
  if (parameters > limit) {
    log.Info(absl::StrFormat(
        "> segment joins not measured: the whole model (%.2fB parameters) is over the %.1fB "
        "measured whole on %s; the plan charges a stage the sum of its segments",
        parameters / 1e9, limit / 1e9, profiler.device.is_cuda() ? "a GPU" : "the CPU"));
    return std::nullopt;
  }
  absl::StatusOr<varuna::Profile> whole = absl::InternalError("not measured");
  try {
    whole = varuna::ProfileWholeModel(builder, config.num_layers, inputs, profiler);
  } catch (const std::exception& e) {  // building the whole model (out of memory, say)
    whole = absl::InternalError(e.what());
  }
  if (!whole.ok()) {
    log.Info(absl::StrCat("> segment joins not measured: the whole model as one stage failed (",
                          whole.status().message(), ")"));
    return std::nullopt;
  }
  return *std::move(whole);
}

// The joins of `whole` against `result`'s segments, into `result` (by size, replacing older
// ones), and a line in the log.
void AddJoins(const std::optional<varuna::Profile>& whole, varuna::Profile& result,
              TrainingLog& log) {
  if (!whole) return;
  std::vector<std::string> parts;
  for (const auto& [b, join] : varuna::SegmentJoins(*whole, result)) {
    result.joins[b] = join;
    parts.push_back(absl::StrFormat("b=%d F %+.3f R %+.3f B %+.3f", b, join.forward_ms,
                                    join.recompute_ms, join.backward_ms));
  }
  if (!parts.empty()) {
    log.Info(absl::StrCat("> segment joins (ms per segment after a stage's first): ",
                          absl::StrJoin(parts, "; ")));
  }
}

absl::Status MergeRanks(const std::string& dir, int world_size, const varuna::CommProfile& comm,
                        const std::optional<varuna::Profile>& whole, TrainingLog& log,
                        varuna::Profile& result) {
  for (int r = 0; r < world_size; ++r) {
    absl::StatusOr<varuna::Profile> part = varuna::ReadProfile(RankDir(dir, r));
    if (!part.ok()) {
      return absl::Status(
          part.status().code(),
          absl::StrCat("rank 0 cannot read rank ", r, "'s measurements (", part.status().message(),
                       "): when the ranks span nodes, --profile-dir must be a "
                       "shared directory every rank sees"));
    }
    if (absl::Status status = varuna::MergeProfile(*part, result); !status.ok()) return status;
  }
  varuna::MergeIntoProfile(comm, result);
  AddJoins(whole, result, log);
  if (absl::Status status = varuna::WriteProfile(result, dir); !status.ok()) return status;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ignored)) {
    if (entry.path().filename().string().rfind(".rank_", 0) == 0) {
      std::filesystem::remove_all(entry.path(), ignored);
    }
  }
  return absl::OkStatus();
}

// The parameter count of every segment, the same on every rank (a collective over `world`):
// segment k's from the rank that measured it (`measured`), or, for the segments nobody measured
// now (`missing` lacks them), from rank 0's `base`.
absl::StatusOr<std::vector<int64_t>> SegmentParameterCounts(
    varuna::comm::World& world, const varuna::Profile& measured, const std::vector<int>& mine,
    const std::vector<int>& missing, const varuna::Profile* base, int num_segments) {
  at::Tensor counts = at::zeros({num_segments}, at::kLong);
  for (int k : mine) counts[k] = measured.statics[static_cast<size_t>(k)].parameter_count;
  if (world.rank() == 0 && base != nullptr) {
    for (int k = 0; k < num_segments; ++k) {
      if (std::find(missing.begin(), missing.end(), k) == missing.end()) {
        counts[k] = base->statics[static_cast<size_t>(k)].parameter_count;
      }
    }
  }
  if (absl::Status status = world.group().AllReduceSum(counts); !status.ok()) return status;
  std::vector<int64_t> result(static_cast<size_t>(num_segments));
  for (int k = 0; k < num_segments; ++k) result[static_cast<size_t>(k)] = counts[k].item<int64_t>();
  return result;
}

// "2 sizes within a node, none across nodes, all-reduce rings 2..4".
std::string DescribeCurves(const varuna::Profile& profile) {
  auto sizes = [](const varuna::CostCurve& curve) {
    return curve.points.empty() ? std::string("none") : absl::StrCat(curve.points.size(), " sizes");
  };
  std::string rings = "none";
  if (!profile.allreduce.empty()) {
    rings = absl::StrCat(profile.allreduce.begin()->first, "..", profile.allreduce.rbegin()->first);
  }
  return absl::StrCat("sends within a node: ", sizes(profile.send_within_node),
                      ", across nodes: ", sizes(profile.send_across_nodes),
                      ", all-reduce rings: ", rings);
}

// With --profile-every-rank: every time this rank measured in `profile` (each of `segments`'
// F, R and B at every size, warm and, where measured, cold, and its step work) replaced by the
// slowest rank's. Training is
// paced by its slowest rank: a replica waits for the slower one at every all-reduce, a pipeline
// for its slower stage; and ranks sharing one machine's cores are not equally fast (on the
// 2-core CPU VM the second rank computed 1-5% slower than the first in quiet stretches, 4-38%
// in busy ones; docs/profiling.md, "Steal time"). Every rank calls it with the same segments
// and sizes measured (all measure every segment); memory stays this rank's. Returns, per rank,
// how many of the measured times were its (ties to the lowest rank; cold times no rank
// measured are not counted).
absl::StatusOr<std::vector<int64_t>> KeepSlowestRank(varuna::comm::World& world,
                                                     const std::vector<int>& segments,
                                                     varuna::Profile& profile) {
  std::vector<double*> times;
  for (int k : segments) {
    for (auto& [b, m] : profile.compute[k]) {
      // The cold times too: 0 where this rank did not measure them (the segment too small or
      // too large for its cache), so ranks that differ there still gather the same count.
      times.insert(times.end(), {&m.forward_ms, &m.recompute_ms, &m.backward_ms, &m.forward_cold_ms,
                                 &m.recompute_cold_ms, &m.backward_cold_ms});
    }
    varuna::SegmentStatic& statics = profile.statics[k];
    times.insert(times.end(), {&statics.gradient_ms, &statics.bucket_ms, &statics.optimizer_ms});
  }
  const int64_t n = static_cast<int64_t>(times.size());
  // Gathers through sums: each rank writes its own row, the other rows are zero. First the
  // counts, so that ranks that measured different sizes (one ran out of memory) fail, all
  // of them, instead of summing mismatched tensors.
  at::Tensor counts = at::zeros({world.size()}, at::kDouble);
  counts[world.rank()] = static_cast<double>(n);
  if (absl::Status status = world.group().AllReduceSum(counts); !status.ok()) return status;
  if (counts.min().item<double>() != counts.max().item<double>()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--profile-every-rank: the ranks measured different micro-batch sizes (one ran out of "
        "memory?): ",
        n, " times on rank ", world.rank(),
        "; profile the sizes every rank fits, or without --profile-every-rank"));
  }
  std::vector<int64_t> counts_by_rank(world.size(), 0);
  if (n == 0) return counts_by_rank;  // nothing measured (an extension that had it all), on all
  at::Tensor rows = at::zeros({world.size(), n}, at::kDouble);
  auto mine = rows.accessor<double, 2>()[world.rank()];
  for (int64_t i = 0; i < n; ++i) mine[i] = *times[i];
  if (absl::Status status = world.group().AllReduceSum(rows); !status.ok()) return status;
  const auto [slowest, which] = rows.max(0);
  const auto slowest_ms = slowest.accessor<double, 1>();
  const auto slowest_rank = which.accessor<int64_t, 1>();
  for (int64_t i = 0; i < n; ++i) {
    *times[i] = slowest_ms[i];
    if (slowest_ms[i] > 0) ++counts_by_rank[slowest_rank[i]];  // a time no rank measured: none's
  }
  return counts_by_rank;
}

}  // namespace

absl::Status RunProfiling(const gpt2::Gpt2Config& config, const ProfileModeOptions& options,
                          TrainingLog& log) {
  for (int k : options.segments) {
    if (k >= config.num_layers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--profile-segments: segment ", k, " does not exist: the model has ", config.num_layers,
          " segments, 0-", config.num_layers - 1, " (one per layer)"));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const varuna::json::Value model_json = gpt2::ModelConfigJson(config);
  const std::string model = varuna::json::Serialize(model_json);
  const std::string dtype = varuna::ProfileDtypeName(options.dtype);
  varuna::comm::World* world = options.world;
  const int world_size = world ? world->size() : 1;
  const int rank = world ? world->rank() : 0;
  auto agree = [world](const std::string& step, const absl::Status& local) {
    // The world group is Gloo (JoinWorld), so the codes live on the CPU.
    return world ? varuna::comm::AgreeOnStatus(world->store(), world->group(),
                                               absl::StrCat("profiling/", step, "/"), local,
                                               c10::Device(c10::kCPU))
                 : local;
  };

  absl::StatusOr<std::optional<varuna::Profile>> existing =
      ReadExisting(options, model_json, model, dtype);
  if (absl::Status status = agree("read", existing.status()); !status.ok()) return status;
  const varuna::Profile* base = existing->has_value() ? &**existing : nullptr;
  if (base) log.Info(absl::StrCat("> profiling: extending the profile in ", options.dir));

  // The segments the profile lacks, the i-th of them measured by rank i mod world_size.
  std::vector<int> missing = MissingSegments(base, config.num_layers, options.micro_batch_sizes);
  if (!options.segments.empty()) {
    std::vector<int> requested;
    std::set_intersection(missing.begin(), missing.end(), options.segments.begin(),
                          options.segments.end(), std::back_inserter(requested));
    missing = std::move(requested);
  }
  // Every rank measures every segment (--profile-every-rank), or its share.
  const bool every_rank = world != nullptr && options.every_rank;
  std::vector<int> mine;
  for (size_t i = 0; i < missing.size(); ++i) {
    if (every_rank || static_cast<int>(i % static_cast<size_t>(world_size)) == rank) {
      mine.push_back(missing[i]);
    }
  }
  std::string how;
  if (every_rank) {
    how = absl::StrFormat(", each measured by all %d processes at once (the slowest kept)",
                          world_size);
  } else if (world) {
    how = absl::StrFormat(", shared among %d processes (rank 0 measures %d)", world_size,
                          mine.size());
  }
  log.Info(absl::StrFormat("> profiling %d of %d segments at micro-batch sizes %s on %s (%s)%s",
                           missing.size(), config.num_layers,
                           absl::StrJoin(options.micro_batch_sizes, ","), options.device_name,
                           dtype, how));
  varuna::ProfilerOptions profiler;
  profiler.micro_batch_sizes = options.micro_batch_sizes;
  profiler.device = options.device;
  profiler.dtype = options.dtype;
  profiler.segments = mine;
  profiler.rounds = options.rounds;
  profiler.progress = [&log](const std::string& line) { log.Info(line); };
  const int64_t seq = config.seq_length;
  const int64_t vocab = config.vocab_size;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  varuna::InputMaker inputs = [seq, vocab, &generator](int b) {
    varuna::TensorMap map;
    map["input_ids"] = at::randint(vocab, {b, seq}, generator, at::kLong);
    map["position_ids"] = at::arange(seq, at::kLong).unsqueeze(0).repeat({b, 1});
    map["labels"] = at::randint(vocab, {b, seq}, generator, at::kLong);
    map["loss_mask"] = at::ones({b, seq}, at::kFloat);
    return map;
  };
  const varuna::StageBuilder builder =
      gpt2::Gpt2StageBuilder(config, options.seed, options.execution);
  absl::StatusOr<varuna::Profile> measured =
      EmptyProfile(model, options.device_name, dtype, config.num_layers);
  if (every_rank) {
    // One segment at a time, the ranks starting it together, and every segment once per round
    // (so that the rounds are spread over the run as without --profile-every-rank); a failure on
    // any rank stops all, at the next agreement, which every rank reaches.
    absl::Status local = measured.status();
    bool stopped = false;
    std::vector<varuna::Profile> rounds;
    for (int round = 0; round < options.rounds && !stopped; ++round) {
      varuna::Profile this_round =
          EmptyProfile(model, options.device_name, dtype, config.num_layers);
      for (int k : mine) {
        const absl::Status ready = agree(absl::StrCat("segment-", k, "-round-", round), local);
        if (!ready.ok()) {
          local = ready;
          stopped = true;
          break;
        }
        varuna::ProfilerOptions one = profiler;
        one.segments = {k};
        one.rounds = 1;
        if (options.rounds > 1) {
          one.progress = [&log, round, rounds = options.rounds](const std::string& line) {
            log.Info(absl::StrFormat("round %d of %d: %s", round + 1, rounds, line));
          };
        }
        absl::StatusOr<varuna::Profile> part =
            varuna::ProfileSegments(builder, config.num_layers, inputs, one, base);
        if (!part.ok()) {
          local = part.status();
          continue;  // to the next agreement, which reports it to every rank
        }
        part->model = model;
        part->device = options.device_name;
        if (absl::Status status = varuna::MergeProfile(*part, this_round); !status.ok()) {
          local = status;
        }
      }
      if (local.ok()) rounds.push_back(std::move(this_round));
    }
    if (!local.ok()) {
      measured = local;
    } else if (rounds.size() == 1) {
      measured = std::move(rounds.front());
    } else {
      measured = varuna::MedianOfRounds(rounds);
    }
  } else if (!mine.empty()) {
    measured = varuna::ProfileSegments(builder, config.num_layers, inputs, profiler, base);
    if (measured.ok()) {
      measured->model = model;
      measured->device = options.device_name;
    }
  }
  // With every rank measuring, each time is the slowest rank's (KeepSlowestRank), and rank 0
  // contributes the profile.
  if (every_rank) {
    absl::Status ready = agree("slowest-rank", measured.status());
    if (ready.ok()) {
      absl::StatusOr<std::vector<int64_t>> counts = KeepSlowestRank(*world, mine, *measured);
      if (counts.ok()) {
        std::vector<std::string> parts;
        int64_t total = 0;
        for (size_t r = 0; r < counts->size(); ++r) {
          parts.push_back(absl::StrCat("rank ", r, " in ", (*counts)[r]));
          total += (*counts)[r];
        }
        if (total > 0) {
          log.Info(absl::StrCat("> profiling: each time is the slowest rank's, ", total,
                                " times: slowest ", absl::StrJoin(parts, ", ")));
        }
      }
      ready = counts.status();
    }
    if (!ready.ok()) measured = ready;
  }
  const std::vector<int> kept = every_rank && rank != 0 ? std::vector<int>() : mine;
  if (every_rank && rank != 0 && measured.ok()) {
    measured = EmptyProfile(model, options.device_name, dtype, config.num_layers);
  }
  // The segment joins (profile.h: SegmentJoin) need the whole model run as one stage: measured
  // when this run measured segments, on every rank at once (rank 0's is kept), so that the
  // ranks share the machine as they did for the segments.
  // Sizes whose joins an extended profile already has are not measured again.
  varuna::ProfilerOptions whole_profiler = profiler;
  whole_profiler.micro_batch_sizes.clear();
  const std::vector<int> complete = base ? base->CommonMicroBatchSizes() : std::vector<int>();
  for (int b : options.micro_batch_sizes) {
    const bool known = base && base->joins.count(b) > 0 &&
                       std::find(complete.begin(), complete.end(), b) != complete.end();
    if (!known) whole_profiler.micro_batch_sizes.push_back(b);
  }
  // Not for a run of some segments only (--profile-segments) that leaves others missing: the
  // joins need every segment.
  const bool leaves_some =
      MissingSegments(base, config.num_layers, options.micro_batch_sizes).size() != missing.size();
  std::optional<varuna::Profile> whole;
  if (!missing.empty() && !leaves_some && !whole_profiler.micro_batch_sizes.empty()) {
    // Every rank takes part (the ranks start together); none measures after a failure.
    const absl::Status ready = world ? agree("whole-model", measured.status()) : measured.status();
    if (ready.ok()) whole = MeasureWholeModel(config, builder, inputs, whole_profiler, log);
  }
  varuna::Profile result =
      base ? **existing : EmptyProfile(model, options.device_name, dtype, config.num_layers);

  if (world == nullptr) {
    if (!measured.ok()) return measured.status();
    if (absl::Status status = varuna::MergeProfile(*measured, result); !status.ok()) {
      return status;
    }
    AddJoins(whole, result, log);
    if (absl::Status status = varuna::WriteProfile(result, options.dir); !status.ok()) {
      return status;
    }
  } else {
    // Each rank's measurements go through the file system to rank 0.
    const std::string own = RankDir(options.dir, rank);
    RemoveOnExit remove_own(own);
    absl::Status local = measured.status();
    if (local.ok()) {
      std::error_code ignored;
      std::filesystem::remove_all(own, ignored);  // a failed earlier run's
      local = varuna::WriteProfile(*measured, own);
    }
    if (absl::Status status = agree("segments", local); !status.ok()) return status;

    varuna::CommProfileOptions comm_options;
    for (int b : options.micro_batch_sizes) {
      comm_options.message_bytes.push_back(static_cast<int64_t>(b) * config.seq_length *
                                           config.hidden_size *
                                           static_cast<int64_t>(c10::elementSize(options.dtype)));
    }
    // Gradient sizes too, so that the all-reduce curve spans what auto-config asks for (a
    // stage's fp32 gradients: 4 bytes per parameter of each segment, and of the whole model
    // for P = 1) instead of extrapolating from the activation sizes. Each is capped at 1 GiB
    // (larger ones are extrapolated from the points below). MeasureCommunication times the
    // point-to-point sends at these sizes as well: cheap on the CPU for small models, and they
    // extend the send curves.
    absl::StatusOr<std::vector<int64_t>> parameters =
        SegmentParameterCounts(*world, *measured, kept, missing, base, config.num_layers);
    if (absl::Status status = agree("parameters", parameters.status()); !status.ok()) {
      return status;
    }
    constexpr int64_t kMaxGradientBytes = int64_t{1} << 30;
    constexpr int64_t kGradientBytesPerParameter = 4;
    int64_t model_parameters = 0;
    for (int64_t count : *parameters) {
      model_parameters += count;
      if (count > 0) {
        comm_options.message_bytes.push_back(
            std::min(count * kGradientBytesPerParameter, kMaxGradientBytes));
      }
    }
    if (model_parameters > 0) {
      comm_options.message_bytes.push_back(
          std::min(model_parameters * kGradientBytesPerParameter, kMaxGradientBytes));
    }
    comm_options.gpus_per_node = options.gpus_per_node;
    comm_options.device = options.device;
    log.Info(absl::StrFormat(
        "> measuring communication over %d processes (%d per node) at %s bytes", world_size,
        options.gpus_per_node, absl::StrJoin(comm_options.message_bytes, ",")));
    absl::StatusOr<varuna::CommProfile> comm = varuna::MeasureCommunication(*world, comm_options);
    if (absl::Status status = agree("communication", comm.status()); !status.ok()) return status;
    absl::Status merged = rank == 0 ? MergeRanks(options.dir, world_size, *comm, whole, log, result)
                                    : absl::OkStatus();
    // Also the barrier that keeps every rank until the profile exists.
    if (absl::Status status = agree("merge", merged); !status.ok()) return status;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log.Info(absl::StrFormat(
      "> profile written to %s in %.1f s (micro-batch sizes measured on every segment: %s)",
      options.dir, seconds, absl::StrJoin(result.CommonMicroBatchSizes(), ",")));
  if (result.send_within_node.points.empty() && result.send_across_nodes.points.empty() &&
      result.allreduce.empty()) {
    log.Info(
        "> the profile has no communication curves: a launched run measures them "
        "(//varuna:launch --nstages=1 --gpus_per_node=<n> ... -- pretrain_gpt2 --profiling ...)");
  } else {
    log.Info(absl::StrCat("> communication curves: ", DescribeCurves(result)));
  }
  return absl::OkStatus();
}

absl::Status RunProfileMode(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                            const varuna::VarunaOptions& engine,
                            const varuna::LaunchEnvironment& launch,
                            const std::vector<std::string>& mode_lines) {
  // The sample run's default metrics file is for training; profiling writes one only if asked.
  const bool rank0 = engine.rank == 0;
  const std::string metrics = !rank0 || (a.sample_run && !a.WasGiven("metrics-file"))
                                  ? ""
                                  : varuna::ResolveUserPath(a.metrics_file);
  absl::StatusOr<std::unique_ptr<TrainingLog>> log =
      TrainingLog::Open(rank0 ? stdout : nullptr, metrics);
  if (!log.ok()) return log.status();
  std::unique_ptr<varuna::comm::World> world;
  const int world_size = launch.world_size.value_or(1);
  if (world_size > 1) {
    absl::StatusOr<std::unique_ptr<varuna::comm::World>> joined =
        JoinWorld(a, engine, launch, world_size, /*stop_requested=*/nullptr);
    if (!joined.ok()) return joined.status();
    world = *std::move(joined);
    if (!launch.local_world_size) {
      (*log)->Info(
          "> LOCAL_WORLD_SIZE is not set: every process counts as a node of its own for the "
          "communication curves");
    }
  }
  for (const std::string& line : mode_lines) (*log)->Info(line);
  absl::StatusOr<AttentionChoice> attention =
      ChooseAttentionBackend(a.attention_backend, engine.device, engine.dtype, config,
                             /*micro_batch=*/a.profile_micro_batch_sizes.back(), a.deterministic);
  if (!attention.ok()) return attention.status();
  (*log)->Info(absl::StrCat("> attention: ", attention->reason));
  ProfileModeOptions options;
  options.dir = varuna::ResolveUserPath(a.profile_dir.empty() ? a.save : a.profile_dir);
  options.micro_batch_sizes = a.profile_micro_batch_sizes;
  options.segments = a.profile_segments;
  options.device = engine.device;
  options.device_name = DeviceName(engine.device);
  options.dtype = engine.dtype;
  options.seed = static_cast<uint64_t>(a.seed);
  // The segments as training runs them (the fusions, the last segment's LM head and loss above
  // all, and FP8), so the profile times what the simulator is asked to predict.
  options.execution = TrainerExecutionOptions(a);
  options.execution.attention = attention->backend;
  if (options.execution.fp8) {  // a list (ParseArguments refuses auto here)
    (*log)->Info(absl::StrCat("> fp8 linears: ", Fp8LinearsNames(options.execution.fp8_linears),
                              " (--fp8-linears)"));
  }
  options.world = world.get();
  options.gpus_per_node = launch.local_world_size.value_or(1);
  options.every_rank = a.profile_every_rank;
  options.rounds = a.profile_rounds;
  at::manual_seed(a.seed);
  return RunProfiling(config, options, **log);
}

}  // namespace trainer
