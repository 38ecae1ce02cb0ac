// What the kernel equivalence tests of varuna/kernels share: a fixture, the device the op under
// test runs on (CPU in <name>, CUDA in <name>_gpu; see kernel_test.bzl), tolerances by dtype,
// and a comparison that reports the worst element.
#ifndef TESTS_VARUNA_KERNELS_KERNEL_TEST_UTIL_H_
#define TESTS_VARUNA_KERNELS_KERNEL_TEST_UTIL_H_

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>

namespace varuna::kernels::testing {

// The fixture of the kernel tests: single-threaded ATen, since the default test run shares two
// cores with other tests.
class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override;
};

// The device this test binary runs ops on: CPU, or in the _gpu target the first CUDA device;
// nullopt when the _gpu target finds no usable GPU (the test then skips).
std::optional<c10::Device> KernelDevice();

// Sets `device` (a new const c10::Device) or skips the test, saying why.
#define VARUNA_KERNEL_DEVICE_OR_SKIP(device)                                                 \
  const std::optional<c10::Device> device##_or = ::varuna::kernels::testing::KernelDevice(); \
  if (!device##_or.has_value()) {                                                            \
    GTEST_SKIP() << "no usable CUDA device here; run the gpu-tagged tests on a GPU host "    \
                    "(README, \"GPU tests\")";                                               \
  }                                                                                          \
  const c10::Device device = *device##_or

// Tolerances for results computed in `dtype` against a float64 reference: fp32 rtol 1e-5,
// fp16/bf16 about 1e-2 (testing.md); atol scales with `magnitude`, the typical size of the
// values compared (a sum over n terms loses absolute, not relative, precision).
struct Tolerance {
  double rtol;
  double atol;
};
Tolerance ToleranceFor(at::ScalarType dtype, double magnitude = 1.0);

// The largest magnitude in `t` (at least 1e-3, so that all-zero results are not compared
// exactly; 1 when `t` is empty): the `magnitude` of ToleranceFor for results like `t`.
double Magnitude(const at::Tensor& t);

// Passes when |actual - expected| <= atol + rtol * |expected| everywhere (both are compared as
// float64 on the CPU; shapes must match and actual must be finite wherever expected is).
// Otherwise names `what`, the worst element (index, both values) and the tolerance.
::testing::AssertionResult AllClose(const at::Tensor& actual, const at::Tensor& expected,
                                    const Tolerance& tolerance, const std::string& what);

// Normal(0, 1) * scale + shift in float64 on the CPU from `generator_seed`, so both sides of a
// comparison start from the same values; convert with .to(device, dtype).
at::Tensor RandomTensor(at::IntArrayRef shape, uint64_t generator_seed, double scale = 1.0,
                        double shift = 0.0);

// `t`'s values one element into a buffer on its device: contiguous, but not 16-byte aligned
// (so a kernel must take its scalar path).
at::Tensor Unaligned(const at::Tensor& t);

// The message (without backtrace) of the c10::Error `f` throws, or "no error".
std::string ErrorOf(const std::function<void()>& f);

// Expects `call` to throw a c10::Error whose message contains `text`.
#define EXPECT_KERNEL_ERROR(call, text)                                                          \
  do {                                                                                           \
    const std::string kernel_error_message = ::varuna::kernels::testing::ErrorOf([&] { call; }); \
    EXPECT_NE(kernel_error_message.find(text), std::string::npos)                                \
        << "message: " << kernel_error_message;                                                  \
  } while (false)

}  // namespace varuna::kernels::testing

#endif  // TESTS_VARUNA_KERNELS_KERNEL_TEST_UTIL_H_
