// LayerNorm over the last dimension, fused (Apex's FusedLayerNorm, and MixedFusedLayerNorm when
// the parameters are fp32 and the input is half precision).
//
// x has shape [..., h] (h >= 1), seen as rows = x.numel() / h rows of h; weight and bias are [h].
// Per row, with statistics in fp32 (float64 for float64 x):
//   mean = sum_j x_j / h,   var = sum_j (x_j - mean)^2 / h (biased),   rstd = 1 / sqrt(var + eps)
//   xhat_j = (x_j - mean) * rstd,   y_j = xhat_j * weight_j + bias_j
// backward, from dy (same shape as x):
//   g_j = dy_j * weight_j
//   dx_j = rstd * (g_j - sum_k g_k / h - xhat_j * sum_k g_k xhat_k / h)
//   dweight_j = sum over rows of dy_j * xhat_j,   dbias_j = sum over rows of dy_j
//
// dtypes: x (and dy, y, dx) float32, float16, bfloat16 or float64; weight and bias both x's
// dtype or both float32 (fp32 parameters with a half-precision x: the mixed case). All
// arithmetic is fp32 (float64 for float64 x); y and dx come back in x's dtype, dweight and dbias
// in weight's dtype (accumulated over all rows in fp32), mean and rstd as float32 (float64 for
// float64 x) of shape [rows]. Inputs that are not contiguous are copied; results are contiguous.
// An x with no rows gives empty y, mean, rstd and dx, and zero dweight and dbias.
//
// Devices: CPU tensors take the LibTorch reference path (the same math with ATen ops). Under
// --config=cuda, float32/float16/bfloat16 CUDA tensors run the kernels of cuda/layer_norm.h on
// the current stream of their device, deterministically (the weight and bias gradients go
// through per-block partial sums added in a fixed order; the partition, and so the last bits,
// depends on the GPU's SM count); float64 CUDA tensors take the reference path with ATen's CUDA
// ops. Rows longer than 16384 (forward) or 8192 (backward) elements take a slower kernel that
// re-reads the row.
//
// Misuse throws c10::Error naming the function and the argument: an undefined tensor, x with no
// dims or h == 0, weight or bias not of shape [h], a dtype not listed above, mean or rstd not
// [rows] of the statistics dtype, grad_output not shaped and typed like x, tensors on different
// devices.
//
// Thread safety: the functions hold no state; concurrent calls on distinct tensors are safe.
#ifndef VARUNA_KERNELS_LAYER_NORM_H_
#define VARUNA_KERNELS_LAYER_NORM_H_

#include <ATen/core/Tensor.h>

namespace varuna::kernels {

struct LayerNormForwardResult {
  at::Tensor output;  // y, shape and dtype of x
  at::Tensor mean;    // [rows]
  at::Tensor rstd;    // [rows]
};

// y, mean and rstd as above; epsilon must be >= 0.
LayerNormForwardResult LayerNormForward(const at::Tensor& x, const at::Tensor& weight,
                                        const at::Tensor& bias, double epsilon);

struct LayerNormGrads {
  at::Tensor input;   // dx, shape and dtype of x
  at::Tensor weight;  // dweight, [h] in weight's dtype
  at::Tensor bias;    // dbias, [h] in weight's dtype
};

// dx, dweight and dbias as above from the output gradient, the forward's input, its mean and
// rstd, and the weight.
LayerNormGrads LayerNormBackward(const at::Tensor& grad_output, const at::Tensor& x,
                                 const at::Tensor& mean, const at::Tensor& rstd,
                                 const at::Tensor& weight);

// LayerNormForward as an autograd op, differentiable in x, weight and bias: saves x, weight,
// mean and rstd, and its backward is LayerNormBackward.
at::Tensor LayerNorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     double epsilon);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_LAYER_NORM_H_
