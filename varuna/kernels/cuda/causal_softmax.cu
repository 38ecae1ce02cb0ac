// Causal scaled softmax kernels (see causal_softmax.h for the math and the contract).
//
// Layout of the work: a group of kThreads threads owns one row at a time and holds the whole
// row in registers, kElements fp32 values per thread, so the input is read once. A group is a
// warp (rows up to 1024 columns, several rows per block, warp-shuffle reductions) or a whole
// block (longer rows, one row per block, block reductions through shared memory). Thread `lane`
// of a group owns the chunks of kVec consecutive columns starting at (c * kThreads + lane) * kVec
// for c = 0 .. kElements / kVec - 1: consecutive lanes touch consecutive chunks, so each access
// is coalesced, and a chunk is one 16-byte (or narrower) vector access when kVec > 1.
//
// Row r is position i = r % columns of its score matrix. Chunks that start past column i are
// never loaded (the causal half is all a row reads); inside the chunk that straddles i, the
// columns past i are masked to -inf (forward) or 0 (backward). Every chunk inside the row is
// stored, so columns past i are written as exact zeros.
//
// Deterministic by construction (--deterministic needs no switch here): each row is reduced by
// one group through a fixed shuffle / shared-memory tree, no atomics.
#include <cuda_runtime.h>

#include <cstdint>

#include "varuna/kernels/cuda/causal_softmax.h"
#include "varuna/kernels/cuda/common.cuh"

namespace varuna::kernels::cuda {
namespace {

// Threads per block: warp kernels put kWarpRowsPerBlock rows in a block, block kernels one.
constexpr int kWarpRowsPerBlock = 4;

template <int kThreads>
constexpr int BlockThreads() {
  return kThreads == kWarpSize ? kWarpSize * kWarpRowsPerBlock : kThreads;
}

// Grid-stride loops cover the rows beyond this many blocks.
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

// Reductions over the kThreads threads that share a row; every one of them gets the result.
// The block versions synchronise, so all threads of the block must call them.
template <int kThreads>
__device__ __forceinline__ float RowMax(float x, float* scratch) {
  if constexpr (kThreads == kWarpSize) {
    return WarpMax(x);
  } else {
    return BlockMax(x, scratch);
  }
}

template <int kThreads>
__device__ __forceinline__ float RowSum(float x, float* scratch) {
  if constexpr (kThreads == kWarpSize) {
    return WarpSum(x);
  } else {
    return BlockSum(x, scratch);
  }
}

// kVec elements as one vector load or store (AlignedVector of common.cuh); the kernels mask
// single elements of a pack, so they convert to and from fp32 themselves.
template <typename T, int kVec>
__device__ __forceinline__ AlignedVector<T, kVec> LoadPack(const T* p) {
  return *reinterpret_cast<const AlignedVector<T, kVec>*>(p);
}

template <typename T, int kVec>
__device__ __forceinline__ void StorePack(T* p, const AlignedVector<T, kVec>& pack) {
  *reinterpret_cast<AlignedVector<T, kVec>*>(p) = pack;
}

template <typename T, int kThreads, int kElements, int kVec>
__global__ void __launch_bounds__(BlockThreads<kThreads>())
    CausalSoftmaxForwardKernel(const T* __restrict__ scores, T* __restrict__ probs, int64_t rows,
                               int columns, float scale) {
  static_assert(kElements % kVec == 0, "a thread's elements are whole chunks");
  constexpr int kChunks = kElements / kVec;
  constexpr int kGroups = BlockThreads<kThreads>() / kThreads;
  __shared__ float scratch[kWarpSize];
  const int lane = threadIdx.x % kThreads;
  const int64_t row_stride = static_cast<int64_t>(gridDim.x) * kGroups;
  // `row` is the same for all threads of a group, so a group leaves the loop together (block
  // kernels: the whole block, as their reductions require).
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kGroups + threadIdx.x / kThreads;
       row < rows; row += row_stride) {
    const int last = static_cast<int>(row % columns);  // the last visible column
    const T* in = scores + row * columns;
    T* out = probs + row * columns;

    float x[kElements];
    float max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int col = (c * kThreads + lane) * kVec;
      if (col <= last) {  // then the whole chunk is inside the row (columns % kVec == 0)
        const AlignedVector<T, kVec> pack = LoadPack<T, kVec>(in + col);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          x[c * kVec + e] = col + e <= last ? scale * ToFloat(pack.v[e]) : -INFINITY;
          max = fmaxf(max, x[c * kVec + e]);
        }
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) x[c * kVec + e] = -INFINITY;
      }
    }
    // Column 0 is always visible, so max is finite for finite scores and exp(-inf - max) = 0.
    max = RowMax<kThreads>(max, scratch);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kElements; ++k) {
      x[k] = expf(x[k] - max);
      sum += x[k];
    }
    const float inverse = 1.0f / RowSum<kThreads>(sum, scratch);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int col = (c * kThreads + lane) * kVec;
      if (col < columns) {
        AlignedVector<T, kVec> pack;
#pragma unroll
        for (int e = 0; e < kVec; ++e) pack.v[e] = FromFloat<T>(x[c * kVec + e] * inverse);
        StorePack<T, kVec>(out + col, pack);
      }
    }
  }
}

