// The engine's hooks for a model's non-parameter state (StageModule::named_state,
// replica_max_state, UpdateStateAfterBackward), with a toy model whose state counts steps and
// records the largest input it saw: the update runs once per step, after the backward, on a step
// the loss scaler skips too; evaluate() leaves the state as it was; a checkpoint saves the state
// under its names and loading restores it in place; a checkpoint without it leaves the state
// fresh and says so; one of another shape is refused naming both shapes. (The MAX over replicas:
// tests/trainer/fp8_training_test.cc, with the GPT-2 model's FP8 state.)
#include <torch/torch.h>

#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varuna/varuna.h"

namespace varuna {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// One segment: loss = mean((w * x * scale)^2). State: "w.seen" [2] = (largest |x| seen since the
// last update, largest |x| of the last update), "w.updates" [1] = updates so far (its length is
// `state_length`, to test shape checks; 0: no state at all).
class StatefulStage : public StageModule {
 public:
  explicit StatefulStage(int64_t state_length) {
    w_ = register_parameter("w", torch::ones({4}));
    if (state_length > 0) {
      seen_ = torch::zeros({2});
      updates_ = torch::zeros({state_length});
    }
  }
  SegmentRange segments() const override { return {0, 0}; }
  int num_segments() const override { return 1; }
  at::Tensor Forward(const at::Tensor&, const TensorMap& in) override {
    const at::Tensor& x = in.at("x");
    if (seen_.defined()) {
      at::NoGradGuard no_grad;
      seen_[0] = at::maximum(seen_[0], x.abs().max());
    }
    return (w_ * x * in.at("scale")).pow(2).mean();
  }
  std::vector<SharedWeight> shared_weights() const override { return {}; }
  int SegmentOf(const std::string& name) const override {
    return name == "w" || name == "w.seen" || name == "w.updates" ? 0 : -1;
  }
  bool DecaysWeight(const std::string&) const override { return false; }
  std::vector<std::pair<std::string, at::Tensor>> named_state() override {
    if (!seen_.defined()) return {};
    return {{"w.seen", seen_}, {"w.updates", updates_}};
  }
  std::vector<at::Tensor> replica_max_state() override {
    if (!seen_.defined()) return {};
    return {seen_.narrow(0, 0, 1)};
  }
  void UpdateStateAfterBackward() override {
    if (!seen_.defined()) return;
    seen_[1] = seen_[0];
    seen_[0] = 0;
    updates_.add_(1);
  }

 private:
  at::Tensor w_, seen_, updates_;
};

std::unique_ptr<Varuna> Make(int64_t state_length, c10::ScalarType dtype = c10::kFloat) {
  VarunaOptions options;
  options.batch_size = 4;
  options.chunk_size = 2;
  options.dtype = dtype;
  auto engine = Varuna::Create(
      [state_length](SegmentRange) { return std::make_shared<StatefulStage>(state_length); }, 1,
      options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE((*engine)
                  ->set_optimizer(std::make_unique<Adam>((*engine)->parameters(), AdamOptions()),
                                  LossScalerOptions())
                  .ok());
  return std::move(*engine);
}

TensorMap Batch(float largest, float scale = 1) {
  at::Tensor x = torch::tensor({0.5f, -largest, 0.25f, 1.0f}).reshape({4, 1}).expand({4, 4});
  return {{"x", x.contiguous()}, {"scale", torch::full({4, 1}, scale)}};
}

at::Tensor State(Varuna& v, const std::string& name) {
  for (const auto& [n, t] : v.model().named_state()) {
    if (n == name) return t.clone();
  }
  return {};
}

class ModelStateTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_F(ModelStateTest, UpdatedOncePerStepAfterTheBackwardAlsoWhenSkipped) {
  auto v = Make(1, c10::kHalf);
  ASSERT_TRUE(v->step(Batch(3)).ok());
  EXPECT_TRUE(at::equal(State(*v, "w.seen"), torch::tensor({0.0f, 3.0f})));
  EXPECT_EQ(State(*v, "w.updates").item<float>(), 1.0f);
  // An inf in the loss: the update is skipped, the state's update is not.
  absl::StatusOr<StepResult> skipped = v->step(Batch(2, std::numeric_limits<float>::infinity()));
  ASSERT_TRUE(skipped.ok());
  EXPECT_TRUE(skipped->overflow);
  EXPECT_TRUE(at::equal(State(*v, "w.seen"), torch::tensor({0.0f, 2.0f})));
  EXPECT_EQ(State(*v, "w.updates").item<float>(), 2.0f);
}

TEST_F(ModelStateTest, EvaluationLeavesTheStateAsItWas) {
  auto v = Make(1);
  ASSERT_TRUE(v->step(Batch(3)).ok());
  const at::Tensor before = State(*v, "w.seen");
  ASSERT_TRUE(v->evaluate(Batch(7)).ok());
  EXPECT_TRUE(at::equal(State(*v, "w.seen"), before));
}

TEST_F(ModelStateTest, CheckpointsSaveAndRestoreTheStateByName) {
  const std::string dir = ::testing::TempDir() + "/model_state_test_ckpt";
  std::filesystem::remove_all(dir);
  auto v = Make(1);
  ASSERT_TRUE(v->step(Batch(3)).ok());
  ASSERT_TRUE(v->step(Batch(5)).ok());
  ASSERT_TRUE(v->checkpoint({dir}, 2, json::Value::object()).ok());

  auto resumed = Make(1);
  const at::Tensor seen = resumed->model().named_state()[0].second;  // the tensor, not a copy
  absl::StatusOr<Varuna::Loaded> loaded = resumed->load_checkpoint(dir, std::nullopt);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(loaded->note, Not(HasSubstr("start fresh")));
  EXPECT_TRUE(at::equal(seen, torch::tensor({0.0f, 5.0f})));  // loaded in place
  EXPECT_EQ(State(*resumed, "w.updates").item<float>(), 2.0f);
  for (float largest : {4.0f, 1.5f}) {
    EXPECT_EQ(v->step(Batch(largest))->loss, resumed->step(Batch(largest))->loss);
    EXPECT_TRUE(at::equal(State(*v, "w.seen"), State(*resumed, "w.seen")));
  }

  // Written without state: the state starts fresh, and the note says so.
  const std::string plain = dir + "_plain";
  std::filesystem::remove_all(plain);
  auto stateless = Make(0);
  ASSERT_TRUE(stateless->step(Batch(3)).ok());
  ASSERT_TRUE(stateless->checkpoint({plain}, 1, json::Value::object()).ok());
  auto fresh = Make(1);
  absl::StatusOr<Varuna::Loaded> from_plain = fresh->load_checkpoint(plain, std::nullopt);
  ASSERT_TRUE(from_plain.ok()) << from_plain.status();
  EXPECT_THAT(from_plain->note,
              HasSubstr("the checkpoint holds none of 2 model state tensors (w.seen, ...): they "
                        "start fresh"));
  EXPECT_TRUE(at::equal(State(*fresh, "w.seen"), torch::zeros({2})));

  // Another shape: refused, naming both; nothing loaded.
  auto longer = Make(3);
  absl::StatusOr<Varuna::Loaded> refused = longer->load_checkpoint(dir, std::nullopt);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("model state w.updates has shape [1] in the checkpoint but [3] in this "
                        "model"));
  EXPECT_TRUE(at::equal(State(*longer, "w.seen"), torch::zeros({2})));
  EXPECT_EQ(longer->optimizer().step_count(), 0);
}

}  // namespace
}  // namespace varuna
