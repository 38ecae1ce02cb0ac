// Kernel equivalence of the fused multi-tensor Adam step: three steps on odd-sized tensors
// (1 to 131075 elements, an empty one, an unaligned view), weight decay on some, model copies
// in float16 / bfloat16 / float32 on some, grad_scale != 1, against a float64 composition of the
// formula; the device-side skip and grad_scale; and, on the CPU, bitwise equality with the op
// sequence of varuna::Adam::Step before it called FusedAdamStep (the resume tests rely on it).
#include "varuna/kernels/fused_adam.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "tests/varuna/kernels/kernel_test_util.h"

namespace varuna::kernels {
namespace {

using testing::AllClose;
using testing::RandomTensor;
using testing::ToleranceFor;

const std::vector<int64_t> kSizes = {1, 7, 33, 4099, 65537, 131075, 0};
// The model copy of tensor i when copies are on (nullopt: the master is the parameter).
const std::optional<at::ScalarType> kCopyTypes[] = {
    std::nullopt, at::kHalf, at::kBFloat16, at::kFloat, at::kHalf, std::nullopt, at::kBFloat16};
constexpr size_t kUnaligned = 4;  // Its tensors are views at an element offset of 1.

AdamHyperparameters Hyperparameters() {
  AdamHyperparameters hp;
  hp.lr = 1e-2;
  hp.beta1 = 0.9;
  hp.beta2 = 0.999;
  hp.eps = 1e-8;
  hp.weight_decay = 0.1;
  return hp;
}

// The op's operands on one device.
struct AdamState {
  std::vector<at::Tensor> masters, grads, exp_avg, exp_avg_sq, copies;
  std::vector<bool> decay;

  void Step(const AdamHyperparameters& hp, const at::Tensor& skip = {}) const {
    FusedAdamStep(masters, grads, exp_avg, exp_avg_sq, copies, decay, hp, skip);
  }
};

at::Tensor On(const at::Tensor& x, c10::Device device, at::ScalarType dtype, bool unaligned) {
  if (!unaligned) return x.to(device, dtype);
  at::Tensor buffer = at::zeros({x.numel() + 1}, at::TensorOptions(device).dtype(dtype));
  at::Tensor view = buffer.narrow(0, 1, x.numel());
  view.copy_(x);
  return view;
}

AdamState MakeState(c10::Device device, bool with_copies, uint64_t seed) {
  AdamState s;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    const int64_t n = kSizes[i];
    const bool unaligned = i == kUnaligned;
    const uint64_t base = seed + 10 * i;
    s.masters.push_back(On(RandomTensor({n}, base), device, at::kFloat, unaligned));
    s.grads.push_back(On(at::zeros({n}, at::kDouble), device, at::kFloat, unaligned));
    s.exp_avg.push_back(On(RandomTensor({n}, base + 1, 0.1), device, at::kFloat, unaligned));
    s.exp_avg_sq.push_back(
        On(RandomTensor({n}, base + 2).square() * 0.01, device, at::kFloat, unaligned));
    at::Tensor copy;
    if (with_copies && kCopyTypes[i].has_value()) {
      copy = On(at::zeros({n}, at::kDouble), device, *kCopyTypes[i], unaligned);
    }
    s.copies.push_back(copy);
    s.decay.push_back(i % 2 == 0);
  }
  return s;
}

void NewGradients(const AdamState& s, uint64_t seed) {
  for (size_t i = 0; i < s.grads.size(); ++i) {
    s.grads[i].copy_(RandomTensor({s.grads[i].numel()}, seed + i));
  }
}

// The float64 composition of the formula.
struct Reference {
  std::vector<at::Tensor> w, m, v;

  explicit Reference(const AdamState& s) {
    for (size_t i = 0; i < s.masters.size(); ++i) {
      w.push_back(s.masters[i].to(at::kCPU, at::kDouble));
      m.push_back(s.exp_avg[i].to(at::kCPU, at::kDouble));
      v.push_back(s.exp_avg_sq[i].to(at::kCPU, at::kDouble));
    }
  }

  void Step(const AdamState& s, const AdamHyperparameters& hp) {
    const double t = static_cast<double>(hp.step);
    const double bias1 = 1 - std::pow(hp.beta1, t);
    const double bias2 = 1 - std::pow(hp.beta2, t);
    for (size_t i = 0; i < w.size(); ++i) {
      const at::Tensor g = s.grads[i].to(at::kCPU, at::kDouble) * hp.grad_scale;
      m[i] = hp.beta1 * m[i] + (1 - hp.beta1) * g;
      v[i] = hp.beta2 * v[i] + (1 - hp.beta2) * g * g;
      const at::Tensor denom = v[i].sqrt() / std::sqrt(bias2) + hp.eps;
      if (s.decay[i]) w[i] = w[i] * (1 - hp.lr * hp.weight_decay);
      w[i] = w[i] - hp.lr / bias1 * m[i] / denom;
    }
  }

