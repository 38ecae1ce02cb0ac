// Fp8Linear, QuantizeFp8 and UpdateFp8Scale (varuna/kernels/fp8_linear.h) against a float64
// reference of the quantise-dequantise math, on the device of the test binary (kernel_test.bzl):
// the CPU runs LibTorch's emulated at::_scaled_mm, the _gpu twin cuBLASLt's FP8 GEMMs (on GPUs
// of compute capability 8.9 or newer; older GPUs check the refusal instead).
//
// The reference quantises with the float8 dtype casts (the same round-to-nearest-even), from the
// product t * scale formed in float64 (exact for float32 operands, so it rounds to the same
// float32 the op forms), clamped to +-fp8_max; it dequantises with the meta's own float32
// scale_inv and multiplies in float64.
#include "varuna/kernels/fp8_linear.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "tests/varuna/kernels/kernel_test_util.h"

namespace varuna::kernels {
namespace {

using testing::AllClose;
using testing::ErrorOf;
using testing::Magnitude;
using testing::RandomTensor;
using testing::Tolerance;
using testing::ToleranceFor;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Skips the test on a CUDA device below sm_89, printing the refusal (checked by its own test).
#define FP8_DEVICE_OR_SKIP(device)                                                \
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);                                           \
  if (const absl::Status fp8_status = CheckFp8Device(device); !fp8_status.ok()) { \
    GTEST_SKIP() << fp8_status.message();                                         \
  }

at::Tensor Cpu64(const at::Tensor& t) { return t.detach().to(at::kCPU, at::kDouble); }

// The reference quantisation of `t` with float32 `scale` to `dtype`, as float64 values.
at::Tensor ReferenceQuantize(const at::Tensor& t, double scale, at::ScalarType dtype) {
  const double fp8_max = Fp8Max(dtype);
  return (Cpu64(t) * scale).clamp(-fp8_max, fp8_max).to(dtype).to(at::kDouble);
}

double Item(const at::Tensor& t) { return t.to(at::kCPU, at::kDouble).item<double>(); }

// Equal values, NaN where the other has NaN.
::testing::AssertionResult SameValues(const at::Tensor& actual, const at::Tensor& expected) {
  const at::Tensor a = Cpu64(actual).reshape({-1});
  const at::Tensor e = Cpu64(expected).reshape({-1});
  if (a.sizes() != e.sizes()) return ::testing::AssertionFailure() << "sizes differ";
  const at::Tensor bad = (a != e) & ~(a.isnan() & e.isnan());
  if (!bad.any().item<bool>()) return ::testing::AssertionSuccess();
  const int64_t i = bad.nonzero()[0][0].item<int64_t>();
  return ::testing::AssertionFailure()
         << bad.sum().item<int64_t>() << " of " << e.numel() << " differ; first at " << i << ": "
         << a[i].item<double>() << " vs expected " << e[i].item<double>();
}

class Fp8LinearTest : public testing::KernelTest {};

// --- Facts of LibTorch's float8 casts and at::_scaled_mm that fp8_linear.h relies on. ---

TEST_F(Fp8LinearTest, Float8CastsRoundToNearestEvenAndDoNotSaturate) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::Tensor v =
      at::tensor({1.0625f, 1.1875f, 448.f, 449.f, 464.f, 465.f, 1000.f, kInf, 57344.f, 61440.f})
          .to(device);
  // E4M3 has 3 mantissa bits (step 1/8 at 1): ties go to even; above 464 (448 + half a step)
  // and for inf the cast gives NaN, not 448.
  const at::Tensor e4m3 = v.to(at::kFloat8_e4m3fn).to(at::kFloat).cpu();
  EXPECT_EQ(e4m3[0].item<float>(), 1.0f);
  EXPECT_EQ(e4m3[1].item<float>(), 1.25f);
  EXPECT_EQ(e4m3[2].item<float>(), 448.f);
  EXPECT_EQ(e4m3[3].item<float>(), 448.f);
  EXPECT_EQ(e4m3[4].item<float>(), 448.f);
  EXPECT_TRUE(std::isnan(e4m3[5].item<float>()));
  EXPECT_TRUE(std::isnan(e4m3[6].item<float>()));
  EXPECT_TRUE(std::isnan(e4m3[7].item<float>()));
  // E5M2: 57344 is the largest finite value; 61440 (half a step above) rounds to inf.
  const at::Tensor e5m2 = v.to(at::kFloat8_e5m2).to(at::kFloat).cpu();
  EXPECT_EQ(e5m2[8].item<float>(), 57344.f);
  EXPECT_TRUE(std::isinf(e5m2[9].item<float>()));
  EXPECT_TRUE(std::isinf(e5m2[7].item<float>()));
}

TEST_F(Fp8LinearTest, ScaledMmMultipliesByTheDequantisationScales) {
  FP8_DEVICE_OR_SKIP(device);
  const at::Tensor a = RandomTensor({32, 48}, 11, 2.0).to(at::kFloat8_e4m3fn);
  const at::Tensor b = RandomTensor({16, 48}, 12, 2.0).to(at::kFloat8_e4m3fn);  // [N, K]
  // Row-major mat1 and column-major mat2 (b^T), the layout cuBLASLt needs.
  const at::Tensor y =
      at::_scaled_mm(a.to(device), b.to(device).t(), at::full({1}, 0.5f).to(device),
                     at::full({1}, 0.25f).to(device), std::nullopt, std::nullopt, at::kFloat);
  const at::Tensor expected = at::matmul(Cpu64(a) * 0.5, (Cpu64(b) * 0.25).t());
  EXPECT_EQ(y.scalar_type(), at::kFloat);
  // Products of two E4M3 values are exact in float32, and these sums are short: the CPU's
  // float32 sum is within 1e-6. Hopper's FP8 tensor cores keep fewer bits of the running sum
  // (about 14, DeepSeek-V3's report, 3.3.2; measured on an H200 2026-11-27: 1.4e-4 relative),
  // so the GPU gets 1e-3 of the result's magnitude.
  const Tolerance tolerance =
      device.is_cpu() ? Tolerance{1e-6, 1e-6} : Tolerance{1e-3, 1e-3 * Magnitude(expected)};
  EXPECT_TRUE(AllClose(y, expected, tolerance, "scaled_mm"));
}

// --- QuantizeFp8 ---

TEST_F(Fp8LinearTest, QuantizeMatchesTheReferenceBitwiseAndRecordsTheAmax) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const at::ScalarType fp8 : {at::kFloat8_e4m3fn, at::kFloat8_e5m2}) {
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      SCOPED_TRACE(::testing::Message() << fp8 << " from " << dtype);
      Fp8Meta meta = MakeFp8Meta(fp8, 4, device);
      const float scale = fp8 == at::kFloat8_e4m3fn ? 37.3f : 3100.7f;
      meta.scale.fill_(scale);
      // Values up to ~30, some beyond fp8_max / scale (saturating), and exact zeros.
      at::Tensor t = RandomTensor({64, 40}, 21, 6.0).to(dtype);
      t.view({-1}).narrow(0, 0, 8).zero_();
      const at::Tensor q = QuantizeFp8(t.to(device), &meta);
      EXPECT_EQ(q.scalar_type(), fp8);
      EXPECT_TRUE(q.is_contiguous());
      EXPECT_TRUE(SameValues(q.to(at::kFloat), ReferenceQuantize(t, scale, fp8)));
      EXPECT_EQ(Item(meta.amax_history[0]), Item(t.abs().max()));
      EXPECT_EQ(Item(meta.amax_history.narrow(0, 1, 3).abs().sum()), 0.0);
      EXPECT_EQ(Item(meta.scale), scale);  // quantising never changes the scale
    }
  }
}

