// TrainingLog: the log lines of a run, Megatron's format on stdout and the same values as JSON
// lines in --metrics-file.
//
// A step line (one line; Megatron's fields, names and number formats, in Megatron's order,
// then this project's tokens per second and MFU), as the sample run printed it:
//  [2026-11-26 23:21:25] iteration       10/      20 | consumed samples:          160 |
//  elapsed time per iteration (ms): 1210.0 | throughput per GPU (TFLOP/s/GPU): 0.0 |
//  learning rate: 1.100000E-03 | global batch size:    16 | lm loss: 7.670558E+00 |
//  loss scale: 1.0 | grad norm: 0.955 | number of skipped iterations:   0 |
//  number of nan iterations:   0 | tokens per second: 1693 | MFU: n/a (unknown device peak) |
// and its JSON line (one object per line; digits shortened here):
//  {"iteration":10,"consumed_samples":160,"ms_per_iteration":1209.97,"lr":0.0011,
//   "lm_loss":7.67056,"loss_scale":1.0,"grad_norm":0.954909,"skipped":0,"nan_iterations":0,
//   "global_batch_size":16,"tokens_per_sec":1692.60,"tflops":0.0146423,
//   "throughput_per_gpu_tflops":0.0146423,"mfu":null}
// An evaluation prints Megatron's line between dashed lines,
//  validation loss at iteration 20 on validation set | lm loss value: 6.814353E+00 |
//  lm loss PPL: 9.108269E+02 |
// ("test loss ... on test set" for the test split), and writes
//  {"iteration":20,"split":"validation","val_loss":6.81435,"val_ppl":910.827}.
//
// Thread safety: none.
#ifndef VARUNA_TRAINER_TRAINING_LOG_H_
#define VARUNA_TRAINER_TRAINING_LOG_H_

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainer {

// One phase timer of a log line (--timing-log-level): its time per iteration, in ms, on the
// fastest and the slowest rank that ran it.
struct TimerSpan {
  std::string name;  // Megatron's: "forward-backward", "optimizer", ...
  double min_ms = 0;
  double max_ms = 0;
};

// The numbers of a log line (the interval's, see LogInterval) or of one step (for TensorBoard).
struct StepRecord {
  std::time_t time = 0;  // When the line was made; printed in local time, as Megatron does.
  int64_t iteration = 0;
  int64_t train_iters = 0;
  int64_t consumed_samples = 0;
  double ms_per_iteration = 0;
  double lr = 0;
  double loss = 0;  // Mean over the steps since the last line.
  double loss_scale = 1;
  double grad_norm = 0;
  // Skipped steps (inf/NaN gradients: no update) since the start of the run; Megatron's
  // "number of skipped iterations". (Megatron counts those of the interval.)
  int64_t skipped = 0;
  // Steps of the interval whose loss was not finite (NaN or inf), skipped or applied; Megatron's
  // "number of nan iterations", 0 in a healthy run.
  int64_t nan_iterations = 0;
  int64_t global_batch_size = 0;  // Sequences per iteration, all replicas.
  int64_t num_gpus = 1;           // The job's processes (one device each): world size.
  double tokens_per_sec = 0;
  double tflops = 0;  // The job's model TFLOP/s; per GPU: tflops / num_gpus.
  std::optional<double> mfu;
  // On a CUDA device: the most bytes this process's tensors held at once since it started (the
  // caching allocator's peak); in the metrics file only ("max_allocated_bytes").
  std::optional<int64_t> max_allocated_bytes;
  // --timing-log-level > 0: the phases' timers (trainer/phase_timing.h), in the metrics file
  // ("timers_ms": {name: [min, max]}) and TensorBoard ("<name>-time", the max in seconds), and
  // Megatron's block of them for --timing-log-option, printed after the line.
  std::vector<TimerSpan> timers;
  std::string timers_block;
};

struct EvalRecord {
  int64_t iteration = 0;
  std::string split;  // "validation" or "test"
  double loss = 0;
};

class TrainingLog {
 public:
  // Logs to `out` (stdout normally; null: nowhere, as on ranks other than 0) and, if
  // metrics_path is not empty, appends JSON lines to that file (created if missing). Error naming
  // --metrics-file if it cannot be opened.
  static absl::StatusOr<std::unique_ptr<TrainingLog>> Open(std::FILE* out,
                                                           const std::string& metrics_path);
  ~TrainingLog();

  // The record's line on `out` and its JSON line in the metrics file. OK, or the first failed
  // write to the metrics file (naming --metrics-file and the system's reason, e.g. a full disk),
  // returned by this call and every later one, which write nothing more to the file: lost
  // metrics stop the run instead of passing silently.
  absl::Status Step(const StepRecord& record);
  absl::Status Eval(const EvalRecord& record);
  // A free-form line on `out` only. A line that cannot be printed (stdout closed) is not an
  // error of the run: the metrics file keeps every value.
  void Info(const std::string& line);

  static std::string FormatStep(const StepRecord& record);
  static std::string StepJson(const StepRecord& record);
  static std::string FormatEval(const EvalRecord& record);
  static std::string EvalJson(const EvalRecord& record);

 private:
  TrainingLog(std::FILE* out, std::FILE* metrics, std::string metrics_path)
      : out_(out), metrics_(metrics), metrics_path_(std::move(metrics_path)) {}
  absl::Status WriteMetrics(const std::string& line);

  std::FILE* out_;
  std::FILE* metrics_;
  std::string metrics_path_;
  absl::Status metrics_status_;
};

}  // namespace trainer

#endif  // VARUNA_TRAINER_TRAINING_LOG_H_
