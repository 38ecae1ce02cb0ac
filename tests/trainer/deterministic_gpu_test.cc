// --deterministic on a GPU (gpu-tagged; every case skips where no CUDA device is usable): a
// tiny GPT-2 in bf16 with dropout on and the sdpa backend gives bitwise-equal losses in two
// runs with the same flags, and a run checkpointed half-way and resumed in a new process gives
// the losses of the run that never stopped. Losses are compared as the metrics file's strings
// (shortest round-trip text), so equal strings are equal doubles.
//
// In the GPU bundle: `source gpu_bundle/env.sh && gpu_bundle/bin/deterministic_gpu_test`
// (the trainer is found next to the test binary).
#include <ATen/cuda/CUDAContext.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"

namespace trainer {
namespace {

using ::testing::HasSubstr;
using testing::Losses;
using testing::Plus;
using testing::Result;

#define SKIP_WITHOUT_GPU()                                                              \
  if (!at::cuda::is_available()) {                                                      \
    GTEST_SKIP() << "no usable CUDA device here (no driver, or no GPU); run this test " \
                    "on a GPU host (README, \"GPU tests\")";                            \
  }

class DeterministicGpuTest : public testing::TrainerTest {
 protected:
  std::vector<std::string> Flags() const {
    return Plus(TinyModel(),
                {"--device=cuda", "--bf16", "--attention-backend=sdpa", "--hidden-dropout=0.1",
                 "--attention-dropout=0.1", "--deterministic", "--train-iters=12"});
  }
};

TEST_F(DeterministicGpuTest, TwoRunsGiveBitwiseEqualLosses) {
  SKIP_WITHOUT_GPU();
  Result first = Run(Flags(), "first");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  Result second = Run(Flags(), "second");
  ASSERT_EQ(second.exit.code, 0) << Describe(second);
  EXPECT_THAT(first.exit.output, HasSubstr("> deterministic: CUBLAS_WORKSPACE_CONFIG="));
  EXPECT_THAT(first.exit.output,
              HasSubstr("> attention: sdpa (--attention-backend; deterministic"));
  const auto a = Losses(first), b = Losses(second);
  ASSERT_EQ(a.size(), 12u) << Describe(first);
  for (int64_t i = 1; i <= 12; ++i) EXPECT_EQ(a.at(i), b.at(i)) << "iteration " << i;
}

TEST_F(DeterministicGpuTest, ResumedRunEqualsTheUninterruptedOneBitwise) {
  SKIP_WITHOUT_GPU();
  const std::string ckpt = dir_ + "/ckpt";
  Result straight = Run(Flags(), "straight");
  ASSERT_EQ(straight.exit.code, 0) << Describe(straight);
  Result first = Run(Plus(Flags(), {"--save=" + ckpt, "--exit-interval=6"}), "first");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  Result second = Run(Plus(Flags(), {"--load=" + ckpt}), "second");
  ASSERT_EQ(second.exit.code, 0) << Describe(second);
  EXPECT_THAT(second.exit.output, HasSubstr("resumed from"));
  const auto a = Losses(straight), b = Losses(first), c = Losses(second);
  ASSERT_EQ(a.size(), 12u) << Describe(straight);
  ASSERT_EQ(b.size(), 6u) << Describe(first);
  ASSERT_EQ(c.size(), 6u) << Describe(second);
  for (int64_t i = 1; i <= 6; ++i) EXPECT_EQ(a.at(i), b.at(i)) << "iteration " << i;
  for (int64_t i = 7; i <= 12; ++i) EXPECT_EQ(a.at(i), c.at(i)) << "iteration " << i;
}

}  // namespace
}  // namespace trainer
