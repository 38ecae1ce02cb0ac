#include "varuna/pipeline.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "varuna/p2p.h"
#include "varuna/rng_state.h"

namespace varuna {
namespace {

int ActivationTag(int micro_batch) { return 4 * micro_batch; }
int GradientTag(int micro_batch) { return 4 * micro_batch + 2; }

// What a stage keeps of one micro-batch between its forward and its backward.
struct InFlight {
  at::Tensor input;   // The received activation (stages after the first).
  at::Tensor output;  // The activation sent on, or the loss; with its graph once (re)computed.
  std::optional<RngState> rng;  // Set when the forward ran without a graph.
};

}  // namespace

absl::StatusOr<double> StageExecutor::Train(const std::vector<TensorMap>& micro_batches,
                                            const std::vector<double>& weights, double loss_scale) {
  const int m = static_cast<int>(micro_batches.size());
  const std::vector<Task> tasks = BuildSchedule(schedule_, num_stages_, m, stage_);
  std::vector<InFlight> state(m);
  PendingSends sends;
  double loss = 0;

  auto forward = [&](int i, bool with_graph) -> at::Tensor {
    at::AutoGradMode grad_mode(with_graph);
    at::Tensor input = state[i].input;
    if (input.defined()) input = input.detach().requires_grad_(with_graph);
    state[i].input = input;
    return model_.Forward(input, micro_batches[i]);
  };

  for (size_t t = 0; t < tasks.size(); ++t) {
    const int i = tasks[t].micro_batch;
    switch (tasks[t].kind) {
      case TaskKind::kForward: {
        if (!first()) {
          absl::StatusOr<at::Tensor> input =
              ReceiveTensor(*pipeline_, stage_ - 1, ActivationTag(i), device_);
          if (!input.ok()) return input.status();
          state[i].input = *input;
        }
        const bool keep = KeepsGraph(tasks, t);
        if (!keep) state[i].rng = RngState::Capture(device_);
        at::Tensor output = forward(i, keep);
        if (!last()) sends.Send(*pipeline_, output, stage_ + 1, ActivationTag(i));
        if (last() && weights[i] != 0) {
          loss += weights[i] * output.detach().to(at::kDouble).item<double>();
        }
        if (keep) state[i].output = output;
        break;
      }
      case TaskKind::kRecompute: {
        const RngState live = RngState::Capture(device_);
        state[i].rng->Restore();
        state[i].output = forward(i, /*with_graph=*/true);
        live.Restore();
        break;
      }
      case TaskKind::kBackward: {
        at::Tensor output = state[i].output;
        if (last()) {
          if (weights[i] != 0) (output.to(at::kFloat) * (weights[i] * loss_scale)).backward();
        } else {
          absl::StatusOr<at::Tensor> gradient =
              ReceiveTensor(*pipeline_, stage_ + 1, GradientTag(i), device_);
          if (!gradient.ok()) return gradient.status();
          output.backward(*gradient);
        }
        if (!first()) {
          const at::Tensor& input_grad = state[i].input.grad();
          sends.Send(*pipeline_, input_grad.defined() ? input_grad : at::zeros_like(state[i].input),
                     stage_ - 1, GradientTag(i));
        }
        state[i] = InFlight();
        break;
      }
    }
  }
  if (absl::Status status = sends.WaitAll(); !status.ok()) return status;
  return loss;
}

absl::StatusOr<double> StageExecutor::Evaluate(const std::vector<TensorMap>& micro_batches,
                                               const std::vector<double>& weights) {
  at::NoGradGuard no_grad;
  PendingSends sends;
  double loss = 0;
  for (int i = 0; i < static_cast<int>(micro_batches.size()); ++i) {
    at::Tensor input;
    if (!first()) {
      absl::StatusOr<at::Tensor> received =
          ReceiveTensor(*pipeline_, stage_ - 1, ActivationTag(i), device_);
      if (!received.ok()) return received.status();
      input = *received;
    }
    at::Tensor output = model_.Forward(input, micro_batches[i]);
    if (last()) {
      if (weights[i] != 0) loss += weights[i] * output.to(at::kDouble).item<double>();
    } else {
      sends.Send(*pipeline_, output, stage_ + 1, ActivationTag(i));
    }
  }
  if (absl::Status status = sends.WaitAll(); !status.ok()) return status;
  return loss;
}

}  // namespace varuna
