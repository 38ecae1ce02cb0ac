// Proves the LibTorch wiring: headers and libraries of the same 2.11.0 wheel, tensor math
// and autograd that give the values worked out by hand, and a CPU build that needs no GPU.

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

TEST(LibTorchSmoke, HeadersAndLibraryAreTheSameVersion) {
  // The headers say which version they are; at::show_config(), compiled into
  // libtorch_cpu.so, says which version the library is. Returning a std::string across the
  // boundary at all also proves both sides use the C++11 ABI (std::__cxx11::basic_string).
  EXPECT_EQ(TORCH_VERSION_MAJOR, 2);
  EXPECT_EQ(TORCH_VERSION_MINOR, 11);
  EXPECT_EQ(TORCH_VERSION_PATCH, 0);
  const std::string config = at::show_config();
  EXPECT_NE(config.find("TORCH_VERSION=2.11.0,"), std::string::npos) << config;
}

TEST(LibTorchSmoke, MatmulGivesTheHandComputedProduct) {
  const auto a = torch::tensor({{1.0, 2.0}, {3.0, 4.0}}, torch::kFloat64);
  const auto b = torch::tensor({{5.0, 6.0}, {7.0, 8.0}}, torch::kFloat64);
  const auto c = torch::matmul(a, b);
  // [[1*5+2*7, 1*6+2*8], [3*5+4*7, 3*6+4*8]]
  const auto expected = torch::tensor({{19.0, 22.0}, {43.0, 50.0}}, torch::kFloat64);
  EXPECT_TRUE(torch::equal(c, expected)) << c;
}

TEST(LibTorchSmoke, AutogradGivesAnalyticGradients) {
  // f(x, w) = sum(tanh(x * w)); df/dx = w * (1 - tanh(xw)^2), df/dw = x * (1 - tanh(xw)^2).
  const auto x = torch::tensor({0.5, -1.0, 2.0}, torch::requires_grad());
  const auto w = torch::tensor({1.5, 0.25, -0.75}, torch::requires_grad());
  torch::tanh(x * w).sum().backward();

  const std::vector<double> xs = {0.5, -1.0, 2.0};
  const std::vector<double> ws = {1.5, 0.25, -0.75};
  for (size_t i = 0; i < xs.size(); ++i) {
    const double sech2 = 1.0 - std::pow(std::tanh(xs[i] * ws[i]), 2);
    EXPECT_NEAR(x.grad()[i].item<double>(), ws[i] * sech2, 1e-6) << "dx[" << i << "]";
    EXPECT_NEAR(w.grad()[i].item<double>(), xs[i] * sech2, 1e-6) << "dw[" << i << "]";
  }
}

TEST(LibTorchSmoke, NnModuleTrainsOnALinearProblem) {
  // y = 3x - 2, learned by SGD on a one-weight linear layer: proves modules, optimizers and
  // the autograd engine work together, not only single ops.
  torch::manual_seed(0);
  torch::nn::Linear model(1, 1);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1));
  const auto x = torch::linspace(-1, 1, 32).unsqueeze(1);
  const auto y = 3 * x - 2;
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    torch::mse_loss(model->forward(x), y).backward();
    opt.step();
  }
  EXPECT_NEAR(model->weight.item<double>(), 3.0, 1e-3);
  EXPECT_NEAR(model->bias.item<double>(), -2.0, 1e-3);
}

TEST(LibTorchSmoke, CpuBuildRunsWithoutAGpu) {
  // The default build links libtorch_cpu only; CUDA ops are not registered in it.
  EXPECT_FALSE(torch::cuda::is_available());
}

}  // namespace
