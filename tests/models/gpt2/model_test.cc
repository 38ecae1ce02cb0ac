// Proves Gpt2Stage as a varuna::StageModule: each segment range allocates exactly its own
// parameters (named and counted as parameter_names.h and summary.h say), chained stages give
// bitwise the loss and gradients of the whole model, initialisation is independent of the
// range (so the tied LM head equals the word embedding on any stage), cut points fire inside
// the range only, a stage reads only the inputs it needs, and bad inputs get clear errors.

#include "models/gpt2/model.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "models/gpt2/init.h"
#include "models/gpt2/parameter_names.h"
#include "models/gpt2/summary.h"
#include "tests/models/gpt2/autograd_graph.h"
#include "tests/models/gpt2/test_batch.h"

namespace gpt2 {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::RandomBatch;
using testing::TinyConfig;

class Gpt2StageTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

std::vector<std::string> SortedParameterNames(const torch::nn::Module& module) {
  std::vector<std::string> names;
  for (const auto& item : module.named_parameters()) names.push_back(item.key());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(Gpt2StageTest, EachRangeHoldsExactlyItsSegmentsParameters) {
  const Gpt2Config config = TinyConfig();
  for (varuna::SegmentRange range :
       {varuna::SegmentRange{0, 0}, varuna::SegmentRange{1, 2}, varuna::SegmentRange{3, 3},
        varuna::SegmentRange{0, 3}, varuna::SegmentRange{2, 3}, varuna::SegmentRange{0, 1}}) {
    SCOPED_TRACE(::testing::Message() << "[" << range.first << ", " << range.last << "]");
    Gpt2Stage stage(config, range, /*seed=*/7);
    EXPECT_EQ(stage.segments(), range);
    EXPECT_EQ(stage.num_segments(), 4);
    std::vector<std::string> expected;
    std::map<std::string, std::vector<int64_t>> shapes;
    for (int segment = range.first; segment <= range.last; ++segment) {
      for (const ParameterSpec& spec : SegmentParameters(config, segment)) {
        expected.push_back(spec.name);
        shapes[spec.name] = spec.shape;
      }
    }
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(SortedParameterNames(stage), expected);
    int64_t numel = 0;
    for (const auto& item : stage.named_parameters()) {
      numel += item.value().numel();
      EXPECT_EQ(item.value().sizes().vec(), shapes[item.key()]) << item.key();
      EXPECT_EQ(item.value().scalar_type(), at::kFloat);
      EXPECT_TRUE(item.value().requires_grad());
      EXPECT_EQ(stage.SegmentOf(item.key()), SegmentOfParameter(config, item.key()));
      EXPECT_TRUE(range.Contains(stage.SegmentOf(item.key()))) << item.key();
    }
    EXPECT_EQ(numel, AllocatedParameters(config, range.first, range.last));
  }
}

TEST_F(Gpt2StageTest, SingleLayerModelIsOneSegmentWithoutCutPoints) {
  Gpt2Config config = TinyConfig();
  config.num_layers = 1;
  Gpt2Stage stage(config, {0, 0}, 2);
  EXPECT_TRUE(stage.cut_points().empty());
  std::vector<std::string> expected;
  for (const ParameterSpec& spec : SegmentParameters(config, 0)) expected.push_back(spec.name);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(SortedParameterNames(stage), expected);
  const at::Tensor loss = stage.Forward({}, RandomBatch(config, 2, 4, 1));
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_TRUE(std::isfinite(loss.item<float>()));
}

TEST_F(Gpt2StageTest, LayerNamesUseGlobalIndices) {
  Gpt2Stage stage(TinyConfig(), {1, 2}, 7);
  const std::vector<std::string> names = SortedParameterNames(stage);
  EXPECT_EQ(names.front(), "h.1.attn.c_attn.bias");
  EXPECT_EQ(names.back(), "h.2.mlp.c_proj.weight");
  EXPECT_EQ(stage.SegmentOf("wte.weight"), 0);  // also for names the stage does not hold
  EXPECT_EQ(stage.SegmentOf("lm_head_weight"), 3);
  EXPECT_EQ(stage.SegmentOf("h.4.ln_1.weight"), -1);
  EXPECT_FALSE(stage.DecaysWeight("h.1.ln_2.weight"));
  EXPECT_TRUE(stage.DecaysWeight("h.1.mlp.c_fc.weight"));
  const std::vector<varuna::SharedWeight> shared = stage.shared_weights();
  ASSERT_EQ(shared.size(), 1u);
  EXPECT_EQ(shared[0].first, "wte.weight");
  EXPECT_EQ(shared[0].second, "lm_head_weight");
}

std::map<std::string, at::Tensor> Parameters(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : module.named_parameters()) out[item.key()] = item.value();
  return out;
}

// Every parameter's gradient in `actual` against the same parameter's in `expected`: bitwise when
// `relative` is 0, else within `relative` x the largest |expected| of that gradient.
void ExpectSameGradients(const torch::nn::Module& expected, const torch::nn::Module& actual,
                         double relative = 0) {
  const std::map<std::string, at::Tensor> actual_parameters = Parameters(actual);
  for (const auto& item : expected.named_parameters()) {
    const at::Tensor want = item.value().grad();
    const at::Tensor got = actual_parameters.at(item.key()).grad();
    ASSERT_TRUE(got.defined()) << item.key();
    const double difference = (got - want).abs().max().item<double>();
    if (relative == 0) {
      EXPECT_TRUE(at::equal(got, want)) << item.key() << " max diff " << difference;
    } else {
      EXPECT_LE(difference, relative * (want.abs().max().item<double>() + 1e-6)) << item.key();
    }
  }
}

// The set-up of a fused-against-unfused comparison: the same parameter names, both stages in
// `dtype`, and each one's loss on `inputs` from the same generator state; {unfused, fused}.
std::pair<at::Tensor, at::Tensor> SeededForwards(Gpt2Stage& unfused, Gpt2Stage& fused,
                                                 at::ScalarType dtype,
                                                 const varuna::TensorMap& inputs) {
  EXPECT_EQ(SortedParameterNames(fused), SortedParameterNames(unfused));
  unfused.to(dtype);
  fused.to(dtype);
  at::manual_seed(11);
  at::Tensor a = unfused.Forward(at::Tensor(), inputs);
  at::manual_seed(11);
  at::Tensor b = fused.Forward(at::Tensor(), inputs);
  return {a, b};
}

TEST_F(Gpt2StageTest, ChainedStagesGiveBitwiseTheWholeModelsLossAndGradients) {
  const Gpt2Config config = TinyConfig();
  const varuna::TensorMap inputs = RandomBatch(config, 3, 8, /*seed=*/11);
  Gpt2Stage whole(config, {0, 3}, 5);
  const at::Tensor whole_loss = whole.Forward({}, inputs);
  whole_loss.backward();
  const std::map<std::string, at::Tensor> whole_params = Parameters(whole);

  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(::testing::Message() << "split after segment " << k);
    Gpt2Stage front(config, {0, k}, 5);
    Gpt2Stage back(config, {k + 1, 3}, 5);
    const at::Tensor activation = front.Forward({}, inputs);
    EXPECT_THAT(activation.sizes(), ElementsAre(3, 8, 16));
    const at::Tensor received = activation.detach().requires_grad_(true);
    const at::Tensor loss = back.Forward(received, inputs);
    EXPECT_TRUE(at::equal(loss, whole_loss))
        << loss.item<float>() << " vs " << whole_loss.item<float>();
    loss.backward();
    activation.backward(received.grad());
    int compared = 0;
    for (const Gpt2Stage* stage : {&front, &back}) {
      for (const auto& item : stage->named_parameters()) {
        const at::Tensor& expected = whole_params.at(item.key());
        EXPECT_TRUE(at::equal(item.value(), expected)) << item.key();
        ASSERT_TRUE(item.value().grad().defined()) << item.key();
        EXPECT_TRUE(at::equal(item.value().grad(), expected.grad())) << item.key();
        ++compared;
      }
    }
    EXPECT_EQ(compared, static_cast<int>(whole_params.size()));
  }
}

