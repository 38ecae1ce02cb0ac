// Bias add + dropout + residual add, then LayerNorm of the sum, fused (llm.c's fused residual
// forward; Apex's and FlashAttention's dropout_add_layer_norm): one pass writes the residual sum
// and its normalised form, and the backward adds the residual's incoming gradient to the
// LayerNorm's input gradient in the same pass. In a pre-LayerNorm transformer layer it joins
// BiasDropoutAdd (attention output + c_proj bias + residual) and the LayerNorm (ln_2) that
// reads the sum.
//
// x and residual have shape [..., h] (h >= 1; rows = x.numel() / h), bias [h], the LayerNorm's
// weight and bias [h]. With keep = 1 - p and m a 0/1 mask of x's shape, P(m = 1) = keep:
//   forward:   r = residual + m * (x + bias) / keep   (training and p > 0; else residual + x +
//   bias)
//              r is rounded to x's dtype; then, per row of r (statistics in fp32):
//              mean = sum_j r_j / h,  rstd = 1 / sqrt(sum_j (r_j - mean)^2 / h + epsilon)
//              y_j = (r_j - mean) * rstd * weight_j + ln_bias_j
//   backward, from dy (the gradient of y) and dr (that of r, which the caller also uses; an
//   undefined dr is zero):
//              dresidual = dr + LayerNormBackward(dy)   (dx of layer_norm.h, rounded to x's dtype)
//              dx = dresidual * m / keep (dresidual without dropout),  dbias = sum over rows of dx
//              dweight, dln_bias: as layer_norm.h's (sums over rows of dy * xhat and dy)
// That is exactly BiasDropoutAdd followed by LayerNorm (bias_dropout_add.h, layer_norm.h), and
// autograd adding the two gradients of r.
//
// dtypes: x, bias and residual float32, float16, bfloat16 or float64, the same; the LayerNorm's
// weight and bias both x's dtype or both float32 (the mixed case). Arithmetic in fp32 (float64
// for float64). r, y, dx, dbias and dresidual come back in x's dtype, dweight and dln_bias in
// weight's, mean and rstd as [rows] of fp32 (float64 for float64 x). Non-contiguous inputs are
// copied; results are contiguous. p must be in [0, 1), epsilon >= 0.
//
// Devices and equality. CPU tensors take the LibTorch reference path, which is the composition
// of BiasDropoutAddForward/Backward and LayerNormForward/Backward themselves: the same mask from
// the same generator state (drawn as at::dropout draws it on the CPU) and bitwise the same
// results as the unfused pair in every dtype. Under --config=cuda, float32/float16/bfloat16
// CUDA tensors with h <= 8192 run the kernels of cuda/bias_dropout_add_layer_norm.h on the
// current stream (one read of x, bias and residual and one write of r, y and the mask forward;
// one read of dy, dr, r and the mask and one write of dresidual and dx backward), drawing the
// mask exactly as BiasDropoutAdd's CUDA kernel does from the same default CUDA generator state
// (Philox seed and offset, advancing it by the same amount), so on CUDA too the fused and
// unfused paths drop the same elements; the values agree to rounding (the fused backward rounds
// dresidual once where the unfused one rounds the LayerNorm's dx first). The column sums go
// through per-block partial sums added in a fixed order: deterministic on one device. Longer
// rows, and float64 CUDA tensors, take the reference path (the unfused kernels). CUDA graph
// capture with dropout is not supported (the op throws).
//
// Misuse throws c10::Error naming the function and the argument: an undefined tensor, x with no
// dims or h == 0, bias not [h] of x's dtype, residual not shaped and typed like x, the
// LayerNorm's weight or bias not [h] of x's dtype or float32 (or of different dtypes), p not in
// [0, 1), epsilon < 0; backward: grad_output or grad_residual not like r, a mask that is not
// bool of r's shape, mean or rstd not [rows] of the statistics dtype, tensors on different
// devices.
//
// Thread safety: no state; concurrent calls on distinct tensors are safe.
#ifndef VARUNA_KERNELS_BIAS_DROPOUT_ADD_LAYER_NORM_H_
#define VARUNA_KERNELS_BIAS_DROPOUT_ADD_LAYER_NORM_H_

#include <ATen/core/Tensor.h>

namespace varuna::kernels {

struct BiasDropoutAddLayerNormResult {
  at::Tensor residual;  // r, shape and dtype of x
  at::Tensor output;    // y = LayerNorm(r), shape and dtype of x
  at::Tensor mask;      // m, bool of x's shape; undefined when no dropout was applied
  at::Tensor mean;      // [rows]
  at::Tensor rstd;      // [rows]
};

// r, y, the mask, mean and rstd as above.
BiasDropoutAddLayerNormResult BiasDropoutAddLayerNormForward(const at::Tensor& x,
                                                             const at::Tensor& bias,
                                                             const at::Tensor& residual,
                                                             const at::Tensor& ln_weight,
                                                             const at::Tensor& ln_bias, double p,
                                                             bool training, double epsilon);

struct BiasDropoutAddLayerNormGrads {
  at::Tensor input;      // dx, shape and dtype of r (dresidual itself without a mask)
  at::Tensor bias;       // dbias, [h] in x's dtype
  at::Tensor residual;   // dresidual = dr + the LayerNorm's input gradient
  at::Tensor ln_weight;  // [h] in the LayerNorm weight's dtype
  at::Tensor ln_bias;    // [h] in the LayerNorm weight's dtype
};

// The five gradients above from dy (`grad_output`), dr (`grad_residual`, undefined: zero) and
// what the forward returned: r (`residual`), the mask (undefined: no dropout), mean and rstd,
// with the LayerNorm's weight and the forward's p.
BiasDropoutAddLayerNormGrads BiasDropoutAddLayerNormBackward(
    const at::Tensor& grad_output, const at::Tensor& grad_residual, const at::Tensor& residual,
    const at::Tensor& mask, const at::Tensor& mean, const at::Tensor& rstd,
    const at::Tensor& ln_weight, double p);

struct BiasDropoutAddLayerNormOutputs {
  at::Tensor residual;  // r: the next residual add's residual
  at::Tensor output;    // y: the next block's input
};

// BiasDropoutAddLayerNormForward as an autograd op with two outputs, differentiable in x, bias,
// residual, ln_weight and ln_bias: saves r, the mask, mean, rstd and ln_weight, and its backward
// is BiasDropoutAddLayerNormBackward.
BiasDropoutAddLayerNormOutputs BiasDropoutAddLayerNorm(const at::Tensor& x, const at::Tensor& bias,
                                                       const at::Tensor& residual,
                                                       const at::Tensor& ln_weight,
                                                       const at::Tensor& ln_bias, double p,
                                                       bool training, double epsilon);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_BIAS_DROPOUT_ADD_LAYER_NORM_H_
