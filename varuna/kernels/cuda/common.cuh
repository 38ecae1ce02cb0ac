// Device helpers for the kernels of varuna/kernels: element loads and stores that compute in
// fp32 whatever the storage type, warp and block reductions, and the dispatch from ElementType
// to a C++ type. Included by .cu files only.
#ifndef VARUNA_KERNELS_CUDA_COMMON_CUH_
#define VARUNA_KERNELS_CUDA_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "varuna/kernels/cuda/element_type.h"

namespace varuna::kernels::cuda {

// fp32 from any storage type, and back with round-to-nearest-even.
__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpSize = 32;

__device__ __forceinline__ float WarpSum(float x) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    x += __shfl_xor_sync(kFullMask, x, offset);
  }
  return x;
}

__device__ __forceinline__ float WarpMax(float x) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    x = fmaxf(x, __shfl_xor_sync(kFullMask, x, offset));
  }
  return x;
}

// Sum (or max) over the whole block; every thread gets the result. blockDim.x must be a
// multiple of 32 and at most 1024; `scratch` holds at least 32 floats of shared memory. All
// threads of the block must call it (it synchronises), and `scratch` may be reused after it
// returns.
__device__ __forceinline__ float BlockSum(float x, float* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  x = WarpSum(x);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < warps ? scratch[lane] : 0.0f;
  return WarpSum(x);
}

__device__ __forceinline__ float BlockMax(float x, float* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  x = WarpMax(x);
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < warps ? scratch[lane] : -INFINITY;
  return WarpMax(x);
}

// Calls f(T{}) with T the storage type of `type`: float, __half or __nv_bfloat16.
template <typename F>
cudaError_t DispatchElementType(ElementType type, F&& f) {
  switch (type) {
    case ElementType::kFloat32:
      return f(float{});
    case ElementType::kFloat16:
      return f(__half{});
    case ElementType::kBFloat16:
      return f(__nv_bfloat16{});
  }
  return cudaErrorInvalidValue;
}

// kVec elements of T as one aligned unit, moved by one 16-byte (or narrower) access. The
// pointer of a LoadAsFloat/StoreFromFloat must be aligned to sizeof(AlignedVector<T, kVec>);
// launchers check with IsAligned and fall back to kVec = 1.
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) AlignedVector {
  T v[kVec];
};

inline bool IsAligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

template <int kVec, typename T>
__device__ __forceinline__ void LoadAsFloat(const T* p, float (&out)[kVec]) {
  const AlignedVector<T, kVec> in = *reinterpret_cast<const AlignedVector<T, kVec>*>(p);
#pragma unroll
  for (int k = 0; k < kVec; ++k) out[k] = ToFloat(in.v[k]);
}

template <int kVec, typename T>
__device__ __forceinline__ void StoreFromFloat(T* p, const float (&in)[kVec]) {
  AlignedVector<T, kVec> out;
#pragma unroll
  for (int k = 0; k < kVec; ++k) out.v[k] = FromFloat<T>(in[k]);
  *reinterpret_cast<AlignedVector<T, kVec>*>(p) = out;
}

// ceil(a / b) for a >= 0 and b > 0: blocks or chunks that cover a items.
inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One wave of blocks on the current device at `per_sm` blocks per multiprocessor:
// SMs * max(1, per_sm). No synchronisation; returns the CUDA error of the queries.
inline cudaError_t WaveBlocks(int per_sm, int* blocks) {
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  int sms = 0;
  error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (error != cudaSuccess) return error;
  *blocks = sms * (per_sm > 1 ? per_sm : 1);
  return cudaSuccess;
}

// How many blocks of `threads_per_block` threads the current device holds at once by thread
// count (SMs * max(1, max threads per SM / threads_per_block)): the grid of a grid-stride
// kernel. No synchronisation; returns the CUDA error of the attribute queries.
inline cudaError_t ResidentBlocks(int threads_per_block, int* blocks) {
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  int threads_per_sm = 0;
  error = cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device);
  if (error != cudaSuccess) return error;
  return WaveBlocks(threads_per_sm / threads_per_block, blocks);
}

// The blocks of `kernel` (launched with threads_per_block threads and no dynamic shared memory)
// that fit on the device at once, by its registers and shared memory as well as its threads.
template <typename Kernel>
cudaError_t ResidentBlocksOf(Kernel kernel, int threads_per_block, int* blocks) {
  int per_sm = 0;
  const cudaError_t error =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads_per_block, 0);
  if (error != cudaSuccess) return error;
  return WaveBlocks(per_sm, blocks);
}

// Stage two of a deterministic column sum (stage one, in the caller's kernel, writes one fp32
// partial-sum row per block, no atomics). `partials` holds gridDim.y (1 or 2) stacked
// [partial_rows, columns] arrays; out_a[c] = sum over q of array a's [q, c], converted to Out.
// The order of the additions depends only on partial_rows: thread row y adds q = y, y + 32, ...
// in turn, then one thread adds the 32 row sums in order of y. Launch with LaunchSumPartialRows.
constexpr int kSumPartialRowsTile = 32;
constexpr int kSumPartialRowsThreads = kSumPartialRowsTile * kSumPartialRowsTile;

template <typename Out>
__global__ void __launch_bounds__(kSumPartialRowsThreads)
    SumPartialRowsKernel(const float* __restrict__ partials, int64_t partial_rows, int64_t columns,
                         Out* __restrict__ out0, Out* __restrict__ out1) {
  __shared__ float sums[kSumPartialRowsTile][kSumPartialRowsTile + 1];
  const float* array = partials + int64_t{blockIdx.y} * partial_rows * columns;
  Out* out = blockIdx.y == 0 ? out0 : out1;
  const int64_t column = int64_t{blockIdx.x} * kSumPartialRowsTile + threadIdx.x;
  float sum = 0.0f;
  if (column < columns) {
#pragma unroll 4
    for (int64_t q = threadIdx.y; q < partial_rows; q += kSumPartialRowsTile) {
      sum += array[q * columns + column];
    }
  }
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && column < columns) {
    float total = 0.0f;
    for (int y = 0; y < kSumPartialRowsTile; ++y) total += sums[y][threadIdx.x];
    out[column] = FromFloat<Out>(total);
  }
}

// Sums `partials` ([partial_rows, columns] fp32, then a second such array when out1 is not
// null) into out0 (and out1). Returns cudaGetLastError() after the launch; nothing is launched
// when columns == 0.
template <typename Out>
cudaError_t LaunchSumPartialRows(const float* partials, int64_t partial_rows, int64_t columns,
                                 Out* out0, Out* out1, cudaStream_t stream) {
  if (columns == 0) return cudaSuccess;
  const dim3 block(kSumPartialRowsTile, kSumPartialRowsTile);
  const dim3 grid(static_cast<unsigned>((columns + kSumPartialRowsTile - 1) / kSumPartialRowsTile),
                  out1 == nullptr ? 1 : 2);
  SumPartialRowsKernel<Out>
      <<<grid, block, 0, stream>>>(partials, partial_rows, columns, out0, out1);
  return cudaGetLastError();
}

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_COMMON_CUH_
