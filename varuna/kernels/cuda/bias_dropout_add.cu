// Fused bias + dropout + residual add kernels (see bias_dropout_add.h here and in varuna/kernels
// for the math and the contract).
//
// Forward: elementwise over the rows * columns elements as chunks of kVec (one 16-byte vector
// when the pointers and `columns` allow), grid-stride over about one wave of blocks, as in
// bias_gelu.cu. With dropout, a chunk draws its uniforms from the Philox subsequences of its
// elements (element e: subsequence e / 4, component e % 4), so a 4- or 8-element chunk starts a
// Philox state once per 4 elements, and the scalar fallback draws the same numbers one element
// at a time. The mask goes out as one byte per element.
//
// Backward: the layout of bias_gelu.cu's backward. A block is TX x TY threads (TX a power of two
// up to 32, TX * TY = kBlockThreads); a thread owns one chunk of columns and walks the rows
// by * TY + ty, + gridDim.y * TY, ...; it writes grad_input = grad_output * mask * scale there and
// keeps the fp32 sum of what it wrote. The TY sums of a column are added by a fixed tree in
// shared memory, written as partial-sum row `by` of the workspace, and SumPartialRowsKernel
// (common.cuh) adds the gridDim.y rows in order. One read of grad_output and the mask, one write
// of grad_input; without a mask only the column sums (grad_input is grad_output).
#include <cuda_runtime.h>
#include <curand_kernel.h>

#include <algorithm>
#include <cstdint>

#include "varuna/kernels/cuda/bias_dropout_add.h"
#include "varuna/kernels/cuda/column_sum.cuh"
#include "varuna/kernels/cuda/common.cuh"
#include "varuna/kernels/cuda/dropout_mask.cuh"

namespace varuna::kernels::cuda {
namespace {

constexpr int kBlockThreads = kColumnSumBlockThreads;

template <typename T, int kVec, bool kDropout>
__global__ void __launch_bounds__(kBlockThreads)
    ForwardKernel(const T* __restrict__ x, const T* __restrict__ bias,
                  const T* __restrict__ residual, T* __restrict__ output,
                  uint8_t* __restrict__ mask, float keep, float scale, uint64_t seed,
                  uint64_t offset, int64_t chunks, int64_t row_chunks) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  int64_t column_chunk = i % row_chunks;
  const int64_t column_step = stride % row_chunks;
  for (; i < chunks; i += stride) {
    float v[kVec];
    float b[kVec];
    float r[kVec];
    LoadAsFloat(x + i * kVec, v);
    LoadAsFloat(bias + column_chunk * kVec, b);
    LoadAsFloat(residual + i * kVec, r);
    if (kDropout) {
      bool kept[kVec];
      DrawKept<kVec>(seed, offset, i * kVec, keep, kept);
      AlignedVector<uint8_t, kVec> bytes;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        v[k] = r[k] + (kept[k] ? (v[k] + b[k]) * scale : 0.0f);
        bytes.v[k] = kept[k] ? 1 : 0;
      }
      *reinterpret_cast<AlignedVector<uint8_t, kVec>*>(mask + i * kVec) = bytes;
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = r[k] + (v[k] + b[k]);
    }
    StoreFromFloat(output + i * kVec, v);
    column_chunk += column_step;
    if (column_chunk >= row_chunks) column_chunk -= row_chunks;
  }
}

template <typename T, int kVec, bool kDropout>
__global__ void __launch_bounds__(kBlockThreads)
    BackwardKernel(const T* __restrict__ grad_output, const uint8_t* __restrict__ mask,
                   T* __restrict__ grad_input, float* __restrict__ partials, float scale,
                   int64_t rows, int64_t columns) {
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
    const int64_t row_step = int64_t{gridDim.y} * height;
    for (int64_t row = int64_t{blockIdx.y} * height + ty; row < rows; row += row_step) {
      const int64_t offset = row * columns + column;
      float g[kVec];
      LoadAsFloat(grad_output + offset, g);
      if (kDropout) {
        const AlignedVector<uint8_t, kVec> bytes =
            *reinterpret_cast<const AlignedVector<uint8_t, kVec>*>(mask + offset);
#pragma unroll
        for (int k = 0; k < kVec; ++k) g[k] = bytes.v[k] != 0 ? g[k] * scale : 0.0f;
        StoreFromFloat(grad_input + offset, g);
      }
#pragma unroll
      for (int k = 0; k < kVec; ++k) sum[k] += g[k];
    }
  }
  StoreColumnSums<kVec>(sum, gather, partials, columns, column, in_columns);
}

