// AccumulateWeightGradient (main_grad += grad_output^T input into an fp32 main gradient) against
// a float64 reference, on the device of the test binary (kernel_test.bzl): the fused GEMM is
// within fp32 rounding of the exact sum, never less accurate than the unfused "dW in the inputs'
// dtype, then add_ into fp32", and accumulates over micro-batches.
#include "varuna/kernels/weight_gradient_accumulation.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/varuna/kernels/kernel_test_util.h"

namespace varuna::kernels {
namespace {

using testing::AllClose;
using testing::Magnitude;
using testing::RandomTensor;
using testing::Tolerance;

struct Shape {
  int64_t rows, in, out;
};

// Odd sizes, one row, GPT-2's h -> 3h / 4h -> h shapes (small h), more rows than columns.
const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {{7, 5, 3},     {1, 16, 8},    {64, 32, 96},
                                            {33, 128, 32}, {200, 17, 65}, {512, 64, 48}};
  return shapes;
}

const std::vector<at::ScalarType>& Dtypes() {
  static const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kHalf, at::kBFloat16};
  return dtypes;
}

std::string Name(const Shape& s, at::ScalarType dtype) {
  return std::string(c10::toString(dtype)) + " [" + std::to_string(s.rows) + ", " +
         std::to_string(s.in) + "] -> " + std::to_string(s.out);
}

// The largest |actual - exact| (exact in float64 on the CPU).
double MaxError(const at::Tensor& actual, const at::Tensor& exact) {
  return (actual.to(at::kCPU, at::kDouble) - exact).abs().max().item<double>();
}

// Tolerance of an fp32 accumulation of `terms` products, relative to the result's magnitude.
Tolerance Fp32Sum(const at::Tensor& expected, int64_t terms) {
  return {1e-5, 1e-6 * static_cast<double>(terms + 8) * Magnitude(expected)};
}

// The fused result's error is no larger than the unfused one's. In fp32 both round only in fp32
// sums (one GEMM with beta = 1, or a GEMM and an add), so either may win by chance: there the
// fused error may be up to twice the unfused one, plus fp32 rounding of `magnitude`.
void ExpectNoLessAccurate(double fused_error, double unfused_error, at::ScalarType dtype,
                          double magnitude, const std::string& what) {
  const double bound = dtype == at::kFloat ? 2 * unfused_error + 1e-6 * magnitude
                                           : unfused_error * (1 + 1e-9) + 1e-12;
  EXPECT_LE(fused_error, bound) << what << ": fused error " << fused_error << ", unfused "
                                << unfused_error;
}

class WeightGradientAccumulationTest : public testing::KernelTest {};

TEST_F(WeightGradientAccumulationTest, MatchesFloat64ReferenceAndBeatsTheUnfusedPath) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  uint64_t seed = 11;
  for (const Shape& s : Shapes()) {
    for (at::ScalarType dtype : Dtypes()) {
      const std::string what = Name(s, dtype);
      // The inputs rounded to `dtype` first, so the reference sees the same values.
      const at::Tensor x = RandomTensor({s.rows, s.in}, ++seed).to(dtype);
      const at::Tensor g = RandomTensor({s.rows, s.out}, ++seed, 0.5).to(dtype);
      const at::Tensor start = RandomTensor({s.out, s.in}, ++seed, 3.0).to(at::kFloat);
      const at::Tensor exact =
          start.to(at::kDouble) + at::mm(g.to(at::kDouble).t(), x.to(at::kDouble));

      at::Tensor main_grad = start.to(device).clone();  // .to may return `start` itself
      const at::Tensor& returned = AccumulateWeightGradient(x.to(device), g.to(device), main_grad);
      EXPECT_TRUE(returned.is_same(main_grad)) << what;
      ASSERT_EQ(main_grad.scalar_type(), at::kFloat) << what;
      EXPECT_TRUE(AllClose(main_grad, exact, Fp32Sum(exact, s.rows), what));

      // The unfused path: dW in the inputs' dtype, then one add into the fp32 buffer.
      at::Tensor unfused = start.to(device).clone();
      unfused.add_(at::mm(g.to(device).t(), x.to(device)));
      const double fused_error = MaxError(main_grad, exact);
      const double unfused_error = MaxError(unfused, exact);
      ExpectNoLessAccurate(fused_error, unfused_error, dtype, Magnitude(exact), what);
      if (dtype != at::kFloat && s.rows > 1) {
        // A half-precision dW is rounded to 8 (bf16) or 11 (fp16) bits: the fused one, to fp32.
        EXPECT_LT(fused_error * 16, unfused_error) << what;
      }
    }
  }
}

