#include "varuna/launch/plan.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/launch/environment.h"

namespace varuna {
namespace {

// The launcher's flags, bound to `options`.
void RegisterLaunchFlags(FlagParser& parser, LaunchOptions& options) {
  parser.Add("nstages", &options.nstages, "pipeline stages P (required unless --profile_dir)", "2");
  parser.Add("chunk_size", &options.chunk_size, "micro-batch size (required unless --profile_dir)",
             "2");
  parser.AddAlias("micro-batch-size", "chunk_size");  // Megatron's name, as in the trainer
  parser.Add("batch_size", &options.batch_size, "global batch size over all replicas (required)",
             "2");
  parser.AddAlias("global-batch-size", "batch_size");  // Megatron's name, as in the trainer
  parser.Add("gpus_per_node", &options.gpus_per_node, "worker processes per node", "2");
  parser.Add("nnodes", &options.nnodes, "nodes in the job", "2");
  parser.Add("node_rank", &options.node_rank, "this node's index in [0, nnodes)", "2");
  parser.Add("master_addr", &options.master_addr, "host of rank 0's rendezvous store");
  parser.Add("master_port", &options.master_port,
             "port of the rendezvous store (0 = a free port, one node only)", "29500");
  parser.Add("grace_seconds", &options.grace_seconds,
             "seconds between SIGTERM and SIGKILL when stopping workers", "10");
  parser.Add("profile_dir", &options.profile_dir,
             "a profile written by `pretrain_gpt2 --profiling`: with --nstages and --chunk_size "
             "both omitted, choose P, the micro-batch size and the stage boundaries from it "
             "(ignored when both are given)");
  parser.Add("gpu_memory_gb", &options.gpu_memory_gb,
             "memory of one GPU in GiB, for the configuration search (required with "
             "--profile_dir)",
             "80");
  parser.Add("dry_run", &options.dry_run,
             "with --profile_dir: print the plan (P, D, micro-batch, step time, tokens/s, memory "
             "per GPU, bubble of the best configurations) and exit without starting workers; no "
             "worker program needed");
  parser.Add("intra_node_gbps", &options.intra_node_gbps,
             "bandwidth between GPUs of one node in Gbit/s for the configuration search (0 = the "
             "profile's measured curves)",
             "7200");
  parser.Add("inter_node_gbps", &options.inter_node_gbps,
             "bandwidth between nodes in Gbit/s for the configuration search (0 = the profile's "
             "measured curves)",
             "400");
  parser.Add("morph", &options.morph,
             "keep the job running on the machines --machine_list names: when the list changes "
             "or the launcher gets SIGUSR1, the workers checkpoint and stop and the job restarts "
             "from that checkpoint on the machines listed then (needs --save in the worker "
             "flags)");
  parser.Add("machine_list", &options.machine_list,
             "with --morph: a file of machines, one host per line (each runs --gpus_per_node "
             "workers)");
  parser.Add("remote_shell", &options.remote_shell,
             "with --morph: the command that runs a node's launcher on another host");
  parser.Add("stop_on_stdin", &options.stop_on_stdin,
             "set by the --morph manager on each node's launcher: a line \"stop\" on stdin means "
             "checkpoint and stop (as SIGUSR1), the end of stdin means stop (as SIGTERM)");
  // Each flag's own bounds, checked as the flags are parsed; ValidateLaunchOptions checks them
  // again for options built in code, with the ones that relate flags. --nstages, --chunk_size
  // and --batch_size are not here: 0 is "not given", which ValidateLaunchOptions reports.
  for (const char* name : {"gpus_per_node", "nnodes"}) parser.SetMinimum(name, 1);
  for (const char* name :
       {"node_rank", "grace_seconds", "gpu_memory_gb", "intra_node_gbps", "inter_node_gbps"}) {
    parser.SetMinimum(name, 0);
  }
  parser.SetMinimum("master_port", 0);
  parser.SetMaximum("master_port", 65535);
  // Varuna's launcher.py spellings of the same flags.
  parser.AddAlias("ngpus_per_server", "gpus_per_node");
  parser.AddAlias("nservers", "nnodes");
  parser.SetUnknownFlagAdvice([names = parser.Names()](const std::string& name) {
    std::vector<std::string> known;
    for (const std::string& flag : names) known.push_back(absl::StrCat("--", flag));
    return absl::StrCat(": the launcher takes ", absl::StrJoin(known, " "),
                        "; flags for the workers go after the program, e.g. -- "
                        "//trainer:pretrain_gpt2 --",
                        name, "=...");
  });
}

// "1, 2, 4" for 4.
std::string Divisors(int n) {
  std::vector<int> divisors;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) divisors.push_back(d);
  }
  return absl::StrJoin(divisors, ", ");
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string Lookup(const std::map<std::string, std::string>& environment, const std::string& key) {
  auto it = environment.find(key);
  return it == environment.end() ? "" : it->second;
}

absl::StatusOr<std::string> ResolveLabel(const std::string& label,
                                         const std::map<std::string, std::string>& environment,
                                         const std::string& cwd) {
  const std::string body = label.substr(2);
  std::string package = body;
  std::string name;
  if (const size_t colon = body.find(':'); colon != std::string::npos) {
    package = body.substr(0, colon);
    name = body.substr(colon + 1);
  } else {
    name = package.substr(package.rfind('/') == std::string::npos ? 0 : package.rfind('/') + 1);
  }
  if (name.empty() || name.find(':') != std::string::npos ||
      package.find("..") != std::string::npos || name.find("..") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the worker program \"", label,
        "\" is not a Bazel label of a binary: write //package:name, e.g. //trainer:pretrain_gpt2"));
  }
  std::string workspace = Lookup(environment, "BUILD_WORKSPACE_DIRECTORY");
  if (workspace.empty()) {
    for (std::filesystem::path dir = cwd; !dir.empty(); dir = dir.parent_path()) {
      if (std::filesystem::exists(dir / "WORKSPACE") ||
          std::filesystem::exists(dir / "WORKSPACE.bazel")) {
        workspace = dir.string();
        break;
      }
      if (dir == dir.parent_path()) break;
    }
  }
  if (workspace.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "cannot resolve the Bazel label ", label,
        ": the launcher was not started by `bazel run` (BUILD_WORKSPACE_DIRECTORY is unset) and "
        "no directory above ",
        cwd,
        " has a WORKSPACE file; start it with `bazel run //varuna:launch -- ...` or give "
        "the program's path instead of a label"));
  }
  const std::string path =
      (std::filesystem::path(workspace) / "bazel-bin" / package / name).string();
  if (!IsExecutableFile(path)) {
    return absl::NotFoundError(absl::StrCat("the worker program ", label, " is not built (no ",
                                            path, "): run `bazel build ", label, "` first"));
  }
  return path;
}

