// TensorBoardLog: the trainer's scalars as TensorBoard event files (--tensorboard-dir), under
// Megatron-LM's tag names, so its dashboards and scripts carry over. Written by rank 0 only.
//
// Every --tensorboard-log-interval steps (Step), at the step's iteration, and with the
// consumed samples as the step of the "... vs samples" twin:
//   lm loss (+ vs samples; not for a skipped step), learning-rate (+ vs samples),
//   loss-scale (+ vs samples; unless --no-log-loss-scale-to-tensorboard),
//   grad-norm (+ vs samples; when finite), skipped-iterations (since the start of training),
//   with --log-memory-to-tensorboard: mem-reserved-bytes, mem-allocated-bytes,
//   mem-max-allocated-bytes, mem-allocated-count (the CUDA caching allocator's, or on the CPU
//   the trainer's count of LibTorch's allocations).
// Every --log-interval, with the log line (Throughput): tokens-per-second, tflops (the job's
// achieved model TFLOP/s), mfu (a fraction; when the device peak is known), and with
// --log-timers-to-tensorboard iteration-time (seconds).
// After each evaluation (Eval): "lm loss validation" (+ vs samples), or "lm loss test"; with
// --log-validation-ppl-to-tensorboard also "lm loss validation ppl" / "lm loss test ppl".
//
// The events of each call are written before it returns, so a crash loses at most one
// interval. Every run starts a new file in the directory; a resumed run (Start) writes no step
// at or before the iteration it resumed from. Each file's first event after the file version
// is TensorBoard's restart marker, a SessionLog START at the first step the run writes
// (resumed from N: N + 1), so TensorBoard hides what earlier files hold at that step and after
// (a crashed run's steps past its last checkpoint, which this run writes again); see
// tensorboard/event_file_reader.h, MergedScalars, for the rule. Write errors are returned.
//
// Thread safety: none.
#ifndef VARUNA_TRAINER_TENSORBOARD_LOG_H_
#define VARUNA_TRAINER_TENSORBOARD_LOG_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/tensorboard/event_file_writer.h"
#include "trainer/training_log.h"

namespace trainer {

struct TensorBoardOptions {
  std::string dir;             // --tensorboard-dir; created if missing
  int64_t log_interval = 1;    // --tensorboard-log-interval
  int64_t queue_size = 1000;   // --tensorboard-queue-size
  bool log_loss_scale = true;  // --log-loss-scale-to-tensorboard
  bool log_validation_ppl = false;
  bool log_memory = false;
  bool log_timers = false;
};

// The device allocator's statistics, in bytes (and allocations).
struct DeviceMemory {
  int64_t reserved_bytes = 0;
  int64_t allocated_bytes = 0;
  int64_t max_allocated_bytes = 0;
  int64_t allocated_count = 0;
};

class TensorBoardLog {
 public:
  // A new event file in options.dir. Errors name --tensorboard-dir and the cause.
  static absl::StatusOr<std::unique_ptr<TensorBoardLog>> Open(const TensorBoardOptions& options);

  // Training starts at `iteration`, resumed from a checkpoint at it when `resumed`: then steps
  // <= `iteration` are not written (a previous run wrote them). Queues the SessionLog START at
  // the first step this run writes (`iteration` + 1 when resumed, else `iteration`); it is
  // written with the next call's events. Errors: the writer's; it keeps them and returns them
  // from every later call too.
  absl::Status Start(int64_t iteration, bool resumed);

  // Whether Step wants iteration `iteration` (every options.log_interval).
  bool WantsStep(int64_t iteration) const { return iteration % options_.log_interval == 0; }

  // One step's scalars: `record` holds that step alone (its loss NaN when it was skipped);
  // `memory` when --log-memory-to-tensorboard and the device has an allocator to ask.
  absl::Status Step(const StepRecord& record, const std::optional<DeviceMemory>& memory);
  // The throughput of the steps of a --log-interval line.
  absl::Status Throughput(const StepRecord& record);
  // An evaluation after `consumed_samples` training samples.
  absl::Status Eval(const EvalRecord& record, int64_t consumed_samples);

  const TensorBoardOptions& options() const { return options_; }
  const std::string& path() const { return writer_->path(); }

 private:
  TensorBoardLog(const TensorBoardOptions& options,
                 std::unique_ptr<tensorboard::EventFileWriter> writer)
      : options_(options), writer_(std::move(writer)) {}

  // `value` at `iteration`, and with `samples` (>= 0) also "<tag> vs samples" at `samples`.
  absl::Status Add(const std::string& tag, int64_t iteration, double value, int64_t samples = -1);

  TensorBoardOptions options_;
  std::unique_ptr<tensorboard::EventFileWriter> writer_;
  int64_t skip_through_ = -1;
};

}  // namespace trainer

#endif  // VARUNA_TRAINER_TENSORBOARD_LOG_H_
