#include "varuna/worker_group.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace varuna {
namespace {

using Clock = std::chrono::steady_clock;

// A line longer than this is passed on in pieces, so one worker cannot grow the buffer.
constexpr size_t kMaxLine = 64 * 1024;

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // e.g. EPIPE: the reader is gone; the workers keep running
    done += static_cast<size_t>(n);
  }
}

struct Worker {
  const WorkerSpec* spec = nullptr;
  pid_t pid = -1;
  int out_fd = -1;      // read end of the worker's stdout+stderr pipe; -1 once closed
  std::string partial;  // output after the last newline
  bool running = false;
};

class Supervisor {
 public:
  Supervisor(const WorkerGroupOptions& options, const sigset_t& child_mask)
      : options_(options), child_mask_(child_mask) {}

  ~Supervisor() {
    for (Worker& w : workers_) {
      if (w.out_fd >= 0) close(w.out_fd);
    }
  }

  absl::Status Start(const std::vector<WorkerSpec>& specs) {
    workers_.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      workers_[i].spec = &specs[i];
      if (absl::Status status = Spawn(workers_[i]); !status.ok()) {
        for (Worker& w : workers_) {
          if (!w.running) continue;
          Signal(w, SIGKILL);
          waitpid(w.pid, nullptr, 0);
          w.running = false;
        }
        return status;
      }
    }
    return absl::OkStatus();
  }

  // Runs until every worker has ended; returns the exit code (see RunWorkerGroup).
  int Supervise(int signal_fd) {
    while (true) {
      Reap();
      if (!AnyRunning()) break;
      if (kill_at_ && Clock::now() >= *kill_at_) KillRunning();
      int timeout_ms = 1000;  // a safety net; SIGCHLD normally wakes the loop
      if (kill_at_) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at_ - Clock::now());
        timeout_ms = static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, timeout_ms));
      }
      std::vector<pollfd> fds = {{signal_fd, POLLIN, 0}};
      std::vector<Worker*> readers;
      for (Worker& w : workers_) {
        if (w.out_fd < 0) continue;
        fds.push_back({w.out_fd, POLLIN, 0});
        readers.push_back(&w);
      }
      if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) HandleSignals(signal_fd);
      for (size_t i = 0; i < readers.size(); ++i) {
        if (fds[i + 1].revents != 0) Drain(*readers[i]);
      }
    }
    // Output still buffered in the pipes (a grandchild may hold a pipe open: do not wait).
    for (Worker& w : workers_) {
      Drain(w);
      FlushPartial(w);
    }
    return exit_code_;
  }

 private:
  void Message(const std::string& text) {
    WriteAll(options_.message_fd, absl::StrCat("[launch] ", text, "\n"));
  }

  absl::Status Spawn(Worker& w) {
    const WorkerSpec& spec = *w.spec;
    std::vector<char*> argv;
    for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> env;
    for (const std::string& e : spec.env) env.push_back(const_cast<char*>(e.c_str()));
    env.push_back(nullptr);
    const std::string exec_error = absl::StrCat("cannot execute ", spec.argv[0], ": ");

    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat("pipe for rank ", spec.rank, ": ", strerror(errno)));
    }
    const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      const int error = errno;
      close(pipe_fds[0]);
      close(pipe_fds[1]);
      if (null_fd >= 0) close(null_fd);
      return absl::InternalError(absl::StrCat("fork for rank ", spec.rank, ": ", strerror(error)));
    }
    if (pid == 0) {
      // The launcher is single-threaded, so this child may call anything before exec.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);  // the launcher died before prctl took effect
      if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
      dup2(pipe_fds[1], STDOUT_FILENO);
      dup2(pipe_fds[1], STDERR_FILENO);
      signal(SIGPIPE, SIG_DFL);
      sigprocmask(SIG_SETMASK, &child_mask_, nullptr);
      execve(argv[0], argv.data(), env.data());
      const std::string message = absl::StrCat(exec_error, strerror(errno), "\n");
      WriteAll(STDERR_FILENO, message);
      _exit(127);
    }
    setpgid(pid, pid);  // also here, so that signals sent right away reach the group
    close(pipe_fds[1]);
    if (null_fd >= 0) close(null_fd);
    fcntl(pipe_fds[0], F_SETFL, fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);
    w.pid = pid;
    w.out_fd = pipe_fds[0];
    w.running = true;
    return absl::OkStatus();
  }

  // Sends `sig` to the worker's process group (its own children too), or to it alone.
  static void Signal(const Worker& w, int sig) {
    if (kill(-w.pid, sig) != 0) kill(w.pid, sig);
  }

  // Reads what the pipe holds now, passing on complete lines.
  void Drain(Worker& w) {
    if (w.out_fd < 0) return;
    char buffer[16384];
    while (true) {
      const ssize_t n = read(w.out_fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return;  // EAGAIN: nothing more for now
      if (n == 0) {
        close(w.out_fd);
        w.out_fd = -1;
        FlushPartial(w);
        return;
      }
      w.partial.append(buffer, static_cast<size_t>(n));
      std::string lines;
      size_t start = 0;
      for (size_t nl; (nl = w.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
        absl::StrAppend(&lines, "[rank ", w.spec->rank, "] ",
                        absl::string_view(w.partial).substr(start, nl + 1 - start));
      }
      w.partial.erase(0, start);
      if (w.partial.size() >= kMaxLine) {
        absl::StrAppend(&lines, "[rank ", w.spec->rank, "] ", w.partial, "\n");
        w.partial.clear();
      }
      WriteAll(options_.output_fd, lines);
    }
  }

  void FlushPartial(Worker& w) {
    if (w.partial.empty()) return;
    WriteAll(options_.output_fd, absl::StrCat("[rank ", w.spec->rank, "] ", w.partial, "\n"));
    w.partial.clear();
  }

  void Reap() {
    for (Worker& w : workers_) {
      if (!w.running) continue;
      int status = 0;
      const pid_t r = waitpid(w.pid, &status, WNOHANG);
      if (r == 0) continue;
      w.running = false;
      Drain(w);  // its last lines come before the report
      const int rank = w.spec->rank;
      if (r < 0) {
        Message(absl::StrCat("rank ", rank, ": lost track of the process (", strerror(errno), ")"));
        Failed(1);
      } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        Message(absl::StrCat("rank ", rank, " exited with code 0"));
      } else if (WIFEXITED(status)) {
        Message(absl::StrCat("rank ", rank, " exited with code ", WEXITSTATUS(status)));
        Failed(WEXITSTATUS(status));
      } else if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        Message(
            absl::StrCat("rank ", rank, " was killed by signal ", sig, " (", strsignal(sig), ")"));
        Failed(128 + sig);
      }
    }
  }

  // A worker failed with `code`: the first failure decides the exit code and stops the rest.
  void Failed(int code) {
    if (exit_code_ == 0) exit_code_ = code;
    if (stopping_) return;
    stopping_ = true;
    if (!AnyRunning()) return;
    Message(
        absl::StrFormat("stopping the other workers: SIGTERM now, SIGKILL to those left after %g s",
                        options_.grace_seconds));
    SignalRunning(SIGTERM);
    ArmKill();
  }

  void HandleSignals(int signal_fd) {
    signalfd_siginfo info;
    while (read(signal_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) continue;  // the loop reaps
      if (sig == SIGUSR1) {
        Message("received SIGUSR1: forwarded to the workers");
        SignalRunning(SIGUSR1);
        continue;
      }
      if (++stop_requests_ > 1) {
        Message(absl::StrCat("received ", strsignal(sig), " again: killing the workers"));
        KillRunning();
        continue;
      }
      stopping_ = true;
      Message(absl::StrFormat(
          "received signal %d (%s): forwarded to the workers; SIGKILL to those left after %g s",
          sig, strsignal(sig), options_.grace_seconds));
      SignalRunning(sig);
      ArmKill();
    }
  }

  void ArmKill() {
    const auto at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(options_.grace_seconds));
    if (!kill_at_ || at < *kill_at_) kill_at_ = at;
  }

  void KillRunning() {
    for (Worker& w : workers_) {
      if (!w.running) continue;
      Message(absl::StrCat("rank ", w.spec->rank, " is still running: sending SIGKILL"));
      Signal(w, SIGKILL);
    }
    kill_at_.reset();
  }

  void SignalRunning(int sig) {
    for (Worker& w : workers_) {
      if (w.running) Signal(w, sig);
    }
  }

  bool AnyRunning() const {
    return std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; });
  }

  const WorkerGroupOptions options_;
  const sigset_t child_mask_;
  std::vector<Worker> workers_;
  int exit_code_ = 0;
  bool stopping_ = false;
  int stop_requests_ = 0;
  std::optional<Clock::time_point> kill_at_;
};

}  // namespace

absl::StatusOr<int> RunWorkerGroup(const std::vector<WorkerSpec>& workers,
                                   const WorkerGroupOptions& options) {
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&handled, sig);
  sigset_t previous;
  sigprocmask(SIG_BLOCK, &handled, &previous);
  const int signal_fd = signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) {
    const int error = errno;
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    return absl::InternalError(absl::StrCat("signalfd: ", strerror(error)));
  }
  // A closed output must not kill the launcher while workers run.
  struct sigaction ignore = {}, previous_pipe = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous_pipe);

  absl::StatusOr<int> result;
  {
    Supervisor supervisor(options, previous);
    if (absl::Status status = supervisor.Start(workers); !status.ok()) {
      result = status;
    } else {
      result = supervisor.Supervise(signal_fd);
    }
  }
  sigaction(SIGPIPE, &previous_pipe, nullptr);
  close(signal_fd);
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  return result;
}

}  // namespace varuna
