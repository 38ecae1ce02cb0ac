// GPT-2 with FP8 linears (Gpt2ExecutionOptions::fp8) on the CPU, where LibTorch emulates the FP8
// GEMM: the state is nine tensors per linear, named "<linear>.fp8.<role>.<field>", mapped to the
// linear's segment and never a parameter; once its scales are calibrated (one step), the model's
// loss and gradients are the float32 model's within FP8's error; the scale update follows the
// recorded amaxes; a recomputed forward records the same amaxes; shapes FP8 cannot take are
// refused with the numbers.
#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/gpt2/model.h"
#include "tests/models/gpt2/autograd_graph.h"
#include "tests/models/gpt2/test_batch.h"

namespace gpt2 {
namespace {

using ::testing::HasSubstr;

// 2 layers, hidden 64, 4 heads, sequence 32, GPT-2's initialisation; dims multiples of 16.
Gpt2Config Fp8Config() {
  Gpt2Config config = testing::TinyConfig();
  config.num_layers = 2;
  config.hidden_size = 64;
  config.num_attention_heads = 4;
  config.seq_length = 32;
  config.max_position_embeddings = 32;
  config.init_method_std = 0.02;
  return config;
}

Gpt2ExecutionOptions Fp8Execution(varuna::kernels::Fp8Format format, int64_t history = 1) {
  Gpt2ExecutionOptions execution;
  varuna::kernels::Fp8Recipe recipe;
  recipe.format = format;
  recipe.amax_history_len = history;
  recipe.amax_compute_algo = varuna::kernels::Fp8AmaxComputeAlgo::kMostRecent;
  execution.fp8 = recipe;
  return execution;
}

class Fp8ModelTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};

TEST_F(Fp8ModelTest, StateIsNinePerLinearNamedByLayerAndNotAParameter) {
  const Gpt2Config config = Fp8Config();
  Gpt2Stage plain(config, {0, 1}, 3);
  Gpt2Stage fp8(config, {1, 1}, 3, Fp8Execution(varuna::kernels::Fp8Format::kHybrid, 4));
  EXPECT_TRUE(plain.named_state().empty());
  EXPECT_TRUE(plain.replica_max_state().empty());

  // The parameters are those of the plain stage's segment 1: FP8 adds none.
  std::set<std::string> plain_names, fp8_names;
  for (const auto& item : plain.named_parameters()) {
    if (plain.SegmentOf(item.key()) == 1) plain_names.insert(item.key());
  }
  for (const auto& item : fp8.named_parameters()) fp8_names.insert(item.key());
  EXPECT_EQ(fp8_names, plain_names);
  EXPECT_EQ(fp8.named_buffers().size(), 0u);

  const auto state = fp8.named_state();
  ASSERT_EQ(state.size(), 4u * 9u);  // layer 1 only
  std::set<std::string> names;
  for (const auto& [name, tensor] : state) {
    names.insert(name);
    EXPECT_EQ(fp8.SegmentOf(name), 1) << name;
    EXPECT_EQ(tensor.scalar_type(), at::kFloat) << name;
    EXPECT_FALSE(tensor.requires_grad()) << name;
  }
  EXPECT_EQ(names.count("h.1.attn.c_attn.fp8.input.amax_history"), 1u);
  EXPECT_EQ(names.count("h.1.attn.c_proj.fp8.weight.scale"), 1u);
  EXPECT_EQ(names.count("h.1.mlp.c_fc.fp8.grad_output.scale_inv"), 1u);
  EXPECT_EQ(names.count("h.1.mlp.c_proj.fp8.input.amax_history"), 1u);
  EXPECT_EQ(fp8.SegmentOf("h.0.mlp.c_fc.fp8.input.scale"), 0);
  EXPECT_EQ(fp8.SegmentOf("h.7.mlp.c_fc.fp8.input.scale"), -1);  // no layer 7
  for (const auto& [name, tensor] : state) {
    if (absl::EndsWith(name, "amax_history")) {
      EXPECT_EQ(tensor.numel(), 4) << name;
    }
  }
  // The same tensors on every call; replica_max_state views their amax_history[0].
  EXPECT_TRUE(fp8.named_state()[0].second.is_same(state[0].second));
  const auto amaxes = fp8.replica_max_state();
  ASSERT_EQ(amaxes.size(), 4u * 3u);
  amaxes[0].fill_(5.0);
  EXPECT_EQ(state[0].second[0].item<float>(), 5.0f);  // h.1.attn.c_attn.fp8.input.amax_history
}

// After one forward and backward (amaxes recorded) and the scale update, the FP8 model's loss
// is the float32 model's within FP8's error, and so are its gradients.
TEST_F(Fp8ModelTest, CalibratedLossAndGradientsAreTheFloat32ModelsWithinFp8Error) {
  const Gpt2Config config = Fp8Config();
  const varuna::TensorMap batch = testing::RandomBatch(config, 2, config.seq_length, 11);
  for (auto format : {varuna::kernels::Fp8Format::kHybrid, varuna::kernels::Fp8Format::kE4M3}) {
    SCOPED_TRACE(varuna::kernels::Fp8FormatName(format));
    Gpt2Stage reference(config, {0, 1}, 5);
    Gpt2Stage fp8(config, {0, 1}, 5, Fp8Execution(format));
    fp8.Forward({}, batch).backward();
    fp8.UpdateStateAfterBackward();
    fp8.zero_grad();

    const at::Tensor expected = reference.Forward({}, batch);
    const at::Tensor loss = fp8.Forward({}, batch);
    expected.backward();
    loss.backward();
    const double a = expected.item<double>(), b = loss.item<double>();
    EXPECT_NEAR(b, a, 2e-3 * a);
    EXPECT_NE(b, a);  // FP8 did run
    for (const std::string name :
         {"h.0.attn.c_attn.weight", "h.1.mlp.c_fc.weight", "h.1.mlp.c_proj.bias", "wte.weight"}) {
      const at::Tensor g_ref = reference.named_parameters()[name].grad();
      const at::Tensor g = fp8.named_parameters()[name].grad();
      const double relative = ((g - g_ref).norm() / g_ref.norm()).item<double>();
      EXPECT_LT(relative, 0.1) << name;
    }
  }
}

// In a bf16 model (as Megatron runs FP8) the FP8 linears take and give bf16; the calibrated loss
// is the bf16 model's within FP8's error.
TEST_F(Fp8ModelTest, Bf16ModelRunsFp8Linears) {
  const Gpt2Config config = Fp8Config();
  const varuna::TensorMap batch = testing::RandomBatch(config, 2, config.seq_length, 13);
  Gpt2Stage reference(config, {0, 1}, 5);
  Gpt2Stage fp8(config, {0, 1}, 5, Fp8Execution(varuna::kernels::Fp8Format::kHybrid));
  reference.to(at::kBFloat16);
  fp8.to(at::kBFloat16);
  fp8.Forward({}, batch).backward();
  fp8.UpdateStateAfterBackward();
  const double a = reference.Forward({}, batch).item<double>();
  const double b = fp8.Forward({}, batch).item<double>();
  EXPECT_NEAR(b, a, 1e-2 * a);
  EXPECT_EQ(fp8.named_parameters()["h.0.mlp.c_fc.weight"].grad().scalar_type(), at::kBFloat16);
  for (const auto& [name, tensor] : fp8.named_state()) {
    EXPECT_EQ(tensor.scalar_type(), at::kFloat) << name;  // the state stays float32
  }
}

// fp8_linears: only the chosen linears compute in FP8 and hold state; with none chosen the
// model is bitwise the model without FP8.
TEST_F(Fp8ModelTest, OnlyTheChosenLinearsComputeInFp8) {
  const Gpt2Config config = Fp8Config();
  const varuna::TensorMap batch = testing::RandomBatch(config, 2, config.seq_length, 19);
  Gpt2ExecutionOptions some = Fp8Execution(varuna::kernels::Fp8Format::kHybrid);
  some.fp8_linears = Fp8LinearSet{/*qkv=*/false, /*proj=*/true, /*fc1=*/false, /*fc2=*/false};
  Gpt2Stage proj_only(config, {0, 1}, 5, some);
  const std::vector<std::pair<std::string, at::Tensor>> state = proj_only.named_state();
  EXPECT_EQ(state.size(), 2u * 9u);  // two layers' attention projections
  for (const auto& [name, tensor] : state) {
    EXPECT_TRUE(absl::StrContains(name, ".attn.c_proj.fp8.")) << name;
  }
  EXPECT_TRUE(testing::GraphHasNode(proj_only.Forward({}, batch), "Fp8LinearFunction"));

  Gpt2ExecutionOptions none = Fp8Execution(varuna::kernels::Fp8Format::kHybrid);
  none.fp8_linears = Fp8LinearSet{false, false, false, false};
  Gpt2Stage reference(config, {0, 1}, 5);
  Gpt2Stage no_fp8(config, {0, 1}, 5, none);
  EXPECT_TRUE(no_fp8.named_state().empty());
  at::manual_seed(3);
  const at::Tensor a = reference.Forward({}, batch);
  at::manual_seed(3);
  const at::Tensor b = no_fp8.Forward({}, batch);
  EXPECT_FALSE(testing::GraphHasNode(b, "Fp8LinearFunction"));
  EXPECT_EQ(b.item<double>(), a.item<double>());
}

// FP8 linears take precedence over the MLP's GEMM-epilogue fusion (whose GEMMs are not FP8):
// with both asked for, the model runs exactly the FP8 model, state included.
TEST_F(Fp8ModelTest, Fp8LinearsTakePrecedenceOverTheGeluGemmFusion) {
  const Gpt2Config config = Fp8Config();
  const varuna::TensorMap batch = testing::RandomBatch(config, 2, config.seq_length, 17);
  Gpt2ExecutionOptions both = Fp8Execution(varuna::kernels::Fp8Format::kHybrid);
  both.bias_gelu_gemm_fusion = true;
  Gpt2Stage fp8(config, {0, 1}, 5, Fp8Execution(varuna::kernels::Fp8Format::kHybrid));
  Gpt2Stage fused(config, {0, 1}, 5, both);
  const at::Tensor a = fp8.Forward({}, batch);
  const at::Tensor b = fused.Forward({}, batch);
  EXPECT_FALSE(testing::GraphHasNode(b, "GeluMlpFunction"));
  EXPECT_TRUE(testing::GraphHasNode(b, "Fp8LinearFunction"));
  EXPECT_EQ(b.item<double>(), a.item<double>());
  a.backward();
  b.backward();
  const auto fused_parameters = fused.named_parameters();
  for (const auto& item : fp8.named_parameters()) {
    EXPECT_TRUE(at::equal(fused_parameters[item.key()].grad(), item.value().grad())) << item.key();
  }
  const auto fused_state = fused.named_state();
  const auto fp8_state = fp8.named_state();
  ASSERT_EQ(fused_state.size(), fp8_state.size());
  for (size_t i = 0; i < fp8_state.size(); ++i) {
    EXPECT_EQ(fused_state[i].first, fp8_state[i].first);
    EXPECT_TRUE(at::equal(fused_state[i].second, fp8_state[i].second)) << fp8_state[i].first;
  }
}

// The scale after the update is fp8_max / amax of the step (most_recent, margin 0), per role;
// a recomputed forward (the same micro-batch again, as Varuna's schedule runs it) records the
// same amaxes, so recomputation changes nothing.
TEST_F(Fp8ModelTest, ScalesFollowTheRecordedAmaxAndRecomputeRecordsTheSame) {
  const Gpt2Config config = Fp8Config();
  const varuna::TensorMap batch = testing::RandomBatch(config, 2, config.seq_length, 12);
  Gpt2Stage fp8(config, {0, 1}, 5, Fp8Execution(varuna::kernels::Fp8Format::kHybrid));
  auto amaxes = [&fp8] {
    std::vector<float> out;
    for (const at::Tensor& t : fp8.replica_max_state()) out.push_back(t.item<float>());
    return out;
  };
  {
    at::NoGradGuard no_grad;
    fp8.Forward({}, batch);
  }
  const std::vector<float> once = amaxes();
  fp8.Forward({}, batch).backward();  // the recompute, then the backward
  const std::vector<float> twice = amaxes();
  ASSERT_EQ(once.size(), twice.size());
  for (size_t i = 0; i < once.size(); ++i) {
    if (i % 3 == 2) {
      EXPECT_EQ(once[i], 0.0f) << i;  // no gradient before the backward
      EXPECT_GT(twice[i], 0.0f) << i;
    } else {
      EXPECT_EQ(twice[i], once[i]) << i;
      EXPECT_GT(once[i], 0.0f) << i;
    }
  }
  fp8.UpdateStateAfterBackward();
  const auto state = fp8.named_state();
  for (size_t i = 0; i < state.size(); i += 3) {
    // (amax_history, scale, scale_inv) of one role; role k of linear i / 9 is twice[i / 3].
    const std::string& name = state[i].first;
    const bool grad = name.find(".grad_output.") != std::string::npos;
    const double fp8_max = grad ? 57344.0 : 448.0;
    const float amax = twice[i / 3];
    EXPECT_FLOAT_EQ(state[i + 1].second.item<float>(), static_cast<float>(fp8_max / amax)) << name;
    EXPECT_FLOAT_EQ(state[i + 2].second.item<float>(), static_cast<float>(amax / fp8_max))
        << state[i + 2].first;
  }
}

TEST_F(Fp8ModelTest, ShapesFp8CannotTakeAreRefusedWithTheNumbers) {
  Gpt2Config config = Fp8Config();
  EXPECT_TRUE(ValidateFp8Shapes(config, {2, 1}).ok());  // 64 and 32 tokens
  config.seq_length = 12;
  absl::Status tokens = ValidateFp8Shapes(config, {4, 2});  // 48, then 24
  EXPECT_EQ(tokens.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tokens.message()),
              HasSubstr("a micro-batch of 2 x 12 = 24 tokens is not"));
  config = Fp8Config();
  config.hidden_size = 72;
  absl::Status hidden = ValidateFp8Shapes(config, {2});
  EXPECT_THAT(std::string(hidden.message()),
              HasSubstr("--fp8-format needs --hidden-size to be a multiple of 16"));
  EXPECT_THAT(std::string(hidden.message()), HasSubstr("it is 72"));
}

}  // namespace
}  // namespace gpt2
