// --deterministic on the CPU: both spellings of the flag; the CUBLAS_WORKSPACE_CONFIG values it
// keeps, sets and refuses; the LibTorch switches it turns on; LibTorch's own error for an op
// without a deterministic implementation becomes a message naming the op; the attention
// backend under the mode; and the trainer with the mode logs what it set and repeats itself
// bitwise. (The GPU half, two CUDA runs and a resumed run bitwise equal, is
// deterministic_gpu_test.)
#include "trainer/deterministic_mode.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/gpt2/config.h"
#include "tests/trainer/trainer_job.h"
#include "trainer/arguments.h"
#include "trainer/attention_backend.h"

namespace trainer {
namespace {

using ::testing::HasSubstr;
using testing::Losses;
using testing::Plus;
using testing::Result;

TEST(DeterministicFlagTest, BothSpellingsTurnTheModeOn) {
  for (const char* flag : {"--deterministic", "--deterministic-mode", "--deterministic_mode",
                           "--deterministic=true"}) {
    absl::StatusOr<TrainerArguments> a = ParseArguments({flag});
    ASSERT_TRUE(a.ok()) << flag << ": " << a.status();
    EXPECT_TRUE(a->deterministic) << flag;
  }
  absl::StatusOr<TrainerArguments> off = ParseArguments({});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->deterministic);
  absl::StatusOr<TrainerArguments> bad = ParseArguments({"--deterministic=maybe"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--deterministic"));
}

TEST(DeterministicCublasWorkspaceTest, SetsKeepsOrRefuses) {
  EXPECT_EQ(*DeterministicCublasWorkspace(nullptr), ":4096:8");
  EXPECT_EQ(*DeterministicCublasWorkspace(""), ":4096:8");
  EXPECT_EQ(*DeterministicCublasWorkspace(":4096:8"), ":4096:8");
  EXPECT_EQ(*DeterministicCublasWorkspace(":16:8"), ":16:8");
  for (const char* bad : {":4096:2", ":16:8:4096:2", "4096:8", "yes"}) {
    absl::StatusOr<std::string> refused = DeterministicCublasWorkspace(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(refused.status().message());
    EXPECT_THAT(message, HasSubstr(std::string("CUBLAS_WORKSPACE_CONFIG=\"") + bad + "\""));
    EXPECT_THAT(message, HasSubstr("unset it"));
    EXPECT_THAT(message, HasSubstr(":4096:8 or :16:8"));
  }
}

// One test owns the process-wide switches (gtest runs the tests of a binary in one process).
TEST(EnterDeterministicModeTest, RefusesABadWorkspaceThenSetsEverySwitch) {
  at::Context& context = at::globalContext();
  setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0", 1);
  absl::StatusOr<std::vector<std::string>> refused = EnterDeterministicMode();
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("CUBLAS_WORKSPACE_CONFIG=\":0:0\""));
  EXPECT_FALSE(context.deterministicAlgorithms()) << "a refused mode must change nothing";
  EXPECT_STREQ(std::getenv("CUBLAS_WORKSPACE_CONFIG"), ":0:0");

  unsetenv("CUBLAS_WORKSPACE_CONFIG");
  absl::StatusOr<std::vector<std::string>> lines = EnterDeterministicMode();
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_STREQ(std::getenv("CUBLAS_WORKSPACE_CONFIG"), ":4096:8");
  EXPECT_TRUE(context.deterministicAlgorithms());
  EXPECT_FALSE(context.deterministicAlgorithmsWarnOnly());
  EXPECT_TRUE(context.deterministicFillUninitializedMemory());  // LibTorch's default, kept
  EXPECT_TRUE(context.deterministicCuDNN());
  EXPECT_FALSE(context.benchmarkCuDNN());
  EXPECT_FALSE(context.userEnabledCuDNNSDP());
  EXPECT_TRUE(context.userEnabledFlashSDP());
  EXPECT_TRUE(context.userEnabledMemEfficientSDP());
  EXPECT_TRUE(context.userEnabledMathSDP());
  ASSERT_EQ(lines->size(), 5u);
  for (const std::string& line : *lines) EXPECT_THAT(line, HasSubstr("> deterministic: "));
  EXPECT_THAT((*lines)[1], HasSubstr("CUBLAS_WORKSPACE_CONFIG=:4096:8 (set by --deterministic)"));

  // LibTorch's own alert, as an op without a deterministic implementation raises it, names the
  // op for our message.
  try {
    at::Context::alertNotDeterministic("my_scatter_kernel");
    FAIL() << "alertNotDeterministic did not throw under the deterministic switch";
  } catch (const c10::Error& e) {
    EXPECT_EQ(NondeterministicOperation(e.what()), "my_scatter_kernel") << e.what();
    EXPECT_EQ(NondeterministicOperation(e.what_without_backtrace()), "my_scatter_kernel");
  }
  context.setDeterministicAlgorithms(false, false);
  unsetenv("CUBLAS_WORKSPACE_CONFIG");
}

TEST(NondeterministicOperationTest, NamesTheOpOrNothing) {
  EXPECT_EQ(NondeterministicOperation("index_add_cuda_ does not have a deterministic "
                                      "implementation, but you set ..."),
            "index_add_cuda_");
  EXPECT_EQ(NondeterministicOperation("CUDA out of memory. Tried to allocate 2 GiB"), std::nullopt);
  EXPECT_EQ(NondeterministicOperation(""), std::nullopt);
  EXPECT_EQ(NondeterministicOperation(" does not have a deterministic implementation"),
            std::nullopt);
  const std::string message = NondeterministicOperationError("index_add_cuda_");
  EXPECT_THAT(message, HasSubstr("--deterministic: the op index_add_cuda_ has no deterministic"));
  EXPECT_THAT(message, HasSubstr("--attention-backend=fused-softmax"));
  EXPECT_THAT(message, HasSubstr("run without --deterministic"));
}

TEST(DeterministicAttentionTest, TheCpuChoicesSayTheModeIsOn) {
  gpt2::Gpt2Config model = *gpt2::PresetConfig("gpt2-tiny");
  absl::StatusOr<AttentionChoice> automatic = ChooseAttentionBackend(
      "auto", c10::Device(c10::kCPU), at::kFloat, model, /*micro_batch=*/2, true);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(automatic->backend, varuna::kernels::AttentionBackend::kFusedSoftmax);
  EXPECT_THAT(automatic->reason, HasSubstr("deterministic"));
  absl::StatusOr<AttentionChoice> sdpa = ChooseAttentionBackend(
      "sdpa", c10::Device(c10::kCPU), at::kFloat, model, /*micro_batch=*/2, true);
  ASSERT_TRUE(sdpa.ok()) << sdpa.status();
  EXPECT_EQ(sdpa->backend, varuna::kernels::AttentionBackend::kSdpa);
  EXPECT_THAT(sdpa->reason, HasSubstr("sdpa (--attention-backend; deterministic"));
  absl::StatusOr<AttentionChoice> bad = ChooseAttentionBackend(
      "cudnn", c10::Device(c10::kCPU), at::kFloat, model, /*micro_batch=*/2, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--attention-backend=cudnn"));
}

class DeterministicRunTest : public testing::TrainerTest {};

// The trainer under the mode on the CPU (dropout on, sdpa): it logs what the mode set, and two
// runs give the same loss strings; with a non-deterministic CUBLAS_WORKSPACE_CONFIG it stops
// before doing anything, naming the variable (exit 2, as for a bad flag).
TEST_F(DeterministicRunTest, LogsTheModeAndRepeatsBitwise) {
  const auto flags = Plus(TinyModel(), {"--train-iters=4", "--attention-backend=sdpa",
                                        "--hidden-dropout=0.1", "--attention-dropout=0.1"});
  Result first = Run(Plus(flags, {"--deterministic"}), "first");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  Result second = Run(Plus(flags, {"--deterministic-mode"}), "second");
  ASSERT_EQ(second.exit.code, 0) << Describe(second);
  EXPECT_THAT(
      first.exit.output,
      HasSubstr("> deterministic: CUBLAS_WORKSPACE_CONFIG=:4096:8 (set by --deterministic)"));
  EXPECT_THAT(first.exit.output, HasSubstr("> deterministic: LibTorch's deterministic algorithms"));
  EXPECT_THAT(first.exit.output,
              HasSubstr("> attention: sdpa (--attention-backend; deterministic"));
  ASSERT_EQ(Losses(first).size(), 4u);
  EXPECT_EQ(Losses(first), Losses(second));

  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:2", 1);  // the trainer inherits the environment
  Result refused = Run(Plus(flags, {"--deterministic"}), "refused");
  unsetenv("CUBLAS_WORKSPACE_CONFIG");
  EXPECT_EQ(refused.exit.code, 2) << Describe(refused);
  EXPECT_THAT(refused.exit.output,
              HasSubstr("pretrain_gpt2: error: --deterministic: the environment variable "
                        "CUBLAS_WORKSPACE_CONFIG=\":4096:2\""));
  EXPECT_TRUE(refused.metrics.empty());
}

}  // namespace
}  // namespace trainer
