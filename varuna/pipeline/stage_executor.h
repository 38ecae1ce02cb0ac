// StageExecutor: runs one pipeline stage's task list (pipeline/schedule.h) for one step: forwards,
// recomputes and backwards of every micro-batch, with activations and gradients exchanged with
// the neighbouring stages of the same replica.
//
// Only a forward whose backward comes next in the list (KeepsGraph) keeps its autograd graph;
// every other forward runs without gradients, keeping just its input and the random-generator
// state, and is recomputed (R) before its backward with that state restored and the live state
// put back afterwards, so dropout masks match and later forwards are not replayed. Sends are
// asynchronous; receives block in task order, which the schedules make deadlock-free.
//
// Tags on the pipeline group: micro-batch i uses 4i, 4i+1 for its activation (stage s to s+1)
// and 4i+2, 4i+3 for its gradient (s+1 to s).
//
// Thread safety: none.
#ifndef VARUNA_PIPELINE_STAGE_EXECUTOR_H_
#define VARUNA_PIPELINE_STAGE_EXECUTOR_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "varuna/comm/process_group.h"
#include "varuna/pipeline/phase_timers.h"
#include "varuna/pipeline/schedule.h"
#include "varuna/pipeline/stage_module.h"
#include "varuna/pipeline/tensor_map.h"

namespace varuna {

class StageExecutor {
 public:
  // `pipeline` is the replica's pipeline group (group rank = stage); null when P == 1.
  StageExecutor(StageModule& model, comm::ProcessGroup* pipeline, int stage, int num_stages,
                const c10::Device& device, ScheduleKind schedule)
      : model_(model),
        pipeline_(pipeline),
        stage_(stage),
        num_stages_(num_stages),
        device_(device),
        schedule_(schedule) {}

  // Runs the step: gradients accumulate into the model's parameters' .grad. The last stage
  // backpropagates weights[i] * loss_scale * loss_i; the others the gradients they receive.
  // Returns sum_i weights[i] * loss_i on the last stage and 0 on the others, as a float64
  // scalar tensor on the stage's device: nothing here waits for the device (no host read).
  // `before_last_backward`, if set, runs right before the step's last backward task (the last
  // B of the task list, after which no gradient accumulates), e.g. to arm gradient hooks.
  absl::StatusOr<at::Tensor> Train(const std::vector<TensorMap>& micro_batches,
                                   const std::vector<double>& weights, double loss_scale,
                                   const std::function<void()>& before_last_backward = nullptr);

  // Times Train's phases per micro-batch with `timers` (level 2: "forward-recv",
  // "forward-compute", "recompute-compute", "backward-recv", "backward-compute", "wait-sends";
  // pipeline/phase_timers.h), or not (null, the default). Not owned; must outlive the executor
  // or be replaced first.
  void set_phase_timers(PhaseTimers* timers) { timers_ = timers; }

  // Forward only, without gradients or dropout; the same return value.
  absl::StatusOr<at::Tensor> Evaluate(const std::vector<TensorMap>& micro_batches,
                                      const std::vector<double>& weights);

 private:
  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == num_stages_ - 1; }

  StageModule& model_;
  comm::ProcessGroup* pipeline_;
  int stage_;
  int num_stages_;
  c10::Device device_;
  ScheduleKind schedule_;
  PhaseTimers* timers_ = nullptr;
};

}  // namespace varuna

#endif  // VARUNA_PIPELINE_STAGE_EXECUTOR_H_