TEST_F(Fp8LinearTest, QuantizeSaturatesOverflowAndKeepsNaN) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::Tensor t =
      at::tensor({500.f, -1000.f, kInf, -kInf, 448.f, 464.f, 465.f, kNaN, 1.f, 1e6f});
  Fp8Meta e4m3 = MakeFp8Meta(at::kFloat8_e4m3fn, 1, device);
  EXPECT_TRUE(SameValues(
      QuantizeFp8(t.to(device), &e4m3).to(at::kFloat),
      at::tensor({448.f, -448.f, 448.f, -448.f, 448.f, 448.f, 448.f, kNaN, 1.f, 448.f})));
  // The amax ignores NaN (TE reduces with fmaxf) and keeps inf.
  EXPECT_TRUE(std::isinf(Item(e4m3.amax_history[0])));
  Fp8Meta e5m2 = MakeFp8Meta(at::kFloat8_e5m2, 1, device);
  e5m2.scale.fill_(100.f);  // E5M2 steps of 8192 in [32768, 65536), of 16 in [64, 128)
  EXPECT_TRUE(SameValues(QuantizeFp8(t.to(device), &e5m2).to(at::kFloat),
                         at::tensor({49152.f, -57344.f, 57344.f, -57344.f, 40960.f, 49152.f,
                                     49152.f, kNaN, 96.f, 57344.f})));
  Fp8Meta finite = MakeFp8Meta(at::kFloat8_e4m3fn, 1, device);
  QuantizeFp8(at::tensor({kNaN, -3.5f, 2.f}).to(device), &finite);
  EXPECT_EQ(Item(finite.amax_history[0]), 3.5);
}

TEST_F(Fp8LinearTest, QuantizeKeepsTheLargestAmaxOfTheStep) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  Fp8Meta meta = MakeFp8Meta(at::kFloat8_e4m3fn, 2, device);
  QuantizeFp8(at::tensor({1.f, -7.f}).to(device), &meta);
  QuantizeFp8(at::tensor({3.f, 2.f}).to(device), &meta);  // a second micro-batch, smaller
  EXPECT_EQ(Item(meta.amax_history[0]), 7.0);
  QuantizeFp8(at::tensor({-9.f}).to(device), &meta);
  EXPECT_EQ(Item(meta.amax_history[0]), 9.0);
  QuantizeFp8(at::empty({0}).to(device), &meta);  // records nothing
  EXPECT_EQ(Item(meta.amax_history[0]), 9.0);
}

// --- UpdateFp8Scale ---

// Records `amax` as one step's amax (the tensor {amax}) and runs the update.
void Step(const Fp8Recipe& recipe, Fp8Meta* meta, float amax) {
  QuantizeFp8(at::full({1}, amax, meta->amax_history.options()), meta);
  UpdateFp8Scale(recipe, meta);
}

std::vector<double> Values(const at::Tensor& t) {
  const at::Tensor c = Cpu64(t).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

TEST_F(Fp8LinearTest, MaxAlgorithmScalesByTheLargestAmaxOfTheWindowAndRollsTheHistory) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Fp8Recipe recipe{Fp8Format::kHybrid, /*margin=*/0, /*amax_history_len=*/3,
                         Fp8AmaxComputeAlgo::kMax};
  Fp8Meta meta = MakeFp8Meta(at::kFloat8_e4m3fn, 3, device);
  const std::vector<float> amaxes = {2.f, 8.f, 1.f, 0.5f, 0.25f, 3.f};
  for (size_t step = 0; step < amaxes.size(); ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    Step(recipe, &meta, amaxes[step]);
    // The window is this step and the two before it.
    float window = 0;
    for (size_t i = step >= 2 ? step - 2 : 0; i <= step; ++i) window = std::max(window, amaxes[i]);
    const float expected = 448.f / window;
    EXPECT_EQ(Item(meta.scale), expected);
    EXPECT_EQ(Item(meta.scale_inv), 1.f / expected);
    // After the roll: [0, the previous step's amax, this step's amax].
    EXPECT_EQ(Values(meta.amax_history),
              (std::vector<double>{0.0, step >= 1 ? amaxes[step - 1] : 0.0, amaxes[step]}));
  }
}

TEST_F(Fp8LinearTest, MostRecentAlgorithmScalesByTheLastAmax) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Fp8Recipe recipe{Fp8Format::kE4M3, 0, 4, Fp8AmaxComputeAlgo::kMostRecent};
  Fp8Meta meta = MakeFp8Meta(at::kFloat8_e4m3fn, 4, device);
  for (const float amax : {2.f, 8.f, 1.f, 0.3f}) {
    Step(recipe, &meta, amax);
    EXPECT_EQ(Item(meta.scale), 448.f / amax);
  }
}

TEST_F(Fp8LinearTest, MarginAndE5M2ChangeTheTargetMaximum) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Fp8Recipe recipe{Fp8Format::kHybrid, /*margin=*/2, 1, Fp8AmaxComputeAlgo::kMax};
  Fp8Meta e4m3 = MakeFp8Meta(at::kFloat8_e4m3fn, 1, device);
  Step(recipe, &e4m3, 3.f);
  EXPECT_EQ(Item(e4m3.scale), 448.f * 0.25f / 3.f);
  Fp8Meta e5m2 = MakeFp8Meta(at::kFloat8_e5m2, 1, device);
  Step(recipe, &e5m2, 3.f);
  EXPECT_EQ(Item(e5m2.scale), 57344.f * 0.25f / 3.f);
  // A history of length 1 is zero after every update.
  EXPECT_EQ(Values(e5m2.amax_history), std::vector<double>{0.0});
}

TEST_F(Fp8LinearTest, AStepThatRecordedNothingChangesNothing) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const Fp8AmaxComputeAlgo algo :
       {Fp8AmaxComputeAlgo::kMax, Fp8AmaxComputeAlgo::kMostRecent}) {
    const Fp8Recipe recipe{Fp8Format::kHybrid, 0, 3, algo};
    Fp8Meta meta = MakeFp8Meta(at::kFloat8_e4m3fn, 3, device);
    UpdateFp8Scale(recipe, &meta);  // fresh state: zero amax keeps scale 1
    EXPECT_EQ(Item(meta.scale), 1.0);
    EXPECT_EQ(Item(meta.scale_inv), 1.0);
    Step(recipe, &meta, 4.f);
    Step(recipe, &meta, 0.f);  // an all-zero tensor: no roll, the old scale
    EXPECT_EQ(Item(meta.scale), 112.0);
    EXPECT_EQ(Values(meta.amax_history), (std::vector<double>{0.0, 0.0, 4.0}));
  }
}

