// Kernel benchmark (manual; not a test): each fused op of varuna/kernels at the sizes of a
// gpt2-355m / gpt2-1.5b training step, against
//   * the device's own copy bandwidth, measured first (a device-to-device copy of 1 GiB):
//     achieved bandwidth = the bytes the op must move at least (every input read once, every
//     output written once) / its time; the goal is at least 0.8 of the copy's;
//   * the unfused LibTorch composition of the same math on the same inputs (time ratio), and
//     where ATen has a fused op of its own (layer norm, softmax, GeLU), that too.
//
//   bazel run -c opt --config=cuda //tests/benchmarks:kernel_benchmark      (on a GPU host:
//   see tests/gpu/bundle.sh; prints a markdown table)
//   bazel run -c opt //tests/benchmarks:kernel_benchmark -- --device=cpu --quick   (smoke run)
//
// Times are the mean over --iterations runs after warm-up, with the device synchronised
// around each timed block. Before the causal softmax is timed, the fused op, the unfused
// composition and ATen's masked softmax are checked to agree on the benchmark's inputs (a
// reference computing something else would make its time meaningless); a mismatch exits 1.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/DeviceAccelerator.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/benchmarks/device_memory.h"
#include "trainer/device_name.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/kernels/bias_dropout_add.h"
#include "varuna/kernels/bias_dropout_add_layer_norm.h"
#include "varuna/kernels/bias_gelu.h"
#include "varuna/kernels/causal_attention.h"
#include "varuna/kernels/causal_softmax.h"
#include "varuna/kernels/fp8_linear.h"
#include "varuna/kernels/fused_adam.h"
#include "varuna/kernels/gelu_mlp.h"
#include "varuna/kernels/layer_norm.h"
#include "varuna/kernels/lm_head_cross_entropy.h"
#include "varuna/kernels/multi_tensor.h"
#include "varuna/kernels/weight_gradient_accumulation.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string device = "";  // empty: cuda when present
  std::string dtype = "fp16";
  int iterations = 20;
  bool quick = false;
};

void Synchronize(const c10::Device& device) {
  if (!device.is_cpu()) at::accelerator::synchronizeDevice(device.index());
}

// The largest |actual - expected|, compared in float32 (NaN anywhere gives NaN).
double LargestDifference(const at::Tensor& actual, const at::Tensor& expected) {
  return (actual.to(at::kFloat) - expected.to(at::kFloat)).abs().max().item<double>();
}

// LargestDifference relative to the largest |expected| (+1e-12: an all-zero reference).
double RelativeError(const at::Tensor& actual, const at::Tensor& expected) {
  return LargestDifference(actual, expected) /
         (expected.to(at::kFloat).abs().max().item<double>() + 1e-12);
}

// Mean milliseconds of `f` over `iterations` runs, after two warm-up runs.
double TimeMs(const c10::Device& device, int iterations, const std::function<void()>& f) {
  f();
  f();
  Synchronize(device);
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < iterations; ++i) f();
  Synchronize(device);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / iterations;
}

struct Row {
  std::string op;
  std::string shape;
  double bytes = 0;       // the minimum the op moves
  double fused_ms = 0;    // varuna::kernels
  double unfused_ms = 0;  // LibTorch composition
  double aten_ms = -1;    // ATen's own fused op, where there is one (-1: none)
};

class Benchmark {
 public:
  Benchmark(const Options& options, c10::Device device, at::ScalarType dtype)
      : options_(options), device_(device), dtype_(dtype) {}

