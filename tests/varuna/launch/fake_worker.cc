// A stand-in for the trainer, started by varuna/launch in launch_test.cc. It prints what the
// launcher gave it (environment, working directory, arguments), then behaves as its flags say:
//   --sleep_ms=N           run this long, then exit 0 (default 0)
//   --fail_rank=R --fail_code=C --fail_after_ms=M   rank R exits with C after M ms
//   --crash_rank=R         rank R kills itself with SIGUSR2 after --fail_after_ms
//   --on_signal_exit=C     on SIGINT, SIGTERM or SIGUSR1: print "rank R received signal S" and
//                          exit with C (otherwise those signals have their default effect)
//   --ignore_sigterm       ignore SIGTERM (so only SIGKILL stops it)
//   --tail=TEXT            write TEXT without a final newline before exiting
// Unknown flags (the launcher's --stage_to_rank_map, ...) are only printed.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

namespace {

std::string g_signal_message_prefix;  // set once before the handler is installed
int g_signal_exit_code = 0;

void OnSignal(int sig) {
  char text[128];
  const int n = std::snprintf(text, sizeof(text), "%s%d\n", g_signal_message_prefix.c_str(), sig);
  if (n > 0) (void)!write(STDOUT_FILENO, text, static_cast<size_t>(n));
  _exit(g_signal_exit_code);
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "<unset>" : value;
}

void Line(const std::string& text) {
  std::fputs((text + "\n").c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  std::string all_args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    all_args += (i > 1 ? " " : "") + arg;
    if (arg.rfind("--", 0) != 0) continue;
    const size_t eq = arg.find('=');
    flags[arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
        eq == std::string::npos ? "true" : arg.substr(eq + 1);
  }
  auto flag = [&](const std::string& name, int fallback) {
    return flags.count(name) ? std::atoi(flags[name].c_str()) : fallback;
  };
  const int rank = flag("rank", -1);

  Line("env RANK=" + Env("RANK") + " LOCAL_RANK=" + Env("LOCAL_RANK") +
       " WORLD_SIZE=" + Env("WORLD_SIZE") + " MASTER_ADDR=" + Env("MASTER_ADDR") +
       " MASTER_PORT=" + Env("MASTER_PORT") + " OMP_NUM_THREADS=" + Env("OMP_NUM_THREADS"));
  char cwd[4096] = "";
  if (getcwd(cwd, sizeof(cwd)) == nullptr) std::strcpy(cwd, "<unknown>");
  Line(std::string("cwd ") + cwd);
  Line("BUILD_WORKING_DIRECTORY " + Env("BUILD_WORKING_DIRECTORY"));
  Line("args " + all_args);
  std::fputs(("stderr line of rank " + std::to_string(rank) + "\n").c_str(), stderr);

  if (flags.count("on_signal_exit")) {
    g_signal_message_prefix = "rank " + std::to_string(rank) + " received signal ";
    g_signal_exit_code = flag("on_signal_exit", 0);
    for (int sig : {SIGINT, SIGTERM, SIGUSR1}) signal(sig, OnSignal);
  }
  if (flags.count("ignore_sigterm")) signal(SIGTERM, SIG_IGN);
  Line("ready");

  using std::chrono::milliseconds;
  if (rank == flag("fail_rank", -2)) {
    std::this_thread::sleep_for(milliseconds(flag("fail_after_ms", 0)));
    Line("failing with code " + std::to_string(flag("fail_code", 1)));
    return flag("fail_code", 1);
  }
  if (rank == flag("crash_rank", -2)) {
    std::this_thread::sleep_for(milliseconds(flag("fail_after_ms", 0)));
    signal(SIGUSR2, SIG_DFL);
    raise(SIGUSR2);
  }
  std::this_thread::sleep_for(milliseconds(flag("sleep_ms", 0)));
  if (flags.count("tail")) std::fputs(flags["tail"].c_str(), stdout);
  std::fflush(stdout);
  return 0;
}