// Flags the launcher sets for each worker; the worker command must not set them too.
const std::set<std::string>& PerProcessFlags() {
  static const auto* flags = new std::set<std::string>{
      "rank",       "local-rank",       "stage-to-rank-map", "chunk-size", "micro-batch-size",
      "batch-size", "global-batch-size"};
  return *flags;
}

}  // namespace

absl::StatusOr<LaunchOptions> ParseLaunchFlags(const std::vector<std::string>& args) {
  LaunchOptions options;
  FlagParser parser("launcher");
  RegisterLaunchFlags(parser, options);
  if (absl::Status status = parser.ParseUntilCommand(args, &options.command); !status.ok()) {
    return status;
  }
  options.help = parser.help_requested();
  if (options.dry_run && options.profile_dir.empty() && !options.help) {
    return absl::InvalidArgumentError(
        "--dry_run plans from a profile: give --profile_dir=<a `pretrain_gpt2 --profiling` "
        "directory> with --gpu_memory_gb and --batch_size");
  }
  if (options.command.empty() && !options.help && !options.dry_run) {
    return absl::InvalidArgumentError(
        "no worker program: put it after the launcher's flags and `--`, e.g. "
        "`--nstages=2 --micro-batch-size=4 --global-batch-size=32 -- //trainer:pretrain_gpt2 "
        "--data-path=...`");
  }
  return options;
}