TEST_F(Fp8LinearTest, InfiniteAmaxKeepsTheScaleWhileItIsInTheWindow) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Fp8Recipe max_recipe{Fp8Format::kHybrid, 0, 3, Fp8AmaxComputeAlgo::kMax};
  Fp8Meta meta = MakeFp8Meta(at::kFloat8_e5m2, 3, device);
  Step(max_recipe, &meta, 7.f);
  const double before = Item(meta.scale);
  EXPECT_EQ(before, 57344.f / 7.f);
  Step(max_recipe, &meta, kInf);  // an overflowed gradient
  EXPECT_EQ(Item(meta.scale), before);
  Step(max_recipe, &meta, 2.f);
  EXPECT_EQ(Item(meta.scale), before);  // inf still in the window of 3
  Step(max_recipe, &meta, 2.f);
  EXPECT_EQ(Item(meta.scale), before);
  Step(max_recipe, &meta, 2.f);  // inf has left the window
  EXPECT_EQ(Item(meta.scale), 57344.f / 2.f);

  const Fp8Recipe recent{Fp8Format::kHybrid, 0, 3, Fp8AmaxComputeAlgo::kMostRecent};
  Fp8Meta last = MakeFp8Meta(at::kFloat8_e5m2, 3, device);
  Step(recent, &last, 7.f);
  Step(recent, &last, kInf);
  EXPECT_EQ(Item(last.scale), 57344.f / 7.f);
  Step(recent, &last, 2.f);
  EXPECT_EQ(Item(last.scale), 57344.f / 2.f);
}

TEST_F(Fp8LinearTest, NaNInTheHistoryIsIgnoredAndTinyAmaxGivesTheLargestFloat) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Fp8Recipe recipe{Fp8Format::kE4M3, 0, 3, Fp8AmaxComputeAlgo::kMax};
  Fp8Meta meta = MakeFp8Meta(at::kFloat8_e4m3fn, 3, device);
  // A NaN can only arrive from outside (a loaded or all-reduced history): max skips it.
  meta.amax_history.copy_(at::tensor({5.f, kNaN, 2.f}));
  UpdateFp8Scale(recipe, &meta);
  EXPECT_EQ(Item(meta.scale), 448.f / 5.f);

  Fp8Meta tiny = MakeFp8Meta(at::kFloat8_e4m3fn, 1, device);
  const float denormal = std::numeric_limits<float>::denorm_min();
  Step(Fp8Recipe{Fp8Format::kE4M3, 0, 1, Fp8AmaxComputeAlgo::kMax}, &tiny, denormal);
  EXPECT_EQ(Item(tiny.scale), std::numeric_limits<float>::max());
  EXPECT_EQ(Item(tiny.scale_inv), 1.f / std::numeric_limits<float>::max());
}

TEST_F(Fp8LinearTest, UpdateRefusesAHistoryOfAnotherLength) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  Fp8Meta meta = MakeFp8Meta(at::kFloat8_e4m3fn, 3, device);
  EXPECT_KERNEL_ERROR(UpdateFp8Scale(Fp8Recipe{}, &meta),
                      "the amax history has 3 entries but the recipe says 1024");
  EXPECT_KERNEL_ERROR(UpdateFp8Scale(Fp8Recipe{Fp8Format::kHybrid, -1, 3}, &meta),
                      "--fp8-margin=-1 must be at least 0");
}

// --- Fp8Linear ---

struct Case {
  std::vector<int64_t> x_shape;  // [..., K]
  int64_t n;
  bool bias;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {{{16, 16}, 16, true},
                                          {{2, 8, 32}, 48, false},
                                          {{48, 64}, 112, true},
                                          {{4, 16, 128}, 384, true},
                                          {{64, 384}, 128, false}};
  return cases;
}

// The float64 reference of one forward and backward with the scales in `meta` at call time.
struct Reference {
  at::Tensor y, dx, dw, db;
};

Reference ReferenceLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                          const at::Tensor& dy, const Fp8LinearMeta& meta) {
  const auto deq = [](const at::Tensor& t, const Fp8Meta& m) {
    return ReferenceQuantize(t, Item(m.scale), m.dtype) * Item(m.scale_inv);
  };
  const int64_t k = w.size(1);
  const int64_t n = w.size(0);
  const at::Tensor x2 = deq(x.reshape({-1, k}), meta.input);
  const at::Tensor w2 = deq(w, meta.weight);
  const at::Tensor dy2 = deq(dy.reshape({-1, n}), meta.grad_output);
  std::vector<int64_t> y_shape = x.sizes().vec();
  y_shape.back() = n;
  at::Tensor y = at::matmul(x2, w2.t());
  if (b.defined()) y = y + Cpu64(b);
  return {y.view(y_shape), at::matmul(dy2, w2).view(x.sizes()), at::matmul(dy2.t(), x2),
          b.defined() ? Cpu64(dy).reshape({-1, n}).sum(0) : at::Tensor()};
}

Tolerance LinearTolerance(const c10::Device& device, at::ScalarType dtype, bool forward,
                          double magnitude) {
  if (dtype != at::kFloat) return ToleranceFor(dtype, magnitude);
  // The CPU accumulates in float32. On the GPU the FP8 tensor cores keep about 14 bits of the
  // running sum even without cuBLASLt's fast accumulation (the backward; an H200 on 2026-11-27
  // differed by up to 1.8e-4 of the magnitude), and fewer with it (the forward).
  const double rtol = device.is_cpu() ? 1e-5 : (forward ? 4e-3 : 1e-3);
  return {rtol, rtol * magnitude};
}

class Fp8LinearCaseTest : public Fp8LinearTest {
 protected:
  // Two training steps of one layer: step 1 with the fresh scales (1), then UpdateFp8Scales,
  // step 2 with the scales of step 1's amaxes; each against the reference at its scales.
  void CheckTwoSteps(const c10::Device& device, at::ScalarType dtype, Fp8Format format,
                     Fp8AmaxComputeAlgo algo) {
    uint64_t seed = 900;
    for (const Case& c : Cases()) {
      std::ostringstream what;
      what << "x " << at::IntArrayRef(c.x_shape) << " N " << c.n << (c.bias ? " bias " : " ")
           << dtype << " " << Fp8FormatName(format);
      SCOPED_TRACE(what.str());
      const int64_t k = c.x_shape.back();
      const Fp8Recipe recipe{format, 0, 4, algo};
      const Fp8LinearMeta meta = MakeFp8LinearMeta(recipe, device);
      float input_amax = 0;  // the amax the input scale comes from after the update
      for (int step = 0; step < 2; ++step) {
        SCOPED_TRACE(::testing::Message() << "step " << step);
        // Activations around 3, weights around 0.05, gradients around 1e-3 (step 1 saturates
        // nothing at scale 1 but loses the gradients' small values; step 2 rescales them).
        const at::Tensor x = RandomTensor(c.x_shape, seed += 10, 3.0).to(dtype);
        const at::Tensor w = RandomTensor({c.n, k}, seed + 1, 0.05).to(dtype);
        const at::Tensor b = c.bias ? RandomTensor({c.n}, seed + 2, 0.5).to(dtype) : at::Tensor();
        std::vector<int64_t> y_shape = c.x_shape;
        y_shape.back() = c.n;
        const at::Tensor dy = RandomTensor(y_shape, seed + 3, 1e-3).to(dtype);

        // The scales this step uses (the backward's grad scale too: nothing updates between).
        const Reference ref = ReferenceLinear(x, w, b, dy, meta);
        const at::Tensor xd = x.to(device).requires_grad_(true);
        const at::Tensor wd = w.to(device).requires_grad_(true);
        const at::Tensor bd = c.bias ? b.to(device).requires_grad_(true) : at::Tensor();
        const at::Tensor y = Fp8Linear(xd, wd, bd, meta);
        EXPECT_EQ(y.scalar_type(), dtype);
        y.backward(dy.to(device));
        EXPECT_TRUE(
            AllClose(y, ref.y, LinearTolerance(device, dtype, true, Magnitude(ref.y)), "y"));
        EXPECT_TRUE(AllClose(xd.grad(), ref.dx,
                             LinearTolerance(device, dtype, false, Magnitude(ref.dx)), "dx"));
        EXPECT_TRUE(AllClose(wd.grad(), ref.dw,
                             LinearTolerance(device, dtype, false, Magnitude(ref.dw)), "dw"));
        if (c.bias) {
          EXPECT_TRUE(AllClose(bd.grad(), ref.db,
                               LinearTolerance(device, dtype, false, Magnitude(ref.db)), "db"));
        }
        // This step's amaxes are in the histories' current slots.
        EXPECT_EQ(Item(meta.input.amax_history[0]), Item(x.abs().max()));
        EXPECT_EQ(Item(meta.weight.amax_history[0]), Item(w.abs().max()));
        EXPECT_EQ(Item(meta.grad_output.amax_history[0]), Item(dy.abs().max()));
        const auto x_amax = static_cast<float>(Item(x.abs().max()));
        input_amax = algo == Fp8AmaxComputeAlgo::kMax ? std::max(input_amax, x_amax) : x_amax;
        Fp8LinearMeta updated = meta;
        UpdateFp8Scales(recipe, &updated);
        EXPECT_EQ(Item(meta.input.scale), 448.f / input_amax);
      }
    }
  }
};

