#include "tests/varuna/kernels/kernel_test_util.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>

#ifdef VARUNA_KERNEL_TEST_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace varuna::kernels::testing {

void KernelTest::SetUp() { at::set_num_threads(1); }

std::optional<c10::Device> KernelDevice() {
#ifdef VARUNA_KERNEL_TEST_CUDA
  if (!at::cuda::is_available()) return std::nullopt;
  static const bool printed = [] {
    std::cout << "kernel test device: " << at::cuda::getDeviceProperties(0)->name << "\n";
    return true;
  }();
  (void)printed;
  return c10::Device(c10::kCUDA, 0);
#else
  return c10::Device(c10::kCPU);
#endif
}

Tolerance ToleranceFor(at::ScalarType dtype, double magnitude) {
  switch (dtype) {
    case at::kDouble:
      return {1e-10, 1e-10 * magnitude};
    case at::kFloat:
      return {1e-5, 1e-5 * magnitude};
    case at::kHalf:
      return {1e-2, 1e-2 * magnitude};
    case at::kBFloat16:
      return {2e-2, 2e-2 * magnitude};
    default:
      return {0, 0};
  }
}

double Magnitude(const at::Tensor& t) {
  return t.numel() == 0 ? 1.0 : std::max(1e-3, t.abs().max().item<double>());
}

::testing::AssertionResult AllClose(const at::Tensor& actual, const at::Tensor& expected,
                                    const Tolerance& tolerance, const std::string& what) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure()
           << what << ": shape " << actual.sizes() << " but expected " << expected.sizes();
  }
  const at::Tensor a = actual.detach().to(at::kCPU, at::kDouble).contiguous().reshape({-1});
  const at::Tensor e = expected.detach().to(at::kCPU, at::kDouble).contiguous().reshape({-1});
  const at::Tensor allowed = e.abs() * tolerance.rtol + tolerance.atol;
  const at::Tensor excess = (a - e).abs() - allowed;
  // NaN in `a` where `e` is finite must fail: NaN compares false, so test the negation.
  const at::Tensor bad = ~(excess <= 0) & e.isfinite();
  if (!bad.any().item<bool>()) return ::testing::AssertionSuccess();
  const int64_t worst =
      at::where(bad, excess.nan_to_num(INFINITY), -INFINITY).argmax().item<int64_t>();
  std::ostringstream out;
  out << what << ": " << bad.sum().item<int64_t>() << " of " << e.numel()
      << " elements differ; worst at flat index " << worst << ": " << a[worst].item<double>()
      << " vs expected " << e[worst].item<double>() << " (rtol " << tolerance.rtol << ", atol "
      << tolerance.atol << ")";
  return ::testing::AssertionFailure() << out.str();
}

at::Tensor RandomTensor(at::IntArrayRef shape, uint64_t generator_seed, double scale,
                        double shift) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(generator_seed);
  return at::normal(0.0, 1.0, shape, generator, at::TensorOptions().dtype(at::kDouble)) * scale +
         shift;
}

at::Tensor Unaligned(const at::Tensor& t) {
  at::Tensor buffer = at::empty({t.numel() + 1}, t.options());
  at::Tensor view = buffer.narrow(0, 1, t.numel()).view(t.sizes());
  view.copy_(t);
  EXPECT_NE(reinterpret_cast<uintptr_t>(view.data_ptr()) % 16, 0u);
  return view;
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "no error";
}

}  // namespace varuna::kernels::testing
