// Adam: the Adam optimizer with decoupled weight decay (AdamW, Loshchilov & Hutter), over named
// parameters, with fp32 state.
//
// For every parameter p with gradient g at step t (t counts applied steps, from 1):
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   p = p - lr * (m / (1 - beta1^t) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay * p)
// where weight_decay applies only to parameters marked `decay` (Megatron leaves biases and
// LayerNorm parameters out). This is Apex's FusedAdam in AdamW mode, the optimizer Megatron and
// Varuna use.
//
// Master weights: the optimizer updates an fp32 master copy of every parameter. For an fp32
// parameter the master is the parameter itself; for an fp16/bf16 one it is a separate fp32
// tensor, and the update is copied back into the parameter (rounded). Gradients are read as
// fp32 from `master_grad` tensors the caller fills (see MasterGrads()).
//
// Step() is one varuna::kernels::FusedAdamStep over all parameters: one CUDA launch for a model
// on the GPU, the LibTorch reference on the CPU.
//
// The state (moments, masters, step count) is keyed by parameter name, so it can be saved per
// segment and loaded under another layout.
//
// Thread safety: none.
#ifndef VARUNA_OPTIM_ADAM_H_
#define VARUNA_OPTIM_ADAM_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace varuna {

struct AdamOptions {
  double lr = 1e-3;  // Usually replaced every step by the LR schedule (set_lr).
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // Decoupled; only on parameters marked `decay`.
};

// One parameter handed to the optimizer.
struct NamedParameter {
  std::string name;  // Full-model name, e.g. "h.3.attn.c_attn.weight".
  at::Tensor tensor;
  bool decay = true;
};

class Adam {
 public:
  // `parameters` must have distinct names and defined floating-point tensors.
  Adam(std::vector<NamedParameter> parameters, const AdamOptions& options);

  const AdamOptions& options() const { return options_; }
  void set_lr(double lr) { options_.lr = lr; }

  // Number of steps applied so far.
  int64_t step_count() const { return step_count_; }

  // One entry per parameter, in construction order: the fp32 gradient the next Step() uses.
  // The engine writes (unscaled, reduced, clipped) gradients here; zeros after construction.
  // After ReleaseMasterGrads() the next call allocates them again, uninitialised: the caller
  // must then write every element before stepping.
  std::vector<at::Tensor>& MasterGrads();
  // Frees the master gradients (as many fp32 elements as the parameters) until MasterGrads() is
  // next called, so that the memory serves the activations of the forward and backward passes
  // in between (work already queued on them keeps it: LibTorch's allocator orders reuse on the
  // stream).
  void ReleaseMasterGrads();
  const std::vector<NamedParameter>& parameters() const { return parameters_; }

  // The fp32 master copy of parameter i (the parameter itself when it is fp32).
  const at::Tensor& master(size_t i) const { return masters_[i]; }

  // Applies one update with the current master gradients, each multiplied by `grad_scale` first
  // (e.g. the gradient-clipping coefficient), and increments step_count().
  void Step(double grad_scale = 1.0);

  // Enqueues the update of step number step_count() + 1 with its inputs on the parameters'
  // device, so the caller need not read anything back first: every gradient is multiplied by
  // `grad_scale`, and nothing at all changes if `skip` holds a nonzero value (both float32
  // tensors of one element, read on the device; see kernels::FusedAdamStep). step_count() is
  // left alone: call CountStep() once the caller knows the update was applied (skip held 0).
  void StepOnDevice(const at::Tensor& grad_scale, const at::Tensor& skip);
  void CountStep() { ++step_count_; }

  // Named state tensors of parameter i: "<name>" (fp32 master), "<name>.exp_avg",
  // "<name>.exp_avg_sq" (CPU copies are the caller's business).
  std::vector<std::pair<std::string, at::Tensor>> StateOf(size_t i) const;

  // Loads parameter i's state from tensors named as in StateOf, found by `find(name)` (which
  // returns an undefined tensor when absent), and copies the master into the parameter.
  // Returns NotFound / InvalidArgument naming the tensor when one is missing or has the wrong
  // shape; the state is unchanged then.
  template <typename Find>
  absl::Status LoadStateOf(size_t i, const Find& find);

  void set_step_count(int64_t steps) { step_count_ = steps; }

 private:
  absl::Status LoadTensors(size_t i, const at::Tensor& master, const at::Tensor& exp_avg,
                           const at::Tensor& exp_avg_sq);

  std::vector<NamedParameter> parameters_;
  AdamOptions options_;
  std::vector<at::Tensor> masters_;
  std::vector<at::Tensor> master_grads_;
  std::vector<at::Tensor> exp_avg_;
  std::vector<at::Tensor> exp_avg_sq_;
  std::vector<at::Tensor> model_copies_;  // the fp16/bf16 parameter; undefined when fp32
  std::vector<bool> decay_;
  int64_t step_count_ = 0;
};

template <typename Find>
absl::Status Adam::LoadStateOf(size_t i, const Find& find) {
  const std::string& name = parameters_[i].name;
  return LoadTensors(i, find(name), find(name + ".exp_avg"), find(name + ".exp_avg_sq"));
}

}  // namespace varuna

#endif  // VARUNA_OPTIM_ADAM_H_
