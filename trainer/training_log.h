// TrainingLog: the log lines of a run, Megatron's format on stdout and the same values as JSON
// lines in --metrics-file.
//
// A step line:
//  iteration      100/     300 | consumed samples:          800 | elapsed time per iteration
//  (ms): 95.1 | learning rate: 1.480E-03 | lm loss: 5.012345E+00 | loss scale: 1.0 | grad norm:
//  0.812 | number of skipped iterations:   0 | tokens per second: 10767 | TFLOP/s: 0.03 | MFU:
//  n/a (unknown device peak)
// and its JSON line (one object per line):
//  {"iteration":100,"consumed_samples":800,"ms_per_iteration":95.1,"lr":0.00148,"lm_loss":5.01,
//   "loss_scale":1.0,"grad_norm":0.812,"skipped":0,"tokens_per_sec":10767,"tflops":0.03,
//   "mfu":null}
// An evaluation adds {"iteration":100,"split":"validation","val_loss":4.9,"val_ppl":134.3}.
//
// Thread safety: none.
#ifndef VARUNA_TRAINER_TRAINING_LOG_H_
#define VARUNA_TRAINER_TRAINING_LOG_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainer {

struct StepRecord {
  int64_t iteration = 0;
  int64_t train_iters = 0;
  int64_t consumed_samples = 0;
  double ms_per_iteration = 0;
  double lr = 0;
  double loss = 0;  // Mean over the steps since the last line.
  double loss_scale = 1;
  double grad_norm = 0;
  int64_t skipped = 0;  // Skipped steps since the start of the run.
  double tokens_per_sec = 0;
  double tflops = 0;
  std::optional<double> mfu;
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
