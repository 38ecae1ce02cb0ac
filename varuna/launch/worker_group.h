// RunWorkerGroup: starts this node's worker processes of a LaunchPlan and supervises them
// until all have ended (the process side of `varuna/launch`).
//
// - Each worker runs in its own process group, with stdin from /dev/null (a pipe for a
//   WorkerSpec::control_via_stdin one), its stdout and stderr merged into one pipe; every line it
//   writes is copied to `output_fd` after its WorkerSpec::output_prefix. It starts with SIGUSR1
//   ignored, so that a checkpoint request that comes before it has installed its handler does
//   not kill it, and it is killed (SIGKILL) if the launcher itself dies.
// - A checkpoint-and-stop request (Varuna's on-demand checkpoint) is SIGUSR1 sent to the
//   launcher, a line "stop" on options.control_fd, or options.watch returning a reason. It
//   reaches each running worker as SIGUSR1 to its process group, or as the line "stop" on its
//   stdin for a control_via_stdin worker, and again every options.resend_stop_seconds (when
//   positive) until the workers have ended: a worker that ignored the first one while starting
//   gets the next.
// - SIGINT, SIGTERM and SIGHUP sent to the launcher, or the end of options.control_fd (taken as
//   SIGHUP), are forwarded to every running worker's process group and start the grace period
//   below; a second one kills the workers at once.
// - When a worker exits non-zero or is killed by a signal, "<name> exited with code X" /
//   "<name> was killed by signal S (NAME)" goes to `message_fd`, the others get SIGTERM, and
//   those still running `grace_seconds` later get SIGKILL.
//
// The caller must be single-threaded: the signals above (and SIGCHLD) are blocked and read
// through a signalfd while the workers run; the previous mask is restored on return.
#ifndef VARUNA_LAUNCH_WORKER_GROUP_H_
#define VARUNA_LAUNCH_WORKER_GROUP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "varuna/launch/plan.h"

namespace varuna {

struct WorkerGroupOptions {
  double grace_seconds = 10;  // SIGTERM-to-SIGKILL delay
  int output_fd = 1;          // where the workers' prefixed lines go
  int message_fd = 2;         // where the launcher's own "[launch] ..." lines go
  // Read for lines from the job's manager ("stop"; see above); -1: none. Not closed here.
  int control_fd = -1;
  // Called every watch_seconds while the workers run; a non-empty result is the reason for a
  // checkpoint-and-stop request (it is called no more after that). Empty function: none.
  std::function<std::string()> watch;
  double watch_seconds = 1;
  double resend_stop_seconds = 0;  // 0: a checkpoint-and-stop request is sent once
};

struct WorkerGroupResult {
  // The launcher's exit code: 0 when every worker exited 0, else that of the first worker to
  // fail (its exit code, or 128 + the signal that killed it).
  int exit_code = 0;
  bool checkpoint_stop_requested = false;  // a checkpoint-and-stop request came (see above)
  bool terminate_requested = false;        // SIGINT, SIGTERM or SIGHUP came (or control EOF)
};

// Runs `workers` (WorkerSpec::argv and env as given; argv[0] is the program path) until every
// one has ended. Errors (Internal) only when the launcher cannot set up pipes or fork; workers
// already started are killed first.
absl::StatusOr<WorkerGroupResult> RunWorkerGroup(const std::vector<WorkerSpec>& workers,
                                                 const WorkerGroupOptions& options);

}  // namespace varuna

#endif  // VARUNA_LAUNCH_WORKER_GROUP_H_
