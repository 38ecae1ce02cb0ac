#include "varuna/pipeline/stage_executor.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceGuard.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "varuna/pipeline/p2p.h"
#include "varuna/pipeline/phase_timers.h"
#include "varuna/pipeline/rng_state.h"

namespace varuna {
namespace {

int ActivationTag(int micro_batch) { return 4 * micro_batch; }
int GradientTag(int micro_batch) { return 4 * micro_batch + 2; }

// Receives tensors 0..count-1 from `peer`, in that order, on a thread of its own, so that they
// arrive while the stage computes (Varuna's receive threads). Both neighbours issue their
// transfers in increasing micro-batch order in every schedule, which NCCL's matching needs.
class Prefetcher {
 public:
  Prefetcher(comm::ProcessGroup* group, int peer, int count, int (*tag_of)(int),
             const c10::Device& device)
      : slots_(count) {
    if (group == nullptr) return;
    thread_ = std::thread([this, group, peer, count, tag_of, device] {
      // A new thread's current CUDA device is 0: make it this rank's, so that no CUDA call
      // here touches (and makes a context on) another rank's GPU.
      const c10::DeviceGuard on_device(device);
      for (int i = 0; i < count; ++i) {
        absl::StatusOr<at::Tensor> tensor = ReceiveTensor(*group, peer, tag_of(i), device);
        std::lock_guard<std::mutex> lock(mu_);
        if (!tensor.ok()) {
          status_ = tensor.status();
          break;
        }
        slots_[i] = std::move(*tensor);
        cv_.notify_all();
      }
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
      cv_.notify_all();
    });
  }

  // Joins the thread once it has received everything or failed. A thread still waiting (the
  // step failed on this rank first) is detached: the process is about to report the error
  // and exit, and its peers' transfers will fail.
  ~Prefetcher() {
    if (!thread_.joinable()) return;
    bool finished;
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished = finished_;
    }
    if (finished || !abandoned_) {
      thread_.join();
    } else {
      thread_.detach();
    }
  }

  // Whether tensor i is here (or the receiving failed), without waiting.
  bool Arrived(int i) {
    std::lock_guard<std::mutex> lock(mu_);
    return slots_[i].defined() || !status_.ok();
  }

  // Waits for tensor i.
  absl::StatusOr<at::Tensor> Take(int i) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return slots_[i].defined() || !status_.ok() || finished_; });
    if (!slots_[i].defined()) {
      return status_.ok() ? absl::InternalError("a tensor was never received") : status_;
    }
    at::Tensor out = std::move(slots_[i]);
    slots_[i] = at::Tensor();
    return out;
  }

  // Marks the step as failed, so the destructor does not wait for the thread.
  void Abandon() { abandoned_ = true; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<at::Tensor> slots_;  // guarded by mu_
  absl::Status status_;            // guarded by mu_
  bool finished_ = false;          // guarded by mu_
  bool abandoned_ = false;
  std::thread thread_;
};

// The sum of weight * loss over micro-batches, kept on the loss's device (never read back here),
// so that the host does not wait for any forward to finish before it queues the next work.
class WeightedLoss {
 public:
  explicit WeightedLoss(const c10::Device& device) : device_(device) {}

  void Add(double weight, const at::Tensor& loss) {
    const at::Tensor term = loss.detach().to(at::kDouble) * weight;
    sum_ = sum_.defined() ? sum_ + term : term;
  }
  // A float64 scalar on the device (0 when nothing was added).
  at::Tensor Value() const {
    return sum_.defined() ? sum_.reshape({})
                          : at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device_));
  }

 private:
  c10::Device device_;
  at::Tensor sum_;
};

// What a stage keeps of one micro-batch between its forward and its backward.
struct InFlight {
  at::Tensor input;   // The received activation (stages after the first).
  at::Tensor output;  // The activation sent on, or the loss; with its graph once (re)computed.
  std::optional<RngState> rng;  // Set when the forward ran without a graph.
};

}  // namespace