  void ExpectMatches(const AdamState& s) const {
    for (size_t i = 0; i < w.size(); ++i) {
      const std::string name = "tensor " + std::to_string(i);
      EXPECT_TRUE(AllClose(s.masters[i], w[i], ToleranceFor(at::kFloat), name + " master"));
      EXPECT_TRUE(AllClose(s.exp_avg[i], m[i], ToleranceFor(at::kFloat), name + " exp_avg"));
      EXPECT_TRUE(
          AllClose(s.exp_avg_sq[i], v[i], ToleranceFor(at::kFloat, 0.01), name + " exp_avg_sq"));
      if (s.copies[i].defined()) {
        // The copy is the op's own master rounded to nearest even: exactly.
        EXPECT_TRUE(at::equal(s.copies[i].cpu(), s.masters[i].to(s.copies[i].scalar_type()).cpu()))
            << name << " model copy";
      }
    }
  }
};

std::vector<at::Tensor> Snapshot(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& x : tensors) out.push_back(x.defined() ? x.cpu().clone() : x);
  return out;
}

void ExpectBitwiseEqual(const std::vector<at::Tensor>& actual,
                        const std::vector<at::Tensor>& expected, const std::string& what) {
  for (size_t i = 0; i < actual.size(); ++i) {
    if (!actual[i].defined()) continue;
    EXPECT_TRUE(at::equal(actual[i].cpu(), expected[i].cpu())) << what << "[" << i << "]";
  }
}

using FusedAdamStepTest = testing::KernelTest;

TEST_F(FusedAdamStepTest, ThreeStepsMatchFloat64WithAndWithoutModelCopies) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const bool with_copies : {false, true}) {
    SCOPED_TRACE(with_copies ? "with model copies" : "masters only");
    const AdamState s = MakeState(device, with_copies, 1000);
    Reference reference(s);
    const double grad_scales[] = {1.0, 0.37, 2.5};
    for (int64_t t = 1; t <= 3; ++t) {
      SCOPED_TRACE("step " + std::to_string(t));
      NewGradients(s, 2000 + 100 * t);
      AdamHyperparameters hp = Hyperparameters();
      hp.step = t;
      hp.grad_scale = grad_scales[t - 1];
      s.Step(hp);
      reference.Step(s, hp);
      reference.ExpectMatches(s);
    }
  }
}

TEST_F(FusedAdamStepTest, WeightDecayZeroAndBeta1Zero) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const AdamState s = MakeState(device, true, 3000);
  Reference reference(s);
  AdamHyperparameters hp = Hyperparameters();
  hp.weight_decay = 0;
  hp.beta1 = 0;
  hp.step = 5;
  NewGradients(s, 3100);
  s.Step(hp);
  reference.Step(s, hp);
  reference.ExpectMatches(s);
}

TEST_F(FusedAdamStepTest, SkipOneChangesNothingAndSkipZeroUpdates) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const AdamState s = MakeState(device, true, 4000);
  NewGradients(s, 4100);
  const std::vector<at::Tensor> masters = Snapshot(s.masters), grads = Snapshot(s.grads),
                                exp_avg = Snapshot(s.exp_avg), exp_avg_sq = Snapshot(s.exp_avg_sq),
                                copies = Snapshot(s.copies);
  const at::TensorOptions f32 = at::TensorOptions(device).dtype(at::kFloat);
  AdamHyperparameters hp = Hyperparameters();
  s.Step(hp, at::ones({1}, f32));
  ExpectBitwiseEqual(s.masters, masters, "masters");
  ExpectBitwiseEqual(s.grads, grads, "grads");
  ExpectBitwiseEqual(s.exp_avg, exp_avg, "exp_avg");
  ExpectBitwiseEqual(s.exp_avg_sq, exp_avg_sq, "exp_avg_sq");
  ExpectBitwiseEqual(s.copies, copies, "copies");

  Reference reference(s);
  s.Step(hp, at::zeros({1}, f32));
  reference.Step(s, hp);
  reference.ExpectMatches(s);
  EXPECT_FALSE(at::equal(s.masters[5].cpu(), masters[5])) << "skip = 0 must update";
  ExpectBitwiseEqual(s.grads, grads, "grads (read only)");
}

