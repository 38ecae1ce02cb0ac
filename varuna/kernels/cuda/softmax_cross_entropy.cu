// Softmax cross entropy over logits rows, in place (see softmax_cross_entropy.h).
//
// A block of kThreads threads owns one row at a time (grid-stride over the rows); thread t reads
// the columns t, t + kThreads, ... so consecutive threads read consecutive elements. Three
// passes over the row: its max, the sum of exp(z - max), and (with the gradient) the in-place
// write; rows of GPT-2's 50,304 logits are far too long to hold in registers, and the second and
// third reads mostly hit L2.
#include <cuda_runtime.h>

#include <cstdint>

#include "varuna/kernels/cuda/common.cuh"
#include "varuna/kernels/cuda/softmax_cross_entropy.h"

namespace varuna::kernels::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    SoftmaxCrossEntropyKernel(T* __restrict__ logits, const int64_t* __restrict__ labels,
                              const float* __restrict__ weights, float* __restrict__ losses,
                              int64_t rows, int64_t columns, bool write_gradient) {
  __shared__ float scratch[kWarpSize];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    T* z = logits + row * columns;
    float max = -INFINITY;
    for (int64_t v = threadIdx.x; v < columns; v += kThreads) max = fmaxf(max, ToFloat(z[v]));
    max = BlockMax(max, scratch);
    float sum = 0.0f;
    for (int64_t v = threadIdx.x; v < columns; v += kThreads) sum += expf(ToFloat(z[v]) - max);
    sum = BlockSum(sum, scratch);
    const float lse = max + logf(sum);
    const int64_t label = labels[row];
    const bool valid = label >= 0 && label < columns;
    if (threadIdx.x == 0) losses[row] = valid ? lse - ToFloat(z[label]) : NAN;
    if (!write_gradient) continue;
    // Every thread has read its own columns and thread 0 the label's before any is written: the
    // label's column belongs to thread label % kThreads, which rewrites it only below, after the
    // block-wide barrier.
    __syncthreads();
    const float w = weights[row];
    for (int64_t v = threadIdx.x; v < columns; v += kThreads) {
      const float p = expf(ToFloat(z[v]) - lse);
      z[v] = FromFloat<T>((p - (v == label ? 1.0f : 0.0f)) * w);
    }
  }
}

}  // namespace

cudaError_t LaunchSoftmaxCrossEntropy(void* logits, const int64_t* labels, const float* weights,
                                      float* losses, int64_t rows, int64_t columns,
                                      bool write_gradient, ElementType type, cudaStream_t stream) {
  if (rows < 0 || columns < 1) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
  return DispatchElementType(type, [&](auto zero) {
    using T = decltype(zero);
    SoftmaxCrossEntropyKernel<T><<<grid, kThreads, 0, stream>>>(
        static_cast<T*>(logits), labels, weights, losses, rows, columns, write_gradient);
    return cudaGetLastError();
  });
}

}  // namespace varuna::kernels::cuda