std::string LaunchUsage() {
  std::string out =
      "usage: launch --nstages=P --micro-batch-size=C --global-batch-size=B [flags] -- <program>\n"
      "              [its flags]\n"
      "   or: launch --profile_dir=DIR --gpu_memory_gb=G --global-batch-size=B [flags] -- ...\n"
      "   or: launch --dry_run --profile_dir=DIR --gpu_memory_gb=G --global-batch-size=B\n"
      "              [--nnodes=N --gpus_per_node=G --intra_node_gbps=X --inter_node_gbps=Y]\n"
      "Starts this node's workers of a P-stage pipeline x D-replica job (Varuna's launcher).\n"
      "--global-batch-size is Varuna's --batch_size (all replicas together) and\n"
      "--micro-batch-size its --chunk_size: the same words as the trainer's, with Megatron's\n"
      "meaning; the old spellings keep working.\n"
      "<program> is a Bazel label (//trainer:pretrain_gpt2) or a path. Each worker gets\n"
      "--rank --local_rank --stage_to_rank_map --chunk_size --batch-size=B/D and torchrun's\n"
      "RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT\n"
      "(and ROLE_RANK, ROLE_WORLD_SIZE) in its environment.\n"
      "With --profile_dir and no --nstages/--chunk_size, the launcher simulates every P x D x\n"
      "micro-batch configuration on the profile for W = --gpus_per_node x --nnodes GPUs of\n"
      "--gpu_memory_gb each, keeps those using all W workers (P x D = W), prints the best ten and\n"
      "launches the fastest, adding --stage-segments=<layers per stage> to every worker (the\n"
      "profile must be of the workers' model). Giving only one of --nstages/--chunk_size with\n"
      "--profile_dir is an error; giving both ignores the profile.\nflags:\n";
  LaunchOptions defaults;
  FlagParser parser;
  RegisterLaunchFlags(parser, defaults);
  return out + parser.Help();
}

absl::StatusOr<std::string> ResolveProgram(const std::string& spec,
                                           const std::map<std::string, std::string>& environment,
                                           const std::string& cwd) {
  if (spec.empty()) {
    return absl::InvalidArgumentError(
        "the worker program is an empty string: give a label or path");
  }
  if (spec.rfind("//", 0) == 0) return ResolveLabel(spec, environment, cwd);
  if (spec[0] == '@') {
    return absl::InvalidArgumentError(absl::StrCat(
        "the worker program ", spec,
        " is a label in another Bazel repository, which the launcher cannot locate: build it and "
        "give the binary's path"));
  }
  if (spec.find('/') != std::string::npos) {
    std::filesystem::path path = spec;
    if (path.is_relative()) {
      const std::string base = Lookup(environment, "BUILD_WORKING_DIRECTORY");
      path = std::filesystem::path(base.empty() ? cwd : base) / path;
    }
    if (!std::filesystem::exists(path)) {
      return absl::NotFoundError(absl::StrCat("the worker program ", spec, " does not exist (",
                                              path.string(), "): check the path"));
    }
    if (!IsExecutableFile(path.string())) {
      return absl::InvalidArgumentError(absl::StrCat("the worker program ", spec, " (",
                                                     path.string(),
                                                     ") is not an executable file: chmod +x it "
                                                     "or give the program that runs it"));
    }
    return path.string();
  }
  for (absl::string_view dir : absl::StrSplit(Lookup(environment, "PATH"), ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", spec);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("the worker program ", spec,
                                          " was not found in $PATH: give its path (./", spec,
                                          ") or a Bazel label (//package:", spec, ")"));
}