// A grad_scale tensor (the engine's clip coefficient, computed on the device) is the same
// update as hp.grad_scale holding its value, bitwise; and skip still wins over it.
TEST_F(FusedAdamStepTest, GradScaleTensorEqualsTheHostGradScale) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const AdamState host = MakeState(device, true, 4500);
  const AdamState tensor = MakeState(device, true, 4500);
  NewGradients(host, 4600);
  NewGradients(tensor, 4600);
  const at::TensorOptions f32 = at::TensorOptions(device).dtype(at::kFloat);
  AdamHyperparameters hp = Hyperparameters();
  hp.grad_scale = 0.3712345678;
  host.Step(hp);
  const at::Tensor scale = at::full({1}, hp.grad_scale, f32);
  hp.grad_scale = 1.0;  // Replaced by the tensor.
  FusedAdamStep(tensor.masters, tensor.grads, tensor.exp_avg, tensor.exp_avg_sq, tensor.copies,
                tensor.decay, hp, {}, scale);
  ExpectBitwiseEqual(tensor.masters, Snapshot(host.masters), "masters");
  ExpectBitwiseEqual(tensor.exp_avg, Snapshot(host.exp_avg), "exp_avg");
  ExpectBitwiseEqual(tensor.exp_avg_sq, Snapshot(host.exp_avg_sq), "exp_avg_sq");
  ExpectBitwiseEqual(tensor.copies, Snapshot(host.copies), "copies");
  const std::vector<at::Tensor> masters = Snapshot(tensor.masters);
  FusedAdamStep(tensor.masters, tensor.grads, tensor.exp_avg, tensor.exp_avg_sq, tensor.copies,
                tensor.decay, hp, at::ones({1}, f32), scale);
  ExpectBitwiseEqual(tensor.masters, masters, "masters after a skipped step");
}

// varuna::Adam::Step before it called FusedAdamStep (varuna/adam.cc at commit 35cd309), kept
// here as the bitwise contract: `parameters[i]` is the model tensor, masters[i] itself if fp32.
void LegacyAdamStep(const AdamState& s, const std::vector<at::Tensor>& parameters,
                    const AdamHyperparameters& hp) {
  at::NoGradGuard no_grad;
  const double t = static_cast<double>(hp.step);
  const double bias1 = 1.0 - std::pow(hp.beta1, t);
  const double bias2 = 1.0 - std::pow(hp.beta2, t);
  const double step_size = hp.lr / bias1;
  const double rsqrt_bias2 = 1.0 / std::sqrt(bias2);
  for (size_t i = 0; i < s.masters.size(); ++i) {
    const at::Tensor& m = s.exp_avg[i];
    const at::Tensor& v = s.exp_avg_sq[i];
    const at::Tensor& g = s.grads[i];
    const at::Tensor& w = s.masters[i];
    m.mul_(hp.beta1).add_(g, 1.0 - hp.beta1);
    v.mul_(hp.beta2).addcmul_(g, g, 1.0 - hp.beta2);
    at::Tensor denom = v.sqrt().mul_(rsqrt_bias2).add_(hp.eps);
    if (s.decay[i] && hp.weight_decay != 0) w.mul_(1.0 - hp.lr * hp.weight_decay);
    w.addcdiv_(m, denom, -step_size);
    if (!w.is_same(parameters[i])) parameters[i].copy_(w);
  }
}

TEST_F(FusedAdamStepTest, EqualsTheLegacyAdamStepBitwiseOnTheCpu) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const AdamState op = MakeState(device, true, 5000);
  const AdamState legacy = MakeState(c10::Device(c10::kCPU), true, 5000);
  std::vector<at::Tensor> parameters;
  for (size_t i = 0; i < legacy.masters.size(); ++i) {
    parameters.push_back(legacy.copies[i].defined() ? legacy.copies[i] : legacy.masters[i]);
  }
  // The op with the master passed as its own "copy" must treat it as no copy.
  std::vector<at::Tensor> copies = op.copies;
  for (size_t i = 0; i < copies.size(); ++i) {
    if (!copies[i].defined()) copies[i] = op.masters[i];
  }
  for (int64_t t = 1; t <= 3; ++t) {
    NewGradients(op, 5100 + t);
    NewGradients(legacy, 5100 + t);
    AdamHyperparameters hp = Hyperparameters();
    hp.step = t;
    FusedAdamStep(op.masters, op.grads, op.exp_avg, op.exp_avg_sq, copies, op.decay, hp);
    LegacyAdamStep(legacy, parameters, hp);
  }
  if (device.is_cpu()) {
    ExpectBitwiseEqual(op.masters, legacy.masters, "masters");
    ExpectBitwiseEqual(op.exp_avg, legacy.exp_avg, "exp_avg");
    ExpectBitwiseEqual(op.exp_avg_sq, legacy.exp_avg_sq, "exp_avg_sq");
    ExpectBitwiseEqual(op.copies, legacy.copies, "model copies");
  } else {
    for (size_t i = 0; i < op.masters.size(); ++i) {
      EXPECT_TRUE(AllClose(op.masters[i], legacy.masters[i], ToleranceFor(at::kFloat),
                           "master " + std::to_string(i)));
    }
  }
}

