#include "trainer/run_report.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace trainer {

RunReport::RunReport(std::unique_ptr<TrainingLog> log, std::unique_ptr<TensorBoardLog> tensorboard,
                     std::function<std::optional<DeviceMemory>()> device_memory)
    : log_(std::move(log)),
      tensorboard_(std::move(tensorboard)),
      device_memory_(std::move(device_memory)) {}

void RunReport::Start(int64_t iteration, bool resumed) {
  if (tensorboard_ == nullptr) return;
  // A write error stays with the event file's writer, which returns it from the next Step,
  // Interval or Evaluation; the run stops there.
  tensorboard_->Start(iteration, resumed).IgnoreError();
  log_->Info(absl::StrCat("> tensorboard: ", tensorboard_->path()));
  if (tensorboard_->options().log_memory && !device_memory_) {
    log_->Info(
        "> tensorboard: no memory scalars: no allocator statistics for this device "
        "(--log-memory-to-tensorboard)");
  }
}

absl::Status RunReport::Step(const StepRecord& step) {
  if (tensorboard_ == nullptr || !tensorboard_->WantsStep(step.iteration)) {
    return absl::OkStatus();
  }
  const bool memory = tensorboard_->options().log_memory && device_memory_;
  return tensorboard_->Step(step, memory ? device_memory_() : std::nullopt);
}

absl::Status RunReport::Interval(const StepRecord& interval) {
  StepRecord line = interval;
  if (device_memory_) {
    if (const std::optional<DeviceMemory> memory = device_memory_()) {
      line.max_allocated_bytes = memory->max_allocated_bytes;
    }
  }
  if (absl::Status status = log_->Step(line); !status.ok()) return status;
  return tensorboard_ == nullptr ? absl::OkStatus() : tensorboard_->Throughput(interval);
}

absl::Status RunReport::Evaluation(const EvalRecord& record, int64_t consumed_samples) {
  if (absl::Status status = log_->Eval(record); !status.ok()) return status;
  return tensorboard_ == nullptr ? absl::OkStatus() : tensorboard_->Eval(record, consumed_samples);
}

}  // namespace trainer