TEST_F(Fp8LinearCaseTest, Float32MatchesTheReference) {
  FP8_DEVICE_OR_SKIP(device);
  CheckTwoSteps(device, at::kFloat, Fp8Format::kHybrid, Fp8AmaxComputeAlgo::kMax);
  CheckTwoSteps(device, at::kFloat, Fp8Format::kE4M3, Fp8AmaxComputeAlgo::kMostRecent);
}

TEST_F(Fp8LinearCaseTest, BFloat16MatchesTheReference) {
  FP8_DEVICE_OR_SKIP(device);
  CheckTwoSteps(device, at::kBFloat16, Fp8Format::kHybrid, Fp8AmaxComputeAlgo::kMax);
}

TEST_F(Fp8LinearCaseTest, Float16MatchesTheReference) {
  FP8_DEVICE_OR_SKIP(device);
  CheckTwoSteps(device, at::kHalf, Fp8Format::kHybrid, Fp8AmaxComputeAlgo::kMax);
}

TEST_F(Fp8LinearTest, QuantisationErrorIsThatOfE4M3NotOfTheHighPrecisionProduct) {
  // Guards against a path that skips the quantisation: the FP8 result differs from the float64
  // product of the unquantised operands by about E4M3's relative step (2^-4), far beyond the
  // tolerance the reference comparisons use.
  FP8_DEVICE_OR_SKIP(device);
  const at::Tensor x = RandomTensor({32, 64}, 41, 3.0).to(at::kFloat);
  const at::Tensor w = RandomTensor({32, 64}, 42, 0.05).to(at::kFloat);
  const Fp8LinearMeta meta = MakeFp8LinearMeta(Fp8Recipe{}, device);
  const at::Tensor y = Fp8Linear(x.to(device), w.to(device), at::Tensor(), meta);
  const at::Tensor exact = at::matmul(Cpu64(x), Cpu64(w).t());
  const double relative = Item((Cpu64(y) - exact).abs().max()) / Magnitude(exact);
  EXPECT_GT(relative, 1e-3);
  EXPECT_LT(relative, 0.1);
}

TEST_F(Fp8LinearTest, WithoutGradientsTheForwardIsTheSameAndRecordsTheSameAmaxes) {
  // Gradients off (the Varuna schedule's F, evaluation): no transposes are made for a backward,
  // and the output and the recorded amaxes are bitwise those of a forward with gradients.
  FP8_DEVICE_OR_SKIP(device);
  const at::Tensor x = RandomTensor({32, 64}, 61, 3.0).to(at::kBFloat16).to(device);
  const at::Tensor w = RandomTensor({48, 64}, 62, 0.05).to(at::kBFloat16).to(device);
  const at::Tensor b = RandomTensor({48}, 63, 0.1).to(at::kBFloat16).to(device);
  const Fp8LinearMeta with_grad = MakeFp8LinearMeta(Fp8Recipe{}, device);
  const Fp8LinearMeta without = MakeFp8LinearMeta(Fp8Recipe{}, device);
  const at::Tensor y = Fp8Linear(x, w.clone().requires_grad_(true), b, with_grad);
  at::Tensor y_no_grad;
  {
    const c10::AutoGradMode no_grad(false);
    y_no_grad = Fp8Linear(x, w.clone().requires_grad_(true), b, without);
  }
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y_no_grad.requires_grad());
  EXPECT_TRUE(at::equal(y.detach(), y_no_grad));
  EXPECT_TRUE(at::equal(with_grad.input.amax_history, without.input.amax_history));
  EXPECT_TRUE(at::equal(with_grad.weight.amax_history, without.weight.amax_history));
}

TEST_F(Fp8LinearTest, ForwardUsesItsOwnScalesInTheBackward) {
  // An update between the forward and the backward (TE updates forward scales per micro-batch)
  // must not change how the saved fp8 operands are read.
  FP8_DEVICE_OR_SKIP(device);
  const Fp8Recipe recipe{Fp8Format::kHybrid, 0, 2, Fp8AmaxComputeAlgo::kMax};
  const at::Tensor x = RandomTensor({16, 32}, 51, 3.0).to(at::kFloat);
  const at::Tensor w = RandomTensor({16, 32}, 52, 0.05).to(at::kFloat);
  const at::Tensor dy = RandomTensor({16, 16}, 53, 1.0).to(at::kFloat);
  Fp8LinearMeta meta = MakeFp8LinearMeta(recipe, device);
  const Reference ref = ReferenceLinear(x, w, at::Tensor(), dy, meta);
  const at::Tensor wd = w.to(device).requires_grad_(true);
  const at::Tensor y = Fp8Linear(x.to(device), wd, at::Tensor(), meta);
  UpdateFp8Scale(recipe, &meta.input);
  UpdateFp8Scale(recipe, &meta.weight);
  ASSERT_NE(Item(meta.input.scale), 1.0);
  y.backward(dy.to(device));
  EXPECT_TRUE(AllClose(wd.grad(), ref.dw,
                       LinearTolerance(device, at::kFloat, false, Magnitude(ref.dw)), "dw"));
}

TEST_F(Fp8LinearTest, RefusesShapesThatAreNotMultiplesOf16) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Fp8LinearMeta meta = MakeFp8LinearMeta(Fp8Recipe{}, device);
  const auto opts = at::TensorOptions().device(device);
  EXPECT_KERNEL_ERROR(
      Fp8Linear(at::ones({10, 32}, opts), at::ones({16, 32}, opts), at::Tensor(), meta),
      "FP8 GEMMs need every dim a multiple of 16 (cuBLASLt), got M=10 rows");
  EXPECT_KERNEL_ERROR(
      Fp8Linear(at::ones({2, 8, 24}, opts), at::ones({16, 24}, opts), at::Tensor(), meta),
      "K=24 in_features");
  EXPECT_KERNEL_ERROR(
      Fp8Linear(at::ones({16, 32}, opts), at::ones({40, 32}, opts), at::Tensor(), meta),
      "N=40 out_features");
  EXPECT_KERNEL_ERROR(
      Fp8Linear(at::ones({16, 0}, opts), at::ones({16, 0}, opts), at::Tensor(), meta),
      "in_features and out_features must be positive");
}

