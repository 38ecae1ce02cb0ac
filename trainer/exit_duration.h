// ExitDuration: Megatron's --exit-duration-in-mins, a run's time limit. Once `minutes` have
// passed since `start` (the program's start, as Megatron measures from its own), the training
// loop checkpoints and exits 0 after the current step, as on SIGTERM: the engine agrees on the
// stop across ranks (Varuna::step's stop_requested, which Megatron does with a MAX all-reduce of
// each rank's "done"), so every rank stops at the same iteration even though each reads its own
// clock.
//
// Thread safety: immutable; Expired() may be called from any thread.
#ifndef VARUNA_TRAINER_EXIT_DURATION_H_
#define VARUNA_TRAINER_EXIT_DURATION_H_

#include <chrono>
#include <string>

namespace trainer {

class ExitDuration {
 public:
  // `minutes` <= 0: never expires.
  ExitDuration(double minutes, std::chrono::steady_clock::time_point start)
      : minutes_(minutes), start_(start) {}

  // True once more than `minutes` have passed since `start`.
  bool Expired() const;

  // Minutes since `start`.
  double ElapsedMinutes() const;

  // "--exit-duration-in-mins=<minutes>: <elapsed> minutes since the start", for the log.
  std::string Describe() const;

 private:
  double minutes_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace trainer

#endif  // VARUNA_TRAINER_EXIT_DURATION_H_
