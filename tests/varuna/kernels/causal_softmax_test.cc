// CausalSoftmax (forward, backward, autograd op) on the test's device against a naive float64
// composition whose backward comes from autograd, on every row or on sampled rows of large
// inputs; plus the causal property, row sums, exact zeros above the diagonal and misuse.
//
// Host work is kept to the rows checked: with sampled rows, only those rows are copied to the
// host and computed in float64, and the autograd op is compared with the explicit functions on
// every row on the device. (LongRowsMatchNaiveOnSampledRows took 138 s on an H100 host when that
// comparison copied whole [16384, 16384] results to the host in float64, single-threaded.)
#include "varuna/kernels/causal_softmax.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "tests/varuna/kernels/kernel_test_util.h"

namespace varuna::kernels {
namespace {

using ::varuna::kernels::testing::AllClose;
using ::varuna::kernels::testing::RandomTensor;
using ::varuna::kernels::testing::Tolerance;
using ::varuna::kernels::testing::ToleranceFor;
using ::varuna::kernels::testing::Unaligned;

using CausalSoftmaxTest = testing::KernelTest;

std::string Describe(at::IntArrayRef shape, at::ScalarType dtype, double scale) {
  std::ostringstream out;
  out << shape << " " << dtype << " scale " << scale;
  return out.str();
}

// The dtypes the op takes on `device` (the reference also takes float64).
std::vector<at::ScalarType> DtypesOn(const c10::Device& device) {
  if (device.is_cpu()) return {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16};
  return {at::kFloat, at::kHalf, at::kBFloat16};
}

// [rows, s] bool, true where column j is past the row's position.
at::Tensor FutureColumns(const at::Tensor& positions, int64_t s) {
  return at::arange(s, at::kLong).unsqueeze(0) > positions.unsqueeze(1);
}

struct NaiveResult {
  at::Tensor probs;
  at::Tensor grad_scores;
};

// The naive float64 op on rows x [n, s] at `positions` [n]: exp(z - max) / sum with z the
// masked scaled scores, written out by hand; the backward is autograd's.
NaiveResult NaiveCausalSoftmax(const at::Tensor& x, const at::Tensor& positions,
                               const at::Tensor& grad, double scale) {
  const at::Tensor leaf = x.to(at::kDouble).clone().requires_grad_();
  const at::Tensor mask = FutureColumns(positions, x.size(-1));
  const at::Tensor z = (leaf * scale).masked_fill(mask, -INFINITY);
  const at::Tensor e = at::exp(z - z.amax(/*dim=*/-1, /*keepdim=*/true).detach());
  const at::Tensor probs = e / e.sum(/*dim=*/-1, /*keepdim=*/true);
  probs.backward(grad.to(at::kDouble));
  return {probs.detach(), leaf.grad()};
}

// Whether `actual` is within `tolerance` of `expected` everywhere, computed in float32 on their
// device (no host copy: for whole large tensors; AllClose on rows says where they differ).
::testing::AssertionResult AllCloseOnDevice(const at::Tensor& actual, const at::Tensor& expected,
                                            const testing::Tolerance& tolerance,
                                            const std::string& what) {
  if (at::allclose(actual.to(at::kFloat), expected.to(at::kFloat), tolerance.rtol,
                   tolerance.atol)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << what << ": differs somewhere on " << actual.device() << " (rtol " << tolerance.rtol
         << ", atol " << tolerance.atol << ")";
}

// Runs the op on `scores` and `grad` (on the device, in the dtype under test) forward, backward
// and through autograd, and compares rows `rows` of the flattened [n, s] results (every row when
// undefined) with the naive op. Host work and memory are O(rows x s), not O(n x s).
void ExpectMatchesNaive(const at::Tensor& scores, const at::Tensor& grad, double scale,
                        const std::string& what, at::Tensor rows = {}) {
  const at::ScalarType dtype = scores.scalar_type();
  const at::Tensor probs = CausalSoftmaxForward(scores, scale);
  ASSERT_EQ(probs.scalar_type(), dtype) << what;
  ASSERT_EQ(probs.device(), scores.device()) << what;
  ASSERT_EQ(probs.sizes(), scores.sizes()) << what;
  const at::Tensor grad_scores = CausalSoftmaxBackward(grad, probs, scale);
  ASSERT_EQ(grad_scores.scalar_type(), dtype) << what;
  ASSERT_EQ(grad_scores.sizes(), scores.sizes()) << what;

  const int64_t s = scores.size(-1);
  const int64_t n = scores.numel() / s;
  const bool every_row = !rows.defined();
  if (every_row) rows = at::arange(n, at::kLong);
  ASSERT_GT(rows.numel(), 0) << what;
  ASSERT_GE(rows.min().item<int64_t>(), 0) << what;
  ASSERT_LT(rows.max().item<int64_t>(), n) << what;
  const at::Tensor device_rows = rows.to(scores.device());
  const auto pick = [&](const at::Tensor& t) {
    return t.reshape({n, s}).index_select(0, device_rows).to(at::kCPU, at::kDouble);
  };

  // The autograd op gives what the explicit functions give (to rounding: on CUDA the leaf's
  // copy may take the vector kernels where `scores` took the scalar ones): on the checked rows
  // in detail, and when rows are sampled, on every row on the device.
  const at::Tensor leaf = scores.detach().clone().requires_grad_();
  const at::Tensor autograd_probs = CausalSoftmax(leaf, scale);
  autograd_probs.backward(grad);
  const Tolerance probs_tolerance = ToleranceFor(dtype);
  const Tolerance grad_tolerance = ToleranceFor(dtype, grad_scores.abs().max().item<double>());
  const at::Tensor ours_probs = pick(probs);
  const at::Tensor ours_grad = pick(grad_scores);
  EXPECT_TRUE(
      AllClose(pick(autograd_probs), ours_probs, probs_tolerance, what + " autograd forward"));
  EXPECT_TRUE(AllClose(pick(leaf.grad()), ours_grad, grad_tolerance, what + " autograd backward"));
  if (!every_row) {
    EXPECT_TRUE(AllCloseOnDevice(autograd_probs.detach(), probs, probs_tolerance,
                                 what + " autograd forward, every row"));
    EXPECT_TRUE(AllCloseOnDevice(leaf.grad(), grad_scores, grad_tolerance,
                                 what + " autograd backward, every row"));
  }

  const at::Tensor positions = rows.remainder(s);
  const NaiveResult naive = NaiveCausalSoftmax(pick(scores), positions, pick(grad), scale);

  EXPECT_TRUE(AllClose(ours_probs, naive.probs, probs_tolerance, what + " forward"));
  const double grad_magnitude = naive.grad_scores.abs().max().item<double>();
  EXPECT_TRUE(AllClose(ours_grad, naive.grad_scores, ToleranceFor(dtype, grad_magnitude),
                       what + " backward"));

  // Above the diagonal: exact zeros, forward and backward. Each row sums to 1.
  const at::Tensor future = FutureColumns(positions, s);
  EXPECT_TRUE(ours_probs.masked_select(future).eq(0).all().item<bool>()) << what;
  EXPECT_TRUE(ours_grad.masked_select(future).eq(0).all().item<bool>()) << what;
  EXPECT_TRUE(AllClose(ours_probs.sum(-1), at::ones({rows.size(0)}, at::kDouble), probs_tolerance,
                       what + " row sums"));
}

void ExpectMatchesNaiveOnRandom(const c10::Device& device, at::IntArrayRef shape,
                                at::ScalarType dtype, double scale, uint64_t seed,
                                const at::Tensor& rows = {}) {
  const at::Tensor scores = RandomTensor(shape, seed, /*scale=*/3.0).to(device, dtype);
  const at::Tensor grad = RandomTensor(shape, seed + 1).to(device, dtype);
  ExpectMatchesNaive(scores, grad, scale, Describe(shape, dtype, scale), rows);
}

TEST_F(CausalSoftmaxTest, SmallAndOddShapesMatchNaiveInEveryDtype) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 1}, {1, 1, 1}, {2, 3, 5, 5}, {4, 17, 17}, {3, 33, 33}, {2, 128, 128}, {1, 3, 200, 200}};
  uint64_t seed = 10;
  for (const at::ScalarType dtype : DtypesOn(device)) {
    for (const std::vector<int64_t>& shape : shapes) {
      for (const double scale : {1.0, 0.37}) {
        ExpectMatchesNaiveOnRandom(device, shape, dtype, scale, seed += 2);
      }
    }
  }
}