absl::Status ValidateLaunchOptions(const LaunchOptions& options) {
  auto invalid = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  auto required = [&](const char* name, int value, const char* example) -> absl::Status {
    if (value == 0) {
      const bool chosen_by_profile = std::string(name) != "batch_size";
      return invalid("--", name, " is required: e.g. --", name, "=", example,
                     chosen_by_profile ? " (or omit --nstages and --chunk_size and give "
                                         "--profile_dir to choose them)"
                                       : "");
    }
    if (value < 0) {
      return invalid("--", name, "=", value, " must be at least 1: e.g. --", name, "=", example);
    }
    return absl::OkStatus();
  };
  if (absl::Status s = required("nstages", options.nstages, "2"); !s.ok()) return s;
  if (absl::Status s = required("chunk_size", options.chunk_size, "4"); !s.ok()) return s;
  if (absl::Status s = required("batch_size", options.batch_size, "32"); !s.ok()) return s;
  if (options.gpus_per_node < 1) {
    return invalid("--gpus_per_node=", options.gpus_per_node,
                   " must be at least 1: it is the number of worker processes on each node");
  }
  if (options.nnodes < 1) return invalid("--nnodes=", options.nnodes, " must be at least 1");
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    return invalid("--node_rank=", options.node_rank,
                   " is out of range for --nnodes=", options.nnodes, ": use 0..",
                   options.nnodes - 1, " (one value per node)");
  }
  if (options.master_addr.empty()) {
    return invalid("--master_addr is empty: give the host of node 0, e.g. --master_addr=10.0.0.1");
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    return invalid("--master_port=", options.master_port, " is not a TCP port: use 1..65535");
  }
  if (options.master_port == 0) {
    if (options.nnodes > 1) {
      return invalid("--master_port=0 (pick a free port) works only on one node: with --nnodes=",
                     options.nnodes, " every node needs the same port, e.g. --master_port=29500");
    }
    return invalid("--master_port=0: the launcher picks a free port before planning");
  }
  if (!(options.grace_seconds >= 0)) {
    return invalid("--grace_seconds=", options.grace_seconds, " must be 0 or more");
  }
  if (!(options.gpu_memory_gb >= 0)) {
    return invalid("--gpu_memory_gb=", options.gpu_memory_gb,
                   " must be positive: the memory of one GPU in GiB, e.g. --gpu_memory_gb=80");
  }
  if (options.command.empty()) return invalid("no worker program given after `--`");
  if (options.morph) {
    return invalid("--morph is run by the job's manager (launch/morph.h), not planned as one node");
  }
  if (!options.machine_list.empty()) {
    return invalid("--machine_list=", options.machine_list,
                   " is only read with --morph: add --morph, or drop --machine_list and give "
                   "--nnodes and --node_rank");
  }
  for (size_t i = 1; i < options.command.size(); ++i) {
    const std::string& arg = options.command[i];
    if (!options.stage_segments.empty() && FlagKeyOf(arg) == "stage-segments") {
      return invalid("the worker flag ", arg,
                     " conflicts with the stage boundaries the launcher chose from --profile_dir=",
                     options.profile_dir,
                     ": remove it, or give --nstages and --chunk_size to choose yourself");
    }
    if (PerProcessFlags().count(FlagKeyOf(arg)) > 0) {
      return invalid("the worker flag ", arg,
                     " is set by the launcher for each process (--rank, --local_rank, "
                     "--stage_to_rank_map, --chunk_size, --batch-size = --batch_size / D): remove "
                     "it, and give the launcher --micro-batch-size (--chunk_size) and "
                     "--global-batch-size (--batch_size) instead");
    }
  }

  const int P = options.nstages;
  const int W = options.gpus_per_node * options.nnodes;
  const std::string world = absl::StrCat("W=", W, " (--gpus_per_node=", options.gpus_per_node,
                                         " x --nnodes=", options.nnodes, ")");
  if (P > W) {
    return invalid("--nstages=", P, " needs at least ", P, " worker processes but the world has ",
                   world, ": raise --gpus_per_node or --nnodes, or use --nstages of at most ", W);
  }
  if (W % P != 0) {
    return invalid("--nstages=", P, " does not divide the world size ", world,
                   ": choose --nstages from {", Divisors(W),
                   "}, or a world size that is a multiple of ", P);
  }
  const int D = W / P;
  if (options.batch_size % D != 0) {
    const int lower = options.batch_size / D * D;
    const std::string lower_text = lower > 0 ? absl::StrCat(lower, " or ") : "";
    return invalid("--batch_size=", options.batch_size, " cannot be split evenly over D=", D,
                   " data-parallel replicas (", world, " / --nstages=", P, "): use a multiple of ",
                   D, ", e.g. ", lower_text, lower + D,
                   ", or change --nstages, --gpus_per_node or --nnodes");
  }
  if (!options.stage_segments.empty()) {
    const std::string sizes = absl::StrJoin(options.stage_segments, ",");
    if (static_cast<int>(options.stage_segments.size()) != P) {
      return invalid("--stage-segments=", sizes, " gives ", options.stage_segments.size(),
                     " stage sizes for --nstages=", P, ": give one size per stage");
    }
    for (int size : options.stage_segments) {
      if (size < 1) {
        return invalid("--stage-segments=", sizes, " has a stage of ", size,
                       " segments: every stage needs at least 1");
      }
    }
  }
  const int replica_batch = options.batch_size / D;
  if (options.chunk_size > replica_batch) {
    return invalid("--chunk_size=", options.chunk_size, " is larger than the per-replica batch ",
                   replica_batch, " (--batch_size=", options.batch_size, " / D=", D,
                   " replicas): use --chunk_size of at most ", replica_batch,
                   " or raise --batch_size");
  }

  return absl::OkStatus();
}

