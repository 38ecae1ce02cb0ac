// FusedAdamStep: one Adam step (AdamW mode: decoupled weight decay) over a list of fp32 master
// weights, in one kernel launch on CUDA (Apex's FusedAdam with master weights).
//
// Math, per element of tensor i, at step t = hp.step (computed in fp32; the constants
// bias1 = 1 - beta1^t, bias2 = 1 - beta2^t, lr / bias1 and 1 / sqrt(bias2) in double on the
// host, then rounded to float):
//   g = grad * grad_scale
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   denom = sqrt(v) * (1 / sqrt(bias2)) + eps
//   if decay[i] and weight_decay != 0:  w = w * (1 - lr * weight_decay)
//   w = w - (lr / bias1) * (m / denom)
//   model_copy = w rounded (to nearest even) to the copy's dtype
// This is varuna::Adam's update (varuna/optim/adam.h). On the CPU the op is its LibTorch reference,
// the same sequence of ATen ops as Adam::Step, so with grad_scale 1 and no `skip` it gives
// bitwise the same results. On CUDA the fused kernel computes the same formula in fp32 (equal
// to the reference up to fp32 rounding and fused multiply-adds).
//
// Arguments (one entry per tensor, all on one device): masters, grads, exp_avg, exp_avg_sq are
// float32, contiguous, with the same element count per i, and distinct (none shares memory with
// another operand of the step). model_copies is empty (no copies) or has one entry per tensor:
// undefined, or the master itself, when the master IS the model parameter, else a contiguous
// float32, float16 or bfloat16 tensor with the master's element count that receives the update.
// decay has one flag per tensor. skip, when defined, is a float32 tensor of one element on the
// same device: if it holds a nonzero value (an overflowed step) nothing changes at all; on CUDA
// the kernel reads it on the device, so the caller never synchronises. grad_scale, when defined,
// is a float32 tensor of one element on the same device whose value replaces hp.grad_scale (on
// CUDA read by the kernel, so a clip coefficient computed on the device needs no host read; on
// the CPU read from host memory). grads are read only.
// Empty tensors are skipped. Misuse (list lengths, undefined tensors, devices, dtypes, element
// counts, non-contiguous tensors, step < 1, betas outside [0, 1)) throws c10::Error naming
// the op and the argument. CUDA work goes on the current stream of the tensors' device.
//
// Not differentiable (runs under no-grad). Thread safety: as ATen's in-place ops.
#ifndef VARUNA_KERNELS_FUSED_ADAM_H_
#define VARUNA_KERNELS_FUSED_ADAM_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace varuna::kernels {

struct AdamHyperparameters {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // Decoupled; only on tensors whose `decay` flag is set.
  int64_t step = 1;           // t >= 1: the step being applied (bias corrections use it).
  double grad_scale = 1.0;    // Multiplies every gradient first, e.g. the clip coefficient.
};

void FusedAdamStep(const std::vector<at::Tensor>& masters, const std::vector<at::Tensor>& grads,
                   const std::vector<at::Tensor>& exp_avg,
                   const std::vector<at::Tensor>& exp_avg_sq,
                   const std::vector<at::Tensor>& model_copies, const std::vector<bool>& decay,
                   const AdamHyperparameters& hp, const at::Tensor& skip = {},
                   const at::Tensor& grad_scale = {});

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_FUSED_ADAM_H_