  double MeasureCopyBandwidth() {
    const int64_t bytes = options_.quick ? (int64_t{1} << 24) : (int64_t{1} << 30);
    at::Tensor a = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device_));
    at::Tensor b = at::empty_like(a);
    const double ms = Time([&] { b.copy_(a); });
    return 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
  }

  // The table's rows, or an error naming the op whose references disagree with it.
  absl::StatusOr<std::vector<Row>> Run() {
    std::vector<Row> rows;
    const int64_t tokens = options_.quick ? 256 : 8 * 1024;
    for (int64_t h : {int64_t{1024}, int64_t{1600}}) {
      LayerNorm(tokens, options_.quick ? h / 8 : h, rows);
      BiasGelu(tokens, options_.quick ? h / 2 : 4 * h, rows);
      if (absl::Status status = BiasDropoutAdd(tokens, options_.quick ? h / 8 : h, rows);
          !status.ok()) {
        return status;
      }
      if (absl::Status status = BiasDropoutAddLayerNorm(tokens, options_.quick ? h / 8 : h, rows);
          !status.ok()) {
        return status;
      }
      if (absl::Status status = ResidualLayerNorm(tokens, options_.quick ? h / 8 : h, rows);
          !status.ok()) {
        return status;
      }
    }
    absl::Status status =
        CausalSoftmax(options_.quick ? 4 : 8 * 16, options_.quick ? 128 : 1024, rows);
    if (status.ok() && !options_.quick) status = CausalSoftmax(4 * 16, 2048, rows);
    if (!status.ok()) return status;
    Optimizer(rows);
    return rows;
  }

 private:
  double Time(const std::function<void()>& f) { return TimeMs(device_, options_.iterations, f); }
  at::TensorOptions Float() const { return at::TensorOptions().dtype(at::kFloat).device(device_); }
  at::Tensor Random(at::IntArrayRef shape, at::ScalarType dtype) const {
    return at::randn(shape, Float()).to(dtype);
  }
  double Size() const { return static_cast<double>(c10::elementSize(dtype_)); }
  // How far a fused op's values may stand from the unfused composition's in the benchmark's
  // dtype (absolute: the values are of order 1).
  double FusedTolerance() const {
    return dtype_ == at::kFloat ? 1e-4 : dtype_ == at::kHalf ? 2e-2 : 1e-1;
  }

  void LayerNorm(int64_t rows, int64_t h, std::vector<Row>& out) {
    const at::Tensor x = Random({rows, h}, dtype_);
    const at::Tensor w = Random({h}, dtype_);
    const at::Tensor b = Random({h}, dtype_);
    const at::Tensor dy = Random({rows, h}, dtype_);
    const std::string shape = absl::StrFormat("[%d, %d]", rows, h);
    const double n = static_cast<double>(rows * h);
    auto unfused_forward = [&] {
      const at::Tensor xf = x.to(at::kFloat);
      const at::Tensor mean = xf.mean(-1, true);
      const at::Tensor rstd = ((xf - mean).square().mean(-1, true) + 1e-5).rsqrt();
      return (((xf - mean) * rstd) * w.to(at::kFloat) + b.to(at::kFloat)).to(dtype_);
    };
    Row forward{"layer_norm forward", shape, 2 * n * Size()};
    forward.fused_ms = Time([&] { varuna::kernels::LayerNormForward(x, w, b, 1e-5); });
    forward.unfused_ms = Time([&] { unfused_forward(); });
    forward.aten_ms = Time([&] { at::layer_norm(x, {h}, w, b, 1e-5); });
    out.push_back(forward);

    const varuna::kernels::LayerNormForwardResult saved =
        varuna::kernels::LayerNormForward(x, w, b, 1e-5);
    Row backward{"layer_norm backward", shape, 3 * n * Size()};
    backward.fused_ms =
        Time([&] { varuna::kernels::LayerNormBackward(dy, x, saved.mean, saved.rstd, w); });
    backward.unfused_ms = Time([&] {
      // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w; dw, db column sums.
      const at::Tensor xf = x.to(at::kFloat);
      const at::Tensor xhat = (xf - saved.mean.view({rows, 1})) * saved.rstd.view({rows, 1});
      const at::Tensor dyf = dy.to(at::kFloat);
      const at::Tensor g = dyf * w.to(at::kFloat);
      const at::Tensor dx =
          saved.rstd.view({rows, 1}) * (g - g.mean(-1, true) - xhat * (g * xhat).mean(-1, true));
      dx.to(dtype_);
      (dyf * xhat).sum(0).to(dtype_);
      dyf.sum(0).to(dtype_);
    });
    const auto aten = at::native_layer_norm(x, {h}, w, b, 1e-5);
    backward.aten_ms = Time([&] {
      at::native_layer_norm_backward(dy, x, {h}, std::get<1>(aten), std::get<2>(aten), w, b,
                                     {true, true, true});
    });
    out.push_back(backward);
  }

  void BiasGelu(int64_t rows, int64_t n, std::vector<Row>& out) {
    const at::Tensor x = Random({rows, n}, dtype_);
    const at::Tensor b = Random({n}, dtype_);
    const at::Tensor dy = Random({rows, n}, dtype_);
    const std::string shape = absl::StrFormat("[%d, %d]", rows, n);
    const double elements = static_cast<double>(rows * n);
    Row forward{"bias_gelu forward", shape, 2 * elements * Size()};
    forward.fused_ms = Time([&] { varuna::kernels::BiasGeluForward(x, b); });
    forward.unfused_ms = Time([&] {
      const at::Tensor u = x.to(at::kFloat) + b.to(at::kFloat);
      const at::Tensor inner = 0.7978845608028654 * (u + 0.044715 * u * u * u);
      (0.5 * u * (1 + inner.tanh())).to(dtype_);
    });
    forward.aten_ms = Time([&] { at::gelu(x + b, "tanh"); });
    out.push_back(forward);

    Row backward{"bias_gelu backward", shape, 3 * elements * Size()};
    backward.fused_ms = Time([&] { varuna::kernels::BiasGeluBackward(dy, x, b); });
    backward.unfused_ms = Time([&] {
      const at::Tensor u = x.to(at::kFloat) + b.to(at::kFloat);
      const at::Tensor t = (0.7978845608028654 * (u + 0.044715 * u * u * u)).tanh();
      const at::Tensor d =
          0.5 * (1 + t) + 0.5 * u * (1 - t * t) * 0.7978845608028654 * (1 + 0.134145 * u * u);
      const at::Tensor dx = dy.to(at::kFloat) * d;
      dx.to(dtype_);
      dx.sum(0).to(dtype_);
    });
    backward.aten_ms = Time([&] {
      const at::Tensor dx = at::gelu_backward(dy, x + b, "tanh");
      dx.sum(0);
    });
    out.push_back(backward);
  }

  // The residual add of a transformer layer (--bias-dropout-fusion), p = 0.1 in training,
  // against residual + at::dropout(x + bias) and its backward (ATen's dropout backward, then the
  // bias gradient's column sum). Checked first: without dropout both give residual + x + bias,
  // and the fused output is consistent with the mask it drew.
  absl::Status BiasDropoutAdd(int64_t rows, int64_t n, std::vector<Row>& out) {
    constexpr double kP = 0.1;
    const at::Tensor x = Random({rows, n}, dtype_);
    const at::Tensor b = Random({n}, dtype_);
    const at::Tensor residual = Random({rows, n}, dtype_);
    const at::Tensor dy = Random({rows, n}, dtype_);
    const std::string shape = absl::StrFormat("[%d, %d]", rows, n);
    const double elements = static_cast<double>(rows * n);
    const varuna::kernels::BiasDropoutAddResult result =
        varuna::kernels::BiasDropoutAddForward(x, b, residual, kP, /*training=*/true);
    const at::Tensor plain =
        varuna::kernels::BiasDropoutAddForward(x, b, residual, kP, /*training=*/false).output;
    const at::Tensor u = x.to(at::kFloat) + b.to(at::kFloat);
    const double tolerance = FusedTolerance();
    for (const auto& [actual, expected] :
         {std::pair{plain, u + residual.to(at::kFloat)},
          std::pair{result.output,
                    u * result.mask.to(at::kFloat) / (1 - kP) + residual.to(at::kFloat)}}) {
      const double worst = LargestDifference(actual, expected);
      if (!(worst <= tolerance)) {
        return absl::InternalError(absl::StrFormat(
            "bias_dropout_add differs from residual + mask * (x + bias) / (1 - p) by up to %g "
            "(tolerance %g for %s): the fused op is wrong, its time would mean nothing",
            worst, tolerance, c10::toString(dtype_)));
      }
    }
    // Reads x and residual, writes the output and the one-byte mask.
    Row forward{"bias_dropout_add forward", shape, elements * (3 * Size() + 1)};
    forward.fused_ms = Time(
        [&] { varuna::kernels::BiasDropoutAddForward(x, b, residual, kP, /*training=*/true); });
    forward.unfused_ms = Time([&] { residual + at::dropout(x + b, kP, /*train=*/true); });
    out.push_back(forward);

    // Reads dy and the mask, writes dx (dbias is n elements).
    Row backward{"bias_dropout_add backward", shape, elements * (2 * Size() + 1)};
    backward.fused_ms = Time([&] { varuna::kernels::BiasDropoutAddBackward(dy, result.mask, kP); });
    backward.unfused_ms =
        Time([&] { at::native_dropout_backward(dy, result.mask, 1.0 / (1.0 - kP)).sum(0); });
    out.push_back(backward);
    return absl::OkStatus();
  }

  // The attention residual add + ln_2 (--bias-dropout-add-layernorm-fusion), p = 0.1 in
  // training, against the two fused ops it replaces (BiasDropoutAdd, then LayerNorm; backward:
  // LayerNormBackward, the add of the residual's two gradients, BiasDropoutAddBackward). Checked
  // first: from the same generator state both draw the same mask and agree to the dtype's
  // rounding.
  absl::Status BiasDropoutAddLayerNorm(int64_t rows, int64_t n, std::vector<Row>& out) {
    constexpr double kP = 0.1;
    constexpr double kEpsilon = 1e-5;
    const at::Tensor x = Random({rows, n}, dtype_);
    const at::Tensor b = Random({n}, dtype_);
    const at::Tensor residual = Random({rows, n}, dtype_);
    const at::Tensor w = Random({n}, dtype_);
    const at::Tensor ln_b = Random({n}, dtype_);
    const at::Tensor dy = Random({rows, n}, dtype_);
    const at::Tensor dr = Random({rows, n}, dtype_);
    const std::string shape = absl::StrFormat("[%d, %d]", rows, n);
    const double elements = static_cast<double>(rows * n);
    at::Generator generator = at::globalContext().defaultGenerator(device_);
    at::Tensor state;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      state = generator.get_state();
    }
    const varuna::kernels::BiasDropoutAddLayerNormResult fused =
        varuna::kernels::BiasDropoutAddLayerNormForward(x, b, residual, w, ln_b, kP,
                                                        /*training=*/true, kEpsilon);
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(state);
    }
    const varuna::kernels::BiasDropoutAddResult sum =
        varuna::kernels::BiasDropoutAddForward(x, b, residual, kP, /*training=*/true);
    const varuna::kernels::LayerNormForwardResult norm =
        varuna::kernels::LayerNormForward(sum.output, w, ln_b, kEpsilon);
    const double tolerance = FusedTolerance();
    const double worst = std::max(LargestDifference(fused.residual, sum.output),
                                  LargestDifference(fused.output, norm.output));
    if (!at::equal(fused.mask, sum.mask) || !(worst <= tolerance)) {
      return absl::InternalError(absl::StrFormat(
          "bias_dropout_add_layer_norm differs from bias_dropout_add + layer_norm (same mask: "
          "%s, values by up to %g, tolerance %g for %s): the fused op is wrong, its time would "
          "mean nothing",
          at::equal(fused.mask, sum.mask) ? "yes" : "no", worst, tolerance, c10::toString(dtype_)));
    }
    // Reads x and residual, writes r, y and the mask (the parameters are 3n elements).
    Row forward{"bias_dropout_add_layer_norm forward", shape, elements * (4 * Size() + 1)};
    forward.fused_ms = Time([&] {
      varuna::kernels::BiasDropoutAddLayerNormForward(x, b, residual, w, ln_b, kP, true, kEpsilon);
    });
    forward.unfused_ms = Time([&] {
      const varuna::kernels::BiasDropoutAddResult s =
          varuna::kernels::BiasDropoutAddForward(x, b, residual, kP, true);
      varuna::kernels::LayerNormForward(s.output, w, ln_b, kEpsilon);
    });
    out.push_back(forward);

    // Reads dy, dr, r and the mask, writes dresidual and dx.
    Row backward{"bias_dropout_add_layer_norm backward", shape, elements * (5 * Size() + 1)};
    backward.fused_ms = Time([&] {
      varuna::kernels::BiasDropoutAddLayerNormBackward(dy, dr, fused.residual, fused.mask,
                                                       fused.mean, fused.rstd, w, kP);
    });
    backward.unfused_ms = Time([&] {
      const varuna::kernels::LayerNormGrads g =
          varuna::kernels::LayerNormBackward(dy, sum.output, norm.mean, norm.rstd, w);
      varuna::kernels::BiasDropoutAddBackward(dr + g.input, sum.mask, kP);
    });
    out.push_back(backward);
    return absl::OkStatus();
  }

  // ln_1's backward with the residual's gradient added in its pass (ResidualLayerNorm's backward:
  // BiasDropoutAddLayerNormBackward without a mask, under --bias-dropout-add-layernorm-fusion)
  // against LayerNormBackward and then the add of x's two gradients. Checked first: both agree
  // to the dtype's rounding. (The forward is LayerNormForward either way.)
  absl::Status ResidualLayerNorm(int64_t rows, int64_t n, std::vector<Row>& out) {
    constexpr double kEpsilon = 1e-5;
    const at::Tensor x = Random({rows, n}, dtype_);
    const at::Tensor w = Random({n}, dtype_);
    const at::Tensor b = Random({n}, dtype_);
    const at::Tensor dy = Random({rows, n}, dtype_);
    const at::Tensor dr = Random({rows, n}, dtype_);
    const varuna::kernels::LayerNormForwardResult norm =
        varuna::kernels::LayerNormForward(x, w, b, kEpsilon);
    auto fused = [&] {
      return varuna::kernels::BiasDropoutAddLayerNormBackward(dy, dr, x, /*mask=*/at::Tensor(),
                                                              norm.mean, norm.rstd, w, /*p=*/0.0)
          .residual;
    };
    auto unfused = [&] {
      return dr + varuna::kernels::LayerNormBackward(dy, x, norm.mean, norm.rstd, w).input;
    };
    const double tolerance = FusedTolerance();
    const double worst = LargestDifference(fused(), unfused());
    if (!(worst <= tolerance)) {
      return absl::InternalError(absl::StrFormat(
          "residual_layer_norm's backward differs from layer_norm's backward + the add by up to "
          "%g (tolerance %g for %s): the fused op is wrong, its time would mean nothing",
          worst, tolerance, c10::toString(dtype_)));
    }
    // Reads dy, dr and x, writes dx (the parameters' gradients are 2n elements).
    Row backward{"residual_layer_norm backward", absl::StrFormat("[%d, %d]", rows, n),
                 static_cast<double>(rows * n) * 4 * Size()};
    backward.fused_ms = Time([&] { fused(); });
    backward.unfused_ms = Time([&] { unfused(); });
    out.push_back(backward);
    return absl::OkStatus();
  }

  // OK when `actual` is within the tolerance of the benchmark's dtype of `expected` (both
  // probabilities or their gradients, so an absolute tolerance); otherwise an error naming
  // `what` and the largest difference.
  absl::Status CheckClose(const at::Tensor& actual, const at::Tensor& expected,
                          const std::string& what) const {
    const double tolerance = dtype_ == at::kFloat ? 1e-5 : dtype_ == at::kHalf ? 1e-2 : 2e-2;
    const at::Tensor difference = (actual.to(at::kFloat) - expected.to(at::kFloat)).abs();
    // NaN anywhere fails: max propagates it, and NaN <= tolerance is false.
    const double worst = difference.max().item<double>();
    if (worst <= tolerance) return absl::OkStatus();
    return absl::InternalError(absl::StrFormat(
        "%s differs from the fused op by up to %g (tolerance %g for %s): the reference does not "
        "compute the causal softmax, so its time would not compare like with like",
        what, worst, tolerance, c10::toString(dtype_)));
  }

  absl::Status CausalSoftmax(int64_t batch_heads, int64_t s, std::vector<Row>& out) {
    const at::Tensor scores = Random({batch_heads, s, s}, dtype_);
    const at::Tensor dprobs = Random({batch_heads, s, s}, dtype_);
    // True where column j > row i: the entries the causal softmax masks out (ATen's convention
    // too: masked_fill and _masked_softmax drop the entries where the mask is true).
    const at::Tensor mask =
        at::ones({s, s}, at::TensorOptions().dtype(at::kBool).device(device_)).triu(1);
    // ATen's masked softmax needs a mask type. 0 (src_mask, [L, L]) and 1 (src_key_padding_mask,
    // [B, L]) apply only to a 4-D input with a 2-D mask; 2 (the default mask) takes a mask of
    // the input's shape. Made contiguous once here: CUDA takes its fused kernel only for a
    // contiguous mask (an expanded [L, L] mask falls back to masked_fill + softmax), and the
    // CPU would copy an expanded mask on every call.
    constexpr int64_t kMaskOfTheInputsShape = 2;
    const at::Tensor full_mask = mask.expand({batch_heads, s, s}).contiguous();
    // The last dim by its non-negative index: the CUDA op compares dim with input.dim() - 1
    // unwrapped, so -1 would send it down the fallback path.
    const int64_t last_dim = scores.dim() - 1;
    const std::string shape = absl::StrFormat("[%d, %d, %d]", batch_heads, s, s);
    // The causal half is read, the whole row written.
    const double elements = static_cast<double>(batch_heads * s * s);
    const double half = static_cast<double>(batch_heads * s * (s + 1) / 2);
    const double scale = 0.125;
    const auto unfused_forward = [&] {
      return (scores.to(at::kFloat) * scale).masked_fill(mask, -INFINITY).softmax(-1).to(dtype_);
    };
    const auto aten_forward = [&] {
      return at::_masked_softmax(scores * scale, full_mask, last_dim, kMaskOfTheInputsShape);
    };
    const at::Tensor probs = varuna::kernels::CausalSoftmaxForward(scores, scale);
    const auto unfused_backward = [&] {
      const at::Tensor p = probs.to(at::kFloat);
      const at::Tensor g = dprobs.to(at::kFloat) * p;
      return ((g - p * g.sum(-1, true)) * scale).to(dtype_);
    };
    // ATen's softmax backward has no scale: the fused op's gradient is `scale` times it.
    const auto aten_backward = [&] {
      return at::_softmax_backward_data(dprobs, probs, last_dim, dtype_);
    };
    const at::Tensor grad_scores = varuna::kernels::CausalSoftmaxBackward(dprobs, probs, scale);
    const std::string at_shape = " at " + shape;
    for (const absl::Status& agreement :
         {CheckClose(unfused_forward(), probs,
                     "causal_softmax forward: the unfused composition" + at_shape),
          CheckClose(aten_forward(), probs,
                     "causal_softmax forward: at::_masked_softmax" + at_shape),
          CheckClose(unfused_backward(), grad_scores,
                     "causal_softmax backward: the unfused composition" + at_shape),
          CheckClose(aten_backward() * scale, grad_scores,
                     "causal_softmax backward: at::_softmax_backward_data" + at_shape)}) {
      if (!agreement.ok()) return agreement;
    }

    Row forward{"causal_softmax forward", shape, (half + elements) * Size()};
    forward.fused_ms = Time([&] { varuna::kernels::CausalSoftmaxForward(scores, scale); });
    forward.unfused_ms = Time([&] { unfused_forward(); });
    forward.aten_ms = Time([&] { aten_forward(); });
    out.push_back(forward);

    Row backward{"causal_softmax backward", shape, (2 * half + elements) * Size()};
    backward.fused_ms = Time([&] { varuna::kernels::CausalSoftmaxBackward(dprobs, probs, scale); });
    backward.unfused_ms = Time([&] { unfused_backward(); });
    backward.aten_ms = Time([&] { aten_backward(); });
    out.push_back(backward);
    return absl::OkStatus();
  }

  // The parameter tensors of gpt2-355m (24 layers, h 1024, vocabulary 50,304, 1,024
  // positions): 291 tensors, 355M elements (--quick: 2 layers of h 64).
  std::vector<std::vector<int64_t>> ParameterShapes() const {
    const int64_t h = options_.quick ? 64 : 1024;
    const int layers = options_.quick ? 2 : 24;
    std::vector<std::vector<int64_t>> shapes = {{options_.quick ? 512 : 50304, h},
                                                {options_.quick ? 128 : 1024, h}};
    for (int l = 0; l < layers; ++l) {
      for (const std::vector<int64_t>& s : std::vector<std::vector<int64_t>>{{h},
                                                                             {h},
                                                                             {3 * h, h},
                                                                             {3 * h},
                                                                             {h, h},
                                                                             {h},
                                                                             {h},
                                                                             {h},
                                                                             {4 * h, h},
                                                                             {4 * h},
                                                                             {h, 4 * h},
                                                                             {h}}) {
        shapes.push_back(s);
      }
    }
    shapes.push_back({h});
    shapes.push_back({h});
    return shapes;
  }

  void Optimizer(std::vector<Row>& out) {
    std::vector<at::Tensor> model, grads16, masters, grads, m, v;
    std::vector<bool> decay;
    double elements = 0;
    for (const std::vector<int64_t>& shape : ParameterShapes()) {
      masters.push_back(at::randn(shape, Float()) * 0.02);
      model.push_back(masters.back().to(dtype_));
      grads16.push_back(at::randn(shape, Float()).to(dtype_));
      grads.push_back(at::randn(shape, Float()) * 1e-3);
      m.push_back(at::zeros(shape, Float()));
      v.push_back(at::zeros(shape, Float()));
      decay.push_back(shape.size() > 1);
      elements += static_cast<double>(masters.back().numel());
    }
    const std::string shape =
        absl::StrFormat("%d tensors, %.0fM elements", masters.size(), elements / 1e6);
    const double scale = 1.0 / 1024;

    Row unscale{"multi_tensor unscale", shape, elements * (Size() + 4)};
    unscale.fused_ms = Time([&] { varuna::kernels::MultiTensorUnscale(grads16, grads, scale); });
    unscale.unfused_ms = Time([&] {
      at::Tensor found = at::zeros({1}, Float());
      for (size_t i = 0; i < grads.size(); ++i) {
        grads[i].copy_(grads16[i]).mul_(scale);
        found.add_(grads[i].isfinite().logical_not().any());
      }
    });
    at::Tensor found_inf = at::zeros({1}, Float());
    const at::Tensor inv_scale = at::full({1}, scale, Float());
    unscale.aten_ms = Time([&] {
      for (size_t i = 0; i < grads.size(); ++i) grads[i].copy_(grads16[i]);
      at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
    });
    out.push_back(unscale);

    Row norm{"multi_tensor l2norm^2", shape, elements * 4};
    norm.fused_ms = Time([&] { varuna::kernels::MultiTensorL2NormSquared(grads); });
    norm.unfused_ms = Time([&] {
      std::vector<at::Tensor> sums;
      for (const at::Tensor& g : grads) sums.push_back(g.square().sum());
      at::stack(sums).sum();
    });
    norm.aten_ms = Time([&] { at::stack(at::_foreach_norm(grads, 2)).square().sum(); });
    out.push_back(norm);

    Row fused_norm{"multi_tensor unscale+l2norm^2", shape, elements * (Size() + 4)};
    fused_norm.fused_ms =
        Time([&] { varuna::kernels::MultiTensorUnscaleL2NormSquared(grads16, grads, scale); });
    fused_norm.unfused_ms = unscale.unfused_ms + norm.unfused_ms;
    out.push_back(fused_norm);

    // Reads master, grad, m, v; writes master, m, v and the fp16/bf16 model copy.
    Row adam{"fused_adam", shape, elements * (7 * 4 + Size())};
    varuna::kernels::AdamHyperparameters hp;
    hp.lr = 1e-4;
    hp.weight_decay = 0.01;
    int64_t step = 0;
    adam.fused_ms = Time([&] {
      hp.step = ++step;
      varuna::kernels::FusedAdamStep(masters, grads, m, v, model, decay, hp);
    });
    adam.unfused_ms = Time([&] {
      // The per-tensor ATen sequence of an unfused AdamW with master weights.
      hp.step = ++step;
      const double bias1 = 1.0 - std::pow(hp.beta1, static_cast<double>(hp.step));
      const double bias2 = 1.0 - std::pow(hp.beta2, static_cast<double>(hp.step));
      for (size_t i = 0; i < masters.size(); ++i) {
        m[i].mul_(hp.beta1).add_(grads[i], 1.0 - hp.beta1);
        v[i].mul_(hp.beta2).addcmul_(grads[i], grads[i], 1.0 - hp.beta2);
        const at::Tensor denom = v[i].sqrt().mul_(1.0 / std::sqrt(bias2)).add_(hp.eps);
        if (decay[i]) masters[i].mul_(1.0 - hp.lr * hp.weight_decay);
        masters[i].addcdiv_(m[i], denom, -hp.lr / bias1);
        model[i].copy_(masters[i]);
      }
    });
    std::vector<at::Tensor> steps;
    for (size_t i = 0; i < masters.size(); ++i) steps.push_back(at::zeros({}, Float()));
    adam.aten_ms = Time([&] {
      at::_fused_adamw_(masters, grads, m, v, {}, steps, hp.lr, hp.beta1, hp.beta2, hp.weight_decay,
                        hp.eps, false, false);
      for (size_t i = 0; i < masters.size(); ++i) model[i].copy_(masters[i]);
    });
    out.push_back(adam);
  }

  Options options_;
  c10::Device device_;
  at::ScalarType dtype_;
};