TEST_F(Gpt2StageTest, InitIsIndependentOfTheRangeAndTiesLmHeadToWte) {
  const Gpt2Config config = TinyConfig();
  Gpt2Stage whole(config, {0, 3}, 5);
  Gpt2Stage first(config, {0, 0}, 5);
  Gpt2Stage middle(config, {1, 2}, 5);
  Gpt2Stage last(config, {3, 3}, 5);
  const std::map<std::string, at::Tensor> all = Parameters(whole);
  for (const Gpt2Stage* stage : {&first, &middle, &last}) {
    for (const auto& item : stage->named_parameters()) {
      EXPECT_TRUE(at::equal(item.value(), all.at(item.key()))) << item.key();
    }
  }
  EXPECT_TRUE(at::equal(all.at("lm_head_weight"), all.at("wte.weight")));
  EXPECT_TRUE(at::equal(Parameters(last).at("lm_head_weight"), Parameters(first).at("wte.weight")));
  // Separate parameters: updating one leaves the other alone.
  EXPECT_NE(all.at("lm_head_weight").data_ptr(), all.at("wte.weight").data_ptr());

  // Another seed gives other values; every weight differs from every other.
  Gpt2Stage other(config, {0, 3}, 6);
  EXPECT_FALSE(at::equal(Parameters(other).at("wte.weight"), all.at("wte.weight")));
  EXPECT_FALSE(at::equal(all.at("h.1.attn.c_proj.weight"), all.at("h.2.attn.c_proj.weight")));
}

