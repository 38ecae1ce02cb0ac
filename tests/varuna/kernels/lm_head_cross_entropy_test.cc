// LmHeadCrossEntropy against the unfused composition in float64 (linear, log_softmax, nll_loss,
// masked mean; its gradients by autograd): the loss and both gradients in every dtype, with
// chunks that divide the tokens and chunks that do not; the upstream gradient scales them; no
// gradient work without grad mode; evaluation; misuse named.
#include "varuna/kernels/lm_head_cross_entropy.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "tests/varuna/kernels/kernel_test_util.h"

namespace varuna::kernels {
namespace {

using testing::AllClose;
using testing::KernelTest;
using testing::Magnitude;
using testing::RandomTensor;
using testing::ToleranceFor;

constexpr int64_t kTokens = 37;
constexpr int64_t kHidden = 24;
constexpr int64_t kVocab = 53;

struct Case {
  at::Tensor hidden;  // float64 CPU
  at::Tensor weight;
  at::Tensor labels;
  at::Tensor mask;
};

Case MakeCase(uint64_t seed) {
  Case c;
  c.hidden = RandomTensor({kTokens, kHidden}, seed);
  c.weight = RandomTensor({kVocab, kHidden}, seed + 1, 0.3);
  c.labels = at::randint(0, kVocab, {kTokens}, at::make_generator<at::CPUGeneratorImpl>(seed + 2),
                         at::kLong);
  // Zeros and fractional weights: the mean is weighted, not a count.
  c.mask = (RandomTensor({kTokens}, seed + 3) > -0.3).to(at::kDouble) * 0.5 +
           (RandomTensor({kTokens}, seed + 4) > 0.5).to(at::kDouble);
  return c;
}

struct Expected {
  at::Tensor loss;
  at::Tensor grad_hidden;
  at::Tensor grad_weight;
};

// The unfused composition in float64, differentiated by autograd with upstream gradient g.
Expected Reference(const Case& c, double g) {
  const at::Tensor x = c.hidden.clone().requires_grad_(true);
  const at::Tensor w = c.weight.clone().requires_grad_(true);
  const at::Tensor log_probs = at::log_softmax(at::linear(x, w), -1);
  const at::Tensor losses = at::nll_loss(log_probs, c.labels, {}, at::Reduction::None);
  const at::Tensor loss = (losses * c.mask).sum() / c.mask.sum();
  (loss * g).backward();
  return {loss.detach(), x.grad(), w.grad()};
}

class LmHeadCrossEntropyTest : public KernelTest {};

// The default chunk: about 2^25 logits, whole multiples of 128 tokens from 128 up.
TEST(LmHeadChunkTest, DefaultChunksAreAboutTwoTo25LogitsInMultiplesOf128Tokens) {
  EXPECT_EQ(DefaultChunkTokens(50304), 640);   // GPT-2's padded vocabulary: 667 rounded down
  EXPECT_EQ(DefaultChunkTokens(4096), 8192);   // the sample run's
  EXPECT_EQ(DefaultChunkTokens(200000), 128);  // 167 rounded down
  EXPECT_EQ(DefaultChunkTokens(300000), 111);  // under 128: as computed
  EXPECT_EQ(DefaultChunkTokens(int64_t{1} << 26), 1);
  EXPECT_EQ(DefaultChunkTokens(0), int64_t{1} << 25);
}

TEST_F(LmHeadCrossEntropyTest, LossAndGradientsMatchTheUnfusedComposition) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Case c = MakeCase(11);
  const double upstream = 0.75;
  const Expected expected = Reference(c, upstream);
  for (at::ScalarType dtype : {at::kDouble, at::kFloat, at::kHalf, at::kBFloat16}) {
    // 5 does not divide 37; 37 and 0 (automatic) are one chunk; 1 is a chunk per token.
    for (int64_t chunk : {5, 1, 37, 0}) {
      const std::string what =
          std::string(c10::toString(dtype)) + " chunk " + std::to_string(chunk);
      // Copies: to() of the same dtype and device would return the case's own tensors.
      const at::Tensor x = c.hidden.to(device, dtype, false, /*copy=*/true).requires_grad_(true);
      const at::Tensor w = c.weight.to(device, dtype, false, /*copy=*/true).requires_grad_(true);
      const at::Tensor loss =
          LmHeadCrossEntropy(x, w, c.labels.to(device), c.mask.to(device, at::kFloat), chunk);
      EXPECT_EQ(loss.dim(), 0) << what;
      EXPECT_EQ(loss.scalar_type(), dtype == at::kDouble ? at::kDouble : at::kFloat) << what;
      (loss * upstream).backward();
      // Half-precision logits round z itself (as the unfused path in that dtype would).
      const double slack = dtype == at::kDouble || dtype == at::kFloat ? 1.0 : 4.0;
      auto tolerance = [&](const at::Tensor& t) {
        testing::Tolerance tol = ToleranceFor(dtype, Magnitude(t));
        tol.rtol *= slack;
        tol.atol *= slack;
        return tol;
      };
      EXPECT_TRUE(AllClose(loss, expected.loss, tolerance(expected.loss), what + " loss"));
      ASSERT_TRUE(x.grad().defined() && w.grad().defined()) << what;
      EXPECT_EQ(x.grad().scalar_type(), dtype) << what;
      EXPECT_EQ(w.grad().scalar_type(), dtype) << what;
      EXPECT_TRUE(AllClose(x.grad(), expected.grad_hidden, tolerance(expected.grad_hidden),
                           what + " grad hidden"));
      EXPECT_TRUE(AllClose(w.grad(), expected.grad_weight, tolerance(expected.grad_weight),
                           what + " grad weight"));
    }
  }
}

// Under dynamic loss scaling the upstream gradient is the loss scale (2^17 at the start), beyond
// fp16's range (65504): the half-precision gradients must still be the scaled fp32 ones, finite,
// and not underflow in the forward (many tokens make 1 / M small).
TEST_F(LmHeadCrossEntropyTest, HalfPrecisionTakesALossScaleBeyondItsRange) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Case c = MakeCase(13);
  const double upstream = 131072.0;
  const Expected expected = Reference(c, upstream);
  for (at::ScalarType dtype : {at::kHalf, at::kBFloat16}) {
    const std::string what = c10::toString(dtype);
    const at::Tensor x = c.hidden.to(device, dtype, false, /*copy=*/true).requires_grad_(true);
    const at::Tensor w = c.weight.to(device, dtype, false, /*copy=*/true).requires_grad_(true);
    const at::Tensor loss =
        LmHeadCrossEntropy(x, w, c.labels.to(device), c.mask.to(device, at::kFloat), 5);
    (loss * upstream).backward();
    ASSERT_TRUE(x.grad().defined() && w.grad().defined()) << what;
    EXPECT_TRUE(at::isfinite(x.grad()).all().item<bool>()) << what << ": dx not finite";
    EXPECT_TRUE(at::isfinite(w.grad()).all().item<bool>()) << what << ": dW not finite";
    auto tolerance = [&](const at::Tensor& t) {
      testing::Tolerance tol = ToleranceFor(dtype, Magnitude(t));
      tol.rtol *= 4.0;
      tol.atol *= 4.0;
      return tol;
    };
    EXPECT_TRUE(AllClose(x.grad(), expected.grad_hidden, tolerance(expected.grad_hidden),
                         what + " grad hidden"));
    EXPECT_TRUE(AllClose(w.grad(), expected.grad_weight, tolerance(expected.grad_weight),
                         what + " grad weight"));
  }
}

