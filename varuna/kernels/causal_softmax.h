// CausalSoftmax: the scaled, causally masked softmax of attention scores (Megatron's
// scaled_upper_triang_masked_softmax), fused into one pass over the causal half of the scores.
//
// scores has shape [..., s, s] (any leading dims); for each matrix, row i and column j:
//   forward:  probs[i, j] = exp(scale * x[i, j] - m_i) / sum_{k<=i} exp(scale * x[i, k] - m_i)
//             for j <= i, with m_i = max_{k<=i} scale * x[i, k]; probs[i, j] = 0 exactly for j > i
//   backward: dscores[i, j] = scale * p[i, j] * (dp[i, j] - sum_{k<=i} dp[i, k] * p[i, k])
//             for j <= i; 0 for j > i (dp above the diagonal is ignored)
// Entries of scores above the diagonal are never read: they may hold anything, even inf or NaN.
//
// dtypes: float32, float16, bfloat16 (and float64 on the CPU); all arithmetic is fp32 (float64
// for float64 inputs), results come back in the input dtype. Inputs that are not contiguous are
// copied; results are contiguous. Empty inputs give empty results.
//
// Devices: CPU tensors take the LibTorch reference path (the same math with ATen ops). Under
// --config=cuda, CUDA tensors run the kernels of cuda/causal_softmax.h on the current stream of
// their device; they take rows up to cuda::kCausalSoftmaxMaxColumns (16384) columns and are
// deterministic.
//
// Misuse throws c10::Error naming the function and the argument: fewer than 2 dims or last two
// dims not equal, a dtype not listed above, tensors of different shapes, dtypes or devices, a
// CUDA row longer than the kernels take.
//
// Thread safety: the functions hold no state; concurrent calls on distinct tensors are safe.
#ifndef VARUNA_KERNELS_CAUSAL_SOFTMAX_H_
#define VARUNA_KERNELS_CAUSAL_SOFTMAX_H_

#include <ATen/core/Tensor.h>

namespace varuna::kernels {

// probs as above, same shape and dtype as scores.
at::Tensor CausalSoftmaxForward(const at::Tensor& scores, double scale);

// dscores as above from the output gradient and the forward's probs (same shape, dtype and
// device; probs as CausalSoftmaxForward returned them, 0 above the diagonal), in their dtype.
at::Tensor CausalSoftmaxBackward(const at::Tensor& grad_probs, const at::Tensor& probs,
                                 double scale);

// CausalSoftmaxForward as an autograd op: saves probs, and its backward is CausalSoftmaxBackward.
at::Tensor CausalSoftmax(const at::Tensor& scores, double scale);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_CAUSAL_SOFTMAX_H_
