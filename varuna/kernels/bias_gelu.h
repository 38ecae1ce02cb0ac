// Bias add + GeLU, fused (Megatron's bias_gelu; GPT-2's gelu_new, the tanh approximation, as
// at::gelu(approximate="tanh")).
//
// x has shape [..., n] and bias [n] (broadcast over the leading dims). With u = x + bias and
// t = tanh(sqrt(2/pi) (u + 0.044715 u^3)):
//   forward:   y = gelu(u) = 0.5 u (1 + t)
//   backward:  dx = dy * gelu'(u),  gelu'(u) = 0.5 (1 + t) + 0.5 u (1 - t^2) sqrt(2/pi)
//                                              * (1 + 3 * 0.044715 u^2)
//              dbias = dx summed over all leading dims
// The backward recomputes u from x and bias (nothing but x and bias is saved).
//
// dtypes: float32, float16, bfloat16 or float64, bias in x's dtype. All arithmetic is fp32
// (float64 for float64 inputs), dbias accumulated in fp32 over all rows; results come back in
// x's dtype. Inputs that are not contiguous are copied; results are contiguous. Empty inputs
// give empty results (and a zero dbias).
//
// Devices: CPU tensors take the LibTorch reference path (the same math with ATen ops). Under
// --config=cuda, float32/float16/bfloat16 CUDA tensors run the kernels of cuda/bias_gelu.h on
// the current stream of their device: the backward fuses dx with per-block partial column sums
// of dx (an fp32 workspace, added in a fixed order by a second kernel), so it is deterministic
// (the partition, and so the last bits, depends on the GPU's SM count). float64 CUDA tensors
// take the reference path with ATen's CUDA ops.
//
// Misuse throws c10::Error naming the function and the argument: an undefined tensor, x with no
// dims, bias not of shape [n] or not of x's dtype, a dtype not listed above, grad_output not
// shaped and typed like x, tensors on different devices.
//
// Thread safety: the functions hold no state; concurrent calls on distinct tensors are safe.
#ifndef VARUNA_KERNELS_BIAS_GELU_H_
#define VARUNA_KERNELS_BIAS_GELU_H_

#include <ATen/core/Tensor.h>

namespace varuna::kernels {

// y = gelu(x + bias), shape and dtype of x.
at::Tensor BiasGeluForward(const at::Tensor& x, const at::Tensor& bias);

struct BiasGeluGrads {
  at::Tensor input;  // dx, shape and dtype of x
  at::Tensor bias;   // dbias, [n] in bias's dtype
};

// dx and dbias as above from the output gradient and the forward's x and bias.
BiasGeluGrads BiasGeluBackward(const at::Tensor& grad_output, const at::Tensor& x,
                               const at::Tensor& bias);

// BiasGeluForward as an autograd op, differentiable in x and bias: saves x and bias, and its
// backward is BiasGeluBackward.
at::Tensor BiasGelu(const at::Tensor& x, const at::Tensor& bias);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_BIAS_GELU_H_
