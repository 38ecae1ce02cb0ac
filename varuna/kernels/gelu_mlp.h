// The transformer's MLP with the bias and GeLU in the first GEMM's epilogue and the GeLU's
// gradient and bias gradient in the epilogue of the backward's GEMM (cuBLASLt's GELU_AUX_BIAS
// and DGELU_BGRAD epilogues, as Transformer Engine's LayerNormMLP runs them).
//
// The math, for x [M, K], fc_weight W1 [F, K], fc_bias b1 [F], proj_weight W2 [H, F]:
//   forward:   pre = x W1^T + b1                 [M, F], kept for the backward
//              h   = gelu(pre)                   [M, F], GPT-2's tanh approximation
//              y   = h W2^T                      [M, H]  (no proj bias: the caller adds it, fused
//                                                 with dropout and the residual add)
//   backward:  dW2 = dy^T h
//              dpre = (dy W2) * gelu'(pre),  db1 = dpre summed over the M rows
//              dW1 = dpre^T x,  dx = dpre W1
// with gelu(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))) and its derivative as
// bias_gelu.h writes it. The unfused composition it replaces, at::linear(x, W1) then
// BiasGelu(., b1) then at::linear(., W2), computes the same GEMMs; what differs is where the
// elementwise work runs: there, the first GEMM writes x W1^T, one kernel reads it back to
// write h, and in the backward one kernel reads dy W2 and x W1^T to write dpre and db1; here
// the GEMMs do it as they store their results (in the forward one [M, F] pass fewer, in the
// backward two fewer). The saved tensors are the same [M, F] ones in number and size (x, pre in
// place of x W1^T, h, and the weights; b1 is not needed).
//
// Where it runs:
//   - CUDA float16/bfloat16 tensors: cuBLASLt (LibTorch's handle and workspace, the current
//     stream): `LinearBiasGelu` is one GEMM with the GELU_AUX_BIAS epilogue (the aux output is
//     pre, in x's dtype, bias added in fp32 before the rounding), `LinearDGeluBiasGrad` one GEMM
//     with DGELU_BGRAD (db1 in the weight's dtype, as cuBLASLt writes a bias gradient in the
//     output type). Where cuBLASLt supports no algorithm for the shape, or F is not a positive
//     multiple of 8 (the aux buffer's leading dimension must be), the reference below runs
//     instead; so does a bias or pre-activation pointer that is not 16-byte aligned (cuBLASLt
//     takes no alignment preference for them). Any other cuBLASLt failure throws. The operands
//     and the output need not be 256-byte aligned (each one's alignment is passed to cuBLASLt's
//     algorithm choice).
//   - everything else (the CPU; float32 and float64 on CUDA): the reference, the unfused
//     composition's own ops: at::mm for the GEMMs, and for the elementwise part the fp32
//     arithmetic of bias_gelu.h's reference (pre = x W1^T + b1 rounded once to x's dtype; the
//     backward's gelu'(pre) from that rounded value). In float32 every result is bitwise the
//     unfused composition's (the tests assert it); in float16/bfloat16 they differ by pre's one
//     rounding, within the dtype's tolerance.
//
// dtypes: float32, float16, bfloat16, float64; every tensor in x's dtype, on x's device.
//
// Misuse throws c10::Error naming the function and the argument: an undefined tensor, shapes
// that do not chain (x's last dim K, W1 [F, K], b1 [F], W2 [H, F]), a dtype or device that
// differs from x's. GeluMlp's backward is not itself differentiable: a double backward
// (create_graph) throws.
//
// Thread safety: no state; concurrent calls on distinct tensors are safe.
#ifndef VARUNA_KERNELS_GELU_MLP_H_
#define VARUNA_KERNELS_GELU_MLP_H_

#include <ATen/core/Tensor.h>

namespace varuna::kernels {

struct LinearBiasGeluOutputs {
  at::Tensor output;          // h = gelu(pre) [M, F]
  at::Tensor pre_activation;  // pre = x W1^T + b1 [M, F]
};

// The forward's first GEMM with its epilogue: x [M, K], weight [F, K], bias [F].
// `used_gemm_epilogue`, when not null, is set to whether cuBLASLt's epilogue ran (false: the
// reference), so that a test can tell the two paths apart.
LinearBiasGeluOutputs LinearBiasGelu(const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias, bool* used_gemm_epilogue = nullptr);

struct LinearDGeluBiasGradOutputs {
  at::Tensor pre_activation;  // dpre = (grad weight) * gelu'(pre) [M, F]
  at::Tensor bias;            // db1 = dpre summed over rows [F]
};

// The backward's GEMM with its epilogue: grad [M, H] (the MLP output's gradient), weight [H, F]
// (the projection's, W2), pre_activation [M, F] (LinearBiasGelu's); `used_gemm_epilogue` as
// above.
LinearDGeluBiasGradOutputs LinearDGeluBiasGrad(const at::Tensor& grad, const at::Tensor& weight,
                                               const at::Tensor& pre_activation,
                                               bool* used_gemm_epilogue = nullptr);

// y = gelu(x W1^T + b1) W2^T for x [..., K], an autograd op differentiable in x, fc_weight,
// fc_bias and proj_weight; returns [..., H].
at::Tensor GeluMlp(const at::Tensor& x, const at::Tensor& fc_weight, const at::Tensor& fc_bias,
                   const at::Tensor& proj_weight);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_GELU_MLP_H_
