// Bias add + dropout + residual add, fused (Megatron's bias_dropout_add, used with the linear
// layers' skip_bias_add: the GEMM runs without its bias, which is added here).
//
// x and residual have shape [..., n] and bias [n] (broadcast over the leading dims). With
// keep = 1 - p and m a 0/1 mask of x's shape drawn with P(m = 1) = keep:
//   forward:   y = residual + m * (x + bias) / keep     (training and p > 0)
//              y = residual + (x + bias)                (otherwise: no random numbers drawn)
//   backward:  dresidual = dy,  dx = dy * m / keep (dy without dropout),
//              dbias = dx summed over all leading dims
// The forward saves only the mask (one byte per element, bool), never x.
//
// dtypes: float32, float16, bfloat16 or float64; bias and residual in x's dtype. All arithmetic
// is fp32 (float64 for float64 inputs), dbias accumulated in fp32 over all rows; results come
// back in x's dtype. Inputs that are not contiguous are copied; results are contiguous. Empty
// inputs give empty results (and a zero dbias). p must be in [0, 1).
//
// Randomness and replay: the mask comes from the default generator of x's device, so restoring
// that generator's state (as the engine does before a recompute, varuna/pipeline/rng_state.h)
// draws the same mask again. CPU tensors take the LibTorch reference path, which draws exactly
// as at::dropout does on the CPU (a tensor of x's dtype filled by bernoulli_(keep), divided by
// keep), so in float32 the result is bitwise that of residual + at::dropout(x + bias, p). Under
// --config=cuda, float32/float16/bfloat16 CUDA tensors run the kernels of
// cuda/bias_dropout_add.h on the current stream of their device: the forward takes a Philox seed
// and offset from the device's default CUDA generator (advancing its offset, as ATen's fused
// dropout does) and draws the mask in the kernel (a different stream of numbers from
// at::dropout's: the same distribution, not the same mask); the backward fuses dx with
// per-block partial column sums of dx (an fp32 workspace, added in a fixed order by a second
// kernel), so it is deterministic. CUDA graph capture is not supported (the op throws).
// float64 CUDA tensors take the reference path with ATen's CUDA ops.
//
// Misuse throws c10::Error naming the function and the argument: an undefined tensor, x with no
// dims, bias not of shape [n] or not of x's dtype, residual not shaped and typed like x, p not
// in [0, 1), grad_output not shaped like x, a mask that is not bool of grad_output's shape,
// tensors on different devices.
//
// Thread safety: the functions hold no state; concurrent calls on distinct tensors are safe
// (the generator is locked while the mask's random numbers are reserved).
#ifndef VARUNA_KERNELS_BIAS_DROPOUT_ADD_H_
#define VARUNA_KERNELS_BIAS_DROPOUT_ADD_H_

#include <ATen/core/Tensor.h>

namespace varuna::kernels {

struct BiasDropoutAddResult {
  at::Tensor output;  // y, shape and dtype of x
  at::Tensor mask;    // m, bool of x's shape; undefined when no dropout was applied
};

// y (and the mask it drew) as above.
BiasDropoutAddResult BiasDropoutAddForward(const at::Tensor& x, const at::Tensor& bias,
                                           const at::Tensor& residual, double p, bool training);

struct BiasDropoutAddGrads {
  at::Tensor input;  // dx, shape and dtype of grad_output (grad_output itself without a mask)
  at::Tensor bias;   // dbias, [n] in grad_output's dtype
};

// dx and dbias from the output gradient, the forward's mask (undefined: no dropout) and p. The
// residual's gradient is grad_output itself.
BiasDropoutAddGrads BiasDropoutAddBackward(const at::Tensor& grad_output, const at::Tensor& mask,
                                           double p);

// BiasDropoutAddForward as an autograd op, differentiable in x, bias and residual: saves the
// mask, and its backward is BiasDropoutAddBackward (dresidual = dy).
at::Tensor BiasDropoutAdd(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& residual,
                          double p, bool training);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_BIAS_DROPOUT_ADD_H_
