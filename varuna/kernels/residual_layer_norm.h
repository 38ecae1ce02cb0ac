// LayerNorm of the residual stream that also passes the stream on: a pre-LayerNorm transformer
// layer's ln_1, whose input x feeds both the LayerNorm and the attention's residual add. The op
// returns x itself beside LayerNorm(x), and the residual add takes that output, so both of x's
// gradients reach this op and its backward adds them in the LayerNorm backward's own pass (llm.c's
// and Apex's fused residual backward), where the unfused graph runs the LayerNorm's backward and
// then autograd's add of x's two gradients (one [rows, h] pass fewer: the add's two reads and
// its write, for one more read in the backward).
//
// x has shape [..., h] (h >= 1; rows = x.numel() / h), weight and bias [h]:
//   forward:   residual = x (the same storage: an alias, no copy)
//              output = LayerNormForward(x, weight, bias, epsilon) (layer_norm.h)
//   backward, from dr (the gradient of `residual`; undefined: zero) and dy (that of `output`;
//   undefined: zero):
//              dx = dr + LayerNormBackward(dy).input, rounded to x's dtype
//              dweight, dbias: LayerNormBackward(dy)'s
// The backward is BiasDropoutAddLayerNormBackward without a mask (bias_dropout_add_layer_norm.h),
// whose `residual` gradient is exactly this dx. So on the CPU (its reference path: the LayerNorm
// backward, then dr + dx in x's dtype, as autograd adds them) every result is bitwise the unfused
// pair's (LayerNorm, and the residual add reading x), in every dtype; on CUDA, with h <= 8192 in
// float32/float16/bfloat16, dx is rounded once after the sum in fp32 where the unfused graph
// rounds the LayerNorm's dx first, so the two agree to rounding. The column sums are
// deterministic on one device, as that op's are.
//
// dtypes and misuse as LayerNormForward's and BiasDropoutAddLayerNormBackward's (the forward's
// checks run first; an error names the function and the argument and throws c10::Error).
// `residual` is a view of x: modifying either in place while the graph is alive is an autograd
// error, as for any view.
//
// Thread safety: no state; concurrent calls on distinct tensors are safe.
#ifndef VARUNA_KERNELS_RESIDUAL_LAYER_NORM_H_
#define VARUNA_KERNELS_RESIDUAL_LAYER_NORM_H_

#include <ATen/core/Tensor.h>

namespace varuna::kernels {

struct ResidualLayerNormOutputs {
  at::Tensor residual;  // x, passed on: the residual add's input
  at::Tensor output;    // LayerNorm(x): the block's input
};

// The two outputs above, as an autograd op differentiable in x, weight and bias: saves x, mean,
// rstd and weight; its backward is BiasDropoutAddLayerNormBackward with no mask and p = 0.
ResidualLayerNormOutputs ResidualLayerNorm(const at::Tensor& x, const at::Tensor& weight,
                                           const at::Tensor& bias, double epsilon);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_RESIDUAL_LAYER_NORM_H_
