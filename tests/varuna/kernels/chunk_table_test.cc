// The host-side chunk table of the multi-tensor kernels: chunk layout, per-tensor entries,
// alignment flags and misuse. Runs on the CPU (the builder reads only tensor metadata).
#include "varuna/kernels/chunk_table.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "varuna/kernels/cuda/element_type.h"

namespace varuna::kernels {
namespace {

using cuda::ElementType;

std::string ErrorOf(const std::vector<std::vector<at::Tensor>>& operands, int64_t chunk_size,
                    const std::vector<int64_t>& options = {}) {
  try {
    ChunkTable table(operands, options, chunk_size, "TestOp", /*pinned=*/false);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "no error";
}

at::Tensor Floats(int64_t n) { return at::arange(n, at::kFloat); }

TEST(ChunkTableTest, CutsEveryTensorIntoChunksAndSkipsEmptyOnes) {
  const std::vector<at::Tensor> sizes = {Floats(0), Floats(1), Floats(17), Floats(16), Floats(0)};
  std::vector<std::vector<at::Tensor>> operands;
  for (const at::Tensor& t : sizes) operands.push_back({t});
  const ChunkTable table(operands, {}, 8, "TestOp", false);
  EXPECT_EQ(table.num_tensors(), 5);
  EXPECT_EQ(table.chunk_size(), 8);
  // 1 -> 1 chunk, 17 -> 3 chunks (8, 8, 1), 16 -> 2 chunks.
  ASSERT_EQ(table.num_chunks(), 6);
  const std::vector<std::pair<int64_t, int64_t>> expected = {{1, 0},  {2, 0}, {2, 8},
                                                             {2, 16}, {3, 0}, {3, 8}};
  for (int64_t c = 0; c < table.num_chunks(); ++c) {
    EXPECT_EQ(table.chunk(c).tensor, expected[c].first) << "chunk " << c;
    EXPECT_EQ(table.chunk(c).start, expected[c].second) << "chunk " << c;
  }
  for (int64_t t = 0; t < table.num_tensors(); ++t) {
    EXPECT_EQ(table.tensor(t).numel, sizes[t].numel());
    EXPECT_EQ(table.tensor(t).option, 0);
  }
  EXPECT_EQ(table.host().numel(), 5 * cuda::kChunkTensorWords + 6 * cuda::kChunkWords);
  EXPECT_EQ(table.host().scalar_type(), at::kLong);
}

TEST(ChunkTableTest, RecordsAddressesTypesOptionsAndAbsentOperands) {
  const at::Tensor a = Floats(10);
  const at::Tensor b = at::zeros({2, 5}, at::kHalf);
  const at::Tensor c = at::zeros({10}, at::kBFloat16);
  const ChunkTable table({{a, b, at::Tensor(), c}, {c}}, {7, 0}, 4, "TestOp", false);
  const cuda::ChunkTensor& entry = table.tensor(0);
  EXPECT_EQ(entry.address[0], reinterpret_cast<int64_t>(a.data_ptr()));
  EXPECT_EQ(entry.address[1], reinterpret_cast<int64_t>(b.data_ptr()));
  EXPECT_EQ(entry.address[2], 0);
  EXPECT_EQ(entry.address[3], reinterpret_cast<int64_t>(c.data_ptr()));
  EXPECT_EQ(entry.address[4], 0);
  EXPECT_EQ(entry.element_type[0], static_cast<int64_t>(ElementType::kFloat32));
  EXPECT_EQ(entry.element_type[1], static_cast<int64_t>(ElementType::kFloat16));
  EXPECT_EQ(entry.element_type[2], cuda::kChunkNoOperand);
  EXPECT_EQ(entry.element_type[3], static_cast<int64_t>(ElementType::kBFloat16));
  EXPECT_EQ(entry.element_type[4], cuda::kChunkNoOperand);
  EXPECT_EQ(entry.option, 7);
  EXPECT_EQ(table.tensor(1).option, 0);
  EXPECT_EQ(table.tensor(1).element_type[0], static_cast<int64_t>(ElementType::kBFloat16));
  EXPECT_EQ(table.num_chunks(), 3 + 3);
}

TEST(ChunkTableTest, VectorizableOnlyWhenEveryOperandIsPackAligned) {
  const at::Tensor floats = Floats(64);  // 64-byte aligned at least (allocator)
  const at::Tensor halves = at::zeros({64}, at::kHalf);
  auto vectorizable = [](const at::Tensor& x, const at::Tensor& y) {
    return ChunkTable({{x, y}}, {}, 8, "TestOp", false).tensor(0).vectorizable;
  };
  EXPECT_EQ(vectorizable(floats.narrow(0, 0, 8), halves.narrow(0, 0, 8)), 1);
  // float: 16-byte packs; offset 4 floats = 16 bytes is aligned, offset 1 is not.
  EXPECT_EQ(vectorizable(floats.narrow(0, 4, 8), halves.narrow(0, 0, 8)), 1);
  EXPECT_EQ(vectorizable(floats.narrow(0, 1, 8), halves.narrow(0, 0, 8)), 0);
  // half: 8-byte packs; offset 4 halves = 8 bytes is aligned, offset 2 is not.
  EXPECT_EQ(vectorizable(floats.narrow(0, 0, 8), halves.narrow(0, 4, 8)), 1);
  EXPECT_EQ(vectorizable(floats.narrow(0, 0, 8), halves.narrow(0, 2, 8)), 0);
}

TEST(ChunkTableTest, ViewOfPointsIntoTheCopy) {
  const ChunkTable table({{Floats(9)}, {Floats(3)}}, {}, 4, "TestOp", false);
  const at::Tensor copy = table.host().clone();
  const cuda::ChunkTableView view = table.ViewOf(copy);
  EXPECT_EQ(reinterpret_cast<const int64_t*>(view.tensors), copy.data_ptr<int64_t>());
  EXPECT_EQ(reinterpret_cast<const int64_t*>(view.chunks),
            copy.data_ptr<int64_t>() + 2 * cuda::kChunkTensorWords);
  EXPECT_EQ(view.num_chunks, 4);
  EXPECT_EQ(view.chunk_size, 4);
  EXPECT_EQ(view.chunks[3].tensor, 1);
  EXPECT_EQ(view.tensors[0].numel, 9);
}

TEST(ChunkTableTest, RejectsMisuseNamingTheProblem) {
  const at::Tensor x = Floats(6);
  EXPECT_NE(ErrorOf({{x, Floats(5)}}, 8)
                .find("TestOp: operand 1 of tensor 0 has 5 elements, "
                      "operand 0 has 6"),
            std::string::npos);
  EXPECT_NE(ErrorOf({{x, Floats(6).reshape({2, 3}).t()}}, 8).find("not contiguous"),
            std::string::npos);
  EXPECT_NE(ErrorOf({{x.to(at::kDouble)}}, 8).find("float32, float16 or bfloat16, not Double"),
            std::string::npos);
  EXPECT_NE(ErrorOf({{x}}, 6).find("chunk size 6 is not a positive multiple of 4"),
            std::string::npos);
  EXPECT_NE(ErrorOf({{x, x, x, x, x, x}}, 8).find("has 6 operands, at most 5"), std::string::npos);
  EXPECT_NE(ErrorOf({{at::Tensor(), x}}, 8).find("a tensor without operand 0"), std::string::npos);
  EXPECT_NE(ErrorOf({{x}}, 8, {1, 2}).find("2 options for 1 tensors"), std::string::npos);
}

}  // namespace
}  // namespace varuna::kernels