TEST_F(CausalSoftmaxTest, ManyRowsMatchNaive) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  // 8 * 16 * 64 = 8192 rows: several waves of warp kernels on a large GPU (a launch-shape case:
  // float32 only on the CPU).
  const std::vector<at::ScalarType> dtypes =
      device.is_cpu() ? std::vector<at::ScalarType>{at::kFloat} : DtypesOn(device);
  for (const at::ScalarType dtype : dtypes) {
    ExpectMatchesNaiveOnRandom(device, {8, 16, 64, 64}, dtype, 0.8, 31);
  }
}

// Rows to check of an [n, s] problem: the first and last rows of the first and last matrices and
// some in between.
at::Tensor SampleRows(int64_t n, int64_t s) {
  std::vector<int64_t> rows = {0, 1, s / 3, s / 2, s - 2, s - 1, n - s, n - s / 2, n - 2, n - 1};
  for (int64_t& r : rows) r = std::min(std::max<int64_t>(r, 0), n - 1);
  return at::tensor(rows, at::kLong);
}

TEST_F(CausalSoftmaxTest, GptSequenceLengthsMatchNaive) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  // 1024 (the longest warp row), 2048 (the GPT-2 1.5b length; GPU only) and 2049 (one past
  // it). To keep the default run fast, the CPU runs them in float32 and checks every 37th row
  // and the sampled ones; the GPU checks every row.
  const bool cpu = device.is_cpu();
  const std::vector<at::ScalarType> dtypes =
      cpu ? std::vector<at::ScalarType>{at::kFloat} : DtypesOn(device);
  const auto rows = [&](int64_t n, int64_t s) {
    return cpu ? at::cat({at::arange(0, n, 37, at::kLong), SampleRows(n, s)}) : at::Tensor();
  };
  for (const at::ScalarType dtype : dtypes) {
    ExpectMatchesNaiveOnRandom(device, {1, 2, 1024, 1024}, dtype, 0.125, 41, rows(2048, 1024));
    ExpectMatchesNaiveOnRandom(device, {1, 1, 2049, 2049}, dtype, 1.0, 43, rows(2049, 2049));
    if (!cpu) ExpectMatchesNaiveOnRandom(device, {2, 2048, 2048}, dtype, 0.09, 45);
  }
}

