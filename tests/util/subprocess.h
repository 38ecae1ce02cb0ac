// Test helper: runs worker processes with a hard deadline, for multi-process tests.
//
// A multi-process test re-executes its own binary in a worker role:
//   parent:  Spawn({SelfPath(), "--worker=allreduce", "--rank=0", ...}, log)  (xN)
//            WaitAll(processes, deadline)  -> exit status and output of each
//   worker:  main() sees WorkerArgs and runs the role instead of the gtest suite.
// Workers that meet over TCP get their port from varuna::FreeTcpPort (varuna/launch/host.h).
// Every worker still running at the deadline is killed (SIGKILL), so a hang fails the test
// instead of the CI run.
#ifndef VARUNA_TESTS_UTIL_SUBPROCESS_H_
#define VARUNA_TESTS_UTIL_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace varuna::testing {

// Absolute path of the running binary.
std::string SelfPath();

struct Process {
  pid_t pid = -1;
  std::string log_path;  // stdout and stderr, merged
};

// Starts argv[0] with argv, output to log_path, and this process's environment with
// extra_env's entries added or replaced.
// Aborts the test program if fork or exec fails.
Process Spawn(const std::vector<std::string>& argv, const std::string& log_path,
              const std::map<std::string, std::string>& extra_env = {});

// Starts one worker per rank: this binary with --worker=<role> --rank=<r> and the arguments
// args(r) returns, logging to ::testing::TempDir() + "<role>_rank<r>.log".
std::vector<Process> SpawnRanks(const std::string& role, int ranks,
                                const std::function<std::vector<std::string>(int)>& args);

struct ExitInfo {
  bool exited = false;  // exited normally, with `code`
  int code = -1;
  int signal = 0;          // killed by this signal (SIGKILL if it ran past the deadline)
  bool timed_out = false;  // still running at the deadline
  double seconds = 0;      // from WaitAll's start until it ended
  std::string output;      // its log
};

// Waits for every process, killing those still running `deadline` after the call.
std::vector<ExitInfo> WaitAll(const std::vector<Process>& processes,
                              std::chrono::milliseconds deadline);

// "rank 2: exit 3 after 1.2 s\n<log>" for each process, for failure messages.
std::string Describe(const std::vector<ExitInfo>& exits);

// The `--key=value` arguments of a worker invocation; nullopt unless --worker=... is given.
std::optional<std::map<std::string, std::string>> WorkerArgs(int argc, char** argv);

}  // namespace varuna::testing

#endif  // VARUNA_TESTS_UTIL_SUBPROCESS_H_
