#include "tests/util/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace varuna::testing {
namespace {

[[noreturn]] void Fatal(const std::string& what) {
  std::perror(what.c_str());
  std::abort();
}

}  // namespace

std::string SelfPath() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

Process Spawn(const std::vector<std::string>& argv, const std::string& log_path,
              const std::map<std::string, std::string>& extra_env) {
  // Everything the child needs is prepared before fork: only async-signal-safe calls after.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // extra_env replaces inherited values: getenv returns the first match.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (extra_env.count(entry.substr(0, entry.find('='))) == 0) env_strings.push_back(entry);
  }
  for (const auto& [key, value] : extra_env) env_strings.push_back(key + "=" + value);
  std::vector<char*> env;
  for (std::string& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) Fatal("open " + log_path);

  const pid_t pid = fork();
  if (pid < 0) Fatal("fork");
  if (pid == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execve(args[0], args.data(), env.data());
    _exit(127);
  }
  close(log_fd);
  return Process{pid, log_path};
}

std::vector<Process> SpawnRanks(const std::string& role, int ranks,
                                const std::function<std::vector<std::string>(int)>& args) {
  std::vector<Process> processes;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> argv = {SelfPath(), "--worker=" + role, "--rank=" + std::to_string(r)};
    for (std::string& a : args(r)) argv.push_back(std::move(a));
    processes.push_back(
        Spawn(argv, ::testing::TempDir() + role + "_rank" + std::to_string(r) + ".log"));
  }
  return processes;
}

std::vector<ExitInfo> WaitAll(const std::vector<Process>& processes,
                              std::chrono::milliseconds deadline) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::vector<ExitInfo> exits(processes.size());
  std::vector<bool> done(processes.size(), false);
  size_t remaining = processes.size();
  bool killed = false;
  while (remaining > 0) {
    for (size_t i = 0; i < processes.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      const pid_t r = waitpid(processes[i].pid, &status, WNOHANG);
      if (r == 0) continue;
      done[i] = true;
      --remaining;
      exits[i].seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (r < 0) continue;
      if (WIFEXITED(status)) {
        exits[i].exited = true;
        exits[i].code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        exits[i].signal = WTERMSIG(status);
      }
    }
    if (remaining > 0 && !killed && Clock::now() - start > deadline) {
      for (size_t i = 0; i < processes.size(); ++i) {
        if (!done[i]) {
          exits[i].timed_out = true;
          kill(processes[i].pid, SIGKILL);
        }
      }
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (size_t i = 0; i < processes.size(); ++i) {
    std::ifstream in(processes[i].log_path);
    std::stringstream text;
    text << in.rdbuf();
    exits[i].output = text.str();
  }
  return exits;
}

std::string Describe(const std::vector<ExitInfo>& exits) {
  std::ostringstream out;
  for (size_t i = 0; i < exits.size(); ++i) {
    const ExitInfo& e = exits[i];
    out << "---- process " << i << ": ";
    if (e.timed_out) out << "still running at the deadline, killed; ";
    if (e.exited) {
      out << "exit " << e.code;
    } else {
      out << "signal " << e.signal;
    }
    out << " after " << e.seconds << " s\n" << e.output << "\n";
  }
  return out.str();
}

std::optional<std::map<std::string, std::string>> WorkerArgs(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) continue;
    const size_t eq = a.find('=');
    if (eq == std::string::npos) continue;
    args[a.substr(2, eq - 2)] = a.substr(eq + 1);
  }
  if (args.count("worker") == 0) return std::nullopt;
  return args;
}

}  // namespace varuna::testing