// Scores and gradients made on the device from a closed formula (large inputs: no float64 copy
// on the host), varied enough that no two neighbours are equal.
at::Tensor PatternOnDevice(at::IntArrayRef shape, const c10::Device& device, at::ScalarType dtype,
                           double phase) {
  int64_t numel = 1;
  for (const int64_t d : shape) numel *= d;
  const at::Tensor index = at::arange(numel, at::TensorOptions().dtype(at::kDouble).device(device));
  return (at::sin(index * 0.6180339887 + phase) * 3.0 + at::cos(index * 0.0137))
      .to(dtype)
      .reshape(shape);
}

// Rows to check of one [s, s] matrix of long rows: SampleRows (the first, the longest, the
// middle), the rows on either side of every multiple of 512 columns (where a row's visible part
// fills whole chunks or starts a new chunk of a thread or a new pass of the block over the row,
// for every vector width), and every 997th row: about s / 200 rows.
at::Tensor LongRowSample(int64_t s) {
  const at::Tensor sampled = SampleRows(s, s);
  std::vector<int64_t> rows(sampled.data_ptr<int64_t>(),
                            sampled.data_ptr<int64_t>() + sampled.numel());
  for (int64_t m = 512; m < s; m += 512) rows.insert(rows.end(), {m - 1, m});
  for (int64_t r = 997; r < s; r += 997) rows.push_back(r);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return at::tensor(rows, at::kLong);
}