template <typename T, int kThreads, int kElements, int kVec>
__global__ void __launch_bounds__(BlockThreads<kThreads>())
    CausalSoftmaxBackwardKernel(const T* __restrict__ grad_probs, const T* __restrict__ probs,
                                T* __restrict__ grad_scores, int64_t rows, int columns,
                                float scale) {
  static_assert(kElements % kVec == 0, "a thread's elements are whole chunks");
  constexpr int kChunks = kElements / kVec;
  constexpr int kGroups = BlockThreads<kThreads>() / kThreads;
  __shared__ float scratch[kWarpSize];
  const int lane = threadIdx.x % kThreads;
  const int64_t row_stride = static_cast<int64_t>(gridDim.x) * kGroups;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kGroups + threadIdx.x / kThreads;
       row < rows; row += row_stride) {
    const int last = static_cast<int>(row % columns);
    const int64_t offset = row * columns;

    // Invisible columns hold g = p = 0, so they add nothing to the dot product and their
    // gradient, scale * 0 * (0 - dot), is an exact 0.
    float g[kElements];
    float p[kElements];
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int col = (c * kThreads + lane) * kVec;
      if (col <= last) {
        const AlignedVector<T, kVec> g_pack = LoadPack<T, kVec>(grad_probs + offset + col);
        const AlignedVector<T, kVec> p_pack = LoadPack<T, kVec>(probs + offset + col);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const bool visible = col + e <= last;
          g[c * kVec + e] = visible ? ToFloat(g_pack.v[e]) : 0.0f;
          p[c * kVec + e] = visible ? ToFloat(p_pack.v[e]) : 0.0f;
          dot += g[c * kVec + e] * p[c * kVec + e];
        }
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          g[c * kVec + e] = 0.0f;
          p[c * kVec + e] = 0.0f;
        }
      }
    }
    dot = RowSum<kThreads>(dot, scratch);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int col = (c * kThreads + lane) * kVec;
      if (col < columns) {
        AlignedVector<T, kVec> pack;
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const int k = c * kVec + e;
          pack.v[e] = FromFloat<T>(scale * (p[k] * (g[k] - dot)));
        }
        StorePack<T, kVec>(grad_scores + offset + col, pack);
      }
    }
  }
}

// The widest chunk for kElements values of T per thread: 16 bytes, or all kElements if fewer.
template <typename T, int kElements>
constexpr int VectorWidth() {
  constexpr int kSixteenBytes = 16 / static_cast<int>(sizeof(T));
  return kElements < kSixteenBytes ? kElements : kSixteenBytes;
}

