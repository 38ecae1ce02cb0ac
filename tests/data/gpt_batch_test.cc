#include "data/gpt_batch.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

template <typename T>
std::vector<T> Flat(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}

class GptBatchTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }

  // Two samples of s + 1 = 7 tokens, EOD = 0. Row 0 has EODs at input positions 1 and 4;
  // row 1 has none.
  at::Tensor Samples() {
    const std::vector<int32_t> values = {5, 0, 7, 8, 0, 9, 4,  //
                                         1, 2, 3, 4, 5, 6, 7};
    return at::tensor(values, at::kInt).view({2, 7});
  }
};

TEST_F(GptBatchTest, TokensAndLabelsAreShiftedByOne) {
  absl::StatusOr<GptBatch> batch = MakeGptBatch(Samples(), GptBatchOptions{});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->tokens.scalar_type(), at::kLong);
  EXPECT_EQ(batch->tokens.sizes(), at::IntArrayRef({2, 6}));
  EXPECT_THAT(Flat<int64_t>(batch->tokens), ElementsAreArray({5, 0, 7, 8, 0, 9,  //
                                                              1, 2, 3, 4, 5, 6}));
  EXPECT_THAT(Flat<int64_t>(batch->labels), ElementsAreArray({0, 7, 8, 0, 9, 4,  //
                                                              2, 3, 4, 5, 6, 7}));
  // No flags: EODs are ordinary tokens.
  EXPECT_EQ(batch->loss_mask.scalar_type(), at::kFloat);
  EXPECT_THAT(Flat<float>(batch->loss_mask), ElementsAreArray(std::vector<float>(12, 1.0f)));
  EXPECT_THAT(Flat<int64_t>(batch->position_ids), ElementsAreArray({0, 1, 2, 3, 4, 5,  //
                                                                    0, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(batch->attention_mask.defined());
}

TEST_F(GptBatchTest, EodMasksLossResetsPositionsAndBlocksAttention) {
  GptBatchOptions options;
  options.eod_token = 0;
  options.eod_mask_loss = true;
  options.reset_position_ids = true;
  options.reset_attention_mask = true;
  absl::StatusOr<GptBatch> batch = MakeGptBatch(Samples().to(at::kLong), options);
  ASSERT_TRUE(batch.ok()) << batch.status();
  // Loss is masked where the INPUT token is EOD (positions 1 and 4 of row 0).
  EXPECT_THAT(Flat<float>(batch->loss_mask), ElementsAreArray({1.f, 0.f, 1.f, 1.f, 0.f, 1.f,  //
                                                               1.f, 1.f, 1.f, 1.f, 1.f, 1.f}));
  // Positions restart after each EOD; the EOD keeps its document's count.
  EXPECT_THAT(Flat<int64_t>(batch->position_ids), ElementsAreArray({0, 1, 0, 1, 2, 0,  //
                                                                    0, 1, 2, 3, 4, 5}));
  ASSERT_EQ(batch->attention_mask.scalar_type(), at::kBool);
  ASSERT_EQ(batch->attention_mask.sizes(), at::IntArrayRef({2, 1, 6, 6}));
  // Row 0, by hand (1 = masked): documents are positions {0, 1}, {2, 3, 4}, {5}.
  const std::vector<bool> row0 = {
      0, 1, 1, 1, 1, 1,  // query 0 sees 0
      0, 0, 1, 1, 1, 1,  // query 1 (EOD) sees 0..1
      1, 1, 0, 1, 1, 1,  // query 2 sees 2
      1, 1, 0, 0, 1, 1,  // query 3 sees 2..3
      1, 1, 0, 0, 0, 1,  // query 4 (EOD) sees 2..4
      1, 1, 1, 1, 1, 0,  // query 5 sees 5
  };
  // Row 1: plain causal.
  const std::vector<bool> row1 = {
      0, 1, 1, 1, 1, 1,  //
      0, 0, 1, 1, 1, 1,  //
      0, 0, 0, 1, 1, 1,  //
      0, 0, 0, 0, 1, 1,  //
      0, 0, 0, 0, 0, 1,  //
      0, 0, 0, 0, 0, 0,  //
  };
  const std::vector<bool> mask = Flat<bool>(batch->attention_mask);
  EXPECT_EQ(std::vector<bool>(mask.begin(), mask.begin() + 36), row0);
  EXPECT_EQ(std::vector<bool>(mask.begin() + 36, mask.end()), row1);
}

TEST_F(GptBatchTest, FlagsAreIndependent) {
  GptBatchOptions options;
  options.eod_token = 0;
  options.reset_position_ids = true;
  absl::StatusOr<GptBatch> batch = MakeGptBatch(Samples(), options);
  ASSERT_TRUE(batch.ok());
  EXPECT_THAT(Flat<float>(batch->loss_mask), ElementsAreArray(std::vector<float>(12, 1.0f)));
  EXPECT_THAT(Flat<int64_t>(batch->position_ids).front(), 0);
  EXPECT_THAT(Flat<int64_t>(batch->position_ids)[2], 0);
  EXPECT_FALSE(batch->attention_mask.defined());
  options.reset_position_ids = false;
  options.eod_mask_loss = true;
  batch = MakeGptBatch(Samples(), options);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(Flat<float>(batch->loss_mask)[1], 0.0f);
  EXPECT_THAT(Flat<int64_t>(batch->position_ids), ElementsAre(0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5));
}

TEST_F(GptBatchTest, BadInputsAreRejected) {
  EXPECT_THAT(MakeGptBatch(at::Tensor(), {}).status().message(), HasSubstr("undefined"));
  EXPECT_THAT(MakeGptBatch(at::zeros({7}, at::kLong), {}).status().message(), HasSubstr("got [7]"));
  EXPECT_THAT(MakeGptBatch(at::zeros({2, 1}, at::kLong), {}).status().message(),
              HasSubstr("seq_length >= 1, got [2, 1]"));
  EXPECT_THAT(MakeGptBatch(at::zeros({2, 5}, at::kFloat), {}).status().message(),
              HasSubstr("int32 or int64, got Float"));
  GptBatchOptions options;
  options.eod_mask_loss = true;
  EXPECT_THAT(MakeGptBatch(Samples(), options).status().message(), HasSubstr("end-of-document id"));
}

}  // namespace
}  // namespace data
