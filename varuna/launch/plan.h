// The launcher's plan: from the flags of `varuna/launch` (Varuna's run_varuna/launcher) to the
// exact command line and environment of every worker process this node starts. Pure: nothing
// here starts a process; launch/worker_group.h runs the plan.
//
// Layout (Varuna's launcher, "clustered"): W = gpus_per_node * nnodes processes,
// D = W / P replicas, and global rank r runs stage r mod P of replica r div P
// (StageMap::Uniform). Node n runs ranks [n * gpus_per_node, (n + 1) * gpus_per_node) with
// local rank r - n * gpus_per_node. The stages of one replica have consecutive ranks, so when
// gpus_per_node is a multiple of P each pipeline stays inside one node (activations never
// cross the network) and only the data-parallel gradient all-reduce spans nodes; when P is
// larger than gpus_per_node a pipeline spans ceil(P / gpus_per_node) consecutive nodes.
//
// Each worker runs `<program> <its flags unchanged> --rank=<r> --local_rank=<l>
// --stage_to_rank_map=<map> --chunk_size=<c> --batch-size=<batch_size / D>`, plus
// `--stage-segments=<sizes>` when options.stage_segments is set (appended, so
// `python3 train.py ...` keeps working) with the launcher's environment plus RANK, LOCAL_RANK,
// WORLD_SIZE, LOCAL_WORLD_SIZE (= gpus_per_node), MASTER_ADDR, MASTER_PORT (torchrun's names),
// and OMP_NUM_THREADS=1 when more than one worker shares the node and the variable is unset (as
// torchrun and Varuna do).
//
// Thread safety: the functions are pure (ResolveProgram reads the file system only).
#ifndef VARUNA_LAUNCH_PLAN_H_
#define VARUNA_LAUNCH_PLAN_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "varuna/pipeline/stage_map.h"