TEST_F(WeightGradientAccumulationTest, Float32IsBitwiseTheInPlaceAddmm) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::Tensor x = RandomTensor({45, 23}, 1).to(device, at::kFloat);
  const at::Tensor g = RandomTensor({45, 19}, 2).to(device, at::kFloat);
  const at::Tensor start = RandomTensor({19, 23}, 3).to(device, at::kFloat);
  at::Tensor fused = start.clone();
  AccumulateWeightGradient(x, g, fused);
  at::Tensor reference = start.clone();
  reference.addmm_(g.t(), x);
  EXPECT_TRUE(at::equal(fused.cpu(), reference.cpu()));
}

TEST_F(WeightGradientAccumulationTest, AccumulatesOverMicroBatches) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const Shape s{48, 40, 24};
  for (at::ScalarType dtype : Dtypes()) {
    at::Tensor main_grad = at::zeros({s.out, s.in}, at::TensorOptions(device).dtype(at::kFloat));
    at::Tensor exact = at::zeros({s.out, s.in}, at::kDouble);
    at::Tensor unfused = main_grad.clone();
    for (int micro = 0; micro < 4; ++micro) {
      const at::Tensor x = RandomTensor({s.rows, s.in}, 100 + micro).to(dtype);
      const at::Tensor g = RandomTensor({s.rows, s.out}, 200 + micro, 0.25).to(dtype);
      exact += at::mm(g.to(at::kDouble).t(), x.to(at::kDouble));
      AccumulateWeightGradient(x.to(device), g.to(device), main_grad);
      unfused.add_(at::mm(g.to(device).t(), x.to(device)));
    }
    const std::string what = std::string(c10::toString(dtype)) + ", 4 micro-batches";
    EXPECT_TRUE(AllClose(main_grad, exact, Fp32Sum(exact, 4 * s.rows), what));
    ExpectNoLessAccurate(MaxError(main_grad, exact), MaxError(unfused, exact), dtype,
                         Magnitude(exact), what);
  }
}

TEST_F(WeightGradientAccumulationTest, Float64AccumulatesInFloat64) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::Tensor x = RandomTensor({9, 6}, 5).to(device);
  const at::Tensor g = RandomTensor({9, 4}, 6).to(device);
  at::Tensor main_grad = at::zeros({4, 6}, x.options());
  AccumulateWeightGradient(x, g, main_grad);
  EXPECT_TRUE(AllClose(main_grad, at::mm(g.t(), x).cpu(), {1e-12, 1e-12}, "float64"));
}

TEST_F(WeightGradientAccumulationTest, MisuseNamesTheArgumentAndLeavesMainGradUnchanged) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::TensorOptions half = at::TensorOptions(device).dtype(at::kBFloat16);
  const at::Tensor x = RandomTensor({8, 6}, 7).to(device, at::kBFloat16);
  const at::Tensor g = RandomTensor({8, 4}, 8).to(device, at::kBFloat16);
  at::Tensor main_grad = RandomTensor({4, 6}, 9).to(device, at::kFloat);
  const at::Tensor before = main_grad.clone();

  EXPECT_KERNEL_ERROR(AccumulateWeightGradient(at::Tensor(), g, main_grad), "input");
  EXPECT_KERNEL_ERROR(AccumulateWeightGradient(x, g.to(at::kHalf), main_grad),
                      "grad_output is Half but input is BFloat16");
  at::Tensor half_main = main_grad.to(at::kBFloat16);
  EXPECT_KERNEL_ERROR(AccumulateWeightGradient(x, g, half_main),
                      "allocate main_grad in that dtype");
  EXPECT_KERNEL_ERROR(AccumulateWeightGradient(x.narrow(0, 0, 7), g, main_grad),
                      "input has 7 rows but grad_output has 8");
  at::Tensor wrong = at::zeros({6, 4}, main_grad.options());
  EXPECT_KERNEL_ERROR(AccumulateWeightGradient(x, g, wrong), "pass the weight's main gradient");
  EXPECT_KERNEL_ERROR(AccumulateWeightGradient(x.view({8, 2, 3}), g, main_grad), "must be 2-D");
  at::Tensor strided = at::zeros({6, 4}, main_grad.options()).t();
  EXPECT_KERNEL_ERROR(AccumulateWeightGradient(x, g, strided), "must be contiguous");
  EXPECT_KERNEL_ERROR(
      AccumulateWeightGradient(at::zeros({8, 6}, half.dtype(at::kInt)), g, main_grad), "input");
  EXPECT_TRUE(at::equal(main_grad.cpu(), before.cpu()));
}

}  // namespace
}  // namespace varuna::kernels
