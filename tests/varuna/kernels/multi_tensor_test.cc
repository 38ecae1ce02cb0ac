// Kernel equivalence of the multi-tensor unscale / inf check / squared L2 norm against float64
// compositions, on many tensors of odd sizes (0, 1, 7, 65537 and 300001 elements: tails, several
// chunks, an unaligned view that takes the scalar path) in float32, float16 and bfloat16.
#include "varuna/kernels/multi_tensor.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/varuna/kernels/kernel_test_util.h"

namespace varuna::kernels {
namespace {

using testing::AllClose;
using testing::RandomTensor;
using testing::ToleranceFor;

constexpr double kScale = 1.0 / 1024.0;
const at::ScalarType kSourceTypes[] = {at::kFloat, at::kHalf, at::kBFloat16};

// Gradient-like sources on `device`: sizes 0, 1, 7, 65537 (an element offset of 1 into a larger
// buffer, so not 16-byte aligned), 300001, and [3, 11]. `dtype` undefined: the types cycle
// through float32, float16, bfloat16. Values N(0, 3^2) * 1024, as scaled fp16 gradients.
std::vector<at::Tensor> MakeSources(c10::Device device, std::optional<at::ScalarType> dtype,
                                    uint64_t seed) {
  const std::vector<std::vector<int64_t>> shapes = {{0}, {1}, {7}, {65537}, {300001}, {3, 11}};
  std::vector<at::Tensor> sources;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const at::ScalarType type = dtype.value_or(kSourceTypes[i % 3]);
    if (shapes[i][0] == 65537) {
      sources.push_back(
          RandomTensor({65538}, seed + i, 3.0 * 1024).to(device, type).narrow(0, 1, 65537));
    } else {
      sources.push_back(RandomTensor(shapes[i], seed + i, 3.0 * 1024).to(device, type));
    }
  }
  return sources;
}

// Float32 destinations filled with NaN, so an element the op does not write fails the test.
std::vector<at::Tensor> MakeDestinations(const std::vector<at::Tensor>& sources) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& x : sources) {
    out.push_back(at::full({x.numel()}, std::numeric_limits<float>::quiet_NaN(),
                           x.options().dtype(at::kFloat)));
  }
  return out;
}

double SumOfSquares64(const std::vector<at::Tensor>& tensors, double scale) {
  double sum = 0;
  for (const at::Tensor& x : tensors) {
    sum += (x.to(at::kCPU, at::kDouble) * scale).square().sum().item<double>();
  }
  return sum;
}

float Value(const at::Tensor& scalar, c10::Device device) {
  EXPECT_EQ(scalar.sizes(), at::IntArrayRef({1}));
  EXPECT_EQ(scalar.scalar_type(), at::kFloat);
  EXPECT_EQ(scalar.device(), device);
  return scalar.cpu().item<float>();
}

using MultiTensorTest = testing::KernelTest;

TEST_F(MultiTensorTest, UnscaleMatchesFloat64InEveryDtype) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const at::ScalarType dtype : kSourceTypes) {
    SCOPED_TRACE(c10::toString(dtype));
    const std::vector<at::Tensor> sources = MakeSources(device, dtype, 100);
    const std::vector<at::Tensor> destinations = MakeDestinations(sources);
    EXPECT_EQ(Value(MultiTensorUnscale(sources, destinations, kScale), device), 0.0f);
    for (size_t i = 0; i < sources.size(); ++i) {
      const at::Tensor expected = sources[i].to(at::kCPU, at::kDouble).reshape({-1}) * kScale;
      EXPECT_TRUE(AllClose(destinations[i], expected, ToleranceFor(at::kFloat),
                           "destination " + std::to_string(i)));
    }
  }
}

TEST_F(MultiTensorTest, UnscaleMixedSourceTypesInOneCallAndANonPowerOfTwoScale) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const std::vector<at::Tensor> sources = MakeSources(device, std::nullopt, 200);
  const std::vector<at::Tensor> destinations = MakeDestinations(sources);
  EXPECT_EQ(Value(MultiTensorUnscale(sources, destinations, 0.3), device), 0.0f);
  for (size_t i = 0; i < sources.size(); ++i) {
    const at::Tensor expected = sources[i].to(at::kCPU, at::kDouble).reshape({-1}) * 0.3;
    EXPECT_TRUE(AllClose(destinations[i], expected, ToleranceFor(at::kFloat),
                         "destination " + std::to_string(i)));
  }
}