// Prints the two rows of the LM head + loss table for [tokens, hidden] x vocab, after checking
// that both paths give the same loss; an error if they do not.
absl::Status LmHeadLoss(const c10::Device& device, at::ScalarType dtype, int64_t tokens,
                        int64_t hidden, int64_t vocab, int iterations) {
  const at::AutoGradMode grad_mode(true);
  const at::TensorOptions options = at::TensorOptions().device(device);
  const at::Tensor x = at::randn({tokens, hidden}, options).to(dtype).requires_grad_(true);
  const at::Tensor w = (at::randn({vocab, hidden}, options) * 0.02).to(dtype).requires_grad_(true);
  const at::Tensor labels = at::randint(vocab, {tokens}, options.dtype(at::kLong));
  const at::Tensor mask = (at::rand({tokens}, options) > 0.1).to(at::kFloat);
  auto unfused = [&] {
    const at::Tensor log_probs = at::log_softmax(at::linear(x, w), -1, at::kFloat);
    const at::Tensor losses = at::nll_loss(log_probs, labels, {}, at::Reduction::None);
    return (losses * mask).sum() / mask.sum();
  };
  auto fused = [&] { return varuna::kernels::LmHeadCrossEntropy(x, w, labels, mask); };
  const double a = unfused().item<double>();
  const double b = fused().item<double>();
  if (!(std::abs(a - b) <= 1e-3 * std::abs(a))) {
    return absl::InternalError(absl::StrFormat(
        "LmHeadCrossEntropy gives loss %g where the unfused composition gives %g", b, a));
  }
  const std::string shape = absl::StrFormat("[%d, %d] x %d", tokens, hidden, vocab);
  for (const auto& [name, loss] :
       {std::pair<const char*, std::function<at::Tensor()>>{"unfused", unfused},
        {"LmHeadCrossEntropy", fused}}) {
    auto step = [&, loss = loss] {
      x.mutable_grad() = at::Tensor();
      w.mutable_grad() = at::Tensor();
      loss().backward();
    };
    step();
    Synchronize(device);
    varuna::benchmarks::ResetPeakMemory(device);
    // The peak restarts at what is allocated now.
    const std::optional<double> held = varuna::benchmarks::PeakMemoryBytes(device);
    const double ms = TimeMs(device, iterations, step);
    const std::optional<double> peak = varuna::benchmarks::PeakMemoryBytes(device);
    std::printf("| %s | %s | %.3f | %s |\n", shape.c_str(), name, ms,
                peak ? absl::StrFormat("%.2f", (*peak - *held) / 1e9).c_str() : "-");
  }
  return absl::OkStatus();
}