// Gradient-accumulation fusion (the default) sums dW over the chunks by GEMMs that add into the
// fp32 sum; without it each chunk's dW is rounded to the inputs' dtype and then added. Both give
// the reference's gradients, the same loss and dx bitwise, and the fused dW is no less accurate
// (in half precision, with a chunk per token, clearly more).
TEST_F(LmHeadCrossEntropyTest, GradientAccumulationFusionIsAtLeastAsAccurateAsTheUnfusedSum) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Case c = MakeCase(17);
  const Expected expected = Reference(c, 1.0);
  for (at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (int64_t chunk : {1, 5}) {
      const std::string what =
          std::string(c10::toString(dtype)) + " chunk " + std::to_string(chunk);
      struct Run {
        at::Tensor loss, grad_hidden, grad_weight;
      };
      auto run = [&](bool fusion) {
        const at::Tensor x = c.hidden.to(device, dtype, false, /*copy=*/true).requires_grad_(true);
        const at::Tensor w = c.weight.to(device, dtype, false, /*copy=*/true).requires_grad_(true);
        const at::Tensor loss = LmHeadCrossEntropy(x, w, c.labels.to(device),
                                                   c.mask.to(device, at::kFloat), chunk, fusion);
        loss.backward();
        return Run{loss.detach().cpu(), x.grad().cpu(), w.grad().cpu()};
      };
      const Run fused = run(true);
      const Run unfused = run(false);
      EXPECT_TRUE(at::equal(fused.loss, unfused.loss)) << what;
      EXPECT_TRUE(at::equal(fused.grad_hidden, unfused.grad_hidden)) << what;
      const double slack = dtype == at::kFloat ? 1.0 : 4.0;
      testing::Tolerance tol = ToleranceFor(dtype, Magnitude(expected.grad_weight));
      tol.rtol *= slack;
      tol.atol *= slack;
      EXPECT_TRUE(AllClose(fused.grad_weight, expected.grad_weight, tol, what + " fused dW"));
      EXPECT_TRUE(AllClose(unfused.grad_weight, expected.grad_weight, tol, what + " unfused dW"));
      auto mean_error = [&](const at::Tensor& t) {
        return (t.to(at::kDouble) - expected.grad_weight).abs().mean().item<double>();
      };
      const double fused_error = mean_error(fused.grad_weight);
      const double unfused_error = mean_error(unfused.grad_weight);
      // In fp32 both sums round only in fp32 and either may win by chance (on CUDA); in half
      // precision the unfused one also rounds each chunk's dW to 8 or 11 bits.
      const double bound =
          dtype == at::kFloat ? 2 * unfused_error + 1e-7 : unfused_error * (1 + 1e-6) + 1e-12;
      EXPECT_LE(fused_error, bound)
          << what << ": fused " << fused_error << ", unfused " << unfused_error;
      if (dtype != at::kFloat && chunk == 1) {
        EXPECT_LT(fused_error, unfused_error) << what;
      }
    }
  }
}

