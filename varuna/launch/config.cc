#include "varuna/launch/config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "varuna/io/json.h"

namespace varuna {
namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

std::vector<int> StageSizes(const Candidate& candidate) {
  std::vector<int> sizes;
  for (const SegmentRange& range : candidate.stages) sizes.push_back(range.size());
  return sizes;
}

// ", within nodes X Gbit/s, between nodes Y Gbit/s" for the bandwidths given, else "".
std::string Bandwidths(const LaunchOptions& options) {
  std::string out;
  if (options.intra_node_gbps > 0) {
    absl::StrAppend(&out, ", within nodes ", options.intra_node_gbps, " Gbit/s");
  }
  if (options.inter_node_gbps > 0) {
    absl::StrAppend(&out, ", between nodes ", options.inter_node_gbps, " Gbit/s");
  }
  return out;
}

// The profiled model's sequence length (its JSON's "seq_length"), or 0 when it has none.
int64_t ProfileSequenceLength(const Profile& profile) {
  absl::StatusOr<json::Value> model = json::Parse(profile.model);
  if (!model.ok()) return 0;
  return json::AsInt64(json::Find(*model, "seq_length")).value_or(0);
}

}  // namespace

absl::StatusOr<bool> ConfiguresFromProfile(const LaunchOptions& options) {
  if (options.profile_dir.empty()) return false;
  const bool stages = options.nstages != 0;
  const bool chunk = options.chunk_size != 0;
  if (stages != chunk) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--profile_dir=", options.profile_dir, " with only ", stages ? "--nstages" : "--chunk_size",
        ": give neither --nstages nor --chunk_size (the launcher chooses both from the profile) "
        "or both (the profile is then ignored)"));
  }
  return !stages;
}

