// Device helpers for kernels that walk a ChunkTable (one CUDA block per chunk; see
// chunk_table.h): the block's chunk, packed accesses of kChunkPackElements elements that
// compute in fp32 (vector accesses through LoadAsFloat / StoreFromFloat of common.cuh where the
// table says the tensor is aligned), and the grid. Included by .cu files only.
#ifndef VARUNA_KERNELS_CUDA_CHUNK_KERNEL_CUH_
#define VARUNA_KERNELS_CUDA_CHUNK_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "varuna/kernels/cuda/chunk_table.h"
#include "varuna/kernels/cuda/common.cuh"

namespace varuna::kernels::cuda {

// The chunk that this block processes: elements [start, start + count) of tensor `*tensor`.
struct BlockChunk {
  const ChunkTensor* tensor;
  int64_t start;
  int count;  // 1..chunk_size
};

__device__ __forceinline__ BlockChunk ThisBlockChunk(const ChunkTableView& table) {
  const Chunk chunk = table.chunks[blockIdx.x];
  const ChunkTensor* tensor = table.tensors + chunk.tensor;
  const int64_t left = tensor->numel - chunk.start;
  return {tensor, chunk.start, static_cast<int>(left < table.chunk_size ? left : table.chunk_size)};
}

// Operand k of the chunk's tensor, as a T* to the chunk's first element.
template <typename T>
__device__ __forceinline__ T* ChunkOperand(const BlockChunk& chunk, int k) {
  return reinterpret_cast<T*>(chunk.tensor->address[k]) + chunk.start;
}

// Pack q of a chunk is its elements [q * kChunkPackElements, (q + 1) * kChunkPackElements).
// The kernels give each thread the same packs whether or not the tensor is `vectorizable`; only
// the access differs (one vector access when aligned, kChunkPackElements scalar ones when not),
// so a reduction over a chunk adds in the same order either way.
template <typename T>
__device__ __forceinline__ void LoadChunkPack(const T* p, bool aligned,
                                              float (&out)[kChunkPackElements]) {
  if (aligned) {
    LoadAsFloat(p, out);
  } else {
#pragma unroll
    for (int k = 0; k < kChunkPackElements; ++k) out[k] = ToFloat(p[k]);
  }
}

template <typename T>
__device__ __forceinline__ void StoreChunkPack(T* p, bool aligned,
                                               const float (&in)[kChunkPackElements]) {
  if (aligned) {
    StoreFromFloat(p, in);
  } else {
#pragma unroll
    for (int k = 0; k < kChunkPackElements; ++k) p[k] = FromFloat<T>(in[k]);
  }
}

// The launch size of a chunk kernel: one block per chunk. Returns false when the table has
// more chunks than a grid may have blocks (2^31 - 1; ~140 T elements at 64K per chunk).
inline bool ChunkGrid(const ChunkTableView& table, dim3* grid) {
  if (table.num_chunks <= 0 || table.num_chunks > 0x7fffffff) return false;
  *grid = dim3(static_cast<unsigned>(table.num_chunks));
  return true;
}

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_CHUNK_KERNEL_CUH_