// Prints the FP8 linear table: the four linears of a block (QKV h -> 3h, attention projection
// h -> h, MLP fc h -> 4h, MLP projection 4h -> h) for `tokens` rows, forward + backward, as
// at::linear in `dtype` and as varuna::kernels::Fp8Linear (hybrid recipe, scales updated after
// every step as in training). Skips the table, saying why, on a device FP8 does not run on; an
// error if the FP8 output is not within E4M3's error of the high-precision one.
absl::Status Fp8LinearRows(const c10::Device& device, at::ScalarType dtype, int64_t tokens,
                           int64_t hidden, int iterations) {
  if (const absl::Status status = varuna::kernels::CheckFp8Device(device); !status.ok()) {
    std::printf("| - | skipped: %s | - |\n", std::string(status.message()).c_str());
    return absl::OkStatus();
  }
  const at::AutoGradMode grad_mode(true);
  const at::TensorOptions options = at::TensorOptions().device(device);
  const varuna::kernels::Fp8Recipe recipe;
  for (const auto& [name, in, out] :
       {std::tuple<const char*, int64_t, int64_t>{"qkv", hidden, 3 * hidden},
        {"attention proj", hidden, hidden},
        {"mlp fc", hidden, 4 * hidden},
        {"mlp proj", 4 * hidden, hidden}}) {
    const at::Tensor x = at::randn({tokens, in}, options).to(dtype).requires_grad_(true);
    const at::Tensor w = (at::randn({out, in}, options) * 0.02).to(dtype).requires_grad_(true);
    const at::Tensor b = at::zeros({out}, options).to(dtype).requires_grad_(true);
    const at::Tensor dy = at::randn({tokens, out}, options).to(dtype);
    varuna::kernels::Fp8LinearMeta meta = varuna::kernels::MakeFp8LinearMeta(recipe, device);
    auto high = [&] { return at::linear(x, w, b); };
    auto fp8 = [&] { return varuna::kernels::Fp8Linear(x, w, b, meta); };
    fp8();  // one step to record the amaxes, so that the check runs at real scales
    varuna::kernels::UpdateFp8Scales(recipe, &meta);
    const double error = RelativeError(fp8().detach(), high().detach());
    if (!(error < 0.1)) {
      return absl::InternalError(absl::StrFormat(
          "Fp8Linear %s differs from at::linear by %g of the output's magnitude", name, error));
    }
    const std::string shape = absl::StrFormat("[%d, %d] x %d", tokens, in, out);
    for (const auto& [path, linear] : {std::pair<std::string, std::function<at::Tensor()>>{
                                           absl::StrCat("at::linear ", c10::toString(dtype)), high},
                                       {"Fp8Linear (hybrid)", fp8}}) {
      const bool is_fp8 = path.rfind("Fp8", 0) == 0;
      auto step = [&, linear = linear] {
        x.mutable_grad() = at::Tensor();
        w.mutable_grad() = at::Tensor();
        b.mutable_grad() = at::Tensor();
        linear().backward(dy);
        if (is_fp8) varuna::kernels::UpdateFp8Scales(recipe, &meta);
      };
      std::printf("| %s %s | %s | %.3f |\n", name, shape.c_str(), path.c_str(),
                  TimeMs(device, iterations, step));
    }
  }
  // The quantisation alone (the mlp proj input [tokens, 4h]): the ATen ops of the reference
  // against QuantizeFp8 (on CUDA one fused kernel) and with its transposed copy; then the scale
  // updates of 96 linears' 288 roles (gpt2-355m): one by one (ATen ops) against one batch.
  const at::Tensor t = at::randn({tokens, 4 * hidden}, options).to(dtype);
  varuna::kernels::Fp8Meta quantise_meta =
      varuna::kernels::MakeFp8Meta(at::kFloat8_e4m3fn, recipe.amax_history_len, device);
  const std::string quantise = absl::StrFormat("quantise [%d, %d] -> e4m3", tokens, 4 * hidden);
  for (const auto& [path, run] :
       {std::pair<const char*, std::function<void()>>{
            "ATen ops (unfused)",
            [&] {
              const at::Tensor t32 = t.to(at::kFloat);
              at::Tensor slot = quantise_meta.amax_history.narrow(0, 0, 1);
              slot.copy_(at::fmax(slot, at::abs(t32).nan_to_num_(0.0, INFINITY).amax()));
              at::mul(t32, quantise_meta.scale).clamp_(-448.0, 448.0).to(at::kFloat8_e4m3fn);
            }},
        {"QuantizeFp8", [&] { varuna::kernels::QuantizeFp8(t, &quantise_meta); }},
        {"QuantizeFp8WithTranspose",
         [&] { varuna::kernels::QuantizeFp8WithTranspose(t, &quantise_meta); }}}) {
    std::printf("| %s | %s | %.3f |\n", quantise.c_str(), path, TimeMs(device, iterations, run));
  }
  std::vector<varuna::kernels::Fp8LinearMeta> metas;
  for (int i = 0; i < 96; ++i) metas.push_back(varuna::kernels::MakeFp8LinearMeta(recipe, device));
  std::vector<varuna::kernels::Fp8LinearMeta*> pointers;
  for (varuna::kernels::Fp8LinearMeta& meta : metas) pointers.push_back(&meta);
  for (const auto& [path, run] :
       {std::pair<const char*, std::function<void()>>{
            "UpdateFp8Scale x 288 (ATen ops)",
            [&] {
              for (varuna::kernels::Fp8LinearMeta& meta : metas) {
                varuna::kernels::UpdateFp8Scale(recipe, &meta.input);
                varuna::kernels::UpdateFp8Scale(recipe, &meta.weight);
                varuna::kernels::UpdateFp8Scale(recipe, &meta.grad_output);
              }
            }},
        {"UpdateAllFp8Scales (batched)",
         [&] { varuna::kernels::UpdateAllFp8Scales(recipe, pointers); }}}) {
    std::printf("| scale update, 96 linears | %s | %.3f |\n", path,
                TimeMs(device, iterations, run));
  }
  return absl::OkStatus();
}

