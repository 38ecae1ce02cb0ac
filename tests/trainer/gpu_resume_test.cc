// Checkpoints across devices and layouts on CUDA, as a user runs them: a checkpoint written by
// 2 stages x 2 replicas on the GPU (four ranks on however many GPUs are visible, over
// host-staged Gloo; over NCCL too where there are four GPUs) resumes as one process on the GPU
// and on the CPU, and a CPU checkpoint resumes on the GPU, each continuing the run that never
// stopped. fp32 without dropout: the same layout on the same device agrees to float rounding;
// across devices the kernels differ (the fused CUDA ones against the CPU's composition), so
// the bound is looser. Tagged gpu; skips where no GPU is usable.
#include <c10/cuda/CUDAFunctions.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"

namespace trainer {
namespace {

using ::testing::HasSubstr;
using testing::Losses;
using testing::Plus;
using testing::Result;

constexpr double kSameDevice = 1e-5;  // relative, as the CPU parity tests
constexpr double kAcrossDevices = 2e-4;

class GpuResumeTest : public testing::TrainerTest {
 protected:
  void SetUp() override {
    if (c10::cuda::device_count() < 1) GTEST_SKIP() << "no usable GPU";
    TrainerTest::SetUp();
  }

  // The tiny model with 4 layers, 6 iterations, no dropout, fp32; global batch 8 in
  // micro-batches of 2.
  std::vector<std::string> Model(const std::vector<std::string>& extra) const {
    std::vector<std::string> flags;
    for (const std::string& flag : TinyModel()) {
      if (flag != "--num-layers=2" && flag != "--batch-size=4") flags.push_back(flag);
    }
    return Plus(Plus(flags, {"--num-layers=4", "--train-iters=6", "--hidden-dropout=0",
                             "--attention-dropout=0"}),
                extra);
  }

  // Launcher flags for 2 stages x 2 replicas on one node.
  static std::vector<std::string> TwoByTwo() {
    return {"--nstages=2",    "--gpus_per_node=4", "--batch_size=8",
            "--chunk_size=2", "--master_port=0",   "--grace_seconds=5"};
  }
  static std::vector<std::string> OneProcess(const std::string& device) {
    return {"--device=" + device, "--batch-size=8", "--chunk_size=2"};
  }
  static std::vector<std::string> Transport(const std::string& backend) {
    return {"--device=cuda", "--p2p-backend=" + backend, "--dp-backend=" + backend};
  }

  // Losses of iterations 4..6 of `resumed` against `straight`, within `relative`.
  static void ExpectContinues(const Result& straight, const Result& resumed, double relative,
                              const std::string& what) {
    const auto expected = Losses(straight), losses = Losses(resumed);
    ASSERT_EQ(expected.size(), 6u) << what;
    ASSERT_EQ(losses.size(), 3u) << what;
    for (int64_t i = 4; i <= 6; ++i) {
      const double x = std::stod(expected.at(i)), y = std::stod(losses.at(i));
      EXPECT_NEAR(y, x, relative * x) << what << " iteration " << i;
    }
  }

  void TwoByTwoResumesAsOneProcess(const std::string& backend) {
    const std::string ckpt = dir_ + "/ckpt_" + backend;
    const auto common = Model(Transport(backend));
    Result straight = Run(common, "straight_" + backend, TwoByTwo());
    ASSERT_EQ(straight.exit.code, 0) << Describe(straight);
    EXPECT_THAT(straight.exit.output, HasSubstr("pipeline and tied weights over " + backend));
    if (c10::cuda::device_count() < 4) {
      EXPECT_THAT(straight.exit.output, HasSubstr("4 local ranks share"));
    }
    Result first = Run(Plus(common, {"--save=" + ckpt, "--exit-interval=3", "--shard"}),
                       "first_" + backend, TwoByTwo());
    ASSERT_EQ(first.exit.code, 0) << Describe(first);
    for (const std::string device : {"cuda", "cpu"}) {
      Result resumed = Run(Plus(Model(OneProcess(device)), {"--load=" + ckpt}),
                           absl::StrCat("resumed_", backend, "_", device));
      ASSERT_EQ(resumed.exit.code, 0) << device << "\n" << Describe(resumed);
      EXPECT_THAT(resumed.exit.output, HasSubstr("the layout changed")) << device;
      ExpectContinues(straight, resumed, device == "cuda" ? kSameDevice : kAcrossDevices,
                      absl::StrCat("2x2 ", backend, " on cuda, resumed as 1x1 on ", device));
    }
  }
};

TEST_F(GpuResumeTest, TwoByTwoOverGlooResumesAsOneProcessOnTheGpuAndTheCpu) {
  TwoByTwoResumesAsOneProcess("gloo");
}

TEST_F(GpuResumeTest, TwoByTwoOverNcclResumesAsOneProcessOnTheGpuAndTheCpu) {
  if (c10::cuda::device_count() < 4) GTEST_SKIP() << "NCCL needs a GPU per rank (4)";
  TwoByTwoResumesAsOneProcess("nccl");
}

TEST_F(GpuResumeTest, ACpuCheckpointResumesOnTheGpu) {
  const std::string ckpt = dir_ + "/ckpt_cpu";
  Result straight = Run(Model(OneProcess("cpu")), "straight_cpu");
  ASSERT_EQ(straight.exit.code, 0) << Describe(straight);
  Result first =
      Run(Plus(Model(OneProcess("cpu")), {"--save=" + ckpt, "--exit-interval=3"}), "first_cpu");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  Result resumed = Run(Plus(Model(OneProcess("cuda")), {"--load=" + ckpt}), "resumed_on_cuda");
  ASSERT_EQ(resumed.exit.code, 0) << Describe(resumed);
  EXPECT_THAT(resumed.exit.output, HasSubstr("resumed from"));
  ExpectContinues(straight, resumed, kAcrossDevices, "1x1 on cpu, resumed on cuda");
}

}  // namespace
}  // namespace trainer
