// Multi-tensor unscale, inf/NaN check and squared L2 norm (Apex's multi_tensor_scale and
// multi_tensor_l2norm): one kernel launch over a whole list of gradients, as the fp16 optimizer
// step needs them.
//
// Math, for every element x of every tensor i (computed in fp32 whatever the storage type):
//   MultiTensorUnscale:           destination[i] = float32(x) * float32(scale)
//                                 found_inf = 1 if any x is inf or NaN, else 0
//   MultiTensorL2NormSquared:     sum over all tensors of float32(x)^2
//   MultiTensorUnscaleL2NormSquared: both at once; the sum is over the squares of the unscaled
//                                 values float32(x) * float32(scale), i.e. of destination.
// The loss scaler calls them with scale = 1 / S. found_inf is computed from the sources: it is
// 1 for an inf or NaN that is there, never for a product that overflows. An inf or NaN anywhere
// makes the sum of squares non-finite (so does a finite sum that overflows float32).
//
// Arguments: all tensors on one device, contiguous; sources float32, float16 or bfloat16;
// destinations float32 with the element count of their source (shapes may differ). A
// destination may be its own float32 source (in-place unscale) but must not overlap any other
// source. Empty tensors are skipped; an empty list gives zeros on the CPU. Misuse (list lengths,
// an undefined tensor, devices, dtypes, element counts, non-contiguous tensors) throws c10::Error
// naming the op, the argument and the index.
//
// Results: float32 [1] tensors on the tensors' device. On CUDA the work is enqueued on the
// current stream of that device without a host synchronisation, and the sum is deterministic
// (per-chunk partial sums reduced in a fixed order by a second kernel; no float atomics). The
// CPU path (the reference) sums with ATen's sum in fp32 per tensor, so the two agree to fp32
// rounding, not bitwise. Not differentiable (optimizer-side ops).
//
// Thread safety: as ATen ops; concurrent calls must not write the same destination.
#ifndef VARUNA_KERNELS_MULTI_TENSOR_H_
#define VARUNA_KERNELS_MULTI_TENSOR_H_

#include <ATen/core/Tensor.h>

#include <vector>

namespace varuna::kernels {

// destination[i] = float32(source[i]) * scale; returns found_inf (see above).
at::Tensor MultiTensorUnscale(const std::vector<at::Tensor>& source,
                              const std::vector<at::Tensor>& destination, double scale);

// The sum of squares of all elements of all `tensors`, accumulated in fp32.
at::Tensor MultiTensorL2NormSquared(const std::vector<at::Tensor>& tensors);

struct UnscaleNormResult {
  at::Tensor found_inf;       // float32 [1]: 1 if any source element is inf or NaN, else 0.
  at::Tensor sum_of_squares;  // float32 [1]: the sum of the squares of the unscaled values.
};

// MultiTensorUnscale and the squared norm of its destinations in one pass over the sources.
UnscaleNormResult MultiTensorUnscaleL2NormSquared(const std::vector<at::Tensor>& source,
                                                  const std::vector<at::Tensor>& destination,
                                                  double scale);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_MULTI_TENSOR_H_
