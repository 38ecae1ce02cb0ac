// Proves the gradients of the whole GPT-2 model (float64, no dropout) against central finite
// differences for a sample of elements of every parameter tensor, and the loss-mask semantics:
// the loss is the masked mean of per-token cross entropy, and a label under a zero mask
// changes neither the loss nor any gradient.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>

#include "models/gpt2/model.h"
#include "tests/models/gpt2/test_batch.h"

namespace gpt2 {
namespace {

using testing::RandomBatch;

class GradientTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

// 2 layers, hidden 8, 2 heads, seq 5 (6 positions), vocab 11 padded to 12, no dropout.
Gpt2Config FiniteDifferenceConfig() {
  Gpt2Config config;
  config.num_layers = 2;
  config.hidden_size = 8;
  config.num_attention_heads = 2;
  config.seq_length = 5;
  config.max_position_embeddings = 6;
  config.vocab_size = 11;
  config.make_vocab_size_divisible_by = 4;
  config.hidden_dropout = 0.0;
  config.attention_dropout = 0.0;
  config.init_method_std = 0.3;
  return config;
}

TEST_F(GradientTest, GradientsOfEveryParameterMatchFiniteDifferences) {
  const Gpt2Config config = FiniteDifferenceConfig();
  Gpt2Stage stage(config, {0, 1}, 3);
  stage.to(at::kDouble);
  {
    // Non-trivial LayerNorm parameters and biases, so their gradients are exercised fully.
    at::NoGradGuard no_grad;
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(17);
    for (auto& item : stage.named_parameters()) {
      if (item.value().dim() == 1) item.value().normal_(0.5, 0.3, generator);
    }
  }
  const varuna::TensorMap inputs = RandomBatch(config, 2, 5, 8);
  stage.zero_grad();
  stage.Forward({}, inputs).backward();

  std::mt19937 rng(99);
  const double eps = 1e-6;
  int checked = 0;
  int nonzero = 0;
  for (auto& item : stage.named_parameters()) {
    ASSERT_TRUE(item.value().grad().defined()) << item.key() << " got no gradient";
    at::Tensor flat = item.value().detach().view({-1});
    const at::Tensor grad = item.value().grad().view({-1});
    std::vector<int64_t> indices;
    for (int n = 0; n < 4; ++n) {
      indices.push_back(std::uniform_int_distribution<int64_t>(0, flat.numel() - 1)(rng));
    }
    if (item.key() == "wte.weight") {  // rows of tokens in the batch have non-zero gradients
      const int64_t token = inputs.at("input_ids")[0][2].item<int64_t>();
      indices.push_back(token * config.hidden_size + 3);
    }
    for (int64_t index : indices) {
      at::NoGradGuard no_grad;
      const double original = flat[index].item<double>();
      flat[index] = original + eps;
      const double plus = stage.Forward({}, inputs).item<double>();
      flat[index] = original - eps;
      const double minus = stage.Forward({}, inputs).item<double>();
      flat[index] = original;
      const double numeric = (plus - minus) / (2 * eps);
      const double analytic = grad[index].item<double>();
      EXPECT_NEAR(analytic, numeric, 1e-8 + 1e-6 * std::abs(numeric))
          << item.key() << "[" << index << "]";
      ++checked;
      nonzero += std::abs(analytic) > 1e-6;
    }
  }
  EXPECT_EQ(checked, 4 * 29 + 1);  // 14 + 12 + 3 parameter tensors
  EXPECT_GT(nonzero, checked / 2);
}

std::map<std::string, at::Tensor> Gradients(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : module.named_parameters()) {
    EXPECT_TRUE(item.value().grad().defined()) << item.key() << " got no gradient";
    if (item.value().grad().defined()) out[item.key()] = item.value().grad().clone();
  }
  return out;
}

TEST_F(GradientTest, LossIsTheMaskedMeanOfTokenCrossEntropy) {
  const Gpt2Config config = testing::TinyConfig();
  Gpt2Stage stage(config, {0, 3}, 3);
  stage.to(at::kDouble);
  varuna::TensorMap inputs = RandomBatch(config, 2, 8, 4);
  inputs["loss_mask"] =
      at::tensor({1., 0., 1., 1., 0., 0., 1., 0., 1., 1., 1., 0., 0., 0., 0., 1.}, at::kDouble)
          .view({2, 8});
  const at::Tensor logits = stage.Logits({}, inputs);
  // By hand: ce = logsumexp(logits) - logit[label], mean over the 8 counted tokens.
  const at::Tensor ce =
      logits.logsumexp(-1) - logits.gather(-1, inputs.at("labels").unsqueeze(-1)).squeeze(-1);
  double expected = 0.0;
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 8; ++j) {
      if (inputs.at("loss_mask")[i][j].item<double>() == 1.0) expected += ce[i][j].item<double>();
    }
  }
  expected /= 8;
  EXPECT_NEAR(stage.Forward({}, inputs).item<double>(), expected, 1e-12);

  // All ones: the plain mean cross entropy.
  inputs["loss_mask"] = at::ones({2, 8}, at::kFloat);
  const at::Tensor mean_ce =
      at::cross_entropy_loss(logits.flatten(0, 1), inputs.at("labels").flatten());
  EXPECT_NEAR(stage.Forward({}, inputs).item<double>(), mean_ce.item<double>(), 1e-12);
  EXPECT_GT(std::abs(mean_ce.item<double>() - expected), 1e-6);
}

TEST_F(GradientTest, LabelsUnderAZeroMaskChangeNothing) {
  const Gpt2Config config = testing::TinyConfig();
  Gpt2Stage stage(config, {0, 3}, 3);
  varuna::TensorMap inputs = RandomBatch(config, 2, 8, 4);
  at::Tensor mask = at::ones({2, 8});
  mask[0][5] = 0.0;
  mask[1][2] = 0.0;
  inputs["loss_mask"] = mask;

  stage.zero_grad();
  const at::Tensor loss = stage.Forward({}, inputs);
  loss.backward();
  const std::map<std::string, at::Tensor> grads = Gradients(stage);

  varuna::TensorMap relabelled = inputs;
  relabelled["labels"] = inputs.at("labels").clone();
  relabelled["labels"][0][5] = (inputs.at("labels")[0][5].item<int64_t>() + 1) % 23;
  relabelled["labels"][1][2] = (inputs.at("labels")[1][2].item<int64_t>() + 5) % 23;
  stage.zero_grad();
  const at::Tensor relabelled_loss = stage.Forward({}, relabelled);
  relabelled_loss.backward();
  EXPECT_TRUE(at::equal(relabelled_loss, loss));
  for (const auto& [name, grad] : Gradients(stage)) {
    EXPECT_TRUE(at::equal(grad, grads.at(name))) << name;
  }

  // A counted label does change the loss and the LM head's gradient.
  relabelled["labels"][0][4] = (inputs.at("labels")[0][4].item<int64_t>() + 1) % 23;
  stage.zero_grad();
  const at::Tensor counted_loss = stage.Forward({}, relabelled);
  counted_loss.backward();
  EXPECT_FALSE(at::equal(counted_loss, loss));
  EXPECT_FALSE(at::equal(Gradients(stage).at("lm_head_weight"), grads.at("lm_head_weight")));
}

}  // namespace
}  // namespace gpt2