TEST_F(Gpt2StageTest, InitFollowsMegatron) {
  Gpt2Config config = TinyConfig();
  config.hidden_size = 256;
  config.num_attention_heads = 4;
  config.init_method_std = 0.02;
  Gpt2Stage stage(config, {0, 3}, 1234);
  const std::map<std::string, at::Tensor> p = Parameters(stage);
  const double output_std = 0.02 / std::sqrt(2.0 * 4);
  for (const char* name : {"h.0.mlp.c_fc.weight", "h.3.attn.c_attn.weight"}) {
    EXPECT_NEAR(p.at(name).std().item<double>(), 0.02, 0.02 * 0.02) << name;
    EXPECT_NEAR(p.at(name).mean().item<double>(), 0.0, 1e-3) << name;
  }
  for (const char* name : {"h.1.mlp.c_proj.weight", "h.2.attn.c_proj.weight"}) {
    EXPECT_NEAR(p.at(name).std().item<double>(), output_std, output_std * 0.03) << name;
  }
  EXPECT_NEAR(p.at("wte.weight").std().item<double>(), 0.02, 0.02 * 0.05);
  EXPECT_NEAR(p.at("wpe.weight").std().item<double>(), 0.02, 0.02 * 0.05);
  for (const char* name : {"h.0.ln_1.weight", "h.2.ln_2.weight", "ln_f.weight"}) {
    EXPECT_TRUE(at::equal(p.at(name), at::ones_like(p.at(name)))) << name;
  }
  for (const char* name : {"h.0.ln_1.bias", "h.1.attn.c_attn.bias", "h.2.mlp.c_proj.bias",
                           "h.3.mlp.c_fc.bias", "ln_f.bias"}) {
    EXPECT_EQ(p.at(name).abs().max().item<float>(), 0.0f) << name;
  }
}

