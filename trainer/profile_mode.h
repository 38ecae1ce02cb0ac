// --profiling: Varuna's profile mode in the trainer. Instead of training, it measures every
// cut-point segment of the model at each --profile-micro-batches size on this process's device
// (varuna/planning/compute_profiler.h) and writes the profile (varuna/planning/profile.h) to
// --profile-dir (or --save),
// which the simulator and auto-configuration read.
//
// An existing profile in the directory is extended: only the (segment, size) pairs it lacks
// are measured, then merged and written back. A profile of another model, device or dtype is
// refused with the difference named (nothing is written). Inputs are random tokens of the
// model's vocabulary with position ids, labels and a full loss mask: profiling needs no data.
//
// One process (options.world null): every missing segment is measured here and the profile gets
// no communication curves (those it already has are kept; the log says how to measure them).
//
// A launched job (options.world set, every rank calls RunProfiling with the same options): the
// segments the profile lacks are shared round-robin (the i-th missing segment goes to rank
// i mod world size) or, with options.every_rank, every rank measures every one of them (the
// ranks agree before each segment, so they run it at the same time, contending for a shared
// machine as training's ranks do; each time is then the slowest rank's, since training is paced by
// its slowest rank, and rank 0 contributes them); each rank writes what
// it measured (what is kept) into <dir>/.rank_<r>; then all ranks
// measure the communication curves (varuna/planning/comm_profiler.h) with the activation bytes that
// cross a cut at each micro-batch size (b * seq_length * hidden_size * element size) as message
// sizes; then rank 0 merges the ranks' segments and the curves into the profile, writes it and
// removes the .rank_* directories. --profile-dir must therefore be a directory every rank sees
// (a shared file system when the ranks span nodes). After each of these steps the ranks agree
// on the outcome over the world group: a rank's error makes every rank return it (prefixed
// "rank r: "), and a rank that dies makes the others fail within the world's timeout. Every
// rank returns only after the profile is written (or the job failed).
//
// Thread safety: runs on the calling thread and uses the device exclusively; with a world, it
// is a collective over it (see planning/comm_profiler.h: no other traffic meanwhile).
#ifndef VARUNA_TRAINER_PROFILE_MODE_H_
#define VARUNA_TRAINER_PROFILE_MODE_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model.h"
#include "trainer/arguments.h"
#include "trainer/training_log.h"
#include "varuna/launch/environment.h"
#include "varuna/varuna.h"

namespace varuna::comm {
class World;
}  // namespace varuna::comm

namespace trainer {

struct ProfileModeOptions {
  std::string dir;                     // The profile directory, resolved.
  std::vector<int> micro_batch_sizes;  // Ascending, each >= 1.
  // The segments to measure (--profile-segments), ascending; empty: all of them.
  std::vector<int> segments;
  c10::Device device = c10::kCPU;
  std::string device_name;  // Profile::device, e.g. "NVIDIA H200" or "cpu".
  at::ScalarType dtype = at::kFloat;
  uint64_t seed = 1234;  // Weights and the random tokens.
  gpt2::Gpt2ExecutionOptions execution;
  // The job's world when launched with WORLD_SIZE > 1 (not owned; see above), else null.
  varuna::comm::World* world = nullptr;
  // Ranks per node (LOCAL_WORLD_SIZE) for the communication curves; used with `world` only.
  int gpus_per_node = 1;
  // With `world`: every rank measures every missing segment, the ranks starting each segment
  // together, and each time kept is the slowest rank's (--profile-every-rank).
  bool every_rank = false;
  // Rounds of the measurement (--profile-rounds, >= 1): varuna::ProfilerOptions::rounds.
  int rounds = 1;
};

// Profiles the missing pairs of `config` (of options.segments only, when given) into
// options.dir and logs each measurement, where it wrote and how long it took. OK, or:
// InvalidArgument naming --profile-segments when a segment is beyond the model's (before
// anything is read or written); FailedPrecondition naming the difference when the
// directory holds a profile of another model, device or dtype; ReadProfile's error for a
// malformed profile; the profiler's, the communication profiler's or WriteProfile's error (with
// a world: the lowest failing rank's, on every rank).
absl::Status RunProfiling(const gpt2::Gpt2Config& config, const ProfileModeOptions& options,
                          TrainingLog& log);

// pretrain_gpt2 --profiling: RunProfiling with the options of the flags, on one process or,
// when launched (WORLD_SIZE > 1 in `launch`), on every rank of the job, which it joins; the
// stage map plays no part. Logs on rank 0 (and to --metrics-file when it was given), including
// `mode_lines` (what --deterministic set). RunProfiling's errors, or joining's.
absl::Status RunProfileMode(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                            const varuna::VarunaOptions& engine,
                            const varuna::LaunchEnvironment& launch,
                            const std::vector<std::string>& mode_lines);

}  // namespace trainer

#endif  // VARUNA_TRAINER_PROFILE_MODE_H_