namespace varuna {

// The launcher's flags. Every flag accepts dashes and underscores (--chunk-size,
// --chunk_size), as `--name=value` or `--name value`.
struct LaunchOptions {
  int nstages = 0;        // --nstages: pipeline stages P (required unless --profile_dir)
  int chunk_size = 0;     // --chunk_size: micro-batch size (required unless --profile_dir)
  int batch_size = 0;     // --batch_size: GLOBAL batch, all replicas together (required)
  int gpus_per_node = 1;  // --gpus_per_node (alias --ngpus_per_server): workers on each node
  int nnodes = 1;         // --nnodes (alias --nservers): nodes in the job
  int node_rank = 0;      // --node_rank: this node, in [0, nnodes)
  std::string master_addr = "127.0.0.1";  // --master_addr: host of rank 0's rendezvous store
  int master_port = 29500;    // --master_port: its port; 0 = a free port (only with nnodes == 1)
  double grace_seconds = 10;  // --grace_seconds: SIGTERM-to-SIGKILL delay when stopping workers
  // --profile_dir: a profile (`pretrain_gpt2 --profiling`) from which, when --nstages and
  // --chunk_size are both omitted, the launcher chooses P, the micro-batch size and the stage
  // boundaries (launch/config.h).
  std::string profile_dir;
  double gpu_memory_gb = 0;  // --gpu_memory_gb: memory of one GPU in GiB (with --profile_dir)
  // --dry_run: with --profile_dir, print the plan (the best configurations for --nnodes x
  // --gpus_per_node GPUs: P, D, micro-batch, step time, tokens/s, memory per GPU, bubble) and
  // exit without starting workers; no worker program is needed.
  bool dry_run = false;
  // --intra_node_gbps / --inter_node_gbps: link bandwidths in Gbit/s within a node and between
  // nodes for the configuration search (ClusterSpec, planning/auto_config.h); 0 = the
  // profile's measured communication curves.
  double intra_node_gbps = 0;
  double inter_node_gbps = 0;
  // Segments per stage for every worker's --stage-segments (set from the profile's choice;
  // no flag). Empty: the workers split evenly.
  std::vector<int> stage_segments;
  // --morph: keep the job running on the machines --machine_list names (launch/morph.h); the
  // launcher becomes the job's manager and starts every node's launcher itself.
  bool morph = false;
  std::string machine_list;  // --machine_list: one machine (host) per line, for --morph
  // --remote_shell: how the manager starts a node's launcher on another machine (default "ssh";
  // the command is `<remote_shell> <host> <shell command>`).
  std::string remote_shell = "ssh";
  // --stop_on_stdin: this launcher is a node of a --morph job: a line "stop" on stdin asks the
  // workers to checkpoint and stop (as SIGUSR1 does), and the end of stdin (the manager is
  // gone) stops them as SIGTERM does.
  bool stop_on_stdin = false;
  bool help = false;  // --help / -h was given
  // The worker command: a Bazel label (//pkg:name) or a program path, then its flags.
  std::vector<std::string> command;
};

// Parses the launcher's arguments (without argv[0]). The worker command starts after `--` or
// at the first argument that is not a flag (Varuna's `launcher ... train.py args`). Checks
// syntax (unknown flags, malformed numbers, a missing command) and each flag's own bounds
// (--nnodes >= 1, --master_port in [0, 65535], ...); PlanLaunch checks the values together.
// InvalidArgument naming the argument and the fix.
absl::StatusOr<LaunchOptions> ParseLaunchFlags(const std::vector<std::string>& args);

// The usage text printed for --help.
std::string LaunchUsage();

// Where the worker program of `spec` (options.command[0]) is:
//  - "//pkg:name" or "//pkg" (name = last component of pkg): <workspace>/bazel-bin/pkg/name,
//    where <workspace> is $BUILD_WORKSPACE_DIRECTORY (set by `bazel run`) or the nearest
//    directory above `cwd` holding a WORKSPACE file. NotFound saying to `bazel build` it first
//    when the binary is missing.
//  - a path with a '/': relative paths resolve against $BUILD_WORKING_DIRECTORY when set (the
//    user's directory under `bazel run`), else against `cwd`.
//  - a bare name: searched in $PATH.
// `environment` is the launcher's environment. Returns the path, which exists and is
// executable; NotFound / InvalidArgument naming `spec` otherwise.
absl::StatusOr<std::string> ResolveProgram(const std::string& spec,
                                           const std::map<std::string, std::string>& environment,
                                           const std::string& cwd);

// One worker process of this node.
struct WorkerSpec {
  std::string name;           // how messages name it: "rank 3"
  std::string output_prefix;  // put before each line of its output: "[rank 3] "
  // True: it is a node's launcher under the --morph manager: a checkpoint-and-stop request
  // reaches it as a line "stop" on its stdin (a pipe) instead of SIGUSR1 (launch/worker_group.h).
  bool control_via_stdin = false;
  int rank = 0;                   // global rank
  int local_rank = 0;             // rank on this node
  StagePosition position;         // its stage and replica
  std::vector<std::string> argv;  // argv[0] is the program path
  std::vector<std::string> env;   // the whole environment, "NAME=value"
};

struct LaunchPlan {
  int num_stages = 0;        // P
  int num_replicas = 0;      // D
  int world_size = 0;        // W = P * D
  int global_batch = 0;      // --batch_size
  int replica_batch = 0;     // global_batch / D, passed as --batch-size
  int chunk_size = 0;        // micro-batch size
  int micro_batches = 0;     // per step and replica: ceil(replica_batch / chunk_size)
  int last_micro_batch = 0;  // size of the last micro-batch (chunk_size unless a tail)
  // Segments per stage, passed as --stage-segments; empty: the workers split evenly.
  std::vector<int> stage_segments;
  int node_rank = 0;
  int nnodes = 0;
  std::string master_addr;
  int master_port = 0;
  std::string program;  // resolved worker program
  StageMap stage_map = StageMap::Uniform(1, 1);
  std::vector<WorkerSpec> workers;  // this node's, in local-rank order
  std::vector<std::string> notes;   // advice that does not stop the launch

  // A human-readable summary (several lines, each ending in '\n'): P x D, the map, the batch
  // split, the rendezvous address, and this node's ranks.
  std::string Describe() const;
};

// Checks the values of `options` (see PlanLaunch for the errors); OK when PlanLaunch would
// accept them.
absl::Status ValidateLaunchOptions(const LaunchOptions& options);

// Validates `options` and computes the plan for this node. `program` is the resolved worker
// program (ResolveProgram); `environment` is the launcher's environment, which the workers
// inherit. options.master_port must already be non-zero (the caller picks a free port for 0).
// InvalidArgument naming the flags, their values and what to change when: a required flag is
// missing or out of range, P does not divide W or exceeds it, batch_size is not a multiple of
// D, chunk_size exceeds the per-replica batch, node_rank is not in [0, nnodes), stage_segments
// is set but not one size >= 1 per stage, or the worker flags already set one of the
// per-process flags the launcher adds (--stage-segments too, when the launcher sets it).
absl::StatusOr<LaunchPlan> PlanLaunch(const LaunchOptions& options, const std::string& program,
                                      const std::map<std::string, std::string>& environment);

}  // namespace varuna

#endif  // VARUNA_LAUNCH_PLAN_H_