TEST_F(Gpt2StageTest, ParameterSeedIsStableFnv1a) {
  // Pinned values: changing the hash would silently change every initialisation.
  EXPECT_EQ(ParameterSeed(0, ""), 12161962213042174405ull);
  EXPECT_EQ(ParameterSeed(1234, "wte.weight"), 9762509242939368287ull);
  EXPECT_NE(ParameterSeed(1234, "wpe.weight"), ParameterSeed(1234, "wte.weight"));
  EXPECT_NE(ParameterSeed(1235, "wte.weight"), ParameterSeed(1234, "wte.weight"));
}

TEST_F(Gpt2StageTest, InitializeParameterRejectsUnknownNames) {
  at::Tensor t = at::empty({4});
  try {
    InitializeParameter(TinyConfig(), 1, "h.9.ln_1.weight", t);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot initialise 'h.9.ln_1.weight'"));
  }
}

TEST_F(Gpt2StageTest, CutPointsFireInsideTheRangeOnly) {
  const Gpt2Config config = TinyConfig();
  const varuna::TensorMap inputs = RandomBatch(config, 2, 5, 3);
  struct Case {
    varuna::SegmentRange range;
    std::vector<int> fired;
  };
  for (const Case& c :
       {Case{{0, 3}, {0, 1, 2}}, Case{{1, 2}, {1, 2}}, Case{{3, 3}, {}}, Case{{0, 0}, {0}}}) {
    Gpt2Stage stage(config, c.range, 1);
    ASSERT_EQ(stage.cut_points().size(), 3u);
    std::vector<int> fired;
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(stage.cut_points()[k].index(), k);
      stage.cut_points()[k].set_observer([&fired](int index, const at::Tensor& activation) {
        fired.push_back(index);
        EXPECT_THAT(activation.sizes(), ElementsAre(2, 5, 16));
      });
    }
    const at::Tensor activation = c.range.first == 0 ? at::Tensor() : at::randn({2, 5, 16});
    stage.Forward(activation, inputs);
    EXPECT_EQ(fired, c.fired);
  }
}

TEST_F(Gpt2StageTest, StagesReadOnlyTheInputsTheyNeed) {
  const Gpt2Config config = TinyConfig();
  const varuna::TensorMap full = RandomBatch(config, 2, 6, 3);
  const at::Tensor activation = at::randn({2, 6, 16});

  Gpt2Stage middle(config, {1, 2}, 1);
  EXPECT_THAT(middle.Forward(activation, {}).sizes(), ElementsAre(2, 6, 16));

  Gpt2Stage first(config, {0, 1}, 1);
  const at::Tensor out = first.Forward(
      {}, {{"input_ids", full.at("input_ids")}, {"position_ids", full.at("position_ids")}});
  EXPECT_THAT(out.sizes(), ElementsAre(2, 6, 16));

  Gpt2Stage last(config, {2, 3}, 1);
  const at::Tensor loss = last.Forward(
      activation, {{"labels", full.at("labels")}, {"loss_mask", full.at("loss_mask")}});
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_TRUE(std::isfinite(loss.item<float>()));
}

TEST_F(Gpt2StageTest, DropoutFollowsTrainingModeAndTheDefaultGenerator) {
  Gpt2Config config = TinyConfig();
  config.hidden_dropout = 0.1;
  config.attention_dropout = 0.1;
  const varuna::TensorMap inputs = RandomBatch(config, 2, 8, 3);
  Gpt2Stage stage(config, {0, 3}, 9);
  Gpt2Config no_dropout_config = TinyConfig();
  Gpt2Stage no_dropout(no_dropout_config, {0, 3}, 9);

  at::Generator generator = at::detail::getDefaultCPUGenerator();  // shares the default state
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    state = generator.get_state();
  }
  const at::Tensor a = stage.Forward({}, inputs);
  const at::Tensor b = stage.Forward({}, inputs);
  EXPECT_FALSE(at::equal(a, b));  // fresh masks each time
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
  EXPECT_TRUE(at::equal(stage.Forward({}, inputs), a));  // same state, same masks

  stage.eval();
  const at::Tensor reference = no_dropout.Forward({}, inputs);
  EXPECT_TRUE(at::equal(stage.Forward({}, inputs), reference));
  EXPECT_TRUE(at::equal(stage.Forward({}, inputs), reference));
  EXPECT_FALSE(at::equal(a, reference));
}