TEST_F(MultiTensorTest, UnscaleInPlaceOnFloat32) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const std::vector<at::Tensor> sources = MakeSources(device, at::kFloat, 300);
  std::vector<at::Tensor> originals;
  for (const at::Tensor& x : sources) originals.push_back(x.to(at::kCPU, at::kDouble));
  EXPECT_EQ(Value(MultiTensorUnscale(sources, sources, kScale), device), 0.0f);
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_TRUE(AllClose(sources[i], originals[i] * kScale, ToleranceFor(at::kFloat),
                         "in-place tensor " + std::to_string(i)));
  }
}

TEST_F(MultiTensorTest, FoundInfFlagsInfAndNanAnywhere) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    size_t tensor;
    int64_t element;  // -1: the last
    double value;
  };
  // Tensor 4 (300001 elements) is the last large one, tensor 5 the last in the list; tensor 3
  // is the unaligned view (scalar path), tensor 1 has one element.
  const Case cases[] = {{5, -1, inf},     {5, -1, -inf}, {5, -1, nan}, {4, 150000, -inf},
                        {4, 299999, nan}, {3, -1, inf},  {1, 0, nan},  {4, 65536, inf}};
  for (const at::ScalarType dtype : kSourceTypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " tensor " + std::to_string(c.tensor) +
                   " element " + std::to_string(c.element) + " value " + std::to_string(c.value));
      const std::vector<at::Tensor> sources = MakeSources(device, dtype, 400);
      const at::Tensor flat = sources[c.tensor].view({-1});
      flat[c.element < 0 ? flat.numel() - 1 : c.element].fill_(c.value);
      EXPECT_EQ(Value(MultiTensorUnscale(sources, MakeDestinations(sources), kScale), device),
                1.0f);
      const UnscaleNormResult both =
          MultiTensorUnscaleL2NormSquared(sources, MakeDestinations(sources), kScale);
      EXPECT_EQ(Value(both.found_inf, device), 1.0f);
      EXPECT_FALSE(std::isfinite(Value(both.sum_of_squares, device)));
      EXPECT_FALSE(std::isfinite(Value(MultiTensorL2NormSquared(sources), device)));
    }
  }
}

TEST_F(MultiTensorTest, L2NormSquaredMatchesFloat64InEveryDtypeAndMixed) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const std::optional<at::ScalarType> types[] = {at::kFloat, at::kHalf, at::kBFloat16,
                                                 std::nullopt};
  for (const std::optional<at::ScalarType>& dtype : types) {
    SCOPED_TRACE(dtype ? c10::toString(*dtype) : "mixed");
    // Unscaled values (N(0, 9)): a sum of ~370K squares around 3.3e6.
    std::vector<at::Tensor> tensors = MakeSources(device, dtype, 500);
    for (at::Tensor& x : tensors) x = (x.to(at::kFloat) * kScale).to(x.scalar_type());
    const double expected = SumOfSquares64(tensors, 1.0);
    const float actual = Value(MultiTensorL2NormSquared(tensors), device);
    EXPECT_NEAR(actual, expected, expected * 1e-5);
    EXPECT_GT(expected, 1e6);
  }
}

TEST_F(MultiTensorTest, UnscaleL2NormSquaredEqualsTheTwoSeparateOpsBitwise) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const std::optional<at::ScalarType> types[] = {at::kFloat, at::kHalf, at::kBFloat16,
                                                 std::nullopt};
  for (const std::optional<at::ScalarType>& dtype : types) {
    SCOPED_TRACE(dtype ? c10::toString(*dtype) : "mixed");
    const std::vector<at::Tensor> sources = MakeSources(device, dtype, 600);
    const std::vector<at::Tensor> fused_out = MakeDestinations(sources);
    const std::vector<at::Tensor> separate_out = MakeDestinations(sources);
    const UnscaleNormResult fused = MultiTensorUnscaleL2NormSquared(sources, fused_out, kScale);
    const at::Tensor found = MultiTensorUnscale(sources, separate_out, kScale);
    const at::Tensor sum = MultiTensorL2NormSquared(separate_out);
    EXPECT_EQ(Value(fused.found_inf, device), 0.0f);
    EXPECT_EQ(Value(found, device), 0.0f);
    EXPECT_EQ(Value(fused.sum_of_squares, device), Value(sum, device));
    for (size_t i = 0; i < sources.size(); ++i) {
      EXPECT_TRUE(at::equal(fused_out[i].cpu(), separate_out[i].cpu())) << "tensor " << i;
    }
    const double expected = SumOfSquares64(sources, kScale);
    EXPECT_NEAR(Value(fused.sum_of_squares, device), expected, expected * 1e-5);
  }
}

