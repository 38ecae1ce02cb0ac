// LaunchConfig: the launcher's choice of P, micro-batch size and stage boundaries from a profile
// (Varuna's auto-configuration at launch). With --profile_dir and neither --nstages nor
// --chunk_size, the launcher searches every configuration on the profile (planning/auto_config.h)
// for ClusterSpec{--nnodes, --gpus_per_node, --gpu_memory_gb} and the global --batch_size, keeps
// the candidates that use every worker (P * D == W = gpus_per_node * nnodes: the launch layout,
// launch/plan.h, starts W workers and needs each of them in the stage map), and launches the
// fastest: --nstages = its P, --chunk_size = its micro-batch size, and every worker gets
// --stage-segments = its stage sizes.
//
// --profile_dir with both --nstages and --chunk_size: the profile is not read (the flags win;
// the launcher prints a note). With only one of them: an error (give both or neither).
//
// Thread safety: ChooseLaunchConfiguration is pure; ChooseFromProfileDir reads files only.
#ifndef VARUNA_LAUNCH_CONFIG_H_
#define VARUNA_LAUNCH_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "varuna/launch/plan.h"
#include "varuna/planning/auto_config.h"
#include "varuna/planning/profile.h"

namespace varuna {

// How many candidates the launcher's table shows.
inline constexpr int kLaunchCandidateRows = 10;

// Whether `options` ask for the configuration to come from the profile: true for --profile_dir
// without --nstages and --chunk_size, false without --profile_dir or with both.
// InvalidArgument naming the flags for --profile_dir with only one of --nstages/--chunk_size.
absl::StatusOr<bool> ConfiguresFromProfile(const LaunchOptions& options);

struct LaunchChoice {
  // The input options with nstages, chunk_size and stage_segments set from `chosen`.
  LaunchOptions options;
  Candidate chosen;
  // The candidates that use every worker (P * D == W), fastest first; chosen is the first.
  std::vector<Candidate> usable;
  int searched = 0;  // candidates SearchConfigurations returned before the P * D == W filter
  // The P x D the profile cannot price, with what is missing (SearchConfigurations' skipped).
  std::vector<std::string> skipped;
  // What the launcher prints, several lines each ending in '\n': the filter's note, a line per
  // skipped P x D, the table of the first kLaunchCandidateRows usable candidates
  // (FormatCandidates) and a line naming the chosen one.
  std::string report;
  // What --dry_run prints, lines ending in '\n': the cluster searched (GPUs, memory, batch,
  // bandwidths), the planner's table of the first kLaunchCandidateRows usable candidates
  // (FormatPlan: step time, tokens/s with the profile model's seq_length, memory per GPU, bubble),
  // a line per skipped P x D and the chosen line.
  std::string plan;
};

// Chooses the launch configuration for `options` (gpus_per_node, nnodes, batch_size,
// gpu_memory_gb, intra_node_gbps, inter_node_gbps; nstages and chunk_size are ignored) from
// `profile`. InvalidArgument naming the
// flag when --gpu_memory_gb is missing or not positive, --batch_size is missing, or
// --gpus_per_node / --nnodes is below 1; the search's own errors (an invalid profile, a batch
// that fits no D, nothing fitting in memory) prefixed with the cluster and batch searched;
// FailedPrecondition when no candidate uses every worker (saying which changes would help).
absl::StatusOr<LaunchChoice> ChooseLaunchConfiguration(const Profile& profile,
                                                       const LaunchOptions& options);

// Reads the profile in options.profile_dir (a path the caller has resolved). ReadProfile's error
// prefixed with --profile_dir and how to write a profile when the directory holds no readable
// profile.
absl::StatusOr<Profile> ReadLaunchProfile(const LaunchOptions& options);

// ReadLaunchProfile, then ChooseLaunchConfiguration.
absl::StatusOr<LaunchChoice> ChooseFromProfileDir(const LaunchOptions& options);

}  // namespace varuna

#endif  // VARUNA_LAUNCH_CONFIG_H_