TEST_F(CausalSoftmaxTest, LongRowsMatchNaiveOnSampledRows) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  if (device.is_cpu()) {
    GTEST_SKIP() << "long rows (block kernels) run only in the _gpu target; the CPU reference "
                    "is checked on rows up to 2049 columns above";
  }
  // The inputs are made on the device and only the sampled rows (under 100 of 16384 columns)
  // come to the host.
  for (const int64_t s : {4100, 8192, 8200, 16384}) {
    const at::Tensor rows = LongRowSample(s);
    for (const at::ScalarType dtype : DtypesOn(device)) {
      const at::Tensor scores = PatternOnDevice({1, s, s}, device, dtype, 0.0);
      const at::Tensor grad = PatternOnDevice({1, s, s}, device, dtype, 1.0);
      ExpectMatchesNaive(scores, grad, 0.6, Describe(scores.sizes(), dtype, 0.6), rows);
    }
  }
}

TEST_F(CausalSoftmaxTest, GridStrideCoversMoreRowsThanTheGrid) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  if (device.is_cpu()) GTEST_SKIP() << "a CUDA launch-shape case; runs in the _gpu target";
  // 131100 matrices of 32 x 32: 4.2 million rows, past the 2^20 blocks of 4 rows a launch has.
  const int64_t matrices = 131100;
  const at::Tensor scores = PatternOnDevice({matrices, 32, 32}, device, at::kHalf, 0.0);
  const at::Tensor grad = PatternOnDevice({matrices, 32, 32}, device, at::kHalf, 1.0);
  ExpectMatchesNaive(scores, grad, 1.0, "grid-stride", SampleRows(matrices * 32, 32));
}

TEST_F(CausalSoftmaxTest, UnalignedAndNonContiguousInputsMatchNaive) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const at::ScalarType dtype : DtypesOn(device)) {
    const std::vector<int64_t> shape = {3, 64, 64};
    const at::Tensor scores = RandomTensor(shape, 51, 2.0).to(device, dtype);
    const at::Tensor grad = RandomTensor(shape, 52).to(device, dtype);
    // Contiguous, but not 16-byte aligned (the scalar kernels).
    ExpectMatchesNaive(Unaligned(scores), Unaligned(grad), 0.5,
                       Describe(shape, dtype, 0.5) + " unaligned");
    // A transposed view: the op reads it as its logical values.
    const at::Tensor transposed = scores.transpose(-1, -2);
    ASSERT_FALSE(transposed.is_contiguous());
    EXPECT_TRUE(at::equal(CausalSoftmaxForward(transposed, 0.5).cpu(),
                          CausalSoftmaxForward(transposed.contiguous(), 0.5).cpu()))
        << dtype;
    EXPECT_TRUE(at::equal(
        CausalSoftmaxBackward(grad.transpose(-1, -2), CausalSoftmaxForward(scores, 0.5), 0.5).cpu(),
        CausalSoftmaxBackward(grad.transpose(-1, -2).contiguous(),
                              CausalSoftmaxForward(scores, 0.5), 0.5)
            .cpu()))
        << dtype;
  }
}

TEST_F(CausalSoftmaxTest, EntriesAboveTheDiagonalChangeNothing) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  // Warp rows, and on the GPU block rows of 256 and 512 threads (too slow for the CPU run).
  std::vector<int64_t> lengths = {7, 64, 300};
  if (!device.is_cpu()) lengths.insert(lengths.end(), {1100, 4100});
  for (const int64_t s : lengths) {
    // Made once per length, not per length and dtype (float64 on the host, single-threaded;
    // this case took 17 s on an H100 host making them per dtype), and compared on the device.
    const at::Tensor scores64 = RandomTensor({2, s, s}, 61, 2.0);
    const at::Tensor grad64 = RandomTensor({2, s, s}, 62);
    const at::Tensor large64 = RandomTensor({2, s, s}, 63, 50.0);
    const at::Tensor future =
        at::ones({s, s}, at::TensorOptions().dtype(at::kBool).device(device)).triu(1);
    for (const at::ScalarType dtype : DtypesOn(device)) {
      const at::Tensor scores = scores64.to(device, dtype);
      const at::Tensor grad = grad64.to(device, dtype);
      // Large values, inf and NaN above the diagonal: never read.
      at::Tensor changed = scores + future.to(dtype) * large64.to(device, dtype);
      changed.select(-1, s - 1).narrow(-1, 0, s - 1).fill_(NAN);
      changed.select(-2, 0).narrow(-1, 1, s - 1).fill_(INFINITY);
      const at::Tensor probs = CausalSoftmaxForward(scores, 0.7);
      // at::equal is false for NaN anywhere in the results.
      EXPECT_TRUE(at::equal(CausalSoftmaxForward(changed, 0.7), probs)) << dtype << " s " << s;
      // Likewise the output gradient above the diagonal.
      at::Tensor changed_grad = grad.clone();
      changed_grad.masked_fill_(future, NAN);
      EXPECT_TRUE(at::equal(CausalSoftmaxBackward(changed_grad, probs, 0.7),
                            CausalSoftmaxBackward(grad, probs, 0.7)))
          << dtype << " s " << s;
    }
  }
}