// Prints the weight-gradient table (Megatron's gradient-accumulation fusion): dW = dy^T x added
// into an fp32 main gradient, for the four linears of a block at `tokens` rows and one chunk of
// the fused LM head's dW (a default chunk, 640 tokens, x GPT-2's padded vocabulary): unfused, dW in
// `dtype` then main_grad.add_(dW) (two passes over [out, in], one half-precision copy), against one
// GEMM with an fp32 output and beta = 1 (varuna::kernels::AccumulateWeightGradient). An error if
// the two differ by more than `dtype`'s rounding of dW.
absl::Status WeightGradientRows(const c10::Device& device, at::ScalarType dtype, int64_t tokens,
                                int64_t hidden, int64_t vocab, int iterations) {
  const at::TensorOptions options = at::TensorOptions().device(device);
  for (const auto& [name, rows, in, out] :
       {std::tuple<const char*, int64_t, int64_t, int64_t>{"qkv", tokens, hidden, 3 * hidden},
        {"attention proj", tokens, hidden, hidden},
        {"mlp fc", tokens, hidden, 4 * hidden},
        {"mlp proj", tokens, 4 * hidden, hidden},
        {"lm head chunk", std::min<int64_t>(tokens, varuna::kernels::DefaultChunkTokens(vocab)),
         hidden, vocab}}) {
    const at::Tensor x = at::randn({rows, in}, options).to(dtype);
    const at::Tensor dy = at::randn({rows, out}, options).to(dtype);
    at::Tensor fused = at::zeros({out, in}, options.dtype(at::kFloat));
    at::Tensor unfused = at::zeros({out, in}, options.dtype(at::kFloat));
    varuna::kernels::AccumulateWeightGradient(x, dy, fused);
    unfused.add_(at::mm(dy.t(), x));
    const double error = RelativeError(fused, unfused);
    if (!(error < 2e-2)) {
      return absl::InternalError(absl::StrFormat(
          "AccumulateWeightGradient %s differs from mm + add_ by %g of dW's magnitude", name,
          error));
    }
    const std::string shape = absl::StrFormat("[%d, %d] x %d", rows, in, out);
    std::printf("| %s %s | %s mm + fp32 add_ | %.3f |\n", name, shape.c_str(), c10::toString(dtype),
                TimeMs(device, iterations, [&] { unfused.add_(at::mm(dy.t(), x)); }));
    std::printf("| %s %s | AccumulateWeightGradient | %.3f |\n", name, shape.c_str(),
                TimeMs(device, iterations,
                       [&] { varuna::kernels::AccumulateWeightGradient(x, dy, fused); }));
  }
  return absl::OkStatus();
}