TEST_F(FusedAdamStepTest, EmptyListIsANoOp) {
  FusedAdamStep({}, {}, {}, {}, {}, {}, Hyperparameters());
}

TEST_F(FusedAdamStepTest, RejectsMisuseNamingTheArgument) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::TensorOptions f32 = at::TensorOptions(device).dtype(at::kFloat);
  auto t = [&](int64_t n = 7) { return at::ones({n}, f32); };
  const at::Tensor w = t(), g = t(), m = t(), v = t();
  const AdamHyperparameters hp = Hyperparameters();
  const at::Tensor elsewhere =
      at::ones({7}, at::TensorOptions(device.is_cuda() ? c10::kCPU : c10::kMeta));

  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {}, {m}, {v}, {}, {true}, hp),
                      "FusedAdamStep: 1 masters but 0 grads");
  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {g}, {m}, {v}, {}, {}, hp),
                      "FusedAdamStep: 1 masters but 0 decay");
  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {g}, {m}, {v}, {at::Tensor(), at::Tensor()}, {true}, hp),
                      "FusedAdamStep: 1 masters but 2 model_copies");
  EXPECT_KERNEL_ERROR(FusedAdamStep({w.to(at::kHalf)}, {g}, {m}, {v}, {}, {true}, hp),
                      "FusedAdamStep: masters[0] is Half; it must be float32");
  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {g}, {t(6)}, {v}, {}, {true}, hp),
                      "FusedAdamStep: exp_avg[0] has 6 elements but masters[0] has 7");
  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {at::ones({7, 2}, f32).t()[0]}, {m}, {v}, {}, {true}, hp),
                      "FusedAdamStep: grads[0] is not contiguous");
  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {g}, {m}, {at::Tensor()}, {}, {true}, hp),
                      "FusedAdamStep: exp_avg_sq[0] is undefined");
  EXPECT_KERNEL_ERROR(
      FusedAdamStep({w}, {g}, {m}, {v}, {w.to(at::kDouble)}, {true}, hp),
      "FusedAdamStep: model_copies[0] is Double; model copies are float32, float16 or "
      "bfloat16");
  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {g}, {m}, {v}, {t(8).to(at::kHalf)}, {true}, hp),
                      "FusedAdamStep: model_copies[0] has 8 elements but masters[0] has 7");
  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {w}, {m}, {v}, {}, {true}, hp),
                      "FusedAdamStep: grads[0] shares memory with masters[0]");
  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {g}, {m}, {elsewhere}, {}, {true}, hp),
                      "FusedAdamStep: exp_avg_sq[0] is on");
  EXPECT_KERNEL_ERROR(
      FusedAdamStep({w}, {g}, {m}, {v}, {}, {true}, hp, at::ones({1}, f32.dtype(at::kInt))),
      "FusedAdamStep: skip must be a float32 tensor of one element");
  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {g}, {m}, {v}, {}, {true}, hp, at::zeros({2}, f32)),
                      "FusedAdamStep: skip must be a float32 tensor of one element");
  AdamHyperparameters bad = hp;
  bad.step = 0;
  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {g}, {m}, {v}, {}, {true}, bad),
                      "FusedAdamStep: step 0 is not a step number");
  bad = hp;
  bad.beta2 = 1.0;
  EXPECT_KERNEL_ERROR(FusedAdamStep({w}, {g}, {m}, {v}, {}, {true}, bad),
                      "FusedAdamStep: beta2 1 is outside [0, 1)");
  // Nothing above changed the tensors.
  EXPECT_TRUE(at::equal(w.cpu(), at::ones({7})));
}

}  // namespace
}  // namespace varuna::kernels
