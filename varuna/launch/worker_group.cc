#include "varuna/launch/worker_group.h"

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
  int control_fd = -1;  // write end of a control_via_stdin worker's stdin; -1 otherwise
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
      if (w.control_fd >= 0) close(w.control_fd);
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

  // Runs until every worker has ended (see RunWorkerGroup).
  WorkerGroupResult Supervise(int signal_fd) {
    if (options_.watch) next_watch_ = After(options_.watch_seconds);
    while (true) {
      Reap();
      if (!AnyRunning()) break;
      const Clock::time_point now = Clock::now();
      if (kill_at_ && now >= *kill_at_) KillRunning();
      if (next_watch_ && now >= *next_watch_) Watch();
      if (resend_at_ && now >= *resend_at_) SendStop();
      int timeout_ms = 1000;  // a safety net; SIGCHLD normally wakes the loop
      for (const std::optional<Clock::time_point>& at : {kill_at_, next_watch_, resend_at_}) {
        if (!at) continue;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*at - now);
        timeout_ms = static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, timeout_ms));
      }
      std::vector<pollfd> fds = {{signal_fd, POLLIN, 0}};
      const bool control = control_fd_ >= 0;
      if (control) fds.push_back({control_fd_, POLLIN, 0});
      const size_t first_reader = fds.size();
      std::vector<Worker*> readers;
      for (Worker& w : workers_) {
        if (w.out_fd < 0) continue;
        fds.push_back({w.out_fd, POLLIN, 0});
        readers.push_back(&w);
      }
      if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) HandleSignals(signal_fd);
      if (control && fds[1].revents != 0) ReadControl();
      for (size_t i = 0; i < readers.size(); ++i) {
        if (fds[first_reader + i].revents != 0) Drain(*readers[i]);
      }
    }
    // Output still buffered in the pipes (a grandchild may hold a pipe open: do not wait).
    for (Worker& w : workers_) {
      Drain(w);
      FlushPartial(w);
    }
    return result_;
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
      return absl::InternalError(absl::StrCat("pipe for ", spec.name, ": ", strerror(errno)));
    }
    // stdin: /dev/null, or the read end of a control pipe (stdin_fds[1] is kept to write to).
    int stdin_fds[2] = {-1, -1};
    if (spec.control_via_stdin) {
      if (pipe2(stdin_fds, O_CLOEXEC) != 0) stdin_fds[0] = stdin_fds[1] = -1;
    } else {
      stdin_fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    const pid_t parent = getpid();
    const pid_t pid = stdin_fds[0] < 0 ? -1 : fork();
    if (pid < 0) {
      const int error = errno;
      for (int fd : {pipe_fds[0], pipe_fds[1], stdin_fds[0], stdin_fds[1]}) {
        if (fd >= 0) close(fd);
      }
      return absl::InternalError(absl::StrCat("fork for ", spec.name, ": ", strerror(error)));
    }
    if (pid == 0) {
      // The launcher is single-threaded, so this child may call anything before exec.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);  // the launcher died before prctl took effect
      dup2(stdin_fds[0], STDIN_FILENO);
      dup2(pipe_fds[1], STDOUT_FILENO);
      dup2(pipe_fds[1], STDERR_FILENO);
      signal(SIGPIPE, SIG_DFL);
      signal(SIGUSR1, SIG_IGN);  // until the worker installs its own handler
      sigprocmask(SIG_SETMASK, &child_mask_, nullptr);
      execve(argv[0], argv.data(), env.data());
      const std::string message = absl::StrCat(exec_error, strerror(errno), "\n");
      WriteAll(STDERR_FILENO, message);
      _exit(127);
    }
    setpgid(pid, pid);  // also here, so that signals sent right away reach the group
    close(pipe_fds[1]);
    close(stdin_fds[0]);
    fcntl(pipe_fds[0], F_SETFL, fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);
    if (stdin_fds[1] >= 0) {
      fcntl(stdin_fds[1], F_SETFL, fcntl(stdin_fds[1], F_GETFL) | O_NONBLOCK);
    }
    w.pid = pid;
    w.out_fd = pipe_fds[0];
    w.control_fd = stdin_fds[1];
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
        absl::StrAppend(&lines, w.spec->output_prefix,
                        absl::string_view(w.partial).substr(start, nl + 1 - start));
      }
      w.partial.erase(0, start);
      if (w.partial.size() >= kMaxLine) {
        absl::StrAppend(&lines, w.spec->output_prefix, w.partial, "\n");
        w.partial.clear();
      }
      WriteAll(options_.output_fd, lines);
    }
  }

  void FlushPartial(Worker& w) {
    if (w.partial.empty()) return;
    WriteAll(options_.output_fd, absl::StrCat(w.spec->output_prefix, w.partial, "\n"));
    w.partial.clear();
  }

  void Reap() {
    for (Worker& w : workers_) {
      if (!w.running) continue;
      int status = 0;
      const pid_t r = waitpid(w.pid, &status, WNOHANG);
      if (r == 0) continue;
      w.running = false;
      if (w.control_fd >= 0) {
        close(w.control_fd);
        w.control_fd = -1;
      }
      Drain(w);  // its last lines come before the report
      const std::string& name = w.spec->name;
      if (r < 0) {
        Message(absl::StrCat(name, ": lost track of the process (", strerror(errno), ")"));
        Failed(1);
      } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        Message(absl::StrCat(name, " exited with code 0"));
      } else if (WIFEXITED(status)) {
        Message(absl::StrCat(name, " exited with code ", WEXITSTATUS(status)));
        Failed(WEXITSTATUS(status));
      } else if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        Message(absl::StrCat(name, " was killed by signal ", sig, " (", strsignal(sig), ")"));
        Failed(128 + sig);
      }
    }
  }

  // A worker failed with `code`: the first failure decides the exit code and stops the rest.
  void Failed(int code) {
    if (result_.exit_code == 0) result_.exit_code = code;
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
        RequestCheckpointStop("received SIGUSR1: forwarded to the workers");
        continue;
      }
      Terminate(sig, absl::StrFormat("received signal %d (%s)", sig, strsignal(sig)));
    }
  }

  // SIGINT/SIGTERM/SIGHUP (`sig`) for `why`: forwarded, then SIGKILL after the grace period.
  void Terminate(int sig, const std::string& why) {
    result_.terminate_requested = true;
    if (++stop_requests_ > 1) {
      Message(absl::StrCat(why, " again: killing the workers"));
      KillRunning();
      return;
    }
    stopping_ = true;
    Message(absl::StrFormat("%s: forwarded to the workers; SIGKILL to those left after %g s", why,
                            options_.grace_seconds));
    SignalRunning(sig);
    ArmKill();
  }

  // A checkpoint-and-stop request for `why` (said once; later requests only resend it).
  void RequestCheckpointStop(const std::string& why) {
    if (!result_.checkpoint_stop_requested) Message(why);
    result_.checkpoint_stop_requested = true;
    next_watch_.reset();
    SendStop();
  }

  void SendStop() {
    for (Worker& w : workers_) {
      if (!w.running) continue;
      if (w.control_fd >= 0) {
        WriteAll(w.control_fd, "stop\n");
      } else if (!w.spec->control_via_stdin) {
        Signal(w, SIGUSR1);
      }
    }
    resend_at_.reset();
    if (options_.resend_stop_seconds > 0) resend_at_ = After(options_.resend_stop_seconds);
  }

  void Watch() {
    next_watch_ = After(options_.watch_seconds);
    if (std::string reason = options_.watch(); !reason.empty()) RequestCheckpointStop(reason);
  }

  // Reads the manager's lines: "stop" is a checkpoint-and-stop request; the end of the input
  // (the manager is gone) stops the workers as SIGHUP does.
  void ReadControl() {
    char buffer[256];
    const ssize_t n = read(control_fd_, buffer, sizeof(buffer));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      control_fd_ = -1;
      Terminate(SIGHUP, "the job's manager closed this node's control input");
      return;
    }
    control_partial_.append(buffer, static_cast<size_t>(n));
    for (size_t nl; (nl = control_partial_.find('\n')) != std::string::npos;) {
      const std::string line = control_partial_.substr(0, nl);
      control_partial_.erase(0, nl + 1);
      if (line == "stop") {
        RequestCheckpointStop("the job's manager asks for a checkpoint: forwarded to the workers");
      } else {
        Message(absl::StrCat("ignored an unknown line from the job's manager: \"", line, "\""));
      }
    }
    if (control_partial_.size() > sizeof(buffer)) control_partial_.clear();
  }

  static Clock::time_point After(double seconds) {
    return Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }

  void ArmKill() {
    const auto at = After(options_.grace_seconds);
    if (!kill_at_ || at < *kill_at_) kill_at_ = at;
  }

  void KillRunning() {
    for (Worker& w : workers_) {
      if (!w.running) continue;
      Message(absl::StrCat(w.spec->name, " is still running: sending SIGKILL"));
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
  WorkerGroupResult result_;
  bool stopping_ = false;
  int stop_requests_ = 0;
  int control_fd_ = options_.control_fd;  // -1 once it has ended
  std::string control_partial_;           // control input after the last newline
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> next_watch_;  // when to call options_.watch next
  std::optional<Clock::time_point> resend_at_;   // when to resend a checkpoint-and-stop request
};

}  // namespace

absl::StatusOr<WorkerGroupResult> RunWorkerGroup(const std::vector<WorkerSpec>& workers,
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
  // A launcher started with SIGUSR1 ignored (a node of a --morph job) must still read it.
  struct sigaction default_action = {}, previous_usr1 = {};
  default_action.sa_handler = SIG_DFL;
  sigaction(SIGUSR1, &default_action, &previous_usr1);

  absl::StatusOr<WorkerGroupResult> result;
  {
    Supervisor supervisor(options, previous);
    if (absl::Status status = supervisor.Start(workers); !status.ok()) {
      result = status;
    } else {
      result = supervisor.Supervise(signal_fd);
    }
  }
  sigaction(SIGPIPE, &previous_pipe, nullptr);
  sigaction(SIGUSR1, &previous_usr1, nullptr);
  close(signal_fd);
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  return result;
}

}  // namespace varuna