// The MLP (--bias-gelu-gemm-fusion): GeluMlp against the composition the model runs without it
// (at::linear, BiasGelu, at::linear), forward + backward. Checked first: the two agree to the
// dtype's rounding.
absl::Status GeluMlpRows(const c10::Device& device, at::ScalarType dtype, int64_t tokens,
                         int64_t hidden, int iterations) {
  const at::TensorOptions options = at::TensorOptions().device(device);
  const auto leaf = [&](at::IntArrayRef shape, double scale) {
    return (at::randn(shape, options) * scale).to(dtype).requires_grad_(true);
  };
  const at::Tensor x = leaf({tokens, hidden}, 1.0);
  const at::Tensor fc_weight = leaf({4 * hidden, hidden}, 1.0 / std::sqrt(hidden));
  const at::Tensor fc_bias = leaf({4 * hidden}, 0.1);
  const at::Tensor proj_weight = leaf({hidden, 4 * hidden}, 0.5 / std::sqrt(hidden));
  const at::Tensor grad = at::randn({tokens, hidden}, options).to(dtype);
  const auto unfused = [&] {
    return at::linear(varuna::kernels::BiasGelu(at::linear(x, fc_weight), fc_bias), proj_weight);
  };
  const auto fused = [&] { return varuna::kernels::GeluMlp(x, fc_weight, fc_bias, proj_weight); };
  const auto gradients = [&](const std::function<at::Tensor()>& mlp) {
    const std::vector<at::Tensor> inputs = {x, fc_weight, fc_bias, proj_weight};
    return torch::autograd::grad({mlp()}, inputs, {grad});
  };
  const std::vector<at::Tensor> want = gradients(unfused);
  const std::vector<at::Tensor> got = gradients(fused);
  const char* names[] = {"dx", "d_fc_weight", "d_fc_bias", "d_proj_weight"};
  for (size_t i = 0; i < want.size(); ++i) {
    const double error = RelativeError(got[i], want[i]);
    if (!(error < 5e-2)) {
      return absl::InternalError(absl::StrFormat(
          "GeluMlp's %s differs from the unfused MLP's by %g of its magnitude", names[i], error));
    }
  }
  const std::string shape = absl::StrFormat("[%d, %d] x %d", tokens, hidden, 4 * hidden);
  std::printf("| %s | linear + BiasGelu + linear | %.3f |\n", shape.c_str(),
              TimeMs(device, iterations, [&] { gradients(unfused); }));
  std::printf("| %s | GeluMlp | %.3f |\n", shape.c_str(),
              TimeMs(device, iterations, [&] { gradients(fused); }));
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Options options;
  varuna::FlagParser parser;
  parser.Add("device", &options.device, "cpu or cuda (empty: cuda when present)");
  parser.Add("dtype", &options.dtype, "fp16, bf16 or fp32: the activations' and gradients' dtype");
  parser.Add("iterations", &options.iterations, "timed runs per measurement");
  parser.SetMinimum("iterations", 1);
  parser.Add("quick", &options.quick, "tiny sizes (a smoke run)");
  if (std::optional<int> exit =
          parser.ParseMain("kernel_benchmark",
                           "Fused kernels against their LibTorch references, timed.", argc, argv)) {
    return *exit;
  }
  const bool cuda = options.device.empty() ? at::hasCUDA() : options.device == "cuda";
  if (cuda && !at::hasCUDA()) {
    std::fprintf(stderr,
                 "kernel_benchmark: --device=cuda but no CUDA device is usable here (or "
                 "the binary was built without --config=cuda)\n");
    return 1;
  }
  const std::map<std::string, at::ScalarType> dtypes = {
      {"fp16", at::kHalf}, {"bf16", at::kBFloat16}, {"fp32", at::kFloat}};
  if (dtypes.count(options.dtype) == 0) {
    std::fprintf(stderr, "kernel_benchmark: --dtype=%s: use fp16, bf16 or fp32\n",
                 options.dtype.c_str());
    return 2;
  }
  at::NoGradGuard no_grad;
  at::manual_seed(0);
  const c10::Device device = cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  const std::string name = trainer::DeviceName(device);
  Benchmark benchmark(options, device, dtypes.at(options.dtype));
  const double copy = benchmark.MeasureCopyBandwidth();
  std::printf("device: %s; dtype %s; device-to-device copy: %.0f GB/s\n\n", name.c_str(),
              options.dtype.c_str(), copy / 1e9);
  const absl::StatusOr<std::vector<Row>> rows = benchmark.Run();
  if (!rows.ok()) {
    std::fprintf(stderr, "kernel_benchmark: %s\n", std::string(rows.status().message()).c_str());
    return 1;
  }
  std::printf(
      "| op | shape | fused ms | GB/s | of copy | LibTorch unfused ms | speedup | "
      "ATen fused ms | speedup |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& row : *rows) {
    const double bandwidth = row.bytes / (row.fused_ms * 1e-3);
    std::printf(
        "| %s | %s | %.3f | %.0f | %.2f | %.3f | %.2fx | %s | %s |\n", row.op.c_str(),
        row.shape.c_str(), row.fused_ms, bandwidth / 1e9, bandwidth / copy, row.unfused_ms,
        row.unfused_ms / row.fused_ms,
        row.aten_ms < 0 ? "-" : absl::StrFormat("%.3f", row.aten_ms).c_str(),
        row.aten_ms < 0 ? "-" : absl::StrFormat("%.2fx", row.aten_ms / row.fused_ms).c_str());
  }
  // The two causal-attention backends, forward + backward, at the shapes of gpt2-355m (16 heads
  // of 64) and gpt2-1.5b (25 heads of 64), micro-batch 8, sequence 1024: what
  // --attention-backend=auto measures at start-up.
  std::printf(
      "\n| attention [batch, heads, seq, head_dim] | backend | forward + backward ms |\n"
      "|---|---|---|\n");
  at::AutoGradMode grad_mode(true);  // the backends are timed forward + backward
  for (int64_t heads : {int64_t{16}, int64_t{25}}) {
    const int64_t batch = options.quick ? 1 : 8;
    const int64_t seq = options.quick ? 64 : 1024;
    for (const varuna::kernels::AttentionTiming& timing : varuna::kernels::MeasureAttentionBackends(
             device, batch, options.quick ? 2 : heads, seq, 64, dtypes.at(options.dtype),
             options.iterations)) {
      std::printf("| [%d, %d, %d, 64] | %s | %.3f |\n", static_cast<int>(batch),
                  static_cast<int>(options.quick ? 2 : heads), static_cast<int>(seq),
                  varuna::kernels::AttentionBackendName(timing.backend), timing.milliseconds);
    }
  }
  // The LM head and the loss (--cross-entropy-loss-fusion) against the unfused at::linear +
  // log_softmax + nll_loss, forward + backward, at GPT-2's vocabulary and one micro-batch of 8 x
  // 1024 tokens of gpt2-355m (h 1024) and gpt2-1.5b (h 1600); the peak memory each adds on CUDA.
  std::printf(
      "\n| lm head + cross entropy [tokens, hidden] x vocab | path | forward + backward ms | "
      "peak GB added |\n|---|---|---|---|\n");
  for (int64_t h : {int64_t{1024}, int64_t{1600}}) {
    const int64_t tokens = options.quick ? 256 : 8 * 1024;
    const int64_t hidden = options.quick ? h / 16 : h;
    const int64_t vocab = options.quick ? 1024 : 50304;
    const absl::Status status =
        LmHeadLoss(device, dtypes.at(options.dtype), tokens, hidden, vocab, options.iterations);
    if (!status.ok()) {
      std::fprintf(stderr, "kernel_benchmark: %s\n", std::string(status.message()).c_str());
      return 1;
    }
  }
  // FP8 (--fp8-format=hybrid) against the high-precision GEMMs, forward + backward, for the four
  // linears of a gpt2-355m (h 1024) and a gpt2-1.5b (h 1600) block at one micro-batch of 8 x
  // 1024 tokens. Only sm_89+ GPUs run FP8 GEMMs natively; the CPU's _scaled_mm is an emulation.
  std::printf(
      "\n| fp8 linear [tokens, in] x out | path | forward + backward ms |\n|---|---|---|\n");
  for (int64_t h : {int64_t{1024}, int64_t{1600}}) {
    const int64_t tokens = options.quick ? 64 : 8 * 1024;
    const int64_t hidden = options.quick ? h / 256 * 16 : h;  // multiples of 16
    const absl::Status status =
        Fp8LinearRows(device, dtypes.at(options.dtype), tokens, hidden, options.iterations);
    if (!status.ok()) {
      std::fprintf(stderr, "kernel_benchmark: %s\n", std::string(status.message()).c_str());
      return 1;
    }
  }
  // The MLP with its bias + GeLU in the GEMM epilogues (--bias-gelu-gemm-fusion) against the
  // unfused one, for the same blocks.
  std::printf(
      "\n| mlp [tokens, hidden] x 4 hidden | path | forward + backward ms |\n|---|---|---|\n");
  for (int64_t h : {int64_t{1024}, int64_t{1600}}) {
    const int64_t tokens = options.quick ? 64 : 8 * 1024;
    const int64_t hidden = options.quick ? h / 16 : h;
    const absl::Status status =
        GeluMlpRows(device, dtypes.at(options.dtype), tokens, hidden, options.iterations);
    if (!status.ok()) {
      std::fprintf(stderr, "kernel_benchmark: %s\n", std::string(status.message()).c_str());
      return 1;
    }
  }
  // dW into the fp32 main gradient (--gradient-accumulation-fusion's GEMM) against dW in the
  // activations' dtype plus an add, for the same blocks and one LM head chunk.
  std::printf("\n| weight gradient into fp32 [tokens, in] x out | path | ms |\n|---|---|---|\n");
  for (int64_t h : {int64_t{1024}, int64_t{1600}}) {
    const int64_t tokens = options.quick ? 64 : 8 * 1024;
    const int64_t hidden = options.quick ? h / 16 : h;
    const int64_t vocab = options.quick ? 1024 : 50304;
    const absl::Status status = WeightGradientRows(device, dtypes.at(options.dtype), tokens, hidden,
                                                   vocab, options.iterations);
    if (!status.ok()) {
      std::fprintf(stderr, "kernel_benchmark: %s\n", std::string(status.message()).c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
