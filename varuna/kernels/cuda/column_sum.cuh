// The column sums behind the bias gradients of the fused elementwise ops (bias_gelu.cu,
// bias_dropout_add.cu): deterministic, without atomics.
//
// A backward block is TX x TY threads (TX a power of two up to 32, TX * TY =
// kColumnSumBlockThreads). A thread owns one chunk of kVec columns and walks the rows
// by * TY + ty, + gridDim.y * TY, ..., keeping the fp32 sum of what it wrote. StoreColumnSums
// adds the TY sums of each column by a fixed pairwise tree in shared memory and writes them as
// partial-sum row `by` of the [gridDim.y, columns] workspace; SumPartialRowsKernel (common.cuh)
// then adds the gridDim.y rows in order. The order of every addition depends only on the shape.
#ifndef VARUNA_KERNELS_CUDA_COLUMN_SUM_CUH_
#define VARUNA_KERNELS_CUDA_COLUMN_SUM_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "varuna/kernels/cuda/common.cuh"

namespace varuna::kernels::cuda {

inline constexpr int kColumnSumBlockThreads = 256;

// The block shape and grid of a backward over chunks of `vec` columns.
struct ColumnSumPlan {
  dim3 block;
  dim3 grid;
};

// About one wave of blocks in all, but no more thread rows than data rows.
inline cudaError_t PlanColumnSum(int64_t rows, int64_t columns, int vec, ColumnSumPlan* plan) {
  constexpr int64_t kMaxGridY = 65535;
  const int64_t row_chunks = columns / vec;
  int width = 1;
  while (width < row_chunks && width < kWarpSize) width *= 2;
  const int height = kColumnSumBlockThreads / width;
  const int64_t grid_x = CeilDiv(row_chunks, width);
  int resident = 0;
  const cudaError_t error = ResidentBlocks(kColumnSumBlockThreads, &resident);
  if (error != cudaSuccess) return error;
  const int64_t grid_y =
      std::max<int64_t>(1, std::min({CeilDiv(resident, grid_x), CeilDiv(rows, height), kMaxGridY}));
  plan->block = dim3(width, height);
  plan->grid = dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y));
  return cudaSuccess;
}

// How many partial-sum rows (the workspace's height) the backward of a [rows, columns] op of
// element type `type` uses; `vector_width(tag)` gives the chunk width for the element type of
// DispatchElementType's `tag`. 0 for an empty op.
template <typename VectorWidth>
cudaError_t ColumnSumPartialRows(int64_t rows, int64_t columns, ElementType type,
                                 VectorWidth vector_width, int* partial_rows) {
  if (rows < 0 || columns < 0) return cudaErrorInvalidValue;
  if (rows == 0 || columns == 0) {
    *partial_rows = 0;
    return cudaSuccess;
  }
  return DispatchElementType(type, [&](auto tag) -> cudaError_t {
    ColumnSumPlan plan;
    const cudaError_t error = PlanColumnSum(rows, columns, vector_width(tag), &plan);
    if (error != cudaSuccess) return error;
    *partial_rows = static_cast<int>(plan.grid.y);
    return cudaSuccess;
  });
}

// Launches the backward of a [rows, columns] op through `run(tag, vec, plan)`, after checking
// that the plan's partial-sum rows are the `partial_rows` the workspace was sized for (by
// ColumnSumPartialRows); `vector_width(tag)` as there. Nothing to do for an empty op.
template <typename VectorWidth, typename Run>
cudaError_t LaunchColumnSumBackward(int64_t rows, int64_t columns, ElementType type,
                                    int partial_rows, VectorWidth vector_width, Run run) {
  if (rows < 0 || columns < 0) return cudaErrorInvalidValue;
  if (rows == 0 || columns == 0) return cudaSuccess;
  return DispatchElementType(type, [&](auto tag) -> cudaError_t {
    const int vec = vector_width(tag);
    ColumnSumPlan plan;
    const cudaError_t error = PlanColumnSum(rows, columns, vec, &plan);
    if (error != cudaSuccess) return error;
    if (static_cast<int>(plan.grid.y) != partial_rows) return cudaErrorInvalidValue;
    return run(tag, vec, plan);
  });
}

// Adds this block's per-thread sums `sum` over its TY thread rows and writes the kVec column
// sums of chunk `column` (by thread row 0, if `in_columns`) into partial-sum row blockIdx.y.
// `gather` is the block's shared float[kVec * kColumnSumBlockThreads]; every thread of the
// block must call this.
template <int kVec>
__device__ __forceinline__ void StoreColumnSums(const float (&sum)[kVec], float* gather,
                                                float* __restrict__ partials, int64_t columns,
                                                int64_t column, bool in_columns) {
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int width = blockDim.x;
  const int height = blockDim.y;
  // Slot (k * TY + ty) * TX + tx: a warp's threads touch consecutive words.
#pragma unroll
  for (int k = 0; k < kVec; ++k) gather[(k * height + ty) * width + tx] = sum[k];
  __syncthreads();
  // height is a power of two: a fixed pairwise tree over the thread rows.
  for (int half = height / 2; half > 0; half /= 2) {
    if (ty < half) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        gather[(k * height + ty) * width + tx] += gather[(k * height + ty + half) * width + tx];
      }
    }
    __syncthreads();
  }
  if (ty == 0 && in_columns) {
    float* out = partials + int64_t{blockIdx.y} * columns + column;
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[k] = gather[k * height * width + tx];
  }
}

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_COLUMN_SUM_CUH_