TEST_F(Fp8LinearTest, AnEmptyBatchGivesEmptyOutputsAndZeroWeightGradients) {
  FP8_DEVICE_OR_SKIP(device);
  const Fp8LinearMeta meta = MakeFp8LinearMeta(Fp8Recipe{}, device);
  const auto opts = at::TensorOptions().device(device);
  const at::Tensor x = at::ones({0, 32}, opts).requires_grad_(true);
  const at::Tensor w = at::ones({16, 32}, opts).requires_grad_(true);
  const at::Tensor b = at::ones({16}, opts).requires_grad_(true);
  const at::Tensor y = Fp8Linear(x, w, b, meta);
  EXPECT_EQ(y.sizes(), at::IntArrayRef({0, 16}));
  y.sum().backward();
  EXPECT_EQ(x.grad().sizes(), at::IntArrayRef({0, 32}));
  EXPECT_EQ(Item(w.grad().abs().sum()), 0.0);
  EXPECT_EQ(Item(b.grad().abs().sum()), 0.0);
  EXPECT_EQ(Item(meta.input.amax_history[0]), 0.0);  // nothing recorded for x
  EXPECT_EQ(Item(meta.weight.amax_history[0]), 1.0);
}

TEST_F(Fp8LinearTest, RefusesBadArguments) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Fp8LinearMeta meta = MakeFp8LinearMeta(Fp8Recipe{}, device);
  const auto opts = at::TensorOptions().device(device);
  const at::Tensor x = at::ones({16, 32}, opts);
  const at::Tensor w = at::ones({16, 32}, opts);
  EXPECT_KERNEL_ERROR(Fp8Linear(x.to(at::kDouble), w.to(at::kDouble), at::Tensor(), meta),
                      "Fp8Linear: x must be float32, float16 or bfloat16 for FP8, got Double");
  EXPECT_KERNEL_ERROR(Fp8Linear(x, w.to(at::kBFloat16), at::Tensor(), meta),
                      "weight is BFloat16 but x is Float");
  EXPECT_KERNEL_ERROR(Fp8Linear(x, at::ones({16, 48}, opts), at::Tensor(), meta),
                      "weight must be [out_features, 32]");
  EXPECT_KERNEL_ERROR(Fp8Linear(x, w, at::ones({32}, opts), meta), "bias must be [16]");
  EXPECT_KERNEL_ERROR(Fp8Linear(x, w, at::Tensor(), Fp8LinearMeta{}),
                      "the input meta's amax_history is undefined");
  Fp8LinearMeta swapped = meta;
  std::swap(swapped.input, swapped.grad_output);
  swapped.input.dtype = at::kFloat8_e5m2;
  EXPECT_KERNEL_ERROR(Fp8Linear(x, w, at::Tensor(), swapped),
                      "the input and weight metas must be Float8_e4m3fn");
  EXPECT_KERNEL_ERROR(MakeFp8Meta(at::kFloat, 4, device), "is not an FP8 dtype");
  EXPECT_KERNEL_ERROR(MakeFp8Meta(at::kFloat8_e4m3fn, 0, device),
                      "amax_history_len=0 must be at least 1");
}

TEST_F(Fp8LinearTest, NoGradientIsComputedForInputsThatDoNotNeedOne) {
  FP8_DEVICE_OR_SKIP(device);
  const Fp8LinearMeta meta = MakeFp8LinearMeta(Fp8Recipe{}, device);
  const at::Tensor x = RandomTensor({16, 32}, 61).to(at::kFloat).to(device);
  const at::Tensor w = RandomTensor({16, 32}, 62).to(at::kFloat).to(device).requires_grad_(true);
  const at::Tensor b = at::zeros({16}, w.options().requires_grad(false));
  Fp8Linear(x, w, b, meta).sum().backward();
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(x.grad().defined());
  // The backward ran: it recorded the gradient's amax (all ones from sum()).
  EXPECT_EQ(Item(meta.grad_output.amax_history[0]), 1.0);
}

// --- The fused CUDA kernels against the LibTorch reference on the CPU (in the CPU binary the
// op is its own reference; the _gpu twin compares the kernels byte for byte). ---

// The fp8 bytes of `q` on the CPU as int32, every NaN byte written 0x7F: the CPU reference's
// vectorised clamp does not fix the sign of a NaN, so only "NaN" is compared there.
at::Tensor Fp8Bytes(const at::Tensor& q) {
  const at::Tensor bytes = q.detach().to(at::kCPU).contiguous().view(at::kByte).to(at::kInt);
  const at::Tensor nan = q.detach().to(at::kCPU).to(at::kFloat).isnan();
  return at::where(nan, at::full_like(bytes, 0x7F), bytes);
}

::testing::AssertionResult SameBytes(const at::Tensor& actual, const at::Tensor& expected) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure()
           << "shape " << actual.sizes() << " vs expected " << expected.sizes();
  }
  const at::Tensor a = Fp8Bytes(actual).reshape({-1});
  const at::Tensor e = Fp8Bytes(expected).reshape({-1});
  const at::Tensor bad = a != e;
  if (!bad.any().item<bool>()) return ::testing::AssertionSuccess();
  const int64_t i = bad.nonzero()[0][0].item<int64_t>();
  return ::testing::AssertionFailure()
         << bad.sum().item<int64_t>() << " of " << e.numel() << " bytes differ; first at " << i
         << ": 0x" << std::hex << a[i].item<int>() << " vs expected 0x" << e[i].item<int>();
}

// A copy of `meta`'s state on `device` (the same values, fresh tensors).
Fp8Meta CopyMeta(const Fp8Meta& meta, const c10::Device& device) {
  Fp8Meta copy;
  copy.dtype = meta.dtype;
  copy.amax_history = meta.amax_history.to(device).clone();
  copy.scale = meta.scale.to(device).clone();
  copy.scale_inv = meta.scale_inv.to(device).clone();
  return copy;
}

// Values of every kind the quantise meets, as float64 on the CPU (convert to the input dtype):
// normal(0, 3) values, ones beyond fp8_max / scale (saturating), +-inf, NaN, +-0, and values
// whose product lands in the float8 subnormal range or below it.
at::Tensor QuantizeInput(at::IntArrayRef shape, uint64_t seed, double scale, double fp8_max) {
  at::Tensor t = RandomTensor(shape, seed, 3.0);
  at::Tensor flat = t.view({-1});
  const std::vector<double> specials = {kInf,
                                        -kInf,
                                        kNaN,
                                        0.0,
                                        -0.0,
                                        2.5 * fp8_max / scale,
                                        -7.0 * fp8_max / scale,
                                        1.5e-3 / scale,
                                        -3e-6 / scale,
                                        1e-9 / scale,
                                        0.0137 / scale,
                                        -0.0021 / scale};
  // A special value at every 7th element (from the 4th), the specials in turn.
  const at::Tensor where =
      at::arange(std::min<int64_t>(3, flat.numel()), flat.numel(), 7, at::kLong);
  const at::Tensor values = at::tensor(specials, at::kDouble)
                                .repeat({where.numel() / 12 + 1})
                                .narrow(0, 0, where.numel());
  flat.index_put_({where}, values);
  return t;
}

