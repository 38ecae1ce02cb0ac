// ChunkTable (host side): builds the table through which one multi-tensor kernel launch reaches
// all its tensors (see varuna/kernels/cuda/chunk_table.h for the layout and the kernels' view).
//
// The builder reads only tensor metadata (addresses, sizes, dtypes), never tensor data, so it
// runs on the CPU for CUDA tensors and in CPU-only builds alike (its tests run there). The ops
// copy host() to the device with one non-blocking copy on the current stream.
//
// Thread safety: a built table is immutable; distinct tables are independent.
#ifndef VARUNA_KERNELS_CHUNK_TABLE_H_
#define VARUNA_KERNELS_CHUNK_TABLE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "varuna/kernels/cuda/chunk_table.h"

namespace varuna::kernels {

class ChunkTable {
 public:
  // operands[t] lists tensor t's operands, at most cuda::kChunkMaxOperands of them; an
  // undefined tensor is an absent operand (the first must be defined). Every defined operand
  // must be contiguous, float32, float16 or bfloat16, and have as many elements as operand 0.
  // options[t] becomes ChunkTensor::option (an empty `options` means all 0). `chunk_size` must
  // be a positive multiple of cuda::kChunkPackElements. With `pinned` the host buffer is page
  // locked (CUDA builds only), so that copying it to the device does not block the host.
  // Throws c10::Error naming `op` on misuse (the ops check their arguments first, with names).
  ChunkTable(const std::vector<std::vector<at::Tensor>>& operands,
             const std::vector<int64_t>& options, int64_t chunk_size, const char* op, bool pinned);

  int64_t num_tensors() const { return num_tensors_; }
  int64_t num_chunks() const { return num_chunks_; }
  int64_t chunk_size() const { return chunk_size_; }

  // The whole table as an int64 CPU tensor: num_tensors() ChunkTensor entries, then
  // num_chunks() Chunk entries.
  const at::Tensor& host() const { return host_; }

  // Entries of host(), for tests and for the launch code.
  const cuda::ChunkTensor& tensor(int64_t t) const;
  const cuda::Chunk& chunk(int64_t c) const;

  // The kernels' view of `copy`, a device copy of host() (same size, int64, contiguous), which
  // must stay alive until the kernels that use the view have been enqueued on its stream.
  cuda::ChunkTableView ViewOf(const at::Tensor& copy) const;

 private:
  int64_t num_tensors_ = 0;
  int64_t num_chunks_ = 0;
  int64_t chunk_size_ = 0;
  at::Tensor host_;
};

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_CHUNK_TABLE_H_
