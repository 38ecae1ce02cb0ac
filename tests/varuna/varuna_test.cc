// The engine on one stage and one replica, with a toy model: micro-batching returns what the
// whole batch computes, tied weights stay bitwise equal, an overflow skips the step, clipping
// bounds the update, checkpoints restore the state, bad inputs are refused, and a step reads
// nothing back from the device before its end.
#include "varuna/varuna.h"

#include <ATen/record_function.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varuna/checkpoint/files.h"

namespace varuna {
namespace {

using ::testing::HasSubstr;

// Two segments: segment 0 = embedding "embed" (tied) + "bias", segment 1 = head "head" (tied
// copy of embed). Loss = mean over examples of cross entropy(head · (embed[ids] + bias)) times
// the example's "scale" input (to inject inf).
class ToyStage : public StageModule {
 public:
  explicit ToyStage(SegmentRange range) : range_(range) {
    torch::manual_seed(7);
    at::Tensor init = torch::randn({6, 4}) * 0.5;
    embed_ = register_parameter("embed", init.clone());
    bias_ = register_parameter("bias", torch::zeros({4}));
    head_ = register_parameter("head", init.clone());
  }
  SegmentRange segments() const override { return range_; }
  int num_segments() const override { return 2; }
  at::Tensor Forward(const at::Tensor&, const TensorMap& in) override {
    at::Tensor x = embed_.index_select(0, in.at("ids")) + bias_;
    at::Tensor logits = x.matmul(head_.t());
    at::Tensor per_example =
        torch::nn::functional::cross_entropy(
            logits, in.at("labels"),
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone)) *
        in.at("scale");
    return per_example.mean();
  }
  std::vector<SharedWeight> shared_weights() const override { return {{"embed", "head"}}; }
  int SegmentOf(const std::string& name) const override {
    return name == "head" ? 1 : (name == "embed" || name == "bias") ? 0 : -1;
  }
  bool DecaysWeight(const std::string& name) const override { return name != "bias"; }

