// CausalAttention: GPT-2's causal self-attention core, softmax(q k^T / sqrt(d) + causal mask) v,
// with two interchangeable backends:
//
//   kFusedSoftmax ("fused-softmax"): Megatron's path. scores = (q / sqrt(d)) @ k^T (q is scaled
//     before the product so that half-precision scores do not overflow), probs =
//     CausalSoftmax(scores, 1) (fp32 inside, q's dtype out; see causal_softmax.h), dropout on
//     probs when training, context = probs @ v. On the CPU this is the attention of models/gpt2
//     (fp32 softmax, masked entries exactly 0; for float32 the same forward bit for bit, the
//     backward to rounding). It materialises the [b, heads, s, s]
//     scores and probs, and on CUDA takes s up to cuda::kCausalSoftmaxMaxColumns (16384).
//   kSdpa ("sdpa"): at::scaled_dot_product_attention with is_causal; LibTorch picks its fused
//     kernel for the device and dtype (flash or memory-efficient attention on CUDA, a flash
//     kernel or the math path on the CPU).
// Both are differentiable by autograd in q, k and v, run on the tensors' device (CUDA work on
// the current stream) and agree to rounding without dropout. Their dropout masks differ: the
// same seed does not give the same dropped entries across backends.
//
// Thread safety: no state; concurrent calls on distinct tensors are safe.
#ifndef VARUNA_KERNELS_CAUSAL_ATTENTION_H_
#define VARUNA_KERNELS_CAUSAL_ATTENTION_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace varuna::kernels {

enum class AttentionBackend { kFusedSoftmax, kSdpa };

// "fused-softmax" -> kFusedSoftmax, "sdpa" -> kSdpa. Any other name (including "auto", which
// the trainer resolves itself with MeasureAttentionBackends) is InvalidArgument, naming it and
// listing the valid names.
absl::StatusOr<AttentionBackend> ParseAttentionBackend(std::string_view name);

// The name ParseAttentionBackend accepts for `backend`.
const char* AttentionBackendName(AttentionBackend backend);

// q, k, v: [b, heads, s, d], same shape, dtype (float32, float16, bfloat16; float64 on the CPU)
// and device; they may be non-contiguous views (e.g. from splitting a fused QKV projection).
// Returns the context [b, heads, s, d] in q's dtype: row i attends to positions 0..i with scale
// 1/sqrt(d). Dropout with probability `dropout` is applied to the attention probabilities only
// when `training` and dropout > 0 (it then draws from the device's default generator); with
// training == false the result is deterministic and equal to dropout 0.
// Throws c10::Error naming the argument on misuse: undefined tensors, a rank other than 4,
// mismatched shapes, dtypes or devices, a non-floating dtype, dropout outside [0, 1).
at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           double dropout, bool training, AttentionBackend backend);

// The time of one forward + backward of a backend, averaged over the measured iterations.
struct AttentionTiming {
  AttentionBackend backend;
  double milliseconds;
};

// Times CausalAttention's forward and backward (dropout 0, so no generator is touched) for each
// backend on random [batch, heads, seq, head_dim] inputs of `dtype` on `device`: one warm-up
// step, then `iterations` steps between two device synchronisations, wall-clock. Returns one
// timing per backend that ran, in enum order; a backend that throws on these inputs (e.g.
// fused-softmax past its longest CUDA row, or out of memory) is left out, and if every backend
// throws the last error is rethrown. Blocks the calling thread for the whole measurement.
// Throws c10::Error if a size or `iterations` is not positive.
std::vector<AttentionTiming> MeasureAttentionBackends(c10::Device device, int64_t batch,
                                                      int64_t heads, int64_t seq, int64_t head_dim,
                                                      at::ScalarType dtype, int iterations);

// The backend with the smallest time (the first of equal ones). Throws c10::Error if `timings`
// is empty.
AttentionBackend FasterAttentionBackend(const std::vector<AttentionTiming>& timings);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_CAUSAL_ATTENTION_H_
