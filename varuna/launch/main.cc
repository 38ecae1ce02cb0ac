// varuna/launch: Varuna's run_varuna/launcher in C++. Starts this node's workers of a
// P-stage x D-replica job and supervises them (launch/plan.h for the flags and the layout,
// launch/worker_group.h for signals, output and failures):
//
//   bazel run //varuna:launch -- --nstages=2 --micro-batch-size=4 --global-batch-size=32
//       --gpus_per_node=2 -- //trainer:pretrain_gpt2 --data-path=...
// (Megatron's words; Varuna's --chunk_size and --batch_size mean the same)
//
// or, choosing P, the micro-batch size and the stage boundaries from a profile
// (launch/config.h):
//   bazel run //varuna:launch -- --profile_dir=prof --gpu_memory_gb=80 --batch_size=32
//       --gpus_per_node=4 -- //trainer:pretrain_gpt2 --data-path=...
//
// or, as the manager of a job that follows the machines a file lists (launch/morph.h):
//   bazel run //varuna:launch -- --morph --machine_list=machines.txt --profile_dir=prof
//       --gpu_memory_gb=80 --batch_size=32 --gpus_per_node=4 -- //trainer:pretrain_gpt2
//       --save=ckpt ...
//
// Exit status: 0 when every worker exited 0; 2 for bad flags; else the first failing worker's
// exit code (128 + signal when a signal killed it).
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "varuna/io/user_paths.h"
#include "varuna/launch/config.h"
#include "varuna/launch/host.h"
#include "varuna/launch/morph.h"
#include "varuna/launch/plan.h"
#include "varuna/launch/worker_group.h"

namespace {

// The path of this launcher's binary (the --morph manager starts it again for each node).
std::string SelfPath(const char* argv0) {
  char buffer[PATH_MAX + 1] = {};
  const ssize_t n = readlink("/proc/self/exe", buffer, PATH_MAX);
  if (n > 0) return std::string(buffer, static_cast<size_t>(n));
  return std::filesystem::absolute(argv0).string();
}

void Print(const std::string& text) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::cout << "[launch] " << line << "\n";
  }
  std::cout.flush();
}

int Fail(const absl::Status& status) {
  std::cerr << "[launch] error: " << status.message() << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<varuna::LaunchOptions> options =
      varuna::ParseLaunchFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) return Fail(options.status());
  if (options->help) {
    std::cout << varuna::LaunchUsage();
    return 0;
  }
  const std::map<std::string, std::string> environment = varuna::ProcessEnvironment();
  if (options->morph) {
    varuna::MorphContext context;
    context.launcher = SelfPath(argv[0]);
    context.directory = varuna::UserDirectory(environment);
    context.host_name = varuna::HostName();
    context.environment = environment;
    return varuna::RunMorphingJob(*options, context);
  }
  if (options->master_port == 0 && options->nnodes == 1) {
    options->master_port = varuna::FreeTcpPort();
  }

  if (options->dry_run) {
    // Plan only: the table for the cluster the flags describe, no workers.
    varuna::LaunchOptions resolved = *options;
    resolved.profile_dir = varuna::ResolveUserPath(options->profile_dir, environment);
    absl::StatusOr<varuna::LaunchChoice> choice = varuna::ChooseFromProfileDir(resolved);
    if (!choice.ok()) return Fail(choice.status());
    Print(choice->plan);
    return 0;
  }
  absl::StatusOr<bool> from_profile = varuna::ConfiguresFromProfile(*options);
  if (!from_profile.ok()) return Fail(from_profile.status());
  if (*from_profile) {
    varuna::LaunchOptions resolved = *options;
    resolved.profile_dir = varuna::ResolveUserPath(options->profile_dir, environment);
    absl::StatusOr<varuna::LaunchChoice> choice = varuna::ChooseFromProfileDir(resolved);
    if (!choice.ok()) return Fail(choice.status());
    Print(choice->report);
    *options = choice->options;
  } else if (!options->profile_dir.empty()) {
    Print("note: --profile_dir is ignored: --nstages and --chunk_size were given\n");
  }

  if (absl::Status status = varuna::ValidateLaunchOptions(*options); !status.ok()) {
    return Fail(status);
  }
  absl::StatusOr<std::string> program = varuna::ResolveProgram(
      options->command[0], environment, std::filesystem::current_path().string());
  if (!program.ok()) return Fail(program.status());
  absl::StatusOr<varuna::LaunchPlan> plan = varuna::PlanLaunch(*options, *program, environment);
  if (!plan.ok()) return Fail(plan.status());

  Print(plan->Describe());

  varuna::WorkerGroupOptions group;
  group.grace_seconds = options->grace_seconds;
  if (options->stop_on_stdin) {
    group.control_fd = STDIN_FILENO;
    group.resend_stop_seconds = varuna::kMorphResendStopSeconds;
  }
  absl::StatusOr<varuna::WorkerGroupResult> result = varuna::RunWorkerGroup(plan->workers, group);
  if (!result.ok()) return Fail(result.status());
  return result->exit_code;
}
