// CUDA launcher of the softmax cross entropy of a chunk of logits rows, in place: the per-row
// pass of LmHeadCrossEntropy (varuna/kernels/lm_head_cross_entropy.h; llm.c's fused
// classifier). Plain C++: raw pointers, no LibTorch types.
//
// The data are `rows` contiguous rows of `columns` logits z; for each row r with label
// y = labels[r] and weight w = weights[r]:
//   lse = log sum_v exp z_v,  losses[r] = lse - z_y                     (fp32)
//   with write_gradient, z_v is replaced by (exp(z_v - lse) - [v == y]) * w (rounded to the
//   logits' type): the gradient of w * losses[r]
// A label outside [0, columns) gives losses[r] = NaN (and, with write_gradient, the row's
// softmax times w). All arithmetic is fp32. One block per row reduces it through a fixed tree
// (no atomics): deterministic. The logits are read three times (max, sum, gradient) and written
// once; without write_gradient read twice and not written.
//
// Enqueues on `stream` and returns cudaGetLastError() after the launch (no synchronisation),
// cudaSuccess without launching when rows == 0, cudaErrorInvalidValue when rows < 0 or
// columns < 1.
#ifndef VARUNA_KERNELS_CUDA_SOFTMAX_CROSS_ENTROPY_H_
#define VARUNA_KERNELS_CUDA_SOFTMAX_CROSS_ENTROPY_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "varuna/kernels/cuda/element_type.h"

namespace varuna::kernels::cuda {

// logits: rows * columns elements of `type`; labels: rows int64; weights and losses: rows fp32.
cudaError_t LaunchSoftmaxCrossEntropy(void* logits, const int64_t* labels, const float* weights,
                                      float* losses, int64_t rows, int64_t columns,
                                      bool write_gradient, ElementType type, cudaStream_t stream);

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_SOFTMAX_CROSS_ENTROPY_H_