TEST_F(Fp8LinearTest, FusedQuantizeMatchesTheCpuReferenceByteForByte) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const std::vector<std::vector<int64_t>> shapes = {{1},       {7},        {4099},     {3, 5},
                                                    {37, 129}, {64, 1024}, {2, 33, 40}};
  uint64_t seed = 2000;
  for (const at::ScalarType fp8 : {at::kFloat8_e4m3fn, at::kFloat8_e5m2}) {
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      for (const auto& shape : shapes) {
        // The history's slot 0 before: below the new amax, above it, or NaN (replaced).
        for (const float old : {0.5f, 1e30f, kNaN}) {
          SCOPED_TRACE(::testing::Message() << fp8 << " from " << dtype << " shape "
                                            << at::IntArrayRef(shape) << " old amax " << old);
          const double scale = fp8 == at::kFloat8_e4m3fn ? 37.3 : 3100.7;
          const at::Tensor t = QuantizeInput(shape, ++seed, scale, Fp8Max(fp8)).to(dtype);
          Fp8Meta cpu = MakeFp8Meta(fp8, 3, c10::Device(c10::kCPU));
          cpu.scale.fill_(scale);
          cpu.amax_history[0] = old;
          cpu.amax_history[2] = 4.f;
          Fp8Meta on_device = CopyMeta(cpu, device);
          const at::Tensor expected = QuantizeFp8(t, &cpu);
          const at::Tensor q = QuantizeFp8(t.to(device), &on_device);
          EXPECT_EQ(q.scalar_type(), fp8);
          EXPECT_TRUE(q.is_contiguous());
          EXPECT_TRUE(SameBytes(q, expected));
          EXPECT_TRUE(SameValues(on_device.amax_history, cpu.amax_history));
          EXPECT_EQ(Item(on_device.scale), Item(cpu.scale));  // quantising never changes it
        }
      }
    }
  }
}

TEST_F(Fp8LinearTest, QuantizeWithTransposeGivesTheQuantisedTensorAndItsTranspose) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  // Shapes below, at and beyond the kernel's tiles (32 x 32 single elements; 64 x 64 in vectors
  // of 4 where both dims are multiples of 4), most not multiples of them.
  const std::vector<std::vector<int64_t>> shapes = {{1, 1},    {1, 77},    {77, 1},    {31, 33},
                                                    {32, 32},  {65, 97},   {130, 48},  {16, 1040},
                                                    {68, 100}, {132, 260}, {256, 128}, {4, 4}};
  uint64_t seed = 3000;
  for (const at::ScalarType fp8 : {at::kFloat8_e4m3fn, at::kFloat8_e5m2}) {
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      for (const auto& shape : shapes) {
        SCOPED_TRACE(::testing::Message()
                     << fp8 << " from " << dtype << " shape " << at::IntArrayRef(shape));
        const double scale = fp8 == at::kFloat8_e4m3fn ? 11.0 : 900.5;
        const at::Tensor t = QuantizeInput(shape, ++seed, scale, Fp8Max(fp8)).to(dtype);
        Fp8Meta cpu = MakeFp8Meta(fp8, 2, c10::Device(c10::kCPU));
        cpu.scale.fill_(scale);
        Fp8Meta on_device = CopyMeta(cpu, device);
        const at::Tensor expected = QuantizeFp8(t, &cpu);
        // Some inputs one element into their buffer: not aligned for the vector kernel.
        const bool unaligned = shape[0] % 2 == 1 || shape[0] == 68;
        const at::Tensor input = unaligned ? testing::Unaligned(t.to(device)) : t.to(device);
        const auto [q, q_t] = QuantizeFp8WithTranspose(input, &on_device);
        EXPECT_TRUE(q.is_contiguous());
        EXPECT_TRUE(q_t.is_contiguous());
        EXPECT_EQ(q_t.scalar_type(), fp8);
        EXPECT_TRUE(SameBytes(q, expected));
        EXPECT_TRUE(SameBytes(q_t, expected.t().contiguous()));
        // The amax is recorded once, as by QuantizeFp8.
        EXPECT_TRUE(SameValues(on_device.amax_history, cpu.amax_history));
      }
    }
  }
}

// The cast-transpose's optional outputs: the sums of t's columns (the backward's bias gradient;
// on CUDA summed in the same pass where the vector kernel applies, else by at::sum; on the CPU
// bitwise t.to(float32).sum(0)) and the scale_inv it read, a tensor of its own. Neither changes
// the bytes or the amax; the sums repeat bit for bit.
TEST_F(Fp8LinearTest, QuantizeSumsTheColumnsAndKeepsTheScaleInvItUsed) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const std::vector<std::vector<int64_t>> shapes = {{1, 77},    {31, 33},   {65, 97},   {130, 48},
                                                    {68, 100},  {132, 260}, {256, 128}, {0, 16},
                                                    {4096, 64}, {8192, 640}};
  uint64_t seed = 5000;
  for (const at::ScalarType fp8 : {at::kFloat8_e4m3fn, at::kFloat8_e5m2}) {
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      for (const auto& shape : shapes) {
        SCOPED_TRACE(::testing::Message()
                     << fp8 << " from " << dtype << " shape " << at::IntArrayRef(shape));
        const double scale = fp8 == at::kFloat8_e4m3fn ? 11.0 : 900.5;
        // Finite values (the sums of QuantizeInput's infinities and NaN are not sums to compare).
        const at::Tensor t = RandomTensor(shape, ++seed, 3.0).to(dtype);
        Fp8Meta cpu = MakeFp8Meta(fp8, 2, c10::Device(c10::kCPU));
        cpu.scale.fill_(scale);
        cpu.scale_inv.fill_(1.0 / scale);
        Fp8Meta on_device = CopyMeta(cpu, device);
        const at::Tensor expected = QuantizeFp8(t, &cpu);
        const bool unaligned = shape[0] % 2 == 1 || shape[0] == 68;
        const at::Tensor input = unaligned ? testing::Unaligned(t.to(device)) : t.to(device);
        at::Tensor used;
        at::Tensor sums;
        const auto [q, q_t] = QuantizeFp8WithTranspose(input, &on_device, &used, &sums);
        EXPECT_TRUE(SameBytes(q, expected));
        EXPECT_TRUE(SameBytes(q_t, expected.t().contiguous()));
        EXPECT_TRUE(SameValues(on_device.amax_history, cpu.amax_history));
        ASSERT_TRUE(sums.defined());
        EXPECT_EQ(sums.scalar_type(), dtype);
        EXPECT_EQ(sums.sizes(), at::IntArrayRef({shape[1]}));
        const at::Tensor sums64 = Cpu64(t).sum(0);
        EXPECT_TRUE(
            AllClose(sums, sums64, ToleranceFor(dtype, Magnitude(Cpu64(t).abs().sum(0))), "sums"));
        if (device.is_cpu()) {
          EXPECT_TRUE(at::equal(sums, t.to(at::kFloat).sum(0).to(dtype)));
        }
        at::Tensor again;
        Fp8Meta second = CopyMeta(cpu, device);
        QuantizeFp8WithTranspose(input, &second, nullptr, &again);
        EXPECT_TRUE(at::equal(again, sums));
        // The scale_inv read, kept apart from the meta's.
        ASSERT_TRUE(used.defined());
        EXPECT_EQ(Item(used), Item(cpu.scale_inv));
        on_device.scale_inv.fill_(123.0);
        EXPECT_EQ(Item(used), Item(cpu.scale_inv));
        at::Tensor used_plain;
        Fp8Meta third = CopyMeta(cpu, device);
        QuantizeFp8(input, &third, &used_plain);
        EXPECT_EQ(Item(used_plain), Item(cpu.scale_inv));
      }
    }
  }
}

