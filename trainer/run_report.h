// RunReport: where a training run reports, as one object. It owns the log (Megatron's lines on
// stdout, rank 0; trainer/training_log.h), the metrics file (--metrics-file, the same values as
// JSON lines) and TensorBoard (--tensorboard-dir, rank 0; trainer/tensorboard_log.h), and writes
// each event where it belongs:
//
//   Step        every step: TensorBoard's per-step scalars, every --tensorboard-log-interval
//   Interval    every --log-interval: the log line, its JSON line, TensorBoard's throughput
//   Evaluation  each evaluation: the log's block, its JSON line, TensorBoard's loss (and ppl)
//   Info        a line of the log (stdout only)
//
// Step, Interval and Evaluation return the first write error (naming --metrics-file or
// --tensorboard-dir and the reason); the trainer stops on it, so no metric is lost silently.
//
// Thread safety: none; for the training loop's thread.
#ifndef VARUNA_TRAINER_RUN_REPORT_H_
#define VARUNA_TRAINER_RUN_REPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "trainer/tensorboard_log.h"
#include "trainer/training_log.h"

namespace trainer {

class RunReport {
 public:
  // `log`: required. `tensorboard`: null without --tensorboard-dir and on ranks other than 0.
  // `device_memory`: the allocator's statistics for the metrics' max_allocated_bytes and
  // TensorBoard's memory scalars (--log-memory-to-tensorboard): the CUDA caching allocator's,
  // or on the CPU the trainer's count of LibTorch's allocations; null where there is neither.
  RunReport(std::unique_ptr<TrainingLog> log, std::unique_ptr<TensorBoardLog> tensorboard,
            std::function<std::optional<DeviceMemory>()> device_memory);

  // Training starts at `iteration`, resumed from a checkpoint when `resumed`: TensorBoard then
  // writes no step at or before it (an earlier run did), and marks the restart so that
  // TensorBoard hides the later steps of earlier runs (TensorBoardLog::Start). Logs where the
  // events go.
  void Start(int64_t iteration, bool resumed);

  // One step, `step` holding that step alone (its loss NaN when it was skipped).
  absl::Status Step(const StepRecord& step);
  // The steps of a --log-interval line.
  absl::Status Interval(const StepRecord& interval);
  // An evaluation after `consumed_samples` training samples.
  absl::Status Evaluation(const EvalRecord& record, int64_t consumed_samples);
  void Info(const std::string& line) { log_->Info(line); }

  // The log, for the set-up steps that write lines to it.
  TrainingLog& log() { return *log_; }

 private:
  std::unique_ptr<TrainingLog> log_;
  std::unique_ptr<TensorBoardLog> tensorboard_;
  std::function<std::optional<DeviceMemory>()> device_memory_;
};

}  // namespace trainer

#endif  // VARUNA_TRAINER_RUN_REPORT_H_
