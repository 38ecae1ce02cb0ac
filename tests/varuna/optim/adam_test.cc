#include "varuna/optim/adam.h"

#include <torch/torch.h>

#include "gtest/gtest.h"

namespace varuna {
namespace {

// Against LibTorch's own AdamW (an independent implementation) over several steps, with one
// parameter that decays and one that does not.
TEST(AdamTest, MatchesLibTorchAdamW) {
  torch::manual_seed(0);
  torch::set_num_threads(1);
  at::Tensor w = torch::randn({5, 3});
  at::Tensor b = torch::randn({3});
  at::Tensor w_ref = w.clone().requires_grad_(true);
  at::Tensor b_ref = b.clone().requires_grad_(true);
  AdamOptions options;
  options.lr = 0.01;
  options.weight_decay = 0.1;
  Adam adam({{"w", w, true}, {"b", b, false}}, options);

  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{w_ref},
                      std::make_unique<torch::optim::AdamWOptions>(
                          torch::optim::AdamWOptions(0.01).weight_decay(0.1)));
  groups.emplace_back(std::vector<at::Tensor>{b_ref},
                      std::make_unique<torch::optim::AdamWOptions>(
                          torch::optim::AdamWOptions(0.01).weight_decay(0.0)));
  torch::optim::AdamW reference(groups);

  for (int step = 0; step < 5; ++step) {
    at::Tensor gw = torch::randn({5, 3});
    at::Tensor gb = torch::randn({3});
    adam.MasterGrads()[0].copy_(gw);
    adam.MasterGrads()[1].copy_(gb);
    adam.Step();
    w_ref.mutable_grad() = gw.clone();
    b_ref.mutable_grad() = gb.clone();
    reference.step();
  }
  EXPECT_EQ(adam.step_count(), 5);
  EXPECT_TRUE(torch::allclose(w, w_ref.detach(), 1e-6, 1e-7)) << (w - w_ref).abs().max();
  EXPECT_TRUE(torch::allclose(b, b_ref.detach(), 1e-6, 1e-7)) << (b - b_ref).abs().max();
  EXPECT_FALSE(torch::equal(w, torch::zeros_like(w)));
}

// The first step in closed form: m_hat = g and v_hat = g^2, so p -= lr * (sign(g) + wd * p).
TEST(AdamTest, FirstStepClosedForm) {
  at::Tensor p = torch::tensor({1.0f, -2.0f, 3.0f});
  AdamOptions options;
  options.lr = 0.1;
  options.eps = 0;
  options.weight_decay = 0.5;
  Adam adam({{"p", p, true}}, options);
  adam.MasterGrads()[0].copy_(torch::tensor({0.3f, -4.0f, 0.01f}));
  adam.Step();
  // decay first: p * (1 - 0.05), then - 0.1 * sign(g)
  EXPECT_TRUE(
      torch::allclose(p, torch::tensor({0.95f - 0.1f, -1.9f + 0.1f, 2.85f - 0.1f}), 1e-6, 1e-6))
      << p;
}

// A half parameter keeps an fp32 master; the update is applied to the master and the half
// copy is its rounding.
TEST(AdamTest, HalfParameterHasFp32Master) {
  at::Tensor p = torch::full({4}, 1.0, torch::kHalf);
  AdamOptions options;
  options.lr = 1e-4;  // Smaller than half's resolution at 1.0 (~1e-3).
  options.weight_decay = 0;
  Adam adam({{"p", p, true}}, options);
  ASSERT_EQ(adam.master(0).scalar_type(), torch::kFloat);
  for (int i = 0; i < 20; ++i) {
    adam.MasterGrads()[0].fill_(1.0);
    adam.Step();
  }
  EXPECT_NEAR(adam.master(0)[0].item<float>(), 1.0f - 20 * 1e-4f, 1e-5);
  EXPECT_EQ(p[0].item<float>(), adam.master(0)[0].to(torch::kHalf).item<float>());
}

// StepOnDevice applies step_count() + 1 and leaves the count to CountStep; with the skip flag
// set it changes nothing. Released master gradients come back (shaped as the masters) on the
// next MasterGrads(), and stepping before that is refused rather than reading freed memory.
TEST(AdamTest, StepOnDeviceAndReleasedMasterGrads) {
  torch::manual_seed(3);
  const at::Tensor g = torch::randn({4, 2});
  at::Tensor w = torch::randn({4, 2});
  at::Tensor w_host = w.clone();
  Adam on_device({{"w", w, true}}, AdamOptions());
  Adam on_host({{"w", w_host, true}}, AdamOptions());
  on_device.MasterGrads()[0].copy_(g);
  on_host.MasterGrads()[0].copy_(g);
  const at::Tensor before = w.clone();
  on_device.StepOnDevice(torch::full({1}, 0.25f), torch::ones({1}));  // skipped
  EXPECT_TRUE(torch::equal(w, before));
  on_device.StepOnDevice(torch::full({1}, 0.25f), torch::zeros({1}));
  EXPECT_EQ(on_device.step_count(), 0);
  on_device.CountStep();
  on_host.Step(0.25);
  EXPECT_EQ(on_device.step_count(), 1);
  EXPECT_TRUE(torch::equal(w, w_host));

  on_device.ReleaseMasterGrads();
  EXPECT_THROW(on_device.Step(), c10::Error);
  ASSERT_TRUE(on_device.MasterGrads()[0].defined());
  EXPECT_EQ(on_device.MasterGrads()[0].sizes(), w.sizes());
  EXPECT_EQ(on_device.MasterGrads()[0].scalar_type(), at::kFloat);
}

TEST(AdamTest, StateRoundTripAndErrors) {
  at::Tensor p = torch::randn({2, 2});
  Adam adam({{"x", p, true}}, AdamOptions());
  adam.MasterGrads()[0].fill_(0.5);
  adam.Step();
  std::map<std::string, at::Tensor> saved;
  for (auto& [name, t] : adam.StateOf(0)) saved[name] = t.clone();
  ASSERT_EQ(saved.size(), 3u);
  ASSERT_TRUE(saved.count("x.exp_avg"));

  at::Tensor q = torch::zeros({2, 2});
  Adam restored({{"x", q, true}}, AdamOptions());
  auto find = [&](const std::string& n) {
    auto it = saved.find(n);
    return it == saved.end() ? at::Tensor() : it->second;
  };
  ASSERT_TRUE(restored.LoadStateOf(0, find).ok());
  EXPECT_TRUE(torch::equal(q, p));
  for (auto& [name, t] : restored.StateOf(0)) EXPECT_TRUE(torch::equal(t, saved[name])) << name;

  saved.erase("x.exp_avg_sq");
  absl::Status missing = restored.LoadStateOf(0, find);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("x.exp_avg_sq is missing"), std::string::npos);
  saved["x.exp_avg_sq"] = torch::zeros({3});
  absl::Status shape = restored.LoadStateOf(0, find);
  EXPECT_NE(shape.message().find("has shape [3], the model expects [2, 2]"), std::string::npos)
      << shape;
}

}  // namespace
}  // namespace varuna