TEST_F(LmHeadCrossEntropyTest, WithoutGradModeOnlyTheLossIsComputed) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Case c = MakeCase(21);
  const Expected expected = Reference(c, 1.0);
  const at::Tensor x = c.hidden.to(device, at::kFloat).requires_grad_(true);
  const at::Tensor w = c.weight.to(device, at::kFloat).requires_grad_(true);
  at::Tensor loss;
  {
    const at::NoGradGuard no_grad;  // evaluation, and Varuna's graph-free forwards
    loss = LmHeadCrossEntropy(x, w, c.labels.to(device), c.mask.to(device), 8);
  }
  EXPECT_FALSE(loss.requires_grad());
  EXPECT_TRUE(AllClose(loss, expected.loss, ToleranceFor(at::kFloat), "no-grad loss"));
  // Inputs that do not require grad: the same, and nothing to differentiate.
  const at::Tensor plain =
      LmHeadCrossEntropy(x.detach(), w.detach(), c.labels.to(device), c.mask.to(device), 8);
  EXPECT_FALSE(plain.requires_grad());
  EXPECT_TRUE(at::equal(plain, loss));
}

TEST_F(LmHeadCrossEntropyTest, OnlyTheWeightRequiringGradGetsOne) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Case c = MakeCase(31);
  const Expected expected = Reference(c, 1.0);
  const at::Tensor x = c.hidden.to(device, at::kFloat);
  const at::Tensor w = c.weight.to(device, at::kFloat).requires_grad_(true);
  LmHeadCrossEntropy(x, w, c.labels.to(device), c.mask.to(device), 0).backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_TRUE(AllClose(w.grad(), expected.grad_weight,
                       ToleranceFor(at::kFloat, Magnitude(expected.grad_weight)), "grad weight"));
}

TEST_F(LmHeadCrossEntropyTest, MisuseIsNamed) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Case c = MakeCase(41);
  const at::Tensor x = c.hidden.to(device, at::kFloat);
  const at::Tensor w = c.weight.to(device, at::kFloat);
  const at::Tensor y = c.labels.to(device);
  const at::Tensor m = c.mask.to(device);
  auto message = [](const std::function<void()>& call) -> std::string {
    try {
      call();
    } catch (const c10::Error& e) {
      return e.what_without_backtrace();
    }
    return "(no error)";
  };
  EXPECT_THAT(message([&] { LmHeadCrossEntropy(x.unsqueeze(0), w, y, m); }),
              ::testing::HasSubstr("LmHeadCrossEntropy: hidden must be [tokens, hidden]"));
  EXPECT_THAT(message([&] { LmHeadCrossEntropy(x, w.t(), y, m); }),
              ::testing::HasSubstr("weight must be [vocab, 24]"));
  EXPECT_THAT(message([&] { LmHeadCrossEntropy(x, w.to(at::kDouble), y, m); }),
              ::testing::HasSubstr("weight is Double but hidden is Float"));
  EXPECT_THAT(message([&] { LmHeadCrossEntropy(x, w, y.to(at::kInt), m); }),
              ::testing::HasSubstr("labels must be int64 [37]"));
  EXPECT_THAT(message([&] { LmHeadCrossEntropy(x, w, y, m.narrow(0, 0, 3)); }),
              ::testing::HasSubstr("loss_mask must be floating-point [37]"));
  EXPECT_THAT(message([&] { LmHeadCrossEntropy(x, w, y, m.to(at::kLong)); }),
              ::testing::HasSubstr("loss_mask must be floating-point [37]"));
}

}  // namespace
}  // namespace varuna::kernels
