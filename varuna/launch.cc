// varuna/launch: Varuna's run_varuna/launcher in C++. Starts this node's workers of a
// P-stage x D-replica job and supervises them (launch_plan.h for the flags and the layout,
// worker_group.h for signals, output and failures):
//
//   bazel run //varuna:launch -- --nstages=2 --chunk_size=4 --batch_size=32
//       --gpus_per_node=2 -- //trainer:pretrain_gpt2 --data-path=...
//
// or, choosing P, the micro-batch size and the stage boundaries from a profile
// (launch_config.h):
//   bazel run //varuna:launch -- --profile_dir=prof --gpu_memory_gb=80 --batch_size=32
//       --gpus_per_node=4 -- //trainer:pretrain_gpt2 --data-path=...
//
// Exit status: 0 when every worker exited 0; 2 for bad flags; else the first failing worker's
// exit code (128 + signal when a signal killed it).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "varuna/launch_config.h"
#include "varuna/launch_plan.h"
#include "varuna/worker_group.h"

extern char** environ;

namespace {

std::map<std::string, std::string> Environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

// A TCP port free on this host now, for --master_port=0; 0 if none could be bound.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// `path` as the user meant it: relative paths follow the user's directory under `bazel run`.
std::string UserPath(const std::string& path,
                     const std::map<std::string, std::string>& environment) {
  auto base = environment.find("BUILD_WORKING_DIRECTORY");
  if (path.empty() || std::filesystem::path(path).is_absolute() || base == environment.end()) {
    return path;
  }
  return (std::filesystem::path(base->second) / path).string();
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
  if (options->master_port == 0 && options->nnodes == 1) options->master_port = FreePort();
  const std::map<std::string, std::string> environment = Environment();

  absl::StatusOr<bool> from_profile = varuna::ConfiguresFromProfile(*options);
  if (!from_profile.ok()) return Fail(from_profile.status());
  if (*from_profile) {
    varuna::LaunchOptions resolved = *options;
    resolved.profile_dir = UserPath(options->profile_dir, environment);
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
  absl::StatusOr<int> code = varuna::RunWorkerGroup(plan->workers, group);
  if (!code.ok()) return Fail(code.status());
  return *code;
}