absl::StatusOr<LaunchPlan> PlanLaunch(const LaunchOptions& options, const std::string& program,
                                      const std::map<std::string, std::string>& environment) {
  if (absl::Status status = ValidateLaunchOptions(options); !status.ok()) return status;
  const int P = options.nstages;
  const int W = options.gpus_per_node * options.nnodes;
  const int D = W / P;
  const int replica_batch = options.batch_size / D;
  LaunchPlan plan;
  plan.num_stages = P;
  plan.num_replicas = D;
  plan.world_size = W;
  plan.global_batch = options.batch_size;
  plan.replica_batch = replica_batch;
  plan.chunk_size = options.chunk_size;
  plan.micro_batches = (replica_batch + options.chunk_size - 1) / options.chunk_size;
  plan.last_micro_batch = replica_batch - (plan.micro_batches - 1) * options.chunk_size;
  plan.stage_segments = options.stage_segments;
  plan.node_rank = options.node_rank;
  plan.nnodes = options.nnodes;
  plan.master_addr = options.master_addr;
  plan.master_port = options.master_port;
  plan.program = program;
  plan.stage_map = StageMap::Uniform(P, D);
  if (plan.micro_batches < P) {
    plan.notes.push_back(absl::StrCat(
        "only ", plan.micro_batches, " micro-batches per step for ", P,
        " stages: the pipeline will mostly idle; lower --chunk_size or raise --batch_size"));
  }

  LaunchEnvironment launch;
  launch.world_size = W;
  launch.local_world_size = options.gpus_per_node;
  launch.node_rank = options.node_rank;
  launch.master_addr = options.master_addr;
  launch.master_port = options.master_port;
  const bool one_thread = options.gpus_per_node > 1 && environment.count("OMP_NUM_THREADS") == 0;
  if (one_thread) {
    plan.notes.push_back(
        "OMP_NUM_THREADS=1 for each worker (it was unset and several workers share this node); "
        "set it to override");
  }
  const std::string map_text = plan.stage_map.ToString();
  for (int local = 0; local < options.gpus_per_node; ++local) {
    WorkerSpec worker;
    worker.rank = options.node_rank * options.gpus_per_node + local;
    worker.name = absl::StrCat("rank ", worker.rank);
    worker.output_prefix = absl::StrCat("[", worker.name, "] ");
    worker.local_rank = local;
    worker.position = plan.stage_map.Position(worker.rank);
    worker.argv.push_back(program);
    worker.argv.insert(worker.argv.end(), options.command.begin() + 1, options.command.end());
    worker.argv.push_back(absl::StrCat("--rank=", worker.rank));
    worker.argv.push_back(absl::StrCat("--local_rank=", local));
    worker.argv.push_back(absl::StrCat("--stage_to_rank_map=", map_text));
    worker.argv.push_back(absl::StrCat("--chunk_size=", options.chunk_size));
    worker.argv.push_back(absl::StrCat("--batch-size=", replica_batch));
    if (!options.stage_segments.empty()) {
      worker.argv.push_back(
          absl::StrCat("--stage-segments=", absl::StrJoin(options.stage_segments, ",")));
    }
    launch.rank = worker.rank;
    launch.local_rank = local;
    std::map<std::string, std::string> own = launch.Write();
    if (one_thread) own["OMP_NUM_THREADS"] = "1";
    for (const auto& [key, value] : environment) {
      if (own.count(key) == 0) worker.env.push_back(absl::StrCat(key, "=", value));
    }
    for (const auto& [key, value] : own) worker.env.push_back(absl::StrCat(key, "=", value));
    plan.workers.push_back(std::move(worker));
  }
  return plan;
}

std::string LaunchPlan::Describe() const {
  std::string out =
      absl::StrCat(num_stages, " stages x ", num_replicas, " replicas = ", world_size,
                   " workers on ", nnodes, " node(s); this is node ", node_rank, "\n");
  absl::StrAppend(&out, "stage_to_rank_map ", stage_map.ToString(), " (rank = replica * ",
                  num_stages, " + stage)\n");
  absl::StrAppend(&out, "batch ", global_batch, " = ", num_replicas, " replicas x ", replica_batch,
                  "; per step and replica ", micro_batches, " micro-batches of ", chunk_size);
  if (last_micro_batch != chunk_size)
    absl::StrAppend(&out, " (the last of ", last_micro_batch, ")");
  if (!stage_segments.empty()) {
    absl::StrAppend(&out, "\nsegments per stage ", absl::StrJoin(stage_segments, "+"),
                    " (--stage-segments)");
  }
  absl::StrAppend(&out, "\nrendezvous ", master_addr, ":", master_port, "\nprogram ", program,
                  "\n");
  for (const WorkerSpec& worker : workers) {
    absl::StrAppend(&out, "rank ", worker.rank, " (local ", worker.local_rank, "): stage ",
                    worker.position.stage, ", replica ", worker.position.replica, "\n");
  }
  for (const std::string& note : notes) absl::StrAppend(&out, "note: ", note, "\n");
  return out;
}

}  // namespace varuna
