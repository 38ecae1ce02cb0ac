// Megatron's gradient-accumulation fusion, the GEMM side (Apex's fused_weight_gradient_mlp_cuda
// wgrad_gemm_accum_fp32): the weight gradient of a linear layer y = x W^T, computed by one GEMM
// that adds it into an fp32 (main) gradient buffer,
//
//   main_grad += grad_output^T input        (beta = 1: the GEMM reads and writes main_grad)
//
// with grad_output [N, out] and input [N, in] in half precision and main_grad [out, in] in fp32.
// No half-precision [out, in] product is materialised and rounded, and no separate add pass
// runs: summing over micro-batches, or over the token chunks of the fused LM head's dW
// (lm_head_cross_entropy.h), is the same call again on the same buffer.
//
// Paths. CUDA with float16/bfloat16 inputs: cuBLAS with half inputs, fp32 accumulation and an fp32
// output C = main_grad (LibTorch's at::addmm with out_dtype = float32, beta = 1, written in
// place). CUDA float32: addmm_ in place. Everything else (the CPU reference, float64): the inputs
// converted to main_grad's dtype (exact: a half value is a float value), then addmm_ in place;
// the products of half values are exact in fp32, so the only rounding is the fp32 accumulation,
// as in cuBLAS's fp32 compute type. Either way the result is at least as accurate as the
// unfused "dW in the inputs' dtype, then main_grad.add_(dW)", which rounds dW to half first.
//
// dtypes: input and grad_output the same, float32, float16, bfloat16 or float64; main_grad in
// their ComputeType (argument_checks.h: float32, or float64 for float64 inputs), contiguous, on
// the inputs' device. Misuse throws c10::Error naming the op and the argument, and leaves
// main_grad unchanged.
//
// Thread safety: no state; concurrent calls on distinct main_grad tensors are safe.
#ifndef VARUNA_KERNELS_WEIGHT_GRADIENT_ACCUMULATION_H_
#define VARUNA_KERNELS_WEIGHT_GRADIENT_ACCUMULATION_H_

#include <ATen/core/Tensor.h>

namespace varuna::kernels {

// main_grad += grad_output^T input (see above), in place; returns main_grad. input [N, in],
// grad_output [N, out], main_grad [out, in]. Not differentiable (call it under no-grad, from a
// backward).
at::Tensor& AccumulateWeightGradient(const at::Tensor& input, const at::Tensor& grad_output,
                                     at::Tensor& main_grad);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_WEIGHT_GRADIENT_ACCUMULATION_H_
