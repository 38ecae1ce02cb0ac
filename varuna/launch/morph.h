// Morphing: `varuna/launch --morph --machine_list=FILE` keeps one training job running on
// whatever machines FILE lists (Varuna's run_varuna manager with its morph server, section 10
// of varuna-reference.md, in one process).
//
// The launcher becomes the job's manager. For each generation of the job it
//  1. reads the machine list: one host per line, each running --gpus_per_node workers; blank
//     lines and text after '#' are ignored; the same host may appear several times (several
//     "nodes" on one machine, e.g. 127.0.0.1 for a local test);
//  2. chooses the configuration for those machines and the same global --batch_size
//     (ConfigureGeneration): from --profile_dir by auto-configuration (launch/config.h) when
//     --nstages/--chunk_size are omitted, else with the given P and micro-batch size. It uses
//     the longest prefix of the list that a configuration fits (Varuna: D = floor(W / P)) and
//     says which machines stay idle;
//  3. starts one node launcher per machine used (NodeSpecs): `varuna/launch --nnodes=n
//     --node_rank=i --stop_on_stdin ...` directly for this machine, or through
//     `<--remote_shell> <host> 'cd <user directory> && exec ...'` for another one (the launcher,
//     the program and the directory must exist at the same paths there, as Varuna assumes);
//     rank 0's rendezvous store runs on the first machine;
//  4. watches the machine list (once a second). When it changes, or the manager gets SIGUSR1
//     (a preemption notice), every node gets "stop" on its stdin, its launcher sends SIGUSR1
//     to its workers, and the job checkpoints the current iteration and exits 0 (the trainer's
//     on-demand checkpoint; the engine agrees on the stop across ranks);
//  5. relaunches on the machines listed now, with --load=<the workers' --save> (replacing any
//     --load / --load-iteration of theirs): the checkpoint resumes under the new layout.
// The job ends when a generation's workers all exit 0 without a stop request (training is
// done), or after SIGINT/SIGTERM/SIGHUP to the manager (forwarded: the workers checkpoint and
// stop). A failing worker ends the job with its exit code, as without --morph.
//
// Thread safety: the functions are pure except ReadMachineList (reads a file) and
// RunMorphingJob (runs the job; the caller must be single-threaded, as for RunWorkerGroup).
#ifndef VARUNA_LAUNCH_MORPH_H_
#define VARUNA_LAUNCH_MORPH_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varuna/launch/plan.h"
#include "varuna/planning/profile.h"

namespace varuna {

// How often a checkpoint-and-stop request is repeated to workers still running, by the manager
// and by its node launchers (launch/worker_group.h).
inline constexpr double kMorphResendStopSeconds = 5;

// The hosts of a machine list's text, in order. InvalidArgument naming `path` and the line
// when a line holds more than one word.
absl::StatusOr<std::vector<std::string>> ParseMachineList(absl::string_view text,
                                                          const std::string& path);

// Reads and parses the machine list at `path`. NotFound / PermissionDenied naming the file
// when it cannot be read.
absl::StatusOr<std::vector<std::string>> ReadMachineList(const std::string& path);

// The value of the worker flag `name` (without dashes; '-' and '_' are the same) in `command`
// (program first), written --name=value or --name value; the last one wins. nullopt if absent.
std::optional<std::string> WorkerFlagValue(const std::vector<std::string>& command,
                                           const std::string& name);

// `command` resuming from the checkpoints in `load`: its --load, --load-iteration and
// --resume-step flags (either spelling, with their values) removed and --load=<load> added.
std::vector<std::string> ResumeCommand(const std::vector<std::string>& command,
                                       const std::string& load);

// `text` quoted for a POSIX shell ('...', with ' written as '\'').
std::string ShellQuote(const std::string& text);

// Checks the flags of a --morph launch: --machine_list given; --nnodes and --node_rank not
// given (the list decides them); --stop_on_stdin not given; --profile_dir or both --nstages and
// --chunk_size (ConfiguresFromProfile); --batch_size at least 1; --gpus_per_node at least 1;
// --remote_shell not empty; a worker program with --save=DIR (the checkpoint to resume from).
// InvalidArgument naming the flag and the fix.
absl::Status ValidateMorphOptions(const LaunchOptions& options);

// One generation of a morphing job.
struct MorphGeneration {
  // The launch options of the job on `hosts`: nnodes = hosts.size(), master_addr, nstages,
  // chunk_size, stage_segments (from the profile), morph off. master_port is the manager's
  // --master_port (0 stays 0: RunMorphingJob picks a free port for each generation).
  LaunchOptions options;
  std::vector<std::string> hosts;  // the machines used: a prefix of the list
  int idle = 0;                    // machines listed but not used
  std::string report;              // what the manager prints, lines ending in '\n'
};

// The configuration for the machines `listed` (see step 2 above); `profile` is the profile
// read from --profile_dir, or null for fixed --nstages/--chunk_size. `host_name` is this
// machine's (IsThisMachine). InvalidArgument when `listed` is empty, or when it mixes this
// machine written as a loopback name (127.0.0.1, localhost) with other hosts, since they
// could not reach rank 0's store by that name; else the configuration error for the whole
// list (launch/plan.h / launch/config.h), noting that no shorter prefix works either.
absl::StatusOr<MorphGeneration> ConfigureGeneration(const LaunchOptions& options,
                                                    const std::vector<std::string>& listed,
                                                    const Profile* profile,
                                                    const std::string& host_name);

// Where and how the manager runs.
struct MorphContext {
  std::string launcher;                            // path of this launcher binary
  std::string directory;                           // the user's directory (UserDirectory)
  std::string host_name;                           // HostName()
  std::map<std::string, std::string> environment;  // the manager's environment
  int output_fd = 1;                               // where the nodes' output goes
  int message_fd = 2;                              // where the manager's "[launch]" lines go
};

// The node launchers of `generation` with rendezvous port `master_port` (see step 3 above),
// running `command`: the worker command with its program resolved (ResolveProgram), possibly
// ResumeCommand'ed. Each is
// control_via_stdin, named "node i (host)", and passes its output on unprefixed (its own
// launcher prefixes the workers' lines).
std::vector<WorkerSpec> NodeSpecs(const MorphGeneration& generation,
                                  const std::vector<std::string>& command, int master_port,
                                  const MorphContext& context);

// Runs the morphing job (steps 1-5 above) until it ends. Returns the exit code: 0 when the job
// finished or was stopped by SIGINT/SIGTERM/SIGHUP; the first failing node's code; 2 when the
// first generation cannot be configured, the options are invalid (ValidateMorphOptions), the
// worker program cannot be found (ResolveProgram) or the profile cannot be read;
// 1 when a generation stopped for a checkpoint but no checkpoint is in --save. Later
// generations that cannot be configured for the machines listed wait for the list to change.
int RunMorphingJob(const LaunchOptions& options, const MorphContext& context);

}  // namespace varuna

#endif  // VARUNA_LAUNCH_MORPH_H_