 private:
  SegmentRange range_;
  at::Tensor embed_, bias_, head_;
};

// The loss is a mean over the examples whose "mask" is 1, as GPT-2's over unmasked tokens.
class MaskedToyStage : public ToyStage {
 public:
  using ToyStage::ToyStage;
  at::Tensor Forward(const at::Tensor& activation, const TensorMap& in) override {
    TensorMap ones = in;
    ones["scale"] = in.at("mask");
    const double n = static_cast<double>(in.at("mask").size(0));
    return ToyStage::Forward(activation, ones) * n / in.at("mask").sum();
  }
  double LossWeight(const TensorMap& in) const override {
    return in.at("mask").sum().item<double>();
  }
};

StageBuilder Builder() {
  return [](SegmentRange r) { return std::make_shared<ToyStage>(r); };
}

TensorMap Batch(int n, int seed) {
  torch::manual_seed(seed);
  return {{"ids", torch::randint(0, 6, {n}, torch::kLong)},
          {"labels", torch::randint(0, 6, {n}, torch::kLong)},
          {"scale", torch::ones({n})}};
}

std::unique_ptr<Varuna> Make(int batch, int chunk, double clip = 0) {
  VarunaOptions options;
  options.batch_size = batch;
  options.chunk_size = chunk;
  options.clip_grad = clip;
  auto engine = Varuna::Create(Builder(), 2, options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  AdamOptions adam;
  adam.lr = 0.05;
  EXPECT_TRUE((*engine)
                  ->set_optimizer(std::make_unique<Adam>((*engine)->parameters(), adam),
                                  LossScalerOptions())
                  .ok());
  return std::move(*engine);
}

at::Tensor Param(Varuna& v, const std::string& name) {
  return v.model().named_parameters()[name].detach().clone();
}

class VarunaTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_F(VarunaTest, MicroBatchesComputeTheWholeBatch) {
  // 7 examples in micro-batches of 3 (3 + 3 + 1) against one micro-batch of 7.
  auto whole = Make(7, 0);
  auto split = Make(7, 3);
  for (int step = 0; step < 4; ++step) {
    const TensorMap batch = Batch(7, 100 + step);
    StepResult a = *whole->step(batch);
    StepResult b = *split->step(batch);
    EXPECT_NEAR(a.loss, b.loss, 1e-6) << "step " << step;
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5) << "step " << step;
    EXPECT_GT(a.grad_norm, 0);
  }
  for (const char* name : {"embed", "bias", "head"}) {
    EXPECT_TRUE(torch::allclose(Param(*whole, name), Param(*split, name), 1e-5, 1e-6)) << name;
  }
}

// Micro-batches with different numbers of counted examples still give the whole batch's loss.
TEST_F(VarunaTest, MicroBatchesAreWeightedByTheirLossWeight) {
  auto make = [](int chunk) {
    VarunaOptions options;
    options.batch_size = 6;
    options.chunk_size = chunk;
    auto engine = *Varuna::Create(
        [](SegmentRange r) { return std::make_shared<MaskedToyStage>(r); }, 2, options);
    EXPECT_TRUE(
        engine->set_optimizer(std::make_unique<Adam>(engine->parameters(), AdamOptions()), {})
            .ok());
    return engine;
  };
  auto whole = make(0);
  auto split = make(2);
  TensorMap batch = Batch(6, 5);
  batch["mask"] = torch::tensor({1.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.0f});  // 3, 1 and 0 counted.
  StepResult a = *whole->step(batch);
  StepResult b = *split->step(batch);
  EXPECT_NEAR(a.loss, b.loss, 1e-6);
  EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-6);
  batch["mask"].zero_();
  EXPECT_EQ(split->step(batch).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(VarunaTest, LossIsTheBatchMeanAndFalls) {
  auto engine = Make(8, 2);
  const TensorMap batch = Batch(8, 1);
  // Reference: the model's loss on the whole batch before any update.
  const double expected = engine->model().Forward(at::Tensor(), batch).item<double>();
  const double first = engine->step(batch)->loss;
  EXPECT_NEAR(first, expected, 1e-6);
  double last = first;
  for (int i = 0; i < 30; ++i) last = engine->step(batch)->loss;
  EXPECT_LT(last, 0.5 * first);
}

TEST_F(VarunaTest, TiedWeightsStayBitwiseEqual) {
  auto engine = Make(5, 2);
  for (int step = 0; step < 25; ++step) ASSERT_TRUE(engine->step(Batch(5, step)).ok());
  const at::Tensor embed = Param(*engine, "embed");
  EXPECT_TRUE(torch::equal(embed, Param(*engine, "head")));
  // They moved, and both moved with the summed gradient.
  torch::manual_seed(7);
  const at::Tensor init = torch::randn({6, 4}) * 0.5;
  EXPECT_FALSE(torch::allclose(embed, init));
}

// The shared weight's gradient is the sum of the gradients of its two uses, given to both.
TEST_F(VarunaTest, TiedGradientIsTheSumOfBothUses) {
  auto engine = Make(6, 4);
  const TensorMap batch = Batch(6, 11);
  ToyStage reference(SegmentRange{0, 1});
  reference.Forward(at::Tensor(), batch).backward();
  auto params = reference.named_parameters();
  const at::Tensor expected = params["embed"].grad() + params["head"].grad();
  ASSERT_TRUE(engine->step(batch).ok());
  const auto& names = engine->optimizer().parameters();
  for (size_t i = 0; i < names.size(); ++i) {
    const at::Tensor& grad = engine->optimizer().MasterGrads()[i];
    if (names[i].name == "embed" || names[i].name == "head") {
      EXPECT_TRUE(torch::allclose(grad, expected, 1e-5, 1e-7)) << names[i].name;
    }
  }
}

TEST_F(VarunaTest, OverflowSkipsTheStep) {
  auto engine = Make(4, 2);
  ASSERT_TRUE(engine->step(Batch(4, 0)).ok());
  const int64_t steps = engine->optimizer().step_count();
  const at::Tensor embed = Param(*engine, "embed");
  const at::Tensor exp_avg = engine->optimizer().StateOf(0)[1].second.clone();
  TensorMap poisoned = Batch(4, 1);
  poisoned["scale"][3] = std::numeric_limits<float>::infinity();
  StepResult r = *engine->step(poisoned);
  EXPECT_TRUE(r.overflow);
  EXPECT_EQ(engine->optimizer().step_count(), steps);
  EXPECT_TRUE(torch::equal(Param(*engine, "embed"), embed));
  EXPECT_TRUE(torch::equal(engine->optimizer().StateOf(0)[1].second, exp_avg));
  // The next clean step applies again.
  EXPECT_FALSE(engine->step(Batch(4, 2))->overflow);
  EXPECT_EQ(engine->optimizer().step_count(), steps + 1);
}

TEST_F(VarunaTest, ClippingBoundsTheGradient) {
  auto clipped = Make(4, 0, /*clip=*/1e-3);
  const at::Tensor before = Param(*clipped, "bias");
  StepResult r = *clipped->step(Batch(4, 3));
  EXPECT_GT(r.grad_norm, 1e-3);  // Reported before clipping.
  // Adam normalises the step size, so check the clipped gradient it used instead: after the
  // first step exp_avg = (1 - beta1) * g, with g the gradient times the clip coefficient.
  const varuna::Adam& adam = clipped->optimizer();
  double norm2 = 0;
  for (size_t i = 0; i < adam.parameters().size(); ++i) {
    if (adam.parameters()[i].name == "head") continue;  // tied copy
    const at::Tensor g = adam.StateOf(i)[1].second / (1.0 - adam.options().beta1);
    norm2 += g.to(at::kDouble).pow(2).sum().item<double>();
  }
  EXPECT_NEAR(std::sqrt(norm2), 1e-3, 1e-6);
  EXPECT_FALSE(torch::equal(before, Param(*clipped, "bias")));
}

TEST_F(VarunaTest, CheckpointRestoresTheRun) {
  const std::string dir = ::testing::TempDir() + "/varuna_test_ckpt";
  std::filesystem::remove_all(dir);
  auto straight = Make(4, 2);
  auto first_half = Make(4, 2);
  for (int step = 0; step < 3; ++step) {
    straight->step(Batch(4, step)).value();
    first_half->step(Batch(4, step)).value();
  }
  json::Value state = json::Value::object();
  state["consumed_samples"] = 12;
  ASSERT_TRUE(first_half->checkpoint({dir}, 3, state).ok());

  auto resumed = Make(4, 2);
  absl::StatusOr<Varuna::Loaded> loaded = resumed->load_checkpoint(dir, std::nullopt);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->iteration, 3);
  EXPECT_EQ(json::Find(loaded->trainer_state, "consumed_samples")->get<int64_t>(), 12);
  EXPECT_EQ(resumed->optimizer().step_count(), 3);
  for (int step = 3; step < 6; ++step) {
    const double a = straight->step(Batch(4, step))->loss;
    const double b = resumed->step(Batch(4, step))->loss;
    EXPECT_EQ(a, b) << "step " << step;  // Bitwise: the run continues exactly.
  }
  EXPECT_TRUE(torch::equal(Param(*straight, "embed"), Param(*resumed, "embed")));
}

// With a staging directory, checkpoint() returns once the files are staged; the next step that
// finds the move finished completes the checkpoint, and finish_checkpoint() waits for it.
TEST_F(VarunaTest, StagedCheckpointCompletesDuringALaterStep) {
  const std::string root = ::testing::TempDir() + "/varuna_test_staged";
  std::filesystem::remove_all(root);
  CheckpointOptions options;
  options.save_dir = root + "/save";
  options.staging_dir = root + "/local";
  auto engine = Make(4, 2);
  engine->step(Batch(4, 0)).value();
  ASSERT_TRUE(engine->checkpoint(options, 1, json::Value::object()).ok());
  int64_t completed = -1;
  for (int step = 1; step < 50 && completed < 0; ++step) {
    absl::StatusOr<StepResult> r = engine->step(Batch(4, step));
    ASSERT_TRUE(r.ok()) << r.status();
    completed = r->completed_checkpoint;
    if (completed < 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(completed, 1);
  EXPECT_TRUE(VerifyCheckpoint(options.save_dir, 1, CheckpointCheck::kChecksums).ok());
  EXPECT_TRUE(std::filesystem::is_empty(options.staging_dir));  // moved, not copied

  ASSERT_TRUE(engine->checkpoint(options, 2, json::Value::object()).ok());
  ASSERT_TRUE(engine->finish_checkpoint().ok());
  EXPECT_TRUE(VerifyCheckpoint(options.save_dir, 2, CheckpointCheck::kChecksums).ok());
  auto resumed = Make(4, 2);
  absl::StatusOr<Varuna::Loaded> loaded = resumed->load_checkpoint(options.save_dir, std::nullopt);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->iteration, 2);
  EXPECT_TRUE(torch::equal(Param(*engine, "embed"), Param(*resumed, "embed")));
}

TEST_F(VarunaTest, StopRequestIsReportedByTheStep) {
  auto engine = Make(4, 2);
  EXPECT_FALSE(engine->step(Batch(4, 0))->stop);
  EXPECT_TRUE(engine->step(Batch(4, 1), [] { return true; })->stop);
  EXPECT_FALSE(engine->step(Batch(4, 2), [] { return false; })->stop);
}

// A stop asked for while the step computes (here: during its backward) ends that step.
TEST_F(VarunaTest, AStopAskedForDuringTheStepIsAgreedByThatStep) {
  auto engine = Make(4, 2);
  bool backward_ran = false;
  at::Tensor embed = engine->model().named_parameters()["embed"];
  const unsigned hook = embed.register_hook([&backward_ran](const at::Tensor& g) {
    backward_ran = true;
    return g;
  });
  int reads = 0;
  const StepResult r = *engine->step(Batch(4, 0), [&] {
    ++reads;
    return backward_ran;
  });
  embed.remove_hook(hook);
  EXPECT_TRUE(r.stop);
  EXPECT_EQ(reads, 1);
}

// The loss scale continues from a dynamic fp16 checkpoint into a dynamic fp16 run, and only
// then; an fp32 checkpoint resumed in fp16 starts from the initial scale.
TEST_F(VarunaTest, LossScaleResumesOnlyFromFp16ToFp16) {
  const std::string dir = ::testing::TempDir() + "/varuna_test_scale";
  std::filesystem::remove_all(dir);
  auto make = [](c10::ScalarType dtype) {
    VarunaOptions options;
    options.batch_size = 4;
    options.dtype = dtype;
    auto engine = *Varuna::Create(Builder(), 2, options);
    LossScalerOptions scaling;
    scaling.initial_scale = 1024;
    scaling.hysteresis = 1;
    EXPECT_TRUE(
        engine->set_optimizer(std::make_unique<Adam>(engine->parameters(), AdamOptions()), scaling)
            .ok());
    return engine;
  };
  auto fp16 = make(c10::kHalf);
  TensorMap poisoned = Batch(4, 1);
  poisoned["scale"][0] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(fp16->step(poisoned)->overflow);
  ASSERT_EQ(fp16->loss_scale(), 512);
  ASSERT_TRUE(fp16->checkpoint({dir}, 1, json::Value::object()).ok());
  auto resumed = make(c10::kHalf);
  ASSERT_TRUE(resumed->load_checkpoint(dir, 1).ok());
  EXPECT_EQ(resumed->loss_scale(), 512);

  auto fp32 = make(c10::kFloat);
  ASSERT_TRUE(fp32->step(Batch(4, 2)).ok());
  ASSERT_TRUE(fp32->checkpoint({dir}, 2, json::Value::object()).ok());
  auto to_fp16 = make(c10::kHalf);
  ASSERT_TRUE(to_fp16->load_checkpoint(dir, 2).ok());
  EXPECT_EQ(to_fp16->loss_scale(), 1024);
  auto to_fp32 = make(c10::kFloat);
  ASSERT_TRUE(to_fp32->load_checkpoint(dir, 1).ok());  // From the fp16 checkpoint.
  EXPECT_EQ(to_fp32->loss_scale(), 1);
}

TEST_F(VarunaTest, RefusesBadInputsAndLayouts) {
  auto engine = Make(4, 2);
  TensorMap wrong = Batch(4, 0);
  wrong["labels"] = torch::zeros({3}, torch::kLong);
  absl::StatusOr<StepResult> r = engine->step(wrong);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(
      std::string(r.status().message()),
      HasSubstr("input \"labels\" has 3 examples in dimension 0; expected 4 (--batch-size)"));

  VarunaOptions two_stages;
  two_stages.stage_map = *StageMap::Parse("0;1;");
  absl::StatusOr<std::unique_ptr<Varuna>> bad = Varuna::Create(Builder(), 2, two_stages);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("needs the job's process world"));
  VarunaOptions three_stages;
  three_stages.stage_map = *StageMap::Parse("0;1;2;");
  EXPECT_THAT(std::string(Varuna::Create(Builder(), 2, three_stages).status().message()),
              HasSubstr("has 3 pipeline stages but the model has only 2 segments"));

  VarunaOptions chunky;
  chunky.batch_size = 2;
  chunky.chunk_size = 3;
  EXPECT_THAT(std::string(Varuna::Create(Builder(), 2, chunky).status().message()),
              HasSubstr("--chunk_size=3 must be between 1 and --batch-size=2"));

  VarunaOptions plain;
  auto fresh = Varuna::Create(Builder(), 2, plain);
  EXPECT_EQ((*fresh)->step(Batch(1, 0)).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(VarunaTest, StageSegmentsMustFitTheMapAndTheModel) {
  VarunaOptions options;
  options.stage_map = *StageMap::Parse("0;1;");
  options.stage_segments = {1, 1};
  EXPECT_TRUE(Varuna::ValidateOptions(options, 2).ok());
  options.stage_segments = {3, 1};
  EXPECT_TRUE(Varuna::ValidateOptions(options, 4).ok());

  auto error = [&](std::vector<int> sizes, int segments) {
    options.stage_segments = std::move(sizes);
    absl::Status status = Varuna::ValidateOptions(options, segments);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    return std::string(status.message());
  };
  EXPECT_THAT(
      error({1, 1, 1}, 3),
      HasSubstr("--stage-segments=1,1,1 gives 3 stage sizes but --stage_to_rank_map=\"0;1;\" "
                "has 2 stages: give one size per stage"));
  EXPECT_THAT(error({2, 0}, 2),
              HasSubstr("--stage-segments=2,0 has a stage of 0 segments: every stage needs at "
                        "least 1"));
  EXPECT_THAT(error({-1, 3}, 2), HasSubstr("has a stage of -1 segments"));
  EXPECT_THAT(error({1, 2}, 2),
              HasSubstr("--stage-segments=1,2 covers 3 segments but the model has 2 (layers): "
                        "give stage sizes that sum to 2"));

  // One stage given explicitly runs every segment.
  VarunaOptions one;
  one.stage_segments = {2};
  auto engine = Varuna::Create(Builder(), 2, one);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->segments(), (SegmentRange{0, 1}));
  one.stage_segments = {1};
  EXPECT_THAT(std::string(Varuna::Create(Builder(), 2, one).status().message()),
              HasSubstr("--stage-segments=1 covers 1 segments but the model has 2"));
}

// Host reads of tensor values counted on this thread while a HostReadCounter lives, through
// LibTorch's op observers: item() (aten::_local_scalar_dense, which every scalar read such as
// `if (t.all().item<bool>())` goes through) and the ops that return host values or
// data-dependent shapes. On CUDA each of these waits for the device; on the CPU they are what a
// re-introduced wait looks like. (A .to(kCPU) read is a no-op on the CPU and is not seen here;
// the step's one read copies into page-locked memory, see Varuna::step.)
class HostReadCounter {
 public:
  HostReadCounter() {
    count() = 0;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&HostReadCounter::OnOp).scopes({at::RecordScope::FUNCTION}));
  }
  ~HostReadCounter() { at::removeCallback(handle_); }
  int reads() const { return count(); }

