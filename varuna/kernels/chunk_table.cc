#include "varuna/kernels/chunk_table.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include "varuna/kernels/cuda/element_type.h"

namespace varuna::kernels {
namespace {

int64_t ElementTypeCode(at::ScalarType dtype, const char* op) {
  switch (dtype) {
    case at::kFloat:
      return static_cast<int64_t>(cuda::ElementType::kFloat32);
    case at::kHalf:
      return static_cast<int64_t>(cuda::ElementType::kFloat16);
    case at::kBFloat16:
      return static_cast<int64_t>(cuda::ElementType::kBFloat16);
    default:
      TORCH_CHECK(false, op, ": the multi-tensor kernels take float32, float16 or bfloat16, not ",
                  dtype);
  }
}

}  // namespace

ChunkTable::ChunkTable(const std::vector<std::vector<at::Tensor>>& operands,
                       const std::vector<int64_t>& options, int64_t chunk_size, const char* op,
                       bool pinned)
    : num_tensors_(static_cast<int64_t>(operands.size())), chunk_size_(chunk_size) {
  TORCH_CHECK(chunk_size > 0 && chunk_size % cuda::kChunkPackElements == 0, op, ": chunk size ",
              chunk_size, " is not a positive multiple of ", cuda::kChunkPackElements);
  TORCH_CHECK(options.empty() || options.size() == operands.size(), op, ": ", options.size(),
              " options for ", operands.size(), " tensors");
  for (const std::vector<at::Tensor>& tensor : operands) {
    TORCH_CHECK(!tensor.empty() && tensor[0].defined(), op, ": a tensor without operand 0");
    num_chunks_ += (tensor[0].numel() + chunk_size - 1) / chunk_size;
  }
  host_ = at::empty({num_tensors_ * cuda::kChunkTensorWords + num_chunks_ * cuda::kChunkWords},
                    at::TensorOptions().dtype(at::kLong).pinned_memory(pinned));
  auto* tensors = reinterpret_cast<cuda::ChunkTensor*>(host_.data_ptr<int64_t>());
  auto* chunks = reinterpret_cast<cuda::Chunk*>(tensors + num_tensors_);
  int64_t next_chunk = 0;
  for (int64_t t = 0; t < num_tensors_; ++t) {
    const std::vector<at::Tensor>& tensor = operands[t];
    TORCH_CHECK(tensor.size() <= static_cast<size_t>(cuda::kChunkMaxOperands), op, ": tensor ", t,
                " has ", tensor.size(), " operands, at most ", cuda::kChunkMaxOperands,
                " fit the table");
    cuda::ChunkTensor& entry = tensors[t];
    entry.numel = tensor[0].numel();
    entry.vectorizable = 1;
    entry.option = options.empty() ? 0 : options[t];
    for (int k = 0; k < cuda::kChunkMaxOperands; ++k) {
      const bool present = k < static_cast<int>(tensor.size()) && tensor[k].defined();
      entry.address[k] = 0;
      entry.element_type[k] = cuda::kChunkNoOperand;
      if (!present) continue;
      const at::Tensor& operand = tensor[k];
      TORCH_CHECK(operand.numel() == entry.numel, op, ": operand ", k, " of tensor ", t, " has ",
                  operand.numel(), " elements, operand 0 has ", entry.numel);
      TORCH_CHECK(operand.is_contiguous(), op, ": operand ", k, " of tensor ", t,
                  " is not contiguous");
      entry.element_type[k] = ElementTypeCode(operand.scalar_type(), op);
      const auto address = reinterpret_cast<uintptr_t>(operand.data_ptr());
      entry.address[k] = static_cast<int64_t>(address);
      const uintptr_t pack_bytes = cuda::kChunkPackElements * operand.element_size();
      if (address % pack_bytes != 0) entry.vectorizable = 0;
    }
    for (int64_t start = 0; start < entry.numel; start += chunk_size) {
      chunks[next_chunk++] = cuda::Chunk{t, start};
    }
  }
}

const cuda::ChunkTensor& ChunkTable::tensor(int64_t t) const {
  TORCH_CHECK(t >= 0 && t < num_tensors_, "ChunkTable: no tensor ", t);
  return reinterpret_cast<const cuda::ChunkTensor*>(host_.data_ptr<int64_t>())[t];
}

const cuda::Chunk& ChunkTable::chunk(int64_t c) const {
  TORCH_CHECK(c >= 0 && c < num_chunks_, "ChunkTable: no chunk ", c);
  const auto* tensors = reinterpret_cast<const cuda::ChunkTensor*>(host_.data_ptr<int64_t>());
  return reinterpret_cast<const cuda::Chunk*>(tensors + num_tensors_)[c];
}

cuda::ChunkTableView ChunkTable::ViewOf(const at::Tensor& copy) const {
  TORCH_CHECK(
      copy.scalar_type() == at::kLong && copy.is_contiguous() && copy.numel() == host_.numel(),
      "ChunkTable: the device copy is not a contiguous int64 copy of the table");
  const auto* tensors = reinterpret_cast<const cuda::ChunkTensor*>(copy.data_ptr<int64_t>());
  return cuda::ChunkTableView{tensors, reinterpret_cast<const cuda::Chunk*>(tensors + num_tensors_),
                              num_chunks_, chunk_size_};
}

}  // namespace varuna::kernels
