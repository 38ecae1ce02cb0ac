// RunWorkerGroup: starts this node's worker processes of a LaunchPlan and supervises them
// until all have ended (the process side of `varuna/launch`).
//
// - Each worker runs in its own process group, with stdin from /dev/null, its stdout and
//   stderr merged into one pipe; every line it writes is copied to `output_fd` as
//   "[rank N] <line>". It is killed (SIGKILL) if the launcher itself dies.
// - SIGINT, SIGTERM, SIGHUP and SIGUSR1 sent to the launcher are forwarded to every running
//   worker's process group. SIGINT/SIGTERM/SIGHUP also start the grace period below; a second
//   one kills the workers at once. SIGUSR1 (Varuna's checkpoint-and-stop) is only forwarded.
// - When a worker exits non-zero or is killed by a signal, "rank N exited with code X" /
//   "rank N was killed by signal S (NAME)" goes to `message_fd`, the others get SIGTERM, and
//   those still running `grace_seconds` later get SIGKILL.
//
// The caller must be single-threaded: the signals above (and SIGCHLD) are blocked and read
// through a signalfd while the workers run; the previous mask is restored on return.
#ifndef VARUNA_WORKER_GROUP_H_
#define VARUNA_WORKER_GROUP_H_

#include <vector>

#include "absl/status/statusor.h"
#include "varuna/launch_plan.h"

namespace varuna {

struct WorkerGroupOptions {
  double grace_seconds = 10;  // SIGTERM-to-SIGKILL delay
  int output_fd = 1;          // where the workers' prefixed lines go
  int message_fd = 2;         // where the launcher's own "[launch] ..." lines go
};

// Runs `workers` (WorkerSpec::argv and env as given; argv[0] is the program path) until every
// one has ended. Returns the launcher's exit code: 0 when every worker exited 0, else that of
// the first worker to fail (its exit code, or 128 + the signal that killed it). Errors
// (Internal) only when the launcher cannot set up pipes or fork; workers already started are
// killed first.
absl::StatusOr<int> RunWorkerGroup(const std::vector<WorkerSpec>& workers,
                                   const WorkerGroupOptions& options);

}  // namespace varuna

#endif  // VARUNA_WORKER_GROUP_H_
