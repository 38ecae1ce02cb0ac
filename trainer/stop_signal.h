// StopSignal: SIGUSR1 and SIGTERM ask the trainer to finish the current step, checkpoint at
// that iteration and exit 0 (Varuna's on-demand checkpoint before a preemption; a launcher
// forwards both to its workers). While a StopSignal exists, those signals only set a flag;
// the training loop reads it once per step and the engine agrees on it across ranks.
// Megatron's --exit-duration-in-mins stops the loop the same way (trainer/exit_duration.h).
//
// A signal handler can reach nothing but process-wide state, so the flag is the one
// process-wide variable here; at most one StopSignal may exist at a time.
//
// Thread safety: requested() and signal_name() may be called from any thread.
#ifndef VARUNA_TRAINER_STOP_SIGNAL_H_
#define VARUNA_TRAINER_STOP_SIGNAL_H_

#include <csignal>

namespace trainer {

class StopSignal {
 public:
  // Installs the handlers (the previous ones are restored by the destructor).
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // True once SIGUSR1 or SIGTERM has arrived.
  bool requested() const;
  // "SIGUSR1" or "SIGTERM" (the first that arrived), or "" if none.
  const char* signal_name() const;

 private:
  struct sigaction previous_usr1_;
  struct sigaction previous_term_;
};

}  // namespace trainer

#endif  // VARUNA_TRAINER_STOP_SIGNAL_H_