 private:
  static int& count() {
    thread_local int reads = 0;
    return reads;
  }
  static std::unique_ptr<at::ObserverContext> OnOp(const at::RecordFunction& fn) {
    static const std::set<std::string> kReads = {"aten::_local_scalar_dense",
                                                 "aten::equal",
                                                 "aten::allclose",
                                                 "aten::is_nonzero",
                                                 "aten::nonzero",
                                                 "aten::masked_select",
                                                 "aten::_unique2",
                                                 "aten::unique_consecutive"};
    if (kReads.count(fn.name()) > 0) ++count();
    return nullptr;
  }
  at::CallbackHandle handle_;
};

TEST_F(VarunaTest, StepReadsNothingBackBeforeItsEnd) {
  {
    const at::Tensor probe = torch::ones({2});
    HostReadCounter counter;
    (void)probe.sum().item<float>();
    ASSERT_EQ(counter.reads(), 1) << "the counter must see an item()";
  }
  // Micro-batches, the local tied pair, clipping, an applied and an overflowing step: the loss,
  // norm and overflow flag reach the host in one copy at the end, never through a read.
  auto engine = Make(4, 2, /*clip=*/1e-3);
  ASSERT_TRUE(engine->step(Batch(4, 0)).ok());
  TensorMap poisoned = Batch(4, 1);
  poisoned["scale"][3] = std::numeric_limits<float>::infinity();
  for (const TensorMap& batch : {Batch(4, 2), poisoned}) {
    HostReadCounter counter;
    absl::StatusOr<StepResult> result = engine->step(batch);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(counter.reads(), 0) << "a value was read back during the step";
  }
  // GPT-2's loss weight sums each micro-batch's loss mask: a read of the host inputs (one per
  // micro-batch), the only reads the step makes.
  VarunaOptions options;
  options.batch_size = 6;
  options.chunk_size = 2;
  auto masked = *Varuna::Create([](SegmentRange r) { return std::make_shared<MaskedToyStage>(r); },
                                2, options);
  ASSERT_TRUE(
      masked->set_optimizer(std::make_unique<Adam>(masked->parameters(), AdamOptions()), {}).ok());
  TensorMap batch = Batch(6, 5);
  batch["mask"] = torch::tensor({1.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.0f});
  HostReadCounter counter;
  ASSERT_TRUE(masked->step(batch).ok());
  EXPECT_EQ(counter.reads(), 3);
}

}  // namespace
}  // namespace varuna
