// Proves the GPT-2 forward numerics against an independent reference written with other ops
// (at::scaled_dot_product_attention with is_causal, hand-written LayerNorm and tanh-GeLU,
// log_softmax + gather for the loss) on the same weights, the causal property, and the
// document-reset attention mask.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "models/gpt2/model.h"
#include "tests/models/gpt2/test_batch.h"

namespace gpt2 {
namespace {

using testing::RandomBatch;
using testing::TinyConfig;

class ReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

// ---- the reference ----------------------------------------------------------------------------

at::Tensor RefLayerNorm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  const at::Tensor mean = x.mean({-1}, /*keepdim=*/true);
  const at::Tensor var = (x - mean).pow(2).mean({-1}, /*keepdim=*/true);
  return (x - mean) / (var + eps).sqrt() * w + b;
}

at::Tensor RefGelu(const at::Tensor& x) {
  return 0.5 * x * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x.pow(3))));
}

at::Tensor Affine(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return at::matmul(x, w.t()) + b;
}

// The logits [b, s, V] of the full model with parameters `p` (by name), causal attention.
at::Tensor RefLogits(const std::map<std::string, at::Tensor>& p, const Gpt2Config& config,
                     const at::Tensor& ids, const at::Tensor& positions) {
  const int64_t b = ids.size(0);
  const int64_t s = ids.size(1);
  const int64_t h = config.hidden_size;
  const int64_t heads = config.num_attention_heads;
  const double eps = config.layernorm_epsilon;
  at::Tensor x = p.at("wte.weight").index_select(0, ids.flatten()).view({b, s, h}) +
                 p.at("wpe.weight").index_select(0, positions.flatten()).view({b, s, h});
  for (int i = 0; i < config.num_layers; ++i) {
    auto w = [&](const std::string& suffix) {
      return p.at("h." + std::to_string(i) + "." + suffix);
    };
    const at::Tensor a = RefLayerNorm(x, w("ln_1.weight"), w("ln_1.bias"), eps);
    const at::Tensor qkv = Affine(a, w("attn.c_attn.weight"), w("attn.c_attn.bias"));
    std::vector<at::Tensor> qkv_heads;
    for (const at::Tensor& part : qkv.chunk(3, -1)) {
      qkv_heads.push_back(part.reshape({b, s, heads, h / heads}).permute({0, 2, 1, 3}));
    }
    const at::Tensor attended = at::scaled_dot_product_attention(
        qkv_heads[0], qkv_heads[1], qkv_heads[2], /*attn_mask=*/{}, /*dropout_p=*/0.0,
        /*is_causal=*/true);
    const at::Tensor merged = attended.permute({0, 2, 1, 3}).reshape({b, s, h});
    x = x + Affine(merged, w("attn.c_proj.weight"), w("attn.c_proj.bias"));
    const at::Tensor m = RefLayerNorm(x, w("ln_2.weight"), w("ln_2.bias"), eps);
    x = x + Affine(RefGelu(Affine(m, w("mlp.c_fc.weight"), w("mlp.c_fc.bias"))),
                   w("mlp.c_proj.weight"), w("mlp.c_proj.bias"));
  }
  x = RefLayerNorm(x, p.at("ln_f.weight"), p.at("ln_f.bias"), eps);
  return at::matmul(x, p.at("lm_head_weight").t());
}

at::Tensor RefLoss(const at::Tensor& logits, const at::Tensor& labels, const at::Tensor& mask) {
  const at::Tensor nll = -at::log_softmax(logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1);
  return (nll * mask).sum() / mask.sum();
}

std::map<std::string, at::Tensor> Parameters(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : module.named_parameters()) out[item.key()] = item.value().detach();
  return out;
}

void ExpectMatchesReference(at::ScalarType dtype, double tolerance) {
  const Gpt2Config config = TinyConfig();
  Gpt2Stage stage(config, {0, config.num_layers - 1}, 21);
  stage.to(dtype);
  varuna::TensorMap inputs = RandomBatch(config, 3, 8, 5);
  inputs["loss_mask"] = inputs["loss_mask"].to(dtype);
  const std::map<std::string, at::Tensor> p = Parameters(stage);

  const at::Tensor ref_logits =
      RefLogits(p, config, inputs.at("input_ids"), inputs.at("position_ids"));
  const at::Tensor ref_loss = RefLoss(ref_logits, inputs.at("labels"), inputs.at("loss_mask"));
  const at::Tensor logits = stage.Logits({}, inputs);
  const at::Tensor loss = stage.Forward({}, inputs);
  EXPECT_EQ(loss.scalar_type(), dtype);
  EXPECT_NEAR(loss.item<double>(), ref_loss.item<double>(), tolerance);
  EXPECT_LT((logits - ref_logits).abs().max().item<double>(), tolerance * 10);
  // The comparison can fail: another seed gives another loss.
  Gpt2Stage other(config, {0, config.num_layers - 1}, 22);
  other.to(dtype);
  EXPECT_GT(std::abs(other.Forward({}, inputs).item<double>() - ref_loss.item<double>()),
            1000 * tolerance);
}