absl::StatusOr<at::Tensor> StageExecutor::Train(const std::vector<TensorMap>& micro_batches,
                                                const std::vector<double>& weights,
                                                double loss_scale,
                                                const std::function<void()>& before_last_backward) {
  const int m = static_cast<int>(micro_batches.size());
  const std::vector<Task> tasks = BuildSchedule(schedule_, num_stages_, m, stage_);
  // Backwards run in list order (only forwards are run early), so the last B is the last one.
  size_t last_backward = tasks.size();
  for (size_t t = 0; t < tasks.size(); ++t) {
    if (tasks[t].kind == TaskKind::kBackward) last_backward = t;
  }
  std::vector<InFlight> state(m);
  std::vector<bool> done(tasks.size(), false);
  PendingSends sends;
  Prefetcher activations(first() ? nullptr : pipeline_, stage_ - 1, m, ActivationTag, device_);
  Prefetcher gradients(last() ? nullptr : pipeline_, stage_ + 1, m, GradientTag, device_);
  WeightedLoss loss(device_);

  auto forward = [&](int i, bool with_graph) -> at::Tensor {
    at::AutoGradMode grad_mode(with_graph);
    at::Tensor input = state[i].input;
    if (input.defined()) input = input.detach().requires_grad_(with_graph);
    state[i].input = input;
    return model_.Forward(input, micro_batches[i]);
  };
  auto run = [&](size_t t) -> absl::Status {
    const int i = tasks[t].micro_batch;
    done[t] = true;
    switch (tasks[t].kind) {
      case TaskKind::kForward: {
        if (!first()) {
          Phase waiting("varuna::receive_activation", timers_, 2, "forward-recv");
          absl::StatusOr<at::Tensor> input = activations.Take(i);
          if (!input.ok()) return input.status();
          waiting.End();
          state[i].input = *input;
        }
        Phase compute("varuna::forward", timers_, 2, "forward-compute");
        const bool keep = KeepsGraph(tasks, t);
        if (!keep) state[i].rng = RngState::Capture(device_);
        at::Tensor output = forward(i, keep);
        if (last() && weights[i] != 0) loss.Add(weights[i], output);
        if (keep) state[i].output = output;
        compute.End();
        if (!last()) {
          Phase send("varuna::send_activation", timers_, 2, "forward-send");
          sends.Send(*pipeline_, output, stage_ + 1, ActivationTag(i));
          send.End();
        }
        return absl::OkStatus();
      }
      case TaskKind::kRecompute: {
        Phase compute("varuna::recompute", timers_, 2, "recompute-compute");
        const RngState live = RngState::Capture(device_);
        state[i].rng->Restore();
        state[i].output = forward(i, /*with_graph=*/true);
        live.Restore();
        compute.End();
        return absl::OkStatus();
      }
      case TaskKind::kBackward: {
        at::Tensor gradient;
        if (!last()) {
          Phase waiting("varuna::receive_gradient", timers_, 2, "backward-recv");
          absl::StatusOr<at::Tensor> received = gradients.Take(i);
          if (!received.ok()) return received.status();
          waiting.End();
          gradient = *std::move(received);
        }
        Phase compute("varuna::backward", timers_, 2, "backward-compute");
        if (t == last_backward && before_last_backward) before_last_backward();
        at::Tensor output = state[i].output;
        if (last()) {
          if (weights[i] != 0) (output.to(at::kFloat) * (weights[i] * loss_scale)).backward();
        } else {
          output.backward(gradient);
        }
        compute.End();
        if (!first()) {
          Phase send("varuna::send_gradient", timers_, 2, "backward-send");
          const at::Tensor& input_grad = state[i].input.grad();
          sends.Send(*pipeline_, input_grad.defined() ? input_grad : at::zeros_like(state[i].input),
                     stage_ - 1, GradientTag(i));
          send.End();
        }
        state[i] = InFlight();
        return absl::OkStatus();
      }
    }
    return absl::OkStatus();
  };
  // Varuna's opportunistic rule: while the gradient a recompute is waiting for has not arrived,
  // run the next forward if its input is here. Forwards still run in micro-batch order, so
  // the live random stream, and with it every dropout mask, is the same as in list order.
  auto next_forward = [&](size_t from) -> std::optional<size_t> {
    for (size_t u = from; u < tasks.size(); ++u) {
      if (!done[u] && tasks[u].kind == TaskKind::kForward) return u;
    }
    return std::nullopt;
  };

  absl::Status status;
  for (size_t t = 0; t < tasks.size() && status.ok(); ++t) {
    if (done[t]) continue;
    if (tasks[t].kind == TaskKind::kRecompute) {
      while (status.ok() && !gradients.Arrived(tasks[t].micro_batch)) {
        const std::optional<size_t> f = next_forward(t + 1);
        if (!f || !(first() || activations.Arrived(tasks[*f].micro_batch))) break;
        status = run(*f);
      }
      if (!status.ok()) break;
    }
    status = run(t);
  }
  if (status.ok()) {
    Phase waiting("varuna::wait_sends", timers_, 2, "wait-sends");
    status = sends.WaitAll();
    if (status.ok()) waiting.End();
  }
  if (!status.ok()) {
    activations.Abandon();
    gradients.Abandon();
    return status;
  }
  return loss.Value();
}

absl::StatusOr<at::Tensor> StageExecutor::Evaluate(const std::vector<TensorMap>& micro_batches,
                                                   const std::vector<double>& weights) {
  at::NoGradGuard no_grad;
  PendingSends sends;
  WeightedLoss loss(device_);
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
      if (weights[i] != 0) loss.Add(weights[i], output);
    } else {
      sends.Send(*pipeline_, output, stage_ + 1, ActivationTag(i));
    }
  }
  if (absl::Status status = sends.WaitAll(); !status.ok()) return status;
  return loss.Value();
}

}  // namespace varuna
