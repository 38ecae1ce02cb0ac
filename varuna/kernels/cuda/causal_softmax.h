// CUDA launchers of the causal (upper-triangular masked) scaled softmax, Megatron's
// scaled_upper_triang_masked_softmax. Plain C++: raw pointers, no LibTorch types; the LibTorch
// side is varuna/kernels/causal_softmax.h.
//
// The data are `rows` contiguous rows of `columns` elements each; row r is position
// i = r % columns of a square [columns, columns] score matrix, so only its columns 0..i are
// visible (read) and columns i+1.. are written as 0:
//   forward:  probs[r, j] = exp(scale * x[r, j] - m) / sum_{k<=i} exp(scale * x[r, k] - m) for j<=i
//             with m = max_{k<=i} scale * x[r, k]
//   backward: grad_scores[r, j] = scale * p[r, j] * (g[r, j] - sum_{k<=i} g[r, k] * p[r, k])
// All arithmetic is fp32 whatever the element type. The kernels are deterministic (no atomics),
// read each input element once and write each output element once, and take any pointer
// alignment (16-byte vector accesses where pointers and the row length allow, else scalar).
//
// Each launcher enqueues on `stream` and returns cudaGetLastError() after the launch (it does
// not synchronise), cudaSuccess without launching when rows == 0, and cudaErrorInvalidValue
// without launching when columns is outside [1, kCausalSoftmaxMaxColumns] or rows < 0.
#ifndef VARUNA_KERNELS_CUDA_CAUSAL_SOFTMAX_H_
#define VARUNA_KERNELS_CUDA_CAUSAL_SOFTMAX_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "varuna/kernels/cuda/element_type.h"

namespace varuna::kernels::cuda {

// The longest row the kernels hold in registers (a block of 512 threads, 32 elements each).
constexpr int64_t kCausalSoftmaxMaxColumns = 16384;

// scores and probs: rows * columns elements of `type`; they must not overlap.
cudaError_t LaunchCausalSoftmaxForward(const void* scores, void* probs, int64_t rows,
                                       int64_t columns, float scale, ElementType type,
                                       cudaStream_t stream);

// grad_probs, probs and grad_scores: rows * columns elements of `type`; grad_scores must not
// overlap the inputs.
cudaError_t LaunchCausalSoftmaxBackward(const void* grad_probs, const void* probs,
                                        void* grad_scores, int64_t rows, int64_t columns,
                                        float scale, ElementType type, cudaStream_t stream);

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_CAUSAL_SOFTMAX_H_