TEST_F(ReferenceTest, Float32LossMatchesIndependentReference) {
  ExpectMatchesReference(at::kFloat, 1e-5);
}

TEST_F(ReferenceTest, Float64LossMatchesIndependentReference) {
  ExpectMatchesReference(at::kDouble, 1e-10);
}

// ---- causality ---------------------------------------------------------------------------------

// Max |a - b| over positions [from, to) of dimension 1.
double MaxDiff(const at::Tensor& a, const at::Tensor& b, int64_t from, int64_t to) {
  if (from >= to) return 0.0;
  return (a.narrow(1, from, to - from) - b.narrow(1, from, to - from)).abs().max().item<double>();
}

TEST_F(ReferenceTest, ChangingTokenTChangesNothingBeforeT) {
  const Gpt2Config config = TinyConfig();
  Gpt2Stage whole(config, {0, 3}, 4);
  Gpt2Stage front(config, {0, 1}, 4);
  const varuna::TensorMap inputs = RandomBatch(config, 2, 8, 9);
  const at::Tensor logits = whole.Logits({}, inputs);
  const at::Tensor activation = front.Forward({}, inputs);
  for (int64_t t = 0; t < 8; ++t) {
    SCOPED_TRACE(::testing::Message() << "t = " << t);
    varuna::TensorMap changed = inputs;
    changed["input_ids"] = inputs.at("input_ids").clone();
    changed["input_ids"].select(1, t).add_(1).remainder_(config.vocab_size);
    const at::Tensor changed_logits = whole.Logits({}, changed);
    const at::Tensor changed_activation = front.Forward({}, changed);
    EXPECT_EQ(MaxDiff(logits, changed_logits, 0, t), 0.0);
    EXPECT_EQ(MaxDiff(activation, changed_activation, 0, t), 0.0);
    EXPECT_GT(MaxDiff(logits, changed_logits, t, t + 1), 1e-3);
    EXPECT_GT(MaxDiff(activation, changed_activation, t, t + 1), 1e-3);
  }
}

TEST_F(ReferenceTest, ExplicitCausalMaskEqualsTheDefault) {
  const Gpt2Config config = TinyConfig();
  Gpt2Stage whole(config, {0, 3}, 4);
  varuna::TensorMap inputs = RandomBatch(config, 2, 6, 9);
  const at::Tensor loss = whole.Forward({}, inputs);
  inputs["attention_mask"] =
      at::ones({6, 6}, at::kBool).triu(1).view({1, 1, 6, 6}).expand({2, 1, 6, 6});
  EXPECT_TRUE(at::equal(whole.Forward({}, inputs), loss));
  // A mask that hides nothing lets early positions see the future: the loss changes.
  inputs["attention_mask"] = at::zeros({1, 1, 6, 6}, at::kBool);
  EXPECT_GT(std::abs(whole.Forward({}, inputs).item<float>() - loss.item<float>()), 1e-4);
}

TEST_F(ReferenceTest, DocumentMaskIsolatesDocumentsInOneSequence) {
  // Megatron's reset_attention_mask / reset_position_ids: one sequence holding document A
  // (positions 0..2) and document B (positions 3..7, position ids restarting at 0). B's logits
  // must equal those of B run alone.
  const Gpt2Config config = TinyConfig();
  Gpt2Stage whole(config, {0, 3}, 4);
  whole.to(at::kDouble);
  const varuna::TensorMap inputs = RandomBatch(config, 1, 8, 9);
  at::Tensor mask = at::ones({8, 8}, at::kBool).triu(1);
  mask.narrow(0, 3, 5).narrow(1, 0, 3).fill_(true);  // B does not see A
  varuna::TensorMap packed = inputs;
  packed["position_ids"] = at::tensor({0, 1, 2, 0, 1, 2, 3, 4}, at::kLong).view({1, 8});
  packed["attention_mask"] = mask.view({1, 1, 8, 8});
  varuna::TensorMap alone;
  alone["input_ids"] = inputs.at("input_ids").narrow(1, 3, 5);
  alone["position_ids"] = at::arange(5, at::kLong).view({1, 5});
  const at::Tensor packed_b = whole.Logits({}, packed).narrow(1, 3, 5);
  EXPECT_LT((packed_b - whole.Logits({}, alone)).abs().max().item<double>(), 1e-12);
  // Without the mask B sees A and differs.
  packed.erase("attention_mask");
  EXPECT_GT((whole.Logits({}, packed).narrow(1, 3, 5) - whole.Logits({}, alone))
                .abs()
                .max()
                .item<double>(),
            1e-6);
}

}  // namespace
}  // namespace gpt2
