// StepProfiler's range on the CPU, step by step: where it starts and stops (Megatron's counting,
// a range past the run's end, a resumed run, start 0), the ranks it leaves alone, what it
// refuses, what it writes, and that a failure to write or a run that ends inside the range leaves
// the training going and LibTorch's profiler off.
#include "trainer/step_profiler.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "trainer/arguments.h"
#include "trainer/op_profile.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

class StepProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/step_profiler_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
  }

  TrainerArguments Args(int64_t start, int64_t end) const {
    TrainerArguments a;
    a.profile = true;
    a.use_pytorch_profiler = true;
    a.profile_step_start = start;
    a.profile_step_end = end;
    a.profile_ranks = {0};
    a.tensorboard_dir = dir_;
    return a;
  }

  static std::unique_ptr<StepProfiler> Make(const TrainerArguments& a, int rank = 0) {
    absl::StatusOr<std::unique_ptr<StepProfiler>> profiler =
        StepProfiler::Create(a, rank, c10::Device(c10::kCPU));
    EXPECT_TRUE(profiler.ok()) << profiler.status();
    return profiler.ok() ? std::move(*profiler) : nullptr;
  }

  // One "step" of `profiler`'s run, `completed` iterations done before it: the hooks around a
  // matrix product. Returns what AfterStep said.
  static std::string Step(StepProfiler& profiler, int64_t completed, bool last = false) {
    EXPECT_THAT(profiler.BeforeStep(completed), IsEmpty());
    const at::Tensor a = at::ones({16, 16});
    (void)at::mm(a, a);
    return profiler.AfterStep(completed + 1, last);
  }

  int Traces() const {
    int count = 0;
    if (!fs::exists(dir_)) return 0;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      if (name.size() > 14 && name.substr(name.size() - 14) == ".pt.trace.json") ++count;
    }
    return count;
  }

  std::string dir_;
};

TEST_F(StepProfilerTest, RecordsTheStepsAfterStartUpToEnd) {
  std::unique_ptr<StepProfiler> profiler = Make(Args(2, 4));
  ASSERT_NE(profiler, nullptr);
  EXPECT_THAT(profiler->NotReached(0, 10), IsEmpty());
  EXPECT_THAT(Step(*profiler, 0), IsEmpty());
  EXPECT_THAT(Step(*profiler, 1), IsEmpty());
  EXPECT_EQ(Traces(), 0);
  EXPECT_THAT(Step(*profiler, 2), IsEmpty());   // iteration 3: recorded, the range still open
  const std::string said = Step(*profiler, 3);  // iteration 4 closes it
  EXPECT_THAT(said, StartsWith("--profile: iterations 3-4 recorded by LibTorch's profiler"));
  EXPECT_THAT(said, HasSubstr("host self time by op (2 profiled steps"));
  EXPECT_THAT(said, HasSubstr("aten::mm"));
  EXPECT_EQ(Traces(), 1);
  EXPECT_THAT(Step(*profiler, 4), IsEmpty());  // over: nothing more
  EXPECT_EQ(Traces(), 1);
}

TEST_F(StepProfilerTest, StartZeroAndARunThatEndsInsideTheRange) {
  std::unique_ptr<StepProfiler> from_zero = Make(Args(0, 2));
  EXPECT_THAT(Step(*from_zero, 0), IsEmpty());
  EXPECT_THAT(Step(*from_zero, 1), StartsWith("--profile: iterations 1-2 recorded"));
  fs::remove_all(dir_);
  std::unique_ptr<StepProfiler> cut = Make(Args(1, 10));
  EXPECT_THAT(Step(*cut, 0), IsEmpty());
  EXPECT_THAT(Step(*cut, 1, /*last=*/true), StartsWith("--profile: iteration 2 recorded"));
  EXPECT_EQ(Traces(), 1);
}

TEST_F(StepProfilerTest, SaysWhenTheRunNeverReachesTheRange) {
  std::unique_ptr<StepProfiler> profiler = Make(Args(2, 4));
  // Resumed after iteration 3: the step after iteration 2 is not in this run.
  EXPECT_EQ(profiler->NotReached(3, 10),
            "--profile: nothing profiled: the range starts after iteration 2 "
            "(--profile-step-start), and this run trains iterations 4-10");
  EXPECT_THAT(profiler->NotReached(2, 10), IsEmpty());  // resumed exactly there: reached
  EXPECT_THAT(profiler->NotReached(0, 2), HasSubstr("this run trains iterations 1-2"));
  EXPECT_THAT(Step(*profiler, 3), IsEmpty());
  EXPECT_THAT(Step(*profiler, 4), IsEmpty());
  EXPECT_EQ(Traces(), 0);
}

TEST_F(StepProfilerTest, OtherRanksAndRunsWithoutProfileDoNothing) {
  std::unique_ptr<StepProfiler> other = Make(Args(0, 1), /*rank=*/1);
  EXPECT_THAT(other->NotReached(5, 10), IsEmpty());
  EXPECT_THAT(Step(*other, 0), IsEmpty());
  TrainerArguments off = Args(0, 1);
  off.profile = false;
  std::unique_ptr<StepProfiler> none = Make(off);
  EXPECT_THAT(Step(*none, 0), IsEmpty());
  EXPECT_EQ(Traces(), 0);
}

TEST_F(StepProfilerTest, NsightMarksNeedACudaDevice) {
  TrainerArguments a = Args(0, 1);
  a.use_pytorch_profiler = false;
  absl::StatusOr<std::unique_ptr<StepProfiler>> profiler =
      StepProfiler::Create(a, 0, c10::Device(c10::kCPU));
  ASSERT_FALSE(profiler.ok());
  EXPECT_EQ(profiler.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(profiler.status().message()), HasSubstr("add --use-pytorch-profiler"));
}

TEST_F(StepProfilerTest, ATraceThatCannotBeWrittenIsReportedAndTrainingGoesOn) {
  fs::create_directories(fs::path(dir_).parent_path());
  std::ofstream(dir_) << "a file where the directory should be";
  std::unique_ptr<StepProfiler> profiler = Make(Args(0, 1));
  const std::string said = Step(*profiler, 0);
  EXPECT_THAT(said, HasSubstr("--profile: iteration 1 not written: cannot create "
                              "--tensorboard-dir=" +
                              dir_));
  // LibTorch's profiler is off again.
  EXPECT_TRUE(OpProfiler::Start(false).ok());
  fs::remove(dir_);
}

TEST_F(StepProfilerTest, ARunThatEndsInsideTheRangeLeavesTheProfilerOff) {
  {
    std::unique_ptr<StepProfiler> profiler = Make(Args(0, 5));
    EXPECT_THAT(Step(*profiler, 0), IsEmpty());  // open, never closed: the run failed
  }
  EXPECT_EQ(Traces(), 0);
  EXPECT_TRUE(OpProfiler::Start(false).ok());
}

}  // namespace
}  // namespace trainer