TEST_F(Gpt2StageTest, BuilderBuildsTheGivenRange) {
  const varuna::StageBuilder builder = Gpt2StageBuilder(TinyConfig(), 5);
  std::shared_ptr<varuna::StageModule> stage = builder({1, 2});
  ASSERT_NE(stage, nullptr);
  EXPECT_EQ(stage->segments(), (varuna::SegmentRange{1, 2}));
  Gpt2Stage reference(TinyConfig(), {1, 2}, 5);
  const std::map<std::string, at::Tensor> expected = Parameters(reference);
  for (const auto& item : stage->named_parameters()) {
    EXPECT_TRUE(at::equal(item.value(), expected.at(item.key()))) << item.key();
  }
}

TEST_F(Gpt2StageTest, WorksInFloat64AfterTo) {
  const Gpt2Config config = TinyConfig();
  Gpt2Stage stage(config, {0, 3}, 5);
  const at::Tensor loss32 = stage.Forward({}, RandomBatch(config, 2, 8, 1));
  stage.to(at::kDouble);
  const at::Tensor loss64 = stage.Forward({}, RandomBatch(config, 2, 8, 1));
  EXPECT_EQ(loss64.scalar_type(), at::kDouble);
  EXPECT_NEAR(loss64.item<double>(), loss32.item<double>(), 1e-5);
}

TEST_F(Gpt2StageTest, HalfPrecisionKeepsTheLossInFloat32) {
  const Gpt2Config config = TinyConfig();
  const varuna::TensorMap inputs = RandomBatch(config, 2, 8, 1);
  Gpt2Stage reference(config, {0, 3}, 5);
  const double loss32 = reference.Forward({}, inputs).item<double>();
  for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(dtype);
    Gpt2Stage stage(config, {0, 3}, 5);
    stage.to(dtype);
    const at::Tensor loss = stage.Forward({}, inputs);
    EXPECT_EQ(loss.scalar_type(), at::kFloat);
    EXPECT_NEAR(loss.item<double>(), loss32, 0.03 * loss32);
    loss.backward();
    for (const auto& item : stage.named_parameters()) {
      ASSERT_TRUE(item.value().grad().defined()) << item.key();
      EXPECT_EQ(item.value().grad().scalar_type(), dtype) << item.key();
    }
  }
}

// Megatron's --cross-entropy-loss-fusion: the chunked LM head + cross entropy gives the loss
// and every gradient of the unfused path (float64: to rounding; float32: within 1e-5), on the
// last stage alone and for the whole model, with grad and without.
TEST_F(Gpt2StageTest, FusedCrossEntropyGivesTheUnfusedLossAndGradients) {
  const Gpt2Config config = TinyConfig();
  const varuna::TensorMap inputs = RandomBatch(config, 3, 8, 4);
  Gpt2ExecutionOptions fused_execution;
  fused_execution.fused_cross_entropy = true;
  for (varuna::SegmentRange range : {varuna::SegmentRange{0, 3}, varuna::SegmentRange{2, 3}}) {
    for (at::ScalarType dtype : {at::kDouble, at::kFloat}) {
      SCOPED_TRACE(::testing::Message()
                   << "[" << range.first << ", " << range.last << "] " << dtype);
      Gpt2Stage unfused(config, range, 5);
      Gpt2Stage fused(config, range, 5, fused_execution);
      unfused.to(dtype);
      fused.to(dtype);
      at::Tensor activation;
      if (range.first > 0) {
        activation = at::randn({3, 8, config.hidden_size},
                               at::make_generator<at::CPUGeneratorImpl>(6), at::kDouble)
                         .to(dtype);
      }
      const at::Tensor a = unfused.Forward(activation, inputs);
      const at::Tensor b = fused.Forward(activation, inputs);
      const double tolerance = dtype == at::kDouble ? 1e-12 : 1e-5;
      EXPECT_NEAR(b.item<double>(), a.item<double>(), tolerance * a.item<double>());
      {
        const at::NoGradGuard no_grad;
        EXPECT_NEAR(fused.Forward(activation, inputs).item<double>(), a.item<double>(),
                    tolerance * a.item<double>());
      }
      a.backward();
      b.backward();
      for (const auto& item : unfused.named_parameters()) {
        const at::Tensor& expected = item.value().grad();
        const at::Tensor& actual = fused.named_parameters()[item.key()].grad();
        ASSERT_TRUE(actual.defined()) << item.key();
        EXPECT_TRUE(at::allclose(actual, expected, tolerance, tolerance * 10))
            << item.key() << " max diff " << (actual - expected).abs().max().item<double>();
      }
    }
  }
}

