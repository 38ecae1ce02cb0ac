#include "trainer/stop_signal.h"

#include <atomic>

namespace trainer {
namespace {

// The first stop signal received, or 0 (lock-free, so a handler may write it).
std::atomic<int> received_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void OnStopSignal(int signal) {
  int none = 0;
  received_signal.compare_exchange_strong(none, signal);
}

}  // namespace

StopSignal::StopSignal() {
  received_signal.store(0);
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking reads and writes continue after the signal
  sigaction(SIGUSR1, &action, &previous_usr1_);
  sigaction(SIGTERM, &action, &previous_term_);
}

StopSignal::~StopSignal() {
  sigaction(SIGUSR1, &previous_usr1_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
}

bool StopSignal::requested() const { return received_signal.load() != 0; }

const char* StopSignal::signal_name() const {
  switch (received_signal.load()) {
    case SIGUSR1:
      return "SIGUSR1";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "";
  }
}

}  // namespace trainer
