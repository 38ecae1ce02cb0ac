// LibTorch's own log, fit for the terminal of a distributed job.
//
// LibTorch's c10d store client logs a warning carrying a C++ backtrace (15 to 35 "frame #"
// lines) for every call that fails because the store has gone, and an error or warning for
// every failed attempt to connect; each of those failures reaches the user anyway, as one
// error line of ours. LibTorch's log has one threshold for all of it, its own TORCH_WARN
// warnings included.
//
// Thread safety: UseOneLineLibTorchLog may be called from any thread; a QuietLibTorchLog may
// exist only while no other thread calls LibTorch (it changes LibTorch's process-wide
// threshold and puts it back).
#ifndef VARUNA_COMM_LIBTORCH_LOG_H_
#define VARUNA_COMM_LIBTORCH_LOG_H_

namespace varuna::comm {

// For the rest of the process: LibTorch logs errors only, and prints its TORCH_WARN warnings as
// one line each ("[W] LibTorch: ..."). Where the environment sets TORCH_CPP_LOG_LEVEL (INFO,
// WARNING, ERROR or FATAL), LibTorch's own log at that level instead, as PyTorch gives it.
// Idempotent.
void UseOneLineLibTorchLog();

// While it exists, LibTorch logs nothing below FATAL (for the attempts to connect to a store,
// whose outcome the caller reports).
class QuietLibTorchLog {
 public:
  QuietLibTorchLog();
  ~QuietLibTorchLog();
  QuietLibTorchLog(const QuietLibTorchLog&) = delete;
  QuietLibTorchLog& operator=(const QuietLibTorchLog&) = delete;

 private:
  const int previous_;
};

}  // namespace varuna::comm

#endif  // VARUNA_COMM_LIBTORCH_LOG_H_
