#include "trainer/training_log.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "varuna/io/json.h"

namespace trainer {

using varuna::json::Value;

absl::StatusOr<std::unique_ptr<TrainingLog>> TrainingLog::Open(std::FILE* out,
                                                               const std::string& metrics_path) {
  std::FILE* metrics = nullptr;
  if (!metrics_path.empty()) {
    metrics = std::fopen(metrics_path.c_str(), "a");
    if (metrics == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metrics-file=", metrics_path,
                       " cannot be opened for appending: ", std::strerror(errno)));
    }
  }
  return std::unique_ptr<TrainingLog>(new TrainingLog(out, metrics, metrics_path));
}

TrainingLog::~TrainingLog() {
  if (metrics_ != nullptr) std::fclose(metrics_);
}

namespace {

// Megatron's timestamp: local time, "YYYY-MM-DD hh:mm:ss".
std::string Timestamp(std::time_t time) {
  std::tm local{};
  localtime_r(&time, &local);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

double PerGpu(const StepRecord& r) {
  return r.tflops / static_cast<double>(std::max<int64_t>(r.num_gpus, 1));
}

}  // namespace

std::string TrainingLog::FormatStep(const StepRecord& r) {
  const std::string mfu =
      r.mfu ? absl::StrFormat("%.1f%%", 100.0 * *r.mfu) : "n/a (unknown device peak)";
  // Megatron's training_log fields, formats and order, then this project's.
  return absl::StrFormat(
      " [%s] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | "
      "throughput per GPU (TFLOP/s/GPU): %.1f | learning rate: %.6E | global batch size: %5d | "
      "lm loss: %.6E | loss scale: %.1f | grad norm: %.3f | number of skipped iterations: %3d | "
      "number of nan iterations: %3d | tokens per second: %.0f | MFU: %s |",
      Timestamp(r.time), r.iteration, r.train_iters, r.consumed_samples, r.ms_per_iteration,
      PerGpu(r), r.lr, r.global_batch_size, r.loss, r.loss_scale, r.grad_norm, r.skipped,
      r.nan_iterations, r.tokens_per_sec, mfu);
}

std::string TrainingLog::StepJson(const StepRecord& r) {
  Value line = Value::object();
  line["iteration"] = r.iteration;
  line["consumed_samples"] = r.consumed_samples;
  line["ms_per_iteration"] = r.ms_per_iteration;
  line["lr"] = r.lr;
  line["lm_loss"] = r.loss;
  line["loss_scale"] = r.loss_scale;
  line["grad_norm"] = std::isfinite(r.grad_norm) ? Value(r.grad_norm) : Value(nullptr);
  line["skipped"] = r.skipped;
  line["nan_iterations"] = r.nan_iterations;
  line["global_batch_size"] = r.global_batch_size;
  line["tokens_per_sec"] = r.tokens_per_sec;
  line["tflops"] = r.tflops;
  line["throughput_per_gpu_tflops"] = PerGpu(r);
  line["mfu"] = r.mfu ? Value(*r.mfu) : Value(nullptr);
  if (r.max_allocated_bytes) line["max_allocated_bytes"] = *r.max_allocated_bytes;
  if (!r.timers.empty()) {
    Value timers = Value::object();
    for (const TimerSpan& timer : r.timers) {
      timers[timer.name] = Value::array({timer.min_ms, timer.max_ms});
    }
    line["timers_ms"] = timers;
  }
  return varuna::json::Serialize(line);
}

std::string TrainingLog::FormatEval(const EvalRecord& r) {
  return absl::StrFormat(
      " %s loss at iteration %d on %s set | lm loss value: %.6E | lm loss PPL: %.6E |", r.split,
      r.iteration, r.split, r.loss, std::exp(std::min(r.loss, 700.0)));
}

std::string TrainingLog::EvalJson(const EvalRecord& r) {
  Value line = Value::object();
  line["iteration"] = r.iteration;
  line["split"] = r.split;
  line[r.split == "test" ? "test_loss" : "val_loss"] = r.loss;
  line[r.split == "test" ? "test_ppl" : "val_ppl"] = std::exp(std::min(r.loss, 700.0));
  return varuna::json::Serialize(line);
}

absl::Status TrainingLog::WriteMetrics(const std::string& line) {
  if (metrics_ == nullptr || !metrics_status_.ok()) return metrics_status_;
  errno = 0;
  if (std::fprintf(metrics_, "%s\n", line.c_str()) < 0 || std::fflush(metrics_) != 0) {
    metrics_status_ =
        absl::UnavailableError(absl::StrCat("--metrics-file=", metrics_path_, ": writing failed (",
                                            errno != 0 ? std::strerror(errno) : "unknown error",
                                            "): free space there or choose another file"));
  }
  return metrics_status_;
}

absl::Status TrainingLog::Step(const StepRecord& record) {
  if (out_ != nullptr) {
    std::fprintf(out_, "%s\n", FormatStep(record).c_str());
    if (!record.timers_block.empty()) std::fprintf(out_, "%s\n", record.timers_block.c_str());
    std::fflush(out_);
  }
  return WriteMetrics(StepJson(record));
}

absl::Status TrainingLog::Eval(const EvalRecord& record) {
  const std::string line = FormatEval(record);
  const std::string rule(line.size(), '-');
  if (out_ != nullptr) {
    std::fprintf(out_, "%s\n%s\n%s\n", rule.c_str(), line.c_str(), rule.c_str());
    std::fflush(out_);
  }
  return WriteMetrics(EvalJson(record));
}

void TrainingLog::Info(const std::string& line) {
  if (out_ == nullptr) return;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

}  // namespace trainer