// Megatron's --bias-dropout-fusion (on by default): c_proj without its bias, then
// BiasDropoutAdd, against the unfused at::linear + dropout + add. On the CPU the loss and every
// gradient are bitwise equal in float64 and float32, without dropout and with it (0.1,
// training: the fused op draws exactly as at::dropout does, so the masks are the same). The
// parameter names are the same either way.
TEST_F(Gpt2StageTest, BiasDropoutFusionGivesTheUnfusedLossAndGradients) {
  Gpt2ExecutionOptions unfused_execution;
  unfused_execution.bias_dropout_fusion = false;
  ASSERT_TRUE(Gpt2ExecutionOptions().bias_dropout_fusion);
  for (const double dropout : {0.0, 0.1}) {
    Gpt2Config config = TinyConfig();
    config.hidden_dropout = dropout;
    config.attention_dropout = dropout;
    const varuna::TensorMap inputs = RandomBatch(config, 3, 8, 4);
    for (at::ScalarType dtype : {at::kDouble, at::kFloat}) {
      SCOPED_TRACE(::testing::Message() << "dropout " << dropout << " " << dtype);
      Gpt2Stage unfused(config, {0, 3}, 5, unfused_execution);
      Gpt2Stage fused(config, {0, 3}, 5);
      const auto [a, b] = SeededForwards(unfused, fused, dtype, inputs);
      EXPECT_EQ(b.item<double>(), a.item<double>());
      a.backward();
      b.backward();
      ExpectSameGradients(unfused, fused);
    }
  }
}