TEST_F(Fp8LinearTest, QuantizeTakesStridedInputsAndTheTransposeNeedsTwoDims) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::Tensor base = QuantizeInput({40, 24}, 77, 5.0, 448.0).to(at::kBFloat16);
  const at::Tensor strided = base.to(device).t();  // [24, 40], not contiguous
  const at::Tensor sliced = base.to(device).narrow(1, 3, 17);
  for (const at::Tensor& t : {strided, sliced}) {
    Fp8Meta cpu = MakeFp8Meta(at::kFloat8_e4m3fn, 1, c10::Device(c10::kCPU));
    cpu.scale.fill_(5.0);
    Fp8Meta a = CopyMeta(cpu, device);
    Fp8Meta b = CopyMeta(cpu, device);
    const at::Tensor expected = QuantizeFp8(t.to(at::kCPU).contiguous(), &cpu);
    EXPECT_TRUE(SameBytes(QuantizeFp8(t, &a), expected));
    const auto [q, q_t] = QuantizeFp8WithTranspose(t, &b);
    EXPECT_TRUE(SameBytes(q, expected));
    EXPECT_TRUE(SameBytes(q_t, expected.t().contiguous()));
    EXPECT_TRUE(SameValues(a.amax_history, cpu.amax_history));
    EXPECT_TRUE(SameValues(b.amax_history, cpu.amax_history));
  }
  Fp8Meta meta = MakeFp8Meta(at::kFloat8_e4m3fn, 1, device);
  EXPECT_KERNEL_ERROR(
      QuantizeFp8WithTranspose(at::ones({4, 2, 2}, base.options().device(device)), &meta),
      "QuantizeFp8WithTranspose: t has shape [4, 2, 2]; it must be 2-D");
  // Empty: nothing recorded.
  const auto [q, q_t] = QuantizeFp8WithTranspose(at::empty({0, 8}, meta.scale.options()), &meta);
  EXPECT_EQ(q_t.sizes(), (std::vector<int64_t>{8, 0}));
  EXPECT_EQ(Item(meta.amax_history[0]), 0.0);
}

// Metas of every case the update meets, on the CPU: the header's edge cases, then random ones.
std::vector<Fp8Meta> UpdateCases(int64_t history_len, uint64_t seed) {
  const c10::Device cpu(c10::kCPU);
  const float denormal = std::numeric_limits<float>::denorm_min();
  std::vector<std::vector<float>> firsts = {
      {0.f},             // nothing recorded, empty history
      {0.f, 3.f, 9.f},   // nothing recorded this step, older amaxes
      {5.f, kNaN, 2.f},  // NaN in the history
      {kNaN, 1.f},       // NaN as this step's amax
      {denormal},        // tiny amax: the scale overflows to FLT_MAX
      {2.f, 1.f, kInf},  // inf in the window
      {kInf},            // inf this step
      {1e-30f, 1e30f},   // a wide range
  };
  std::vector<Fp8Meta> metas;
  int index = 0;
  for (const auto& first : firsts) {
    for (const at::ScalarType fp8 : {at::kFloat8_e4m3fn, at::kFloat8_e5m2}) {
      Fp8Meta meta = MakeFp8Meta(fp8, history_len, cpu);
      for (size_t i = 0; i < first.size() && static_cast<int64_t>(i) < history_len; ++i) {
        meta.amax_history[i] = first[i];
      }
      // Old scales: 1, an odd value, 0 and -inf (kept when the amax is unusable; inf -> FLT_MAX).
      const float scales[] = {1.f, 0.37f, 0.f, -kInf};
      meta.scale.fill_(scales[index++ % 4]);
      metas.push_back(std::move(meta));
    }
  }
  // Enough random ones to take more than one launch (96 metas per launch).
  for (int i = 0; i < 200; ++i) {
    Fp8Meta meta =
        MakeFp8Meta(i % 2 == 0 ? at::kFloat8_e4m3fn : at::kFloat8_e5m2, history_len, cpu);
    meta.amax_history.copy_(RandomTensor({history_len}, seed + i, 10.0).abs().to(at::kFloat));
    if (i % 5 == 0) meta.amax_history[0] = 0.f;
    meta.scale.fill_(0.5f + static_cast<float>(i));
    metas.push_back(std::move(meta));
  }
  return metas;
}

::testing::AssertionResult SameBits(const at::Tensor& actual, const at::Tensor& expected) {
  const at::Tensor a = actual.to(at::kCPU).contiguous().view(at::kInt);
  const at::Tensor e = expected.to(at::kCPU).contiguous().view(at::kInt);
  if (a.sizes() == e.sizes() && at::equal(a, e)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual.to(at::kCPU) << " vs expected " << expected;
}

TEST_F(Fp8LinearTest, BatchedScaleUpdateMatchesTheOneByOneReferenceBitwise) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  // Lengths 1, 3 and one longer than a block of the kernel (its roll runs in chunks).
  for (const int64_t len : {int64_t{1}, int64_t{3}, int64_t{600}}) {
    for (const Fp8AmaxComputeAlgo algo :
         {Fp8AmaxComputeAlgo::kMax, Fp8AmaxComputeAlgo::kMostRecent}) {
      for (const int margin : {0, 3}) {
        SCOPED_TRACE(::testing::Message() << "history " << len << " "
                                          << Fp8AmaxComputeAlgoName(algo) << " margin " << margin);
        const Fp8Recipe recipe{Fp8Format::kHybrid, margin, len, algo};
        std::vector<Fp8Meta> expected = UpdateCases(len, 4000 + len);
        std::vector<Fp8Meta> batched;
        std::vector<Fp8Meta*> pointers;
        for (const Fp8Meta& meta : expected) batched.push_back(CopyMeta(meta, device));
        for (Fp8Meta& meta : batched) pointers.push_back(&meta);
        for (int step = 0; step < 2; ++step) {  // the second step sees the rolled histories
          for (Fp8Meta& meta : expected) UpdateFp8Scale(recipe, &meta);
          UpdateFp8ScaleBatch(recipe, pointers);
        }
        for (size_t i = 0; i < expected.size(); ++i) {
          SCOPED_TRACE(::testing::Message() << "meta " << i);
          EXPECT_TRUE(SameBits(batched[i].amax_history, expected[i].amax_history));
          EXPECT_TRUE(SameBits(batched[i].scale, expected[i].scale));
          EXPECT_TRUE(SameBits(batched[i].scale_inv, expected[i].scale_inv));
        }
      }
    }
  }
}