TEST_F(CausalSoftmaxTest, EmptyInputsGiveEmptyResults) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{0, 4, 4}, {2, 0, 0}}) {
    const at::Tensor scores = at::empty(shape, at::TensorOptions().device(device));
    const at::Tensor probs = CausalSoftmaxForward(scores, 1.0);
    EXPECT_EQ(probs.sizes(), scores.sizes());
    EXPECT_EQ(CausalSoftmaxBackward(probs, probs, 1.0).sizes(), scores.sizes());
  }
}

TEST_F(CausalSoftmaxTest, MisuseThrowsNamingTheProblem) {
  VARUNA_KERNEL_DEVICE_OR_SKIP(device);
  const auto options = at::TensorOptions().device(device);
  const at::Tensor good = at::randn({2, 4, 4}, options);
  EXPECT_KERNEL_ERROR(CausalSoftmaxForward(at::randn({4}, options), 1.0),
                      "CausalSoftmaxForward: scores must have shape [..., s, s]");
  EXPECT_KERNEL_ERROR(CausalSoftmaxForward(at::randn({2, 4, 5}, options), 1.0),
                      "(the last two dims equal), got [2, 4, 5]");
  EXPECT_KERNEL_ERROR(CausalSoftmaxForward(good.to(at::kInt), 1.0),
                      "scores must be float32, float16, bfloat16 or (on the CPU) float64, got Int");
  EXPECT_KERNEL_ERROR(CausalSoftmaxForward(at::Tensor(), 1.0), "scores is an undefined tensor");
  EXPECT_KERNEL_ERROR(CausalSoftmaxBackward(at::randn({2, 5, 5}, options), good, 1.0),
                      "CausalSoftmaxBackward: grad_probs has shape [2, 5, 5] but probs has "
                      "shape [2, 4, 4]");
  EXPECT_KERNEL_ERROR(CausalSoftmaxBackward(good.to(at::kHalf), good, 1.0),
                      "grad_probs is Half but probs is Float; they must have the same dtype");
  EXPECT_KERNEL_ERROR(CausalSoftmaxBackward(good, at::randn({4, 3}, options), 1.0),
                      "probs must have shape [..., s, s]");
  if (device.is_cuda()) {
    EXPECT_KERNEL_ERROR(CausalSoftmaxForward(good.to(at::kDouble), 1.0),
                        "CausalSoftmaxForward: the CUDA kernel takes float32, float16 or "
                        "bfloat16, not Double");
    EXPECT_KERNEL_ERROR(CausalSoftmaxBackward(good.cpu(), good, 1.0),
                        "grad_probs is on cpu but probs is on cuda:0");
    // One row past the kernels' longest: refused before any launch.
    const at::Tensor too_long = at::empty({1, 16385, 16385}, options.dtype(at::kHalf));
    EXPECT_KERNEL_ERROR(CausalSoftmaxForward(too_long, 1.0),
                        "rows of 16385 columns are longer than the CUDA kernel takes (16384); "
                        "use the sdpa attention backend");
  }
}

}  // namespace
}  // namespace varuna::kernels