TEST_F(MultiTensorTest, EmptyListsAndEmptyTensorsGiveZeros) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const c10::Device cpu(c10::kCPU);
  EXPECT_EQ(Value(MultiTensorUnscale({}, {}, kScale), cpu), 0.0f);
  EXPECT_EQ(Value(MultiTensorL2NormSquared({}), cpu), 0.0f);
  const UnscaleNormResult none = MultiTensorUnscaleL2NormSquared({}, {}, kScale);
  EXPECT_EQ(Value(none.found_inf, cpu), 0.0f);
  EXPECT_EQ(Value(none.sum_of_squares, cpu), 0.0f);

  const std::vector<at::Tensor> empty = {at::empty({0}, at::TensorOptions(device).dtype(at::kHalf)),
                                         at::empty({2, 0}, at::TensorOptions(device))};
  const std::vector<at::Tensor> out = MakeDestinations(empty);
  EXPECT_EQ(Value(MultiTensorUnscale(empty, out, kScale), device), 0.0f);
  EXPECT_EQ(Value(MultiTensorL2NormSquared(empty), device), 0.0f);
  const UnscaleNormResult both = MultiTensorUnscaleL2NormSquared(empty, out, kScale);
  EXPECT_EQ(Value(both.found_inf, device), 0.0f);
  EXPECT_EQ(Value(both.sum_of_squares, device), 0.0f);
}

TEST_F(MultiTensorTest, RejectsMisuseNamingTheArgument) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const at::TensorOptions f32 = at::TensorOptions(device).dtype(at::kFloat);
  const at::Tensor x = at::ones({7}, f32);
  const at::Tensor y = at::ones({7}, f32);
  // A device other than the op's: CPU next to CUDA, the meta device next to the CPU.
  const at::Tensor elsewhere =
      at::ones({7}, at::TensorOptions(device.is_cuda() ? c10::kCPU : c10::kMeta));

  EXPECT_KERNEL_ERROR(MultiTensorUnscale({x, x}, {y}, kScale),
                      "MultiTensorUnscale: 2 sources but 1 destinations");
  EXPECT_KERNEL_ERROR(MultiTensorUnscale({x, at::Tensor()}, {y, y}, kScale),
                      "MultiTensorUnscale: source[1] is undefined");
  EXPECT_KERNEL_ERROR(MultiTensorUnscale({x}, {at::Tensor()}, kScale),
                      "MultiTensorUnscale: destination[0] is undefined");
  EXPECT_KERNEL_ERROR(MultiTensorUnscale({x.to(at::kDouble)}, {y}, kScale),
                      "MultiTensorUnscale: source[0] is Double; the op takes float32, float16 or "
                      "bfloat16");
  EXPECT_KERNEL_ERROR(MultiTensorUnscale({x}, {y.to(at::kHalf)}, kScale),
                      "MultiTensorUnscale: destination[0] is Half; destinations must be float32");
  EXPECT_KERNEL_ERROR(MultiTensorUnscale({x, x}, {y, at::ones({6}, f32)}, kScale),
                      "MultiTensorUnscale: destination[1] has 6 elements but source[1] has 7");
  EXPECT_KERNEL_ERROR(
      MultiTensorUnscale({at::ones({3, 4}, f32).t()}, {at::ones({12}, f32)}, kScale),
      "MultiTensorUnscale: source[0] is not contiguous");
  EXPECT_KERNEL_ERROR(MultiTensorUnscale({x, elsewhere}, {y, y}, kScale),
                      "MultiTensorUnscale: source[1] is on");
  EXPECT_KERNEL_ERROR(MultiTensorUnscale({x}, {elsewhere}, kScale),
                      "put all tensors on one device");
  EXPECT_KERNEL_ERROR(MultiTensorL2NormSquared({x, x.to(at::kInt)}),
                      "MultiTensorL2NormSquared: tensors[1] is Int");
  EXPECT_KERNEL_ERROR(MultiTensorL2NormSquared({x, elsewhere}),
                      "MultiTensorL2NormSquared: tensors[1] is on");
  EXPECT_KERNEL_ERROR(MultiTensorUnscaleL2NormSquared({x}, {y.to(at::kBFloat16)}, kScale),
                      "MultiTensorUnscaleL2NormSquared: destination[0] is BFloat16");
}

}  // namespace
}  // namespace varuna::kernels
