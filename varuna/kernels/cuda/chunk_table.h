// ChunkTable: how one multi-tensor kernel launch (Apex's multi_tensor_apply) sees its tensors.
//
// A multi-tensor op works on a list of tensors; tensor t has up to kChunkMaxOperands operands
// (e.g. Adam: master, gradient, exp_avg, exp_avg_sq, model copy), all with the same number of
// elements. The list is cut into chunks of `chunk_size` elements (a tensor's last chunk may be
// shorter; an empty tensor has none) and CUDA block b processes chunks[b]. The table lives in
// one int64 device buffer: all ChunkTensor entries, then all Chunk entries (see
// varuna/kernels/chunk_table.h, which builds it on the host).
//
// Plain C++ with int64 fields only, so g++ (the builder) and nvcc (the kernels) agree on the
// layout. Included by both sides.
#ifndef VARUNA_KERNELS_CUDA_CHUNK_TABLE_H_
#define VARUNA_KERNELS_CUDA_CHUNK_TABLE_H_

#include <cstdint>

namespace varuna::kernels::cuda {

constexpr int kChunkMaxOperands = 5;

// Elements per vectorised access: 16 bytes of float32, 8 bytes of float16/bfloat16.
constexpr int kChunkPackElements = 4;

// One tensor of the list (11 int64 words).
struct ChunkTensor {
  // Device address of each operand's first element; 0 where the operand is absent.
  int64_t address[kChunkMaxOperands];
  // static_cast<int64_t>(ElementType) of each operand; kChunkNoOperand where absent.
  int64_t element_type[kChunkMaxOperands];
  // Elements of every operand.
  int64_t numel;
  // 1 when every present operand's address is a multiple of kChunkPackElements elements, so
  // the kernel may load and store packs of kChunkPackElements; else 0 (scalar accesses).
  int64_t vectorizable;
  // Per-tensor option that the op defines (Adam: 1 when weight decay applies); 0 by default.
  int64_t option;
};

constexpr int64_t kChunkNoOperand = -1;
constexpr int kChunkTensorWords = sizeof(ChunkTensor) / sizeof(int64_t);

// The part of a tensor that one CUDA block processes.
struct Chunk {
  int64_t tensor;  // Index into the ChunkTensor entries.
  int64_t start;   // First element; a multiple of chunk_size.
};

constexpr int kChunkWords = sizeof(Chunk) / sizeof(int64_t);

// A kernel argument (by value): the table on the device.
struct ChunkTableView {
  const ChunkTensor* tensors;
  const Chunk* chunks;
  int64_t num_chunks;  // The grid size.
  int64_t chunk_size;  // A multiple of kChunkPackElements.
};

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_CHUNK_TABLE_H_
