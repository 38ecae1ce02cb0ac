// Fused bias + GeLU kernels (see bias_gelu.h here and in varuna/kernels for the math and the
// contract).
//
// Forward: elementwise over the rows * columns elements as chunks of kVec (one 16-byte vector
// when the pointers and `columns` allow), grid-stride over about one wave of blocks. The bias
// chunk of element chunk i is i % (columns / kVec), tracked incrementally (no division per
// element).
//
// Backward: a block is TX x TY threads (TX a power of two up to 32, TX * TY = kBlockThreads).
// Block (bx, by) owns the column chunks bx * TX + tx; its thread rows ty walk the data rows
// by * TY + ty, by * TY + ty + gridDim.y * TY, ... So a thread sees one fixed chunk of columns,
// writes grad_input there and keeps the fp32 sum of what it wrote in registers. The TY sums of a
// column are added by a fixed tree in shared memory, and the block writes them as partial-sum
// row `by` of the workspace; SumPartialRowsKernel (common.cuh) then adds the gridDim.y rows in
// order. One read of grad_output and x, one write of grad_input, plus 2 * gridDim.y * columns
// floats of workspace traffic, which the choice of gridDim.y (about one wave of blocks) keeps
// small next to the data. This fused form reads the inputs once, where a separate column-sum
// kernel would read grad_input again.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "varuna/kernels/cuda/bias_gelu.h"
#include "varuna/kernels/cuda/column_sum.cuh"
#include "varuna/kernels/cuda/common.cuh"

namespace varuna::kernels::cuda {
namespace {

constexpr int kBlockThreads = kColumnSumBlockThreads;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// gelu(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))
__device__ __forceinline__ float Gelu(float u) {
  return 0.5f * u * (1.0f + tanhf(kSqrt2OverPi * (u + kCubic * u * u * u)));
}

// gelu'(u) = 0.5 (1 + t) + 0.5 u (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 u^2), t the tanh above.
__device__ __forceinline__ float GeluDerivative(float u) {
  const float u2 = u * u;
  const float t = tanhf(kSqrt2OverPi * u * (1.0f + kCubic * u2));
  return 0.5f * (1.0f + t) + 0.5f * u * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * u2);
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kBlockThreads)
    ForwardKernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ output,
                  int64_t chunks, int64_t row_chunks) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  int64_t column_chunk = i % row_chunks;
  const int64_t column_step = stride % row_chunks;
  for (; i < chunks; i += stride) {
    float v[kVec];
    float b[kVec];
    LoadAsFloat(x + i * kVec, v);
    LoadAsFloat(bias + column_chunk * kVec, b);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = Gelu(v[k] + b[k]);
    StoreFromFloat(output + i * kVec, v);
    column_chunk += column_step;
    if (column_chunk >= row_chunks) column_chunk -= row_chunks;
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kBlockThreads)
    BackwardKernel(const T* __restrict__ grad_output, const T* __restrict__ x,
                   const T* __restrict__ bias, T* __restrict__ grad_input,
                   float* __restrict__ partials, int64_t rows, int64_t columns) {
  __shared__ float gather[kVec * kBlockThreads];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int width = blockDim.x;
  const int height = blockDim.y;
  const int64_t column_chunk = int64_t{blockIdx.x} * width + tx;
  const bool in_columns = column_chunk < columns / kVec;
  const int64_t column = column_chunk * kVec;
  float sum[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) sum[k] = 0.0f;
  if (in_columns) {
    float b[kVec];
    LoadAsFloat(bias + column, b);
    const int64_t row_step = int64_t{gridDim.y} * height;
    for (int64_t row = int64_t{blockIdx.y} * height + ty; row < rows; row += row_step) {
      const int64_t offset = row * columns + column;
      float g[kVec];
      float v[kVec];
      LoadAsFloat(grad_output + offset, g);
      LoadAsFloat(x + offset, v);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        g[k] *= GeluDerivative(v[k] + b[k]);
        sum[k] += g[k];
      }
      StoreFromFloat(grad_input + offset, g);
    }
  }
  StoreColumnSums<kVec>(sum, gather, partials, columns, column, in_columns);
}

template <typename T>
int VectorWidth(const BiasGeluBackwardArgs& a) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vector = a.columns % kVec == 0 && IsAligned(a.grad_output, sizeof(T) * kVec) &&
                      IsAligned(a.x, sizeof(T) * kVec) && IsAligned(a.bias, sizeof(T) * kVec) &&
                      IsAligned(a.grad_input, sizeof(T) * kVec);
  return vector ? kVec : 1;
}

template <typename T, int kVec>
cudaError_t Forward(const void* x, const void* bias, void* output, int64_t rows, int64_t columns,
                    cudaStream_t stream) {
  const int64_t row_chunks = columns / kVec;
  const int64_t chunks = rows * row_chunks;
  int resident = 0;
  const cudaError_t error = ResidentBlocks(kBlockThreads, &resident);
  if (error != cudaSuccess) return error;
  const int64_t grid = std::min<int64_t>(CeilDiv(chunks, kBlockThreads), resident);
  ForwardKernel<T, kVec><<<static_cast<unsigned>(grid), kBlockThreads, 0, stream>>>(
      static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<T*>(output), chunks,
      row_chunks);
  return cudaGetLastError();
}

template <typename T, int kVec>
cudaError_t Backward(const BiasGeluBackwardArgs& a, float* workspace, const ColumnSumPlan& plan,
                     cudaStream_t stream) {
  BackwardKernel<T, kVec><<<plan.grid, plan.block, 0, stream>>>(
      static_cast<const T*>(a.grad_output), static_cast<const T*>(a.x),
      static_cast<const T*>(a.bias), static_cast<T*>(a.grad_input), workspace, a.rows, a.columns);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  return LaunchSumPartialRows(workspace, plan.grid.y, a.columns, static_cast<T*>(a.grad_bias),
                              static_cast<T*>(nullptr), stream);
}

}  // namespace

cudaError_t LaunchBiasGeluForward(ElementType type, const void* x, const void* bias, void* output,
                                  int64_t rows, int64_t columns, cudaStream_t stream) {
  if (rows < 0 || columns < 0) return cudaErrorInvalidValue;
  if (rows == 0 || columns == 0) return cudaSuccess;
  return DispatchElementType(type, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    constexpr int kVec = 16 / sizeof(T);
    const bool vector = columns % kVec == 0 && IsAligned(x, sizeof(T) * kVec) &&
                        IsAligned(bias, sizeof(T) * kVec) && IsAligned(output, sizeof(T) * kVec);
    return vector ? Forward<T, kVec>(x, bias, output, rows, columns, stream)
                  : Forward<T, 1>(x, bias, output, rows, columns, stream);
  });
}

cudaError_t BiasGeluBackwardPartialRows(const BiasGeluBackwardArgs& args, int* partial_rows) {
  return ColumnSumPartialRows(
      args.rows, args.columns, args.type,
      [&](auto tag) { return VectorWidth<decltype(tag)>(args); }, partial_rows);
}

cudaError_t LaunchBiasGeluBackward(const BiasGeluBackwardArgs& args, float* workspace,
                                   int partial_rows, cudaStream_t stream) {
  return LaunchColumnSumBackward(
      args.rows, args.columns, args.type, partial_rows,
      [&](auto tag) { return VectorWidth<decltype(tag)>(args); },
      [&](auto tag, int vec, const ColumnSumPlan& plan) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        return vec == kVec ? Backward<T, kVec>(args, workspace, plan, stream)
                           : Backward<T, 1>(args, workspace, plan, stream);
      });
}

}  // namespace varuna::kernels::cuda