template <typename T>
int BackwardVectorWidth(const BiasDropoutAddBackwardArgs& a) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vector =
      a.columns % kVec == 0 && IsAligned(a.grad_output, sizeof(T) * kVec) &&
      (a.mask == nullptr || (IsAligned(a.mask, kVec) && IsAligned(a.grad_input, sizeof(T) * kVec)));
  return vector ? kVec : 1;
}

bool ValidKeep(float keep) { return keep > 0.0f && keep <= 1.0f; }

template <typename T, int kVec>
cudaError_t Forward(const BiasDropoutAddForwardArgs& a, cudaStream_t stream) {
  const int64_t row_chunks = a.columns / kVec;
  const int64_t chunks = a.rows * row_chunks;
  int resident = 0;
  const cudaError_t error = ResidentBlocks(kBlockThreads, &resident);
  if (error != cudaSuccess) return error;
  const int64_t grid = std::min<int64_t>(CeilDiv(chunks, kBlockThreads), resident);
  const float scale = 1.0f / a.keep_probability;
  const auto* x = static_cast<const T*>(a.x);
  const auto* bias = static_cast<const T*>(a.bias);
  const auto* residual = static_cast<const T*>(a.residual);
  auto* output = static_cast<T*>(a.output);
  if (a.mask != nullptr) {
    ForwardKernel<T, kVec, true><<<static_cast<unsigned>(grid), kBlockThreads, 0, stream>>>(
        x, bias, residual, output, a.mask, a.keep_probability, scale, a.seed, a.offset, chunks,
        row_chunks);
  } else {
    ForwardKernel<T, kVec, false><<<static_cast<unsigned>(grid), kBlockThreads, 0, stream>>>(
        x, bias, residual, output, nullptr, 1.0f, 1.0f, 0, 0, chunks, row_chunks);
  }
  return cudaGetLastError();
}

template <typename T, int kVec>
cudaError_t Backward(const BiasDropoutAddBackwardArgs& a, float* workspace,
                     const ColumnSumPlan& plan, cudaStream_t stream) {
  const float scale = 1.0f / a.keep_probability;
  if (a.mask != nullptr) {
    BackwardKernel<T, kVec, true><<<plan.grid, plan.block, 0, stream>>>(
        static_cast<const T*>(a.grad_output), a.mask, static_cast<T*>(a.grad_input), workspace,
        scale, a.rows, a.columns);
  } else {
    BackwardKernel<T, kVec, false><<<plan.grid, plan.block, 0, stream>>>(
        static_cast<const T*>(a.grad_output), nullptr, nullptr, workspace, 1.0f, a.rows, a.columns);
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return error;
  return LaunchSumPartialRows(workspace, plan.grid.y, a.columns, static_cast<T*>(a.grad_bias),
                              static_cast<T*>(nullptr), stream);
}

}  // namespace

cudaError_t LaunchBiasDropoutAddForward(const BiasDropoutAddForwardArgs& args,
                                        cudaStream_t stream) {
  if (args.rows < 0 || args.columns < 0 || !ValidKeep(args.keep_probability)) {
    return cudaErrorInvalidValue;
  }
  if (args.rows == 0 || args.columns == 0) return cudaSuccess;
  return DispatchElementType(args.type, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    constexpr int kVec = 16 / sizeof(T);
    const bool vector = args.columns % kVec == 0 && IsAligned(args.x, sizeof(T) * kVec) &&
                        IsAligned(args.bias, sizeof(T) * kVec) &&
                        IsAligned(args.residual, sizeof(T) * kVec) &&
                        IsAligned(args.output, sizeof(T) * kVec) &&
                        (args.mask == nullptr || IsAligned(args.mask, kVec));
    return vector ? Forward<T, kVec>(args, stream) : Forward<T, 1>(args, stream);
  });
}

cudaError_t BiasDropoutAddBackwardPartialRows(const BiasDropoutAddBackwardArgs& args,
                                              int* partial_rows) {
  return ColumnSumPartialRows(
      args.rows, args.columns, args.type,
      [&](auto tag) { return BackwardVectorWidth<decltype(tag)>(args); }, partial_rows);
}

cudaError_t LaunchBiasDropoutAddBackward(const BiasDropoutAddBackwardArgs& args, float* workspace,
                                         int partial_rows, cudaStream_t stream) {
  if (!ValidKeep(args.keep_probability)) return cudaErrorInvalidValue;
  return LaunchColumnSumBackward(
      args.rows, args.columns, args.type, partial_rows,
      [&](auto tag) { return BackwardVectorWidth<decltype(tag)>(args); },
      [&](auto tag, int vec, const ColumnSumPlan& plan) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        return vec == kVec ? Backward<T, kVec>(args, workspace, plan, stream)
                           : Backward<T, 1>(args, workspace, plan, stream);
      });
}

}  // namespace varuna::kernels::cuda
