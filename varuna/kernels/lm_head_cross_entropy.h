// The LM head and the masked mean cross entropy in one op, without the [tokens, V] logits
// (llm.c's fused classifier, Megatron's fused cross entropy, Liger's fused linear cross
// entropy): the logits exist only chunk_tokens rows at a time.
//
// Math. hidden x [N, h], weight W [V, h], labels y [N] in [0, V), loss_mask m [N] (>= 0, with
// M = sum m > 0):
//   z_n = W x_n                      (the logits, in the inputs' dtype, as at::linear gives them)
//   lse_n = log sum_v exp z_nv,  l_n = lse_n - z_n,y_n          (fp32; fp64 for fp64 inputs)
//   loss = sum_n m_n l_n / M
// Gradient of the loss:
//   dz_n = (softmax(z_n) - onehot(y_n)) m_n / M   (rounded to the inputs' dtype, as the unfused
//                                                   path's logits gradient is)
//   dx_n = dz_n W,   dW = sum_n dz_n^T x_n          (each scaled by the upstream gradient)
//
// When the result will be differentiated (grad mode on and x or W requiring grad), the forward
// computes dx and dW along with the loss, chunk by chunk, while each chunk's logits exist, so no
// logits are recomputed; the backward only scales them by the upstream gradient. dW is summed
// over the chunks in fp32: with `gradient_accumulation_fusion` (the default; Megatron's
// --gradient-accumulation-fusion), each chunk's GEMM adds into the fp32 sum itself (half inputs,
// fp32 output, beta = 1: weight_gradient_accumulation.h), so no half-precision [V, h] product is
// rounded or added per chunk; without it, each chunk's dW is computed in the inputs' dtype and
// then added (the loss and dx are the same bitwise either way). Without grad (evaluation,
// Varuna's graph-free forwards), only the loss.
// In float16/bfloat16 the saved dz and dx are carried without the 1 / M (weights m_n instead of
// m_n / M, so they do not underflow), and the backward applies 1 / M and the upstream gradient
// (under loss scaling, a scale beyond fp16's range) together in fp32, rounding once; dW is
// divided by M in fp32 before it is rounded.
//
// Memory: chunk_tokens x V logits, the same again in fp32 for the softmax, plus (with grad) dx
// [N, h] and an fp32 dW [V, h]. chunk_tokens <= 0 picks DefaultChunkTokens(V): about 2^25
// logit elements per chunk, in whole multiples of 128 tokens (640 tokens for GPT-2's 50,304).
//
// dtypes: x and W float32, float16, bfloat16 or float64, the same; labels int64; loss_mask
// floating. Devices: the CPU (and float64 on CUDA) takes the reference path, ATen ops per chunk
// (the logits to fp32, logsumexp, the softmax gradient). Under --config=cuda, float32/float16/
// bfloat16 CUDA tensors take the logits GEMM and then one kernel per chunk
// (cuda/softmax_cross_entropy.h) that writes each row's loss and, in place of the logits, their
// gradient: no fp32 copy of the chunk. GEMMs by LibTorch. Deterministic where LibTorch's GEMMs
// are (fixed reduction trees, the chunks summed in a fixed order).
//
// Misuse throws c10::Error naming the op and the argument: undefined tensors, shapes that do not
// match the above, dtypes not listed, tensors on different devices. Nothing is read back to the
// host: a label outside [0, V) fails in ATen's gather on the reference path (an error on the
// CPU) and makes the loss NaN on the CUDA kernel's; M == 0 gives NaN, as the unfused masked mean
// does.
//
// Thread safety: no state; concurrent calls on distinct tensors are safe.
#ifndef VARUNA_KERNELS_LM_HEAD_CROSS_ENTROPY_H_
#define VARUNA_KERNELS_LM_HEAD_CROSS_ENTROPY_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace varuna::kernels {

// The chunk LmHeadCrossEntropy takes when given none: about 2^25 logits, and a whole multiple
// of 128 tokens where that is at least 128 (so each chunk's GEMMs fill their tiles); at least 1.
int64_t DefaultChunkTokens(int64_t vocab);

// The loss above as a 0-dim tensor of the arithmetic type (fp32, or fp64 for fp64 inputs),
// differentiable in hidden and weight.
at::Tensor LmHeadCrossEntropy(const at::Tensor& hidden, const at::Tensor& weight,
                              const at::Tensor& labels, const at::Tensor& loss_mask,
                              int64_t chunk_tokens = 0, bool gradient_accumulation_fusion = true);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_LM_HEAD_CROSS_ENTROPY_H_
