#include "trainer/tensorboard_log.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace trainer {

absl::StatusOr<std::unique_ptr<TensorBoardLog>> TensorBoardLog::Open(
    const TensorBoardOptions& options) {
  absl::StatusOr<std::unique_ptr<tensorboard::EventFileWriter>> writer =
      tensorboard::EventFileWriter::Open({options.dir, options.queue_size, "varuna pretrain_gpt2"});
  if (!writer.ok()) {
    return absl::Status(
        writer.status().code(),
        absl::StrCat("--tensorboard-dir=", options.dir, ": ", writer.status().message(),
                     ": give a directory this process can create and write"));
  }
  return std::unique_ptr<TensorBoardLog>(new TensorBoardLog(options, *std::move(writer)));
}

absl::Status TensorBoardLog::Start(int64_t iteration, bool resumed) {
  skip_through_ = resumed ? iteration : iteration - 1;
  return writer_->AddSessionStart(skip_through_ + 1);
}

absl::Status TensorBoardLog::Add(const std::string& tag, int64_t iteration, double value,
                                 int64_t samples) {
  if (absl::Status s = writer_->AddScalar(tag, iteration, value); !s.ok()) return s;
  if (samples < 0) return absl::OkStatus();
  return writer_->AddScalar(absl::StrCat(tag, " vs samples"), samples, value);
}

absl::Status TensorBoardLog::Step(const StepRecord& r, const std::optional<DeviceMemory>& memory) {
  if (r.iteration <= skip_through_) return absl::OkStatus();
  const int64_t i = r.iteration;
  const int64_t samples = r.consumed_samples;
  absl::Status s;
  if (std::isfinite(r.loss)) s.Update(Add("lm loss", i, r.loss, samples));
  s.Update(Add("learning-rate", i, r.lr, samples));
  if (options_.log_loss_scale) s.Update(Add("loss-scale", i, r.loss_scale, samples));
  if (std::isfinite(r.grad_norm)) s.Update(Add("grad-norm", i, r.grad_norm, samples));
  s.Update(Add("skipped-iterations", i, static_cast<double>(r.skipped)));
  if (memory) {
    s.Update(Add("mem-reserved-bytes", i, static_cast<double>(memory->reserved_bytes)));
    s.Update(Add("mem-allocated-bytes", i, static_cast<double>(memory->allocated_bytes)));
    s.Update(Add("mem-max-allocated-bytes", i, static_cast<double>(memory->max_allocated_bytes)));
    s.Update(Add("mem-allocated-count", i, static_cast<double>(memory->allocated_count)));
  }
  if (!s.ok()) return s;
  return writer_->Flush();
}

absl::Status TensorBoardLog::Throughput(const StepRecord& r) {
  if (r.iteration <= skip_through_) return absl::OkStatus();
  absl::Status s;
  if (options_.log_timers) {
    s.Update(Add("iteration-time", r.iteration, r.ms_per_iteration / 1e3));
    for (const TimerSpan& timer : r.timers) {
      s.Update(Add(timer.name + "-time", r.iteration, timer.max_ms / 1e3));
    }
  }
  s.Update(Add("tokens-per-second", r.iteration, r.tokens_per_sec));
  s.Update(Add("tflops", r.iteration, r.tflops));
  if (r.mfu) s.Update(Add("mfu", r.iteration, *r.mfu));
  if (!s.ok()) return s;
  return writer_->Flush();
}

absl::Status TensorBoardLog::Eval(const EvalRecord& r, int64_t consumed_samples) {
  if (r.iteration <= skip_through_) return absl::OkStatus();
  const std::string tag = absl::StrCat("lm loss ", r.split);  // "lm loss validation"
  absl::Status s = Add(tag, r.iteration, r.loss, consumed_samples);
  if (options_.log_validation_ppl) {
    s.Update(Add(tag + " ppl", r.iteration, std::exp(std::min(r.loss, 20.0)), consumed_samples));
  }
  if (!s.ok()) return s;
  return writer_->Flush();
}

}  // namespace trainer