TEST_F(Fp8LinearTest, UpdateAllFp8ScalesIsUpdateFp8ScalesOnEveryLayer) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Fp8Recipe recipe{Fp8Format::kHybrid, 0, 4, Fp8AmaxComputeAlgo::kMax};
  std::vector<Fp8LinearMeta> one_by_one;
  std::vector<Fp8LinearMeta> all;
  for (int layer = 0; layer < 5; ++layer) {
    Fp8LinearMeta meta = MakeFp8LinearMeta(recipe, device);
    for (Fp8Meta* role : {&meta.input, &meta.weight, &meta.grad_output}) {
      QuantizeFp8(RandomTensor({16, 16}, 5000 + layer, layer + 1.0).to(at::kFloat).to(device),
                  role);
    }
    one_by_one.push_back(meta);
    all.push_back({CopyMeta(meta.input, device), CopyMeta(meta.weight, device),
                   CopyMeta(meta.grad_output, device)});
  }
  std::vector<Fp8LinearMeta*> pointers;
  for (Fp8LinearMeta& meta : all) pointers.push_back(&meta);
  UpdateAllFp8Scales(recipe, pointers);
  for (Fp8LinearMeta& meta : one_by_one) UpdateFp8Scales(recipe, &meta);
  for (size_t i = 0; i < all.size(); ++i) {
    for (const auto& [a, e] : {std::pair<Fp8Meta*, Fp8Meta*>{&all[i].input, &one_by_one[i].input},
                               {&all[i].weight, &one_by_one[i].weight},
                               {&all[i].grad_output, &one_by_one[i].grad_output}}) {
      EXPECT_TRUE(SameBits(a->amax_history, e->amax_history));
      EXPECT_TRUE(SameBits(a->scale, e->scale));
      EXPECT_TRUE(SameBits(a->scale_inv, e->scale_inv));
    }
  }
  UpdateAllFp8Scales(recipe, {});  // nothing to do
  EXPECT_KERNEL_ERROR(UpdateAllFp8Scales(recipe, {pointers[0], nullptr}),
                      "UpdateAllFp8Scales: meta 1 of 2 is null");
  EXPECT_KERNEL_ERROR(UpdateFp8ScaleBatch(Fp8Recipe{}, {&all[0].input}), "the recipe says 1024");
  EXPECT_TRUE(SameFp8Recipe(recipe, recipe));
  EXPECT_FALSE(SameFp8Recipe(recipe, Fp8Recipe{}));
}

// --- Recipe, names, state tensors, device capability ---

TEST(Fp8RecipeTest, ParsesTheMegatronNames) {
  EXPECT_EQ(*ParseFp8Format("hybrid"), Fp8Format::kHybrid);
  EXPECT_EQ(*ParseFp8Format("e4m3"), Fp8Format::kE4M3);
  EXPECT_EQ(ParseFp8Format("e5m2").status().message(),
            "unknown FP8 format 'e5m2': choose hybrid (E4M3 forward, E5M2 gradients) or e4m3");
  EXPECT_EQ(*ParseFp8AmaxComputeAlgo("max"), Fp8AmaxComputeAlgo::kMax);
  EXPECT_EQ(*ParseFp8AmaxComputeAlgo("most_recent"), Fp8AmaxComputeAlgo::kMostRecent);
  EXPECT_EQ(ParseFp8AmaxComputeAlgo("mean").status().message(),
            "unknown FP8 amax compute algorithm 'mean': choose max or most_recent");
  EXPECT_EQ(Fp8DtypeFor(Fp8Format::kHybrid, Fp8TensorRole::kGradOutput), at::kFloat8_e5m2);
  EXPECT_EQ(Fp8DtypeFor(Fp8Format::kHybrid, Fp8TensorRole::kInput), at::kFloat8_e4m3fn);
  EXPECT_EQ(Fp8DtypeFor(Fp8Format::kE4M3, Fp8TensorRole::kGradOutput), at::kFloat8_e4m3fn);
  EXPECT_EQ(Fp8Max(at::kFloat8_e4m3fn), 448.0);
  EXPECT_EQ(Fp8Max(at::kFloat8_e5m2), 57344.0);
}

TEST(Fp8RecipeTest, ValidatesTheRecipe) {
  EXPECT_TRUE(ValidateFp8Recipe(Fp8Recipe{}).ok());
  EXPECT_EQ(ValidateFp8Recipe(Fp8Recipe{Fp8Format::kHybrid, 0, 0}).message(),
            "--fp8-amax-history-len=0 must be at least 1 (Megatron's default 1, Transformer "
            "Engine's 1024)");
  EXPECT_EQ(ValidateFp8Recipe(Fp8Recipe{Fp8Format::kHybrid, -2, 4}).message(),
            "--fp8-margin=-2 must be at least 0 (scale = fp8_max / amax / 2^margin; 0 is the "
            "default)");
}

TEST(Fp8RecipeTest, StateTensorsAreTheMetasOwnByName) {
  const Fp8LinearMeta meta = MakeFp8LinearMeta(
      Fp8Recipe{Fp8Format::kHybrid, 0, 5, Fp8AmaxComputeAlgo::kMax}, c10::Device(c10::kCPU));
  const auto tensors = Fp8LinearMetaTensors(meta);
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"input.amax_history", "input.scale", "input.scale_inv",
                                             "weight.amax_history", "weight.scale",
                                             "weight.scale_inv", "grad_output.amax_history",
                                             "grad_output.scale", "grad_output.scale_inv"}));
  EXPECT_EQ(tensors[6].second.sizes(), at::IntArrayRef({5}));
  // Loading into the named tensor in place restores the state (what a checkpoint load does).
  tensors[7].second.fill_(3.5f);
  EXPECT_EQ(meta.grad_output.scale.item<float>(), 3.5f);
  EXPECT_EQ(meta.grad_output.dtype, at::kFloat8_e5m2);
}

TEST(Fp8DeviceTest, RefusesGpusBelowSm89) {
  EXPECT_EQ(CheckFp8Capability(8, 0, "NVIDIA A100-SXM4-80GB").message(),
            "FP8 needs compute capability 8.9 or newer (Ada, Hopper); this GPU is NVIDIA "
            "A100-SXM4-80GB (sm_80): drop --fp8-format");
  EXPECT_FALSE(CheckFp8Capability(8, 6, "NVIDIA A10").ok());
  EXPECT_FALSE(CheckFp8Capability(7, 0, "Tesla V100").ok());
  EXPECT_TRUE(CheckFp8Capability(8, 9, "NVIDIA L4").ok());
  EXPECT_TRUE(CheckFp8Capability(9, 0, "NVIDIA H100 80GB HBM3").ok());
  EXPECT_TRUE(CheckFp8Capability(10, 0, "NVIDIA B200").ok());
  EXPECT_TRUE(CheckFp8Device(c10::Device(c10::kCPU)).ok());
}

TEST_F(Fp8LinearTest, ThisDeviceRunsFp8OrRefusesWithTheCapabilityMessage) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const absl::Status status = CheckFp8Device(device);
  if (status.ok()) GTEST_SKIP() << device << " runs FP8; the refusal is for older GPUs";
  EXPECT_NE(std::string(status.message()).find("FP8 needs compute capability 8.9 or newer"),
            std::string::npos);
  const Fp8LinearMeta meta = MakeFp8LinearMeta(Fp8Recipe{}, device);
  const at::Tensor x = at::ones({16, 16}, at::TensorOptions().device(device));
  EXPECT_KERNEL_ERROR(Fp8Linear(x, x, at::Tensor(), meta), "drop --fp8-format");
}

}  // namespace
}  // namespace varuna::kernels