template <int kThreads>
unsigned GridFor(int64_t rows) {
  constexpr int kGroups = BlockThreads<kThreads>() / kThreads;
  const int64_t blocks = (rows + kGroups - 1) / kGroups;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

template <typename T, int kThreads, int kElements>
cudaError_t LaunchForward(const T* scores, T* probs, int64_t rows, int columns, float scale,
                          cudaStream_t stream) {
  constexpr int kVec = VectorWidth<T, kElements>();
  const unsigned grid = GridFor<kThreads>(rows);
  constexpr int kBlock = BlockThreads<kThreads>();
  const int bytes = kVec * static_cast<int>(sizeof(T));
  if (kVec > 1 && columns % kVec == 0 && IsAligned(scores, bytes) && IsAligned(probs, bytes)) {
    CausalSoftmaxForwardKernel<T, kThreads, kElements, kVec>
        <<<grid, kBlock, 0, stream>>>(scores, probs, rows, columns, scale);
  } else {
    CausalSoftmaxForwardKernel<T, kThreads, kElements, 1>
        <<<grid, kBlock, 0, stream>>>(scores, probs, rows, columns, scale);
  }
  return cudaGetLastError();
}

template <typename T, int kThreads, int kElements>
cudaError_t LaunchBackward(const T* grad_probs, const T* probs, T* grad_scores, int64_t rows,
                           int columns, float scale, cudaStream_t stream) {
  constexpr int kVec = VectorWidth<T, kElements>();
  const unsigned grid = GridFor<kThreads>(rows);
  constexpr int kBlock = BlockThreads<kThreads>();
  const int bytes = kVec * static_cast<int>(sizeof(T));
  if (kVec > 1 && columns % kVec == 0 && IsAligned(grad_probs, bytes) && IsAligned(probs, bytes) &&
      IsAligned(grad_scores, bytes)) {
    CausalSoftmaxBackwardKernel<T, kThreads, kElements, kVec>
        <<<grid, kBlock, 0, stream>>>(grad_probs, probs, grad_scores, rows, columns, scale);
  } else {
    CausalSoftmaxBackwardKernel<T, kThreads, kElements, 1>
        <<<grid, kBlock, 0, stream>>>(grad_probs, probs, grad_scores, rows, columns, scale);
  }
  return cudaGetLastError();
}

// Picks the group size and elements per thread for the row length: the smallest power-of-two
// capacity (threads * elements) that holds the row. Warps take rows up to 1024 columns (32
// values per thread); longer rows take a block, so that no thread holds more than 32 values
// per input (the backward holds two inputs): 256 threads up to 2048 columns, 512 threads up to
// kCausalSoftmaxMaxColumns. (A warp holding 64 values per thread needed 128-168 registers on
// sm_90, a quarter of the occupancy of the block kernel at 2048 columns.)
// Calls launch.template operator()<kThreads, kElements>().
template <typename Launch>
cudaError_t DispatchRowLength(int columns, Launch&& launch) {
  if (columns <= 32) return launch.template operator()<32, 1>();
  if (columns <= 64) return launch.template operator()<32, 2>();
  if (columns <= 128) return launch.template operator()<32, 4>();
  if (columns <= 256) return launch.template operator()<32, 8>();
  if (columns <= 512) return launch.template operator()<32, 16>();
  if (columns <= 1024) return launch.template operator()<32, 32>();
  if (columns <= 2048) return launch.template operator()<256, 8>();
  if (columns <= 4096) return launch.template operator()<512, 8>();
  if (columns <= 8192) return launch.template operator()<512, 16>();
  static_assert(kCausalSoftmaxMaxColumns == 512 * 32, "the last case must cover the maximum");
  return launch.template operator()<512, 32>();
}

template <typename T>
struct ForwardLaunch {
  const T* scores;
  T* probs;
  int64_t rows;
  int columns;
  float scale;
  cudaStream_t stream;

  template <int kThreads, int kElements>
  cudaError_t operator()() const {
    return LaunchForward<T, kThreads, kElements>(scores, probs, rows, columns, scale, stream);
  }
};

template <typename T>
struct BackwardLaunch {
  const T* grad_probs;
  const T* probs;
  T* grad_scores;
  int64_t rows;
  int columns;
  float scale;
  cudaStream_t stream;

  template <int kThreads, int kElements>
  cudaError_t operator()() const {
    return LaunchBackward<T, kThreads, kElements>(grad_probs, probs, grad_scores, rows, columns,
                                                  scale, stream);
  }
};

}  // namespace

cudaError_t LaunchCausalSoftmaxForward(const void* scores, void* probs, int64_t rows,
                                       int64_t columns, float scale, ElementType type,
                                       cudaStream_t stream) {
  if (rows < 0 || columns < 1 || columns > kCausalSoftmaxMaxColumns) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  return DispatchElementType(type, [&](auto zero) {
    using T = decltype(zero);
    const ForwardLaunch<T> launch{static_cast<const T*>(scores),
                                  static_cast<T*>(probs),
                                  rows,
                                  static_cast<int>(columns),
                                  scale,
                                  stream};
    return DispatchRowLength(static_cast<int>(columns), launch);
  });
}

cudaError_t LaunchCausalSoftmaxBackward(const void* grad_probs, const void* probs,
                                        void* grad_scores, int64_t rows, int64_t columns,
                                        float scale, ElementType type, cudaStream_t stream) {
  if (rows < 0 || columns < 1 || columns > kCausalSoftmaxMaxColumns) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  return DispatchElementType(type, [&](auto zero) {
    using T = decltype(zero);
    const BackwardLaunch<T> launch{static_cast<const T*>(grad_probs),
                                   static_cast<const T*>(probs),
                                   static_cast<T*>(grad_scores),
                                   rows,
                                   static_cast<int>(columns),
                                   scale,
                                   stream};
    return DispatchRowLength(static_cast<int>(columns), launch);
  });
}

}  // namespace varuna::kernels::cuda