absl::StatusOr<LaunchChoice> ChooseLaunchConfiguration(const Profile& profile,
                                                       const LaunchOptions& options) {
  auto invalid = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (!(options.gpu_memory_gb > 0) || !std::isfinite(options.gpu_memory_gb)) {
    return invalid(
        "--profile_dir needs --gpu_memory_gb, the memory of one GPU in GiB (e.g. "
        "--gpu_memory_gb=80), to drop configurations that do not fit; got ",
        options.gpu_memory_gb);
  }
  if (options.batch_size < 1) {
    return invalid("--batch_size=", options.batch_size,
                   ": the configuration search needs the global batch, e.g. --batch_size=32");
  }
  if (options.gpus_per_node < 1 || options.nnodes < 1) {
    return invalid("--gpus_per_node=", options.gpus_per_node, " and --nnodes=", options.nnodes,
                   " must be at least 1");
  }
  const int workers = options.gpus_per_node * options.nnodes;
  ClusterSpec cluster;
  cluster.nodes = options.nnodes;
  cluster.gpus_per_node = options.gpus_per_node;
  cluster.gpu_memory_bytes = static_cast<int64_t>(options.gpu_memory_gb * kBytesPerGiB);
  cluster.intra_node_gbps = options.intra_node_gbps;
  cluster.inter_node_gbps = options.inter_node_gbps;
  AutoConfigOptions search;
  search.global_batch = options.batch_size;
  const std::string searched_for =
      absl::StrCat("configuring from --profile_dir=", options.profile_dir, " for W=", workers,
                   " GPUs (--gpus_per_node=", options.gpus_per_node, " x --nnodes=", options.nnodes,
                   ") of --gpu_memory_gb=", options.gpu_memory_gb,
                   " and --batch_size=", options.batch_size, Bandwidths(options));
  std::vector<std::string> skipped;
  absl::StatusOr<std::vector<Candidate>> candidates =
      SearchConfigurations(profile, cluster, search, &skipped);
  if (!candidates.ok()) {
    return absl::Status(candidates.status().code(),
                        absl::StrCat(searched_for, ": ", candidates.status().message()));
  }

  LaunchChoice choice;
  choice.searched = static_cast<int>(candidates->size());
  choice.skipped = std::move(skipped);
  for (Candidate& candidate : *candidates) {
    if (candidate.pipeline_stages * candidate.data_parallel == workers) {
      choice.usable.push_back(std::move(candidate));
    }
  }
  if (choice.usable.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        searched_for, ": none of the ", choice.searched,
        " configurations that fit uses all W=", workers,
        " workers (P x D = W; the launcher starts every worker, so P must divide W and the "
        "batch must split over D = W / P): change --batch_size to a multiple of W / P for some "
        "P dividing W, --gpus_per_node or --nnodes, or give --nstages and --chunk_size"));
  }
  choice.chosen = choice.usable.front();
  const Candidate& chosen = choice.chosen;
  choice.options = options;
  choice.options.nstages = chosen.pipeline_stages;
  choice.options.chunk_size = chosen.micro_batch;
  choice.options.stage_segments = StageSizes(chosen);

  choice.report =
      absl::StrCat("auto-configuration from ", options.profile_dir, ": ", choice.searched,
                   " configurations fit, ", choice.usable.size(), " of them use all W=", workers,
                   " workers (P x D = W, which the launch layout needs); the fastest ",
                   std::min<size_t>(choice.usable.size(), kLaunchCandidateRows), ":\n");
  for (const std::string& left_out : choice.skipped) {
    absl::StrAppend(&choice.report, "left out (the profile cannot price it): ", left_out, "\n");
  }
  absl::StrAppend(&choice.report, FormatCandidates(choice.usable, kLaunchCandidateRows));
  absl::StrAppend(
      &choice.report,
      absl::StrFormat("chosen: P=%d x D=%d, micro-batch %d (%d per step and replica), "
                      "segments per stage %s, predicted %.3f ms per step\n",
                      chosen.pipeline_stages, chosen.data_parallel, chosen.micro_batch,
                      chosen.num_micro_batches, absl::StrJoin(choice.options.stage_segments, "+"),
                      chosen.simulation.minibatch_ms));
  const int64_t seq_length = ProfileSequenceLength(profile);
  choice.plan = absl::StrCat(
      "plan from ", options.profile_dir, " for ", options.nnodes, " node(s) x ",
      options.gpus_per_node, " GPU(s) of ", options.gpu_memory_gb, " GiB, global batch ",
      options.batch_size, seq_length > 0 ? absl::StrCat(" x ", seq_length, " tokens") : "",
      Bandwidths(options), ": ", choice.usable.size(), " configurations use all ", workers,
      " GPUs and fit; the fastest ", std::min<size_t>(choice.usable.size(), kLaunchCandidateRows),
      ":\n", FormatPlan(choice.usable, kLaunchCandidateRows, options.batch_size * seq_length));
  for (const std::string& left_out : choice.skipped) {
    absl::StrAppend(&choice.plan, "left out (the profile cannot price it): ", left_out, "\n");
  }
  absl::StrAppend(&choice.plan, choice.report.substr(choice.report.rfind("chosen: ")));
  return choice;
}

absl::StatusOr<Profile> ReadLaunchProfile(const LaunchOptions& options) {
  absl::StatusOr<Profile> profile = ReadProfile(options.profile_dir);
  if (!profile.ok()) {
    return absl::Status(
        profile.status().code(),
        absl::StrCat("--profile_dir=", options.profile_dir, ": ", profile.status().message(),
                     ": write a profile there with `pretrain_gpt2 --profiling --profile-dir=",
                     options.profile_dir,
                     "` and the workers' model flags, or give --nstages and --chunk_size"));
  }
  return profile;
}

absl::StatusOr<LaunchChoice> ChooseFromProfileDir(const LaunchOptions& options) {
  absl::StatusOr<Profile> profile = ReadLaunchProfile(options);
  if (!profile.ok()) return profile.status();
  return ChooseLaunchConfiguration(*profile, options);
}

}  // namespace varuna