// --bias-gelu-gemm-fusion (off by default): the MLP as one GeluMlp against the linear +
// BiasGelu + linear composition. On the CPU the fused op's reference runs those ops, so in
// float64 and float32 the loss and every gradient are bitwise equal (with dropout, whose masks
// are drawn outside the MLP); in bfloat16 the kept GeLU input is rounded once more, so close.
TEST_F(Gpt2StageTest, BiasGeluGemmFusionGivesTheUnfusedLossAndGradients) {
  ASSERT_FALSE(Gpt2ExecutionOptions().bias_gelu_gemm_fusion);
  Gpt2ExecutionOptions epilogues;
  epilogues.bias_gelu_gemm_fusion = true;
  Gpt2Config config = TinyConfig();
  config.hidden_dropout = 0.1;
  config.attention_dropout = 0.1;
  const varuna::TensorMap inputs = RandomBatch(config, 3, 8, 4);
  for (at::ScalarType dtype : {at::kDouble, at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    Gpt2Stage unfused(config, {0, 3}, 5);
    Gpt2Stage fused(config, {0, 3}, 5, epilogues);
    const auto [a, b] = SeededForwards(unfused, fused, dtype, inputs);
    // The switch reached the layers: the fused MLP is in one graph only.
    EXPECT_TRUE(testing::GraphHasNode(b, "GeluMlpFunction"));
    EXPECT_FALSE(testing::GraphHasNode(a, "GeluMlpFunction"));
    a.backward();
    b.backward();
    const bool bitwise = dtype != at::kBFloat16;
    if (bitwise) {
      EXPECT_EQ(b.item<double>(), a.item<double>());
    } else {
      EXPECT_NEAR(b.item<double>(), a.item<double>(), 2e-2 * std::abs(a.item<double>()));
    }
    ExpectSameGradients(unfused, fused, bitwise ? 0.0 : 5e-2);
  }
}

// --bias-dropout-add-layernorm-fusion (on by default, with --bias-dropout-fusion): ln_1 as
// ResidualLayerNorm (x passed on to the residual add, x's two gradients added in its backward)
// and the attention's residual add and ln_2 as one BiasDropoutAddLayerNorm, against LayerNorm
// and BiasDropoutAdd then LayerNorm. On the CPU the fused ops' reference paths are those ops
// (adding gradients in the dtype, as autograd does), drawing the same masks, so the loss and
// every gradient are bitwise equal, with dropout and without, in every dtype.
TEST_F(Gpt2StageTest, BiasDropoutAddLayerNormFusionGivesTheUnfusedLossAndGradients) {
  Gpt2ExecutionOptions separate;
  separate.bias_dropout_add_layernorm_fusion = false;
  ASSERT_TRUE(Gpt2ExecutionOptions().bias_dropout_add_layernorm_fusion);
  for (const double dropout : {0.0, 0.1}) {
    Gpt2Config config = TinyConfig();
    config.hidden_dropout = dropout;
    config.attention_dropout = dropout;
    const varuna::TensorMap inputs = RandomBatch(config, 3, 8, 4);
    for (at::ScalarType dtype : {at::kDouble, at::kFloat, at::kBFloat16}) {
      SCOPED_TRACE(::testing::Message() << "dropout " << dropout << " " << dtype);
      Gpt2Stage unfused(config, {0, 3}, 5, separate);
      Gpt2Stage fused(config, {0, 3}, 5);
      const auto [a, b] = SeededForwards(unfused, fused, dtype, inputs);
      // The switch reached the layers: both LayerNorms take their residual's gradient.
      for (const char* node : {"ResidualLayerNormFunction", "BiasDropoutAddLayerNormFunction"}) {
        EXPECT_TRUE(testing::GraphHasNode(b, node)) << node;
        EXPECT_FALSE(testing::GraphHasNode(a, node)) << node;
      }
      // ... and the attention's residual add takes ln_1's residual output (input 2, its first
      // output), so that x's second gradient reaches ln_1's backward.
      torch::autograd::Node* add = testing::FindNode(b, "BiasDropoutAddLayerNormFunction");
      ASSERT_NE(add, nullptr);
      ASSERT_GE(add->next_edges().size(), 3u);
      const torch::autograd::Edge& residual = add->next_edges()[2];
      ASSERT_NE(residual.function, nullptr);
      EXPECT_NE(residual.function->name().find("ResidualLayerNormFunction"), std::string::npos)
          << residual.function->name();
      EXPECT_EQ(residual.input_nr, 0u);
      EXPECT_EQ(b.item<double>(), a.item<double>());
      a.backward();
      b.backward();
      ExpectSameGradients(unfused, fused);
    }
  }
}

// ---- errors ---------------------------------------------------------------------------------

template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  ADD_FAILURE() << "expected c10::Error";
  return "";
}

