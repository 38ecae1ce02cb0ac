// --fp8-linears (trainer/fp8_linear_choice.h): the flag's words, the refusals, the names in the
// log, auto's rule on given timings (the GPU measurement feeds it), and the choice on the CPU.
#include "trainer/fp8_linear_choice.h"

#include <c10/util/Exception.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainer {
namespace {

using ::testing::HasSubstr;

std::string ParseError(const std::string& value) {
  absl::StatusOr<Fp8LinearsFlag> flag = ParseFp8Linears(value);
  EXPECT_FALSE(flag.ok()) << value;
  return flag.ok() ? "" : std::string(flag.status().message());
}

TEST(Fp8LinearChoiceTest, TheFlagsWords) {
  absl::StatusOr<Fp8LinearsFlag> all = ParseFp8Linears("all");
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->automatic);
  EXPECT_TRUE(all->linears.all());
  absl::StatusOr<Fp8LinearsFlag> automatic = ParseFp8Linears("auto");
  ASSERT_TRUE(automatic.ok());
  EXPECT_TRUE(automatic->automatic);
  absl::StatusOr<Fp8LinearsFlag> some = ParseFp8Linears("linear_fc2,linear_qkv");
  ASSERT_TRUE(some.ok());
  EXPECT_FALSE(some->automatic);
  EXPECT_TRUE(some->linears.qkv && !some->linears.proj && !some->linears.fc1 && some->linears.fc2);
  EXPECT_EQ(Fp8LinearsNames(some->linears), "linear_qkv, linear_fc2");  // in layer order
  EXPECT_EQ(Fp8LinearsNames(gpt2::Fp8LinearSet{}), "all four");
  EXPECT_EQ(Fp8LinearsNames(gpt2::Fp8LinearSet{false, false, false, false}), "none");

  EXPECT_THAT(ParseError("linear_fc3"),
              HasSubstr("--fp8-linears=linear_fc3: \"linear_fc3\" is not a linear; give all, "
                        "auto, or a comma list of linear_qkv, linear_proj, linear_fc1 and "
                        "linear_fc2"));
  EXPECT_THAT(ParseError("linear_qkv,linear_qkv"), HasSubstr("\"linear_qkv\" is named twice"));
  EXPECT_THAT(ParseError(""), HasSubstr("\"\" is not a linear"));
  EXPECT_THAT(ParseError("linear_qkv,"), HasSubstr("\"\" is not a linear"));
  EXPECT_THAT(ParseError("all,linear_qkv"), HasSubstr("\"all\" is not a linear"));
}

TEST(Fp8LinearChoiceTest, RefusalsNameTheFix) {
  EXPECT_THAT(CheckFp8Linears("linear_fc1", /*given=*/true, "", false).status().message(),
              HasSubstr("--fp8-linears chooses which linears compute in FP8, which is off: add "
                        "--fp8-format=hybrid (or e4m3), or drop --fp8-linears"));
  EXPECT_TRUE(CheckFp8Linears("all", /*given=*/false, "", false).ok());  // the default, FP8 off
  EXPECT_THAT(CheckFp8Linears("auto", true, "hybrid", /*deterministic=*/true).status().message(),
              HasSubstr("--fp8-linears=auto chooses by a timing at start-up"));
  EXPECT_TRUE(CheckFp8Linears("linear_qkv", true, "hybrid", /*deterministic=*/true).ok());
}

// auto's rule: FP8 where it takes at most 95% of the dtype's time, on the (summed) timings.
TEST(Fp8LinearChoiceTest, AutoKeepsFp8WhereItIsAtLeastFivePercentFaster) {
  // One H200's kernel_benchmark at gpt2-1.5b's widths (docs/performance.md): the attention
  // projection was slower in FP8.
  const Fp8LinearsChoice h200 = DecideFp8Linears(
      {0.467, 0.709, 0.538, 0.283, 0.630, 0.751, 0.592, 0.715}, at::kBFloat16, 8192, /*ranks=*/1);
  EXPECT_TRUE(h200.linears.qkv && !h200.linears.proj && h200.linears.fc1 && h200.linears.fc2);
  EXPECT_THAT(h200.reason,
              HasSubstr("linear_qkv, linear_fc1, linear_fc2 (auto: forward + backward of 8192 "
                        "tokens; FP8 where at least 5% faster: linear_qkv fp8 0.467 ms vs "
                        "BFloat16 0.709 ms, linear_proj fp8 0.538 ms vs BFloat16 0.283 ms"));
  const Fp8LinearsChoice margin =
      DecideFp8Linears({0.95, 1.0, 0.96, 1.0, 1.0, 1.0, 2.0, 1.0}, at::kHalf, 16, /*ranks=*/2);
  EXPECT_TRUE(margin.linears.qkv && !margin.linears.proj && !margin.linears.fc1 &&
              !margin.linears.fc2);
  EXPECT_THAT(margin.reason, HasSubstr("of 16 tokens, summed over 2 ranks;"));
  EXPECT_THROW(DecideFp8Linears({1.0, 2.0}, at::kHalf, 16, 1), c10::Error);
}

TEST(Fp8LinearChoiceTest, OnTheCpuAutoIsAllFourAndAListIsItself) {
  gpt2::Gpt2Config model;
  const varuna::kernels::Fp8Recipe recipe;
  Fp8LinearsFlag automatic;
  automatic.automatic = true;
  absl::StatusOr<Fp8LinearsChoice> cpu = ChooseFp8Linears(
      automatic, c10::Device(c10::kCPU), at::kFloat, model, 4, recipe, /*world=*/nullptr);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE(cpu->linears.all());
  EXPECT_THAT(cpu->reason, HasSubstr("all four (auto: on the CPU LibTorch emulates the FP8 GEMM"));
  Fp8LinearsFlag listed;
  listed.linears = gpt2::Fp8LinearSet{false, true, false, false};
  absl::StatusOr<Fp8LinearsChoice> chosen = ChooseFp8Linears(
      listed, c10::Device(c10::kCPU), at::kFloat, model, 4, recipe, /*world=*/nullptr);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_TRUE(!chosen->linears.qkv && chosen->linears.proj);
  EXPECT_EQ(chosen->reason, "linear_proj (--fp8-linears)");
}

}  // namespace
}  // namespace trainer