TEST_F(Gpt2StageTest, RejectsBadRangesAndConfigs) {
  const Gpt2Config config = TinyConfig();
  EXPECT_TRUE(ValidateSegmentRange(config, {0, 3}).ok());
  for (varuna::SegmentRange range :
       {varuna::SegmentRange{2, 1}, varuna::SegmentRange{-1, 1}, varuna::SegmentRange{0, 4}}) {
    const absl::Status status = ValidateSegmentRange(config, range);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("choose 0 <= first <= last <= 3"));
  }
  EXPECT_THAT(ValidateSegmentRange(config, {2, 1}).message(),
              HasSubstr("segment range [2, 1] is not a non-empty range of the 4 segments"));
  EXPECT_THAT(ErrorOf([&] { Gpt2Stage(config, {0, 4}, 1); }), HasSubstr("segment range [0, 4]"));
  Gpt2Config bad = config;
  bad.num_attention_heads = 3;
  EXPECT_THAT(ErrorOf([&] {
                Gpt2Stage(bad, {0, 3}, 1);
              }),
              HasSubstr("--hidden-size=16 is not divisible by --num-attention-heads=3"));
}

TEST_F(Gpt2StageTest, ForwardNamesMissingOrMalformedInputs) {
  const Gpt2Config config = TinyConfig();
  const varuna::TensorMap inputs = RandomBatch(config, 2, 6, 3);
  Gpt2Stage whole(config, {0, 3}, 1);
  Gpt2Stage middle(config, {1, 2}, 1);

  varuna::TensorMap missing = inputs;
  missing.erase("input_ids");
  EXPECT_THAT(ErrorOf([&] { whole.Forward({}, missing); }),
              HasSubstr("Gpt2Stage(segments [0, 3] of 4): input 'input_ids' is missing"));
  missing = inputs;
  missing.erase("loss_mask");
  EXPECT_THAT(ErrorOf([&] { whole.Forward({}, missing); }),
              HasSubstr("input 'loss_mask' is missing"));

  varuna::TensorMap bad = inputs;
  bad["input_ids"] = inputs.at("input_ids").to(at::kInt);
  EXPECT_THAT(ErrorOf([&] { whole.Forward({}, bad); }),
              HasSubstr("input 'input_ids' must be int64 [batch, seq]"));
  bad = inputs;
  bad["position_ids"] = inputs.at("position_ids").narrow(1, 0, 5);
  EXPECT_THAT(ErrorOf([&] { whole.Forward({}, bad); }),
              HasSubstr("input 'position_ids' must be int64 of the shape of input_ids"));
  bad = inputs;
  bad["labels"] = inputs.at("labels").narrow(1, 0, 5);
  EXPECT_THAT(ErrorOf([&] { whole.Forward({}, bad); }), HasSubstr("input 'labels' must be int64"));
  bad = inputs;
  bad["loss_mask"] = inputs.at("loss_mask").to(at::kLong);
  EXPECT_THAT(ErrorOf([&] { whole.Forward({}, bad); }),
              HasSubstr("input 'loss_mask' must be floating-point"));
  bad = inputs;
  bad["attention_mask"] = at::zeros({2, 1, 6, 6});
  EXPECT_THAT(ErrorOf([&] { whole.Forward({}, bad); }),
              HasSubstr("input 'attention_mask' must be bool [2 or 1, 1, 6, 6]"));

  const varuna::TensorMap long_batch = RandomBatch(config, 1, 11, 3);
  EXPECT_THAT(ErrorOf([&] { whole.Forward({}, long_batch); }),
              HasSubstr("sequence length 11 exceeds --max-position-embeddings=10"));

  EXPECT_THAT(ErrorOf([&] { middle.Forward({}, {}); }),
              HasSubstr("no activation given: a stage that does not start at segment 0"));
  EXPECT_THAT(ErrorOf([&] {
                middle.Forward(at::zeros({2, 6, 15}), {});
              }),
              HasSubstr("the activation must be [batch, seq, 16], got [2, 6, 15]"));
  EXPECT_THAT(ErrorOf([&] {
                middle.Logits(at::zeros({2, 6, 16}), {});
              }),
              HasSubstr("Logits needs the stage that holds the last segment"));
}

}  // namespace
}  // namespace gpt2
