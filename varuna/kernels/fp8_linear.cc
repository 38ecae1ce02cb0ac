#include "varuna/kernels/fp8_linear.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "varuna/kernels/argument_checks.h"

#ifdef VARUNA_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "varuna/kernels/cuda/fp8_quantize.h"
#include "varuna/kernels/cuda/fp8_scale_update.h"
#include "varuna/kernels/cuda_launch.h"
#endif

namespace varuna::kernels {
namespace {

// The column sums of a 2-D t in fp32, rounded to t's dtype (the bias gradient of dY).
at::Tensor ReferenceColumnSums(const at::Tensor& t) {
  // On CUDA the reduction converts as it reads (no fp32 copy of t); the CPU keeps the explicit
  // conversion (its results stay bitwise what they were).
  return (t.is_cuda() ? at::sum(t, /*dim=*/{0}, /*keepdim=*/false, at::kFloat)
                      : t.to(at::kFloat).sum(/*dim=*/0))
      .to(t.scalar_type());
}

constexpr const char* kOp = "Fp8Linear";
// cuBLASLt's FP8 GEMMs need K and N of each GEMM to be multiples of this; the three GEMMs of a
// layer between them use M, K and N in every position.
constexpr int64_t kFp8DimMultiple = 16;

bool IsFp8(at::ScalarType dtype) {
  return dtype == at::kFloat8_e4m3fn || dtype == at::kFloat8_e5m2;
}

void CheckHighPrecision(const at::Tensor& t, const char* op, const char* name) {
  const at::ScalarType dtype = t.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16, op, ": ", name,
              " must be float32, float16 or bfloat16 for FP8, got ", dtype);
}

// One role's state: float32 tensors of the right shapes, on `device`, of a float8 dtype.
void CheckMeta(const Fp8Meta& meta, const c10::Device& device, const char* op, const char* role) {
  TORCH_CHECK(IsFp8(meta.dtype), op, ": the ", role, " meta has dtype ", meta.dtype,
              "; it must be Float8_e4m3fn or Float8_e5m2 (build it with MakeFp8Meta)");
  for (const auto& [name, t] :
       {std::pair<const char*, const at::Tensor*>{"amax_history", &meta.amax_history},
        {"scale", &meta.scale},
        {"scale_inv", &meta.scale_inv}}) {
    TORCH_CHECK(t->defined(), op, ": the ", role, " meta's ", name,
                " is undefined; build the meta with MakeFp8Meta");
    TORCH_CHECK(t->scalar_type() == at::kFloat, op, ": the ", role, " meta's ", name, " is ",
                t->scalar_type(), "; it must be float32");
    TORCH_CHECK(t->device() == device, op, ": the ", role, " meta's ", name, " is on ", t->device(),
                " but the tensor it scales is on ", device,
                "; make the meta on the layer's device");
  }
  TORCH_CHECK(meta.amax_history.dim() == 1 && meta.amax_history.size(0) >= 1, op, ": the ", role,
              " meta's amax_history has shape ", meta.amax_history.sizes(),
              "; it must be [amax_history_len] with a length of at least 1");
  TORCH_CHECK(meta.scale.numel() == 1 && meta.scale_inv.numel() == 1, op, ": the ", role,
              " meta's scale and scale_inv must have one element each, got shapes ",
              meta.scale.sizes(), " and ", meta.scale_inv.sizes());
}

// The autograd op: the forward quantises x and W (recording their amaxes) and saves the fp8
// operands; the backward quantises dY (recording its amax) and runs the two gradient GEMMs.
struct Fp8LinearFunction : torch::autograd::Function<Fp8LinearFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight, const std::optional<at::Tensor>& maybe_bias,
                            const Fp8LinearMeta& meta, bool for_backward) {
    // An absent bias is not an autograd input (an undefined tensor cannot be one).
    const at::Tensor bias = maybe_bias.value_or(at::Tensor());
    const int64_t k = weight.size(1);
    const int64_t n = weight.size(0);
    const int64_t m = x.numel() / k;
    Fp8Meta input = meta.input;
    Fp8Meta weight_meta = meta.weight;
    // The forward GEMM reads xq row-major and wq as a column-major view; the backward reads only
    // their transposes (wgrad: xq^T row-major; dgrad: wq^T row-major). So the forward makes both
    // in one quantise pass (the cast-transpose) and saves only the transposes: the saved fp8
    // bytes are those of one copy each, as before, where saving xq and xq^T (as Transformer
    // Engine does) would double them, and the backward copies no fp8 transpose of x or W.
    // Without a backward to follow (gradients off: the Varuna schedule's F, evaluation), no
    // transposes are made.
    // With them, the dequantisation factors this forward used, kept for the backward (an
    // UpdateFp8Scale between the forward and the backward must not change how xq and wq are
    // read); on CUDA the quantise kernels copy them, with no launch of their own.
    at::Tensor xq, xq_t, wq, wq_t, x_scale_inv, w_scale_inv;
    if (for_backward) {
      std::tie(xq, xq_t) = QuantizeFp8WithTranspose(x.reshape({m, k}), &input, &x_scale_inv);
      std::tie(wq, wq_t) = QuantizeFp8WithTranspose(weight, &weight_meta, &w_scale_inv);
    } else {
      xq = QuantizeFp8(x.reshape({m, k}), &input, &x_scale_inv);
      wq = QuantizeFp8(weight, &weight_meta, &w_scale_inv);
    }

    const at::ScalarType out_dtype = x.scalar_type();
    // cuBLASLt fuses a bias only into a half-precision output of the bias's own dtype.
    const bool bias_in_gemm = bias.defined() && out_dtype != at::kFloat;
    // mat2 = wq^T as a column-major [K, N] view of the row-major [N, K] weight.
    at::Tensor y = at::_scaled_mm(xq, wq.t(), x_scale_inv, w_scale_inv,
                                  bias_in_gemm ? std::optional<at::Tensor>(bias) : std::nullopt,
                                  /*scale_result=*/std::nullopt, out_dtype,
                                  /*use_fast_accum=*/true);
    if (bias.defined() && !bias_in_gemm) y.add_(bias);

    ctx->save_for_backward({xq_t, wq_t});
    ctx->saved_data["x_scale_inv"] = x_scale_inv;
    ctx->saved_data["w_scale_inv"] = w_scale_inv;
    // The grad_output state is mutated in place by the backward (its amax), so it is kept out of
    // save_for_backward's version checks.
    ctx->saved_data["g_history"] = meta.grad_output.amax_history;
    ctx->saved_data["g_scale"] = meta.grad_output.scale;
    ctx->saved_data["g_scale_inv"] = meta.grad_output.scale_inv;
    ctx->saved_data["g_dtype"] = static_cast<int64_t>(meta.grad_output.dtype);
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(weight.scalar_type());
    ctx->saved_data["has_bias"] = bias.defined();

    std::vector<int64_t> y_sizes = x.sizes().vec();
    y_sizes.back() = n;
    return y.view(y_sizes);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor& xq_t = saved[0];  // [K, M]
    const at::Tensor& wq_t = saved[1];  // [K, N]
    const at::Tensor x_scale_inv = ctx->saved_data["x_scale_inv"].toTensor();
    const at::Tensor w_scale_inv = ctx->saved_data["w_scale_inv"].toTensor();
    Fp8Meta grad_meta;
    grad_meta.dtype = static_cast<at::ScalarType>(ctx->saved_data["g_dtype"].toInt());
    grad_meta.amax_history = ctx->saved_data["g_history"].toTensor();
    grad_meta.scale = ctx->saved_data["g_scale"].toTensor();
    grad_meta.scale_inv = ctx->saved_data["g_scale_inv"].toTensor();
    const std::vector<int64_t> x_sizes = ctx->saved_data["x_sizes"].toIntVector();
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const auto w_dtype = static_cast<at::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    const bool has_bias = ctx->saved_data["has_bias"].toBool();

    const int64_t m = xq_t.size(1);
    const int64_t n = wq_t.size(1);
    const at::Tensor dy = grad_outputs[0].reshape({m, n});
    TORCH_CHECK(dy.scalar_type() == x_dtype, kOp, ": the output gradient is ", dy.scalar_type(),
                " but the output is ", x_dtype, "; they must have the same dtype");
    // wgrad reads dYq^T row-major: the cast-transpose makes it in the quantise pass, and with it
    // the bias gradient, dY's column sums (Transformer Engine's cast-transpose-dbias).
    const bool bias_grad = has_bias && ctx->needs_input_grad(2);
    at::Tensor dyq;
    at::Tensor dyq_t;
    at::Tensor db;
    if (ctx->needs_input_grad(1)) {
      std::tie(dyq, dyq_t) = QuantizeFp8WithTranspose(dy, &grad_meta, /*scale_inv_used=*/nullptr,
                                                      bias_grad ? &db : nullptr);
    } else {
      dyq = QuantizeFp8(dy, &grad_meta);
      if (bias_grad) db = ReferenceColumnSums(dy);
    }
    // The sums come in dY's dtype, which is x's and so the bias's (CheckLinearArguments).

    at::Tensor dx;
    at::Tensor dw;
    if (ctx->needs_input_grad(0)) {
      // dX [M, K] = dY [M, N] W [N, K]; mat2 column-major: the saved wq^T, viewed back.
      dx = at::_scaled_mm(dyq, wq_t.t(), grad_meta.scale_inv, w_scale_inv, std::nullopt,
                          std::nullopt, x_dtype, /*use_fast_accum=*/false)
               .view(x_sizes);
    }
    if (ctx->needs_input_grad(1)) {
      // dW [N, K] = dY^T [N, M] X [M, K]; mat1 row-major and mat2 column-major: fp8 transposes.
      dw = at::_scaled_mm(dyq_t, xq_t.t(), grad_meta.scale_inv, x_scale_inv, std::nullopt,
                          std::nullopt, w_dtype,
                          /*use_fast_accum=*/false);
    }
    return {dx, dw, db, at::Tensor(), at::Tensor()};
  }
};

void CheckLinearArguments(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          const Fp8LinearMeta& meta) {
  CheckDefined(x, kOp, "x");
  CheckDefined(weight, kOp, "weight");
  CheckHighPrecision(x, kOp, "x");
  TORCH_CHECK(x.dim() >= 1, kOp, ": x must have shape [..., in_features], got a 0-dim tensor");
  TORCH_CHECK(weight.dim() == 2, kOp, ": weight has shape ", weight.sizes(),
              "; it must be [out_features, in_features]");
  TORCH_CHECK(weight.size(1) == x.size(-1), kOp, ": weight has shape ", weight.sizes(),
              " but x has shape ", x.sizes(), "; weight must be [out_features, ", x.size(-1), "]");
  TORCH_CHECK(weight.scalar_type() == x.scalar_type(), kOp, ": weight is ", weight.scalar_type(),
              " but x is ", x.scalar_type(), "; they must have the same dtype");
  CheckSameDevice(weight, x, kOp, "weight", "x");
  if (bias.defined()) {
    TORCH_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), kOp, ": bias has shape ",
                bias.sizes(), " but weight has shape ", weight.sizes(), "; bias must be [",
                weight.size(0), "]");
    TORCH_CHECK(bias.scalar_type() == x.scalar_type(), kOp, ": bias is ", bias.scalar_type(),
                " but x is ", x.scalar_type(), "; they must have the same dtype");
    CheckSameDevice(bias, x, kOp, "bias", "x");
  }
  const int64_t k = x.size(-1);
  const int64_t n = weight.size(0);
  TORCH_CHECK(k > 0 && n > 0, kOp, ": x has shape ", x.sizes(), " and weight ", weight.sizes(),
              "; in_features and out_features must be positive");
  const int64_t m = x.numel() / k;
  TORCH_CHECK(m % kFp8DimMultiple == 0 && k % kFp8DimMultiple == 0 && n % kFp8DimMultiple == 0, kOp,
              ": FP8 GEMMs need every dim a multiple of ", kFp8DimMultiple,
              " (cuBLASLt), got M=", m, " rows (x ", x.sizes(), "), K=", k, " in_features, N=", n,
              " out_features; choose sizes that are multiples of 16 (micro-batch x sequence, "
              "hidden size) or run this layer without FP8 (drop --fp8-format)");
  const absl::Status device_ok = CheckFp8Device(x.device());
  TORCH_CHECK(device_ok.ok(), kOp, ": ", device_ok.message());
  CheckMeta(meta.input, x.device(), kOp, "input");
  CheckMeta(meta.weight, x.device(), kOp, "weight");
  CheckMeta(meta.grad_output, x.device(), kOp, "grad_output");
  TORCH_CHECK(meta.input.dtype == at::kFloat8_e4m3fn && meta.weight.dtype == at::kFloat8_e4m3fn,
              kOp,
              ": the input and weight metas must be Float8_e4m3fn (every FP8 format keeps the "
              "forward in E4M3), got ",
              meta.input.dtype, " and ", meta.weight.dtype);
}

}  // namespace

absl::Status ValidateFp8Recipe(const Fp8Recipe& recipe) {
  if (recipe.amax_history_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fp8-amax-history-len=", recipe.amax_history_len,
                     " must be at least 1 (Megatron's default 1, Transformer Engine's 1024)"));
  }
  if (recipe.margin < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fp8-margin=", recipe.margin,
                     " must be at least 0 (scale = fp8_max / amax / 2^margin; 0 is the default)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Fp8Format> ParseFp8Format(std::string_view name) {
  for (const Fp8Format format : {Fp8Format::kHybrid, Fp8Format::kE4M3}) {
    if (name == Fp8FormatName(format)) return format;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown FP8 format '", std::string(name),
                                                 "': choose hybrid (E4M3 forward, E5M2 "
                                                 "gradients) or e4m3"));
}

const char* Fp8FormatName(Fp8Format format) {
  switch (format) {
    case Fp8Format::kE4M3:
      return "e4m3";
    case Fp8Format::kHybrid:
      return "hybrid";
  }
  return "unknown";
}

absl::StatusOr<Fp8AmaxComputeAlgo> ParseFp8AmaxComputeAlgo(std::string_view name) {
  for (const Fp8AmaxComputeAlgo algo :
       {Fp8AmaxComputeAlgo::kMax, Fp8AmaxComputeAlgo::kMostRecent}) {
    if (name == Fp8AmaxComputeAlgoName(algo)) return algo;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown FP8 amax compute algorithm '", std::string(name), "': choose max or most_recent"));
}

const char* Fp8AmaxComputeAlgoName(Fp8AmaxComputeAlgo algo) {
  switch (algo) {
    case Fp8AmaxComputeAlgo::kMax:
      return "max";
    case Fp8AmaxComputeAlgo::kMostRecent:
      return "most_recent";
  }
  return "unknown";
}

at::ScalarType Fp8DtypeFor(Fp8Format format, Fp8TensorRole role) {
  return format == Fp8Format::kHybrid && role == Fp8TensorRole::kGradOutput ? at::kFloat8_e5m2
                                                                            : at::kFloat8_e4m3fn;
}

double Fp8Max(at::ScalarType fp8_dtype) {
  if (fp8_dtype == at::kFloat8_e4m3fn) return 448.0;
  if (fp8_dtype == at::kFloat8_e5m2) return 57344.0;
  TORCH_CHECK(false, "Fp8Max: ", fp8_dtype,
              " is not an FP8 dtype; use Float8_e4m3fn or "
              "Float8_e5m2");
  return 0.0;
}

Fp8Meta MakeFp8Meta(at::ScalarType dtype, int64_t amax_history_len, const c10::Device& device) {
  TORCH_CHECK(IsFp8(dtype), "MakeFp8Meta: ", dtype,
              " is not an FP8 dtype; use Float8_e4m3fn or Float8_e5m2");
  TORCH_CHECK(amax_history_len >= 1, "MakeFp8Meta: amax_history_len=", amax_history_len,
              " must be at least 1");
  const at::TensorOptions options = at::TensorOptions().dtype(at::kFloat).device(device);
  Fp8Meta meta;
  meta.dtype = dtype;
  meta.amax_history = at::zeros({amax_history_len}, options);
  meta.scale = at::ones({1}, options);
  meta.scale_inv = at::ones({1}, options);
  return meta;
}

namespace {

void CheckQuantizeArguments(const at::Tensor& t, const Fp8Meta& meta, const char* op) {
  CheckDefined(t, op, "t");
  CheckHighPrecision(t, op, "t");
  CheckMeta(meta, t.device(), op, "given");
}

// The LibTorch reference of QuantizeFp8 (the CPU path, and the definition the CUDA kernel
// matches byte for byte).
at::Tensor ReferenceQuantize(const at::Tensor& t, Fp8Meta* meta) {
  const at::Tensor t32 = t.to(at::kFloat);
  if (t32.numel() > 0) {
    // max |t| with NaN ignored (as TE's cast kernels reduce with fmaxf) and inf kept.
    const at::Tensor amax =
        at::abs(t32).nan_to_num_(0.0, std::numeric_limits<double>::infinity()).amax();
    at::Tensor slot = meta->amax_history.narrow(0, 0, 1);
    slot.copy_(at::fmax(slot, amax));
  }
  const double fp8_max = Fp8Max(meta->dtype);
  // The product in fp32 (one rounding), then the saturating cast: clamp keeps NaN and maps
  // +-inf to +-fp8_max, which the bare cast would turn into NaN (E4M3) or inf (E5M2).
  return at::mul(t32, meta->scale).clamp_(-fp8_max, fp8_max).to(meta->dtype).contiguous();
}

#ifdef VARUNA_WITH_CUDA_KERNELS
// The fused kernel: one read of t, the fp8 bytes (and their transpose when `transpose`), the
// amax folded into amax_history[0] on the device. t is viewed as [numel / last dim, last dim].
// `scale_inv_used` and `column_sums` (when not null) as QuantizeFp8WithTranspose says; the
// kernel writes them where it can.
std::pair<at::Tensor, at::Tensor> CudaQuantize(const at::Tensor& t, Fp8Meta* meta, bool transpose,
                                               const char* op, at::Tensor* scale_inv_used,
                                               at::Tensor* column_sums) {
  const c10::cuda::CUDAGuard guard(t.device());
  TORCH_CHECK(meta->amax_history.is_contiguous(), op,
              ": the meta's amax_history is not contiguous; build the meta with MakeFp8Meta");
  // A strided input is quantised from a contiguous copy (the fused kernel reads one layout).
  const at::Tensor input = t.contiguous();
  const int64_t columns = input.dim() == 0 ? 1 : input.size(-1);
  const int64_t rows = columns == 0 ? 0 : input.numel() / columns;
  const at::TensorOptions fp8 = input.options().dtype(meta->dtype);
  at::Tensor q = at::empty(input.sizes(), fp8);
  at::Tensor q_t = transpose ? at::empty({columns, rows}, fp8) : at::Tensor();
  cuda::Fp8QuantizeArgs args{
      CudaElementType(input.scalar_type(), op),
      meta->dtype == at::kFloat8_e4m3fn ? cuda::Fp8Encoding::kE4M3 : cuda::Fp8Encoding::kE5M2,
      input.data_ptr(),
      rows,
      columns,
      meta->scale.data_ptr<float>(),
      meta->amax_history.data_ptr<float>(),
      static_cast<uint8_t*>(q.data_ptr()),
      transpose ? static_cast<uint8_t*>(q_t.data_ptr()) : nullptr};
  // An empty t launches nothing: its scale_inv is copied and its sums are zeros the ATen way.
  const bool empty = input.numel() == 0;
  if (scale_inv_used != nullptr) {
    if (empty) {
      *scale_inv_used = meta->scale_inv.clone();
    } else {
      *scale_inv_used = at::empty({1}, meta->scale_inv.options());
      args.scale_inv = meta->scale_inv.data_ptr<float>();
      args.scale_inv_out = scale_inv_used->data_ptr<float>();
    }
  }
  at::Tensor partials;
  if (column_sums != nullptr) {
    if (!empty && cuda::QuantizeFp8FusesColumnSums(args)) {
      *column_sums = at::empty({columns}, input.options());
      partials =
          at::empty({cuda::ColumnSumTiles(rows), columns}, input.options().dtype(at::kFloat));
      args.column_sums = column_sums->data_ptr();
      args.column_partials = partials.data_ptr<float>();
    } else {
      *column_sums = ReferenceColumnSums(input.reshape({rows, columns}));
    }
  }
  // `partials` is freed on return: the caching allocator hands it out again only to work
  // ordered after ours on this stream.
  CheckCuda(cuda::LaunchQuantizeFp8(args, CurrentCudaStream(input)), op);
  return {q, q_t};
}
#endif  // VARUNA_WITH_CUDA_KERNELS

}  // namespace

at::Tensor QuantizeFp8(const at::Tensor& t, Fp8Meta* meta, at::Tensor* scale_inv_used) {
  const char* op = "QuantizeFp8";
  CheckQuantizeArguments(t, *meta, op);
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (t.is_cuda()) {
    return CudaQuantize(t, meta, /*transpose=*/false, op, scale_inv_used, nullptr).first;
  }
#endif
  if (scale_inv_used != nullptr) *scale_inv_used = meta->scale_inv.clone();
  return ReferenceQuantize(t, meta);
}

std::pair<at::Tensor, at::Tensor> QuantizeFp8WithTranspose(const at::Tensor& t, Fp8Meta* meta,
                                                           at::Tensor* scale_inv_used,
                                                           at::Tensor* column_sums) {
  const char* op = "QuantizeFp8WithTranspose";
  CheckQuantizeArguments(t, *meta, op);
  TORCH_CHECK(t.dim() == 2, op, ": t has shape ", t.sizes(),
              "; it must be 2-D [rows, columns] (reshape it first)");
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (t.is_cuda())
    return CudaQuantize(t, meta, /*transpose=*/true, op, scale_inv_used, column_sums);
#endif
  if (scale_inv_used != nullptr) *scale_inv_used = meta->scale_inv.clone();
  if (column_sums != nullptr) *column_sums = ReferenceColumnSums(t);
  at::Tensor q = ReferenceQuantize(t, meta);
  at::Tensor q_t = q.t().contiguous();
  return {std::move(q), std::move(q_t)};
}

void UpdateFp8Scale(const Fp8Recipe& recipe, Fp8Meta* meta) {
  const char* op = "UpdateFp8Scale";
  const absl::Status valid = ValidateFp8Recipe(recipe);
  TORCH_CHECK(valid.ok(), op, ": ", valid.message());
  CheckMeta(*meta, meta->amax_history.device(), op, "given");
  at::Tensor& history = meta->amax_history;
  TORCH_CHECK(history.size(0) == recipe.amax_history_len, op, ": the amax history has ",
              history.size(0), " entries but the recipe says ", recipe.amax_history_len,
              "; build the meta with the recipe's amax_history_len");

  const at::Tensor last = history.narrow(0, 0, 1).clone();
  const at::Tensor amax = recipe.amax_compute_algo == Fp8AmaxComputeAlgo::kMax
                              ? at::where(at::isnan(history), 0.0, history).amax().reshape({1})
                              : last;
  // In float32, as TE computes it: fp8_max * 2^-margin, then divided by amax.
  const float scaled_max =
      static_cast<float>(Fp8Max(meta->dtype)) * std::pow(2.0f, -static_cast<float>(recipe.margin));
  const at::Tensor recorded = last.ne(0);
  const at::Tensor usable = at::isfinite(amax).logical_and_(amax.gt(0)).logical_and_(recorded);
  at::Tensor scale = at::where(usable, at::full_like(amax, scaled_max).div_(amax), meta->scale);
  scale = at::where(at::isinf(scale), std::numeric_limits<float>::max(), scale);

  at::Tensor rolled = at::roll(history, /*shifts=*/-1, /*dims=*/0);
  rolled.narrow(0, 0, 1).zero_();
  history.copy_(at::where(recorded, rolled, history));
  meta->scale.copy_(scale);
  meta->scale_inv.copy_(at::ones_like(scale).div_(scale));
}

Fp8LinearMeta MakeFp8LinearMeta(const Fp8Recipe& recipe, const c10::Device& device) {
  const absl::Status valid = ValidateFp8Recipe(recipe);
  TORCH_CHECK(valid.ok(), "MakeFp8LinearMeta: ", valid.message());
  const auto make = [&](Fp8TensorRole role) {
    return MakeFp8Meta(Fp8DtypeFor(recipe.format, role), recipe.amax_history_len, device);
  };
  return {make(Fp8TensorRole::kInput), make(Fp8TensorRole::kWeight),
          make(Fp8TensorRole::kGradOutput)};
}

void UpdateFp8Scales(const Fp8Recipe& recipe, Fp8LinearMeta* meta) {
  UpdateFp8ScaleBatch(recipe, {&meta->input, &meta->weight, &meta->grad_output});
}

namespace {

// The float32 target maximum fp8_max * 2^-margin, computed as UpdateFp8Scale computes it.
float ScaledMax(const Fp8Recipe& recipe, at::ScalarType dtype) {
  return static_cast<float>(Fp8Max(dtype)) * std::pow(2.0f, -static_cast<float>(recipe.margin));
}

}  // namespace

void UpdateFp8ScaleBatch(const Fp8Recipe& recipe, const std::vector<Fp8Meta*>& metas) {
  const char* op = "UpdateFp8ScaleBatch";
  if (metas.empty()) return;
  for (size_t i = 0; i < metas.size(); ++i) {
    TORCH_CHECK(metas[i] != nullptr, op, ": meta ", i, " of ", metas.size(),
                " is null; pass the address of each Fp8Meta");
  }
  const c10::Device device =
      metas[0]->amax_history.defined() ? metas[0]->amax_history.device() : c10::Device(c10::kCPU);
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (device.is_cuda()) {
    const absl::Status valid = ValidateFp8Recipe(recipe);
    TORCH_CHECK(valid.ok(), op, ": ", valid.message());
    std::vector<cuda::Fp8ScaleUpdateEntry> entries;
    entries.reserve(metas.size());
    for (size_t i = 0; i < metas.size(); ++i) {
      Fp8Meta& meta = *metas[i];
      const std::string role = absl::StrCat("given (", i, " of ", metas.size(), ")");
      CheckMeta(meta, device, op, role.c_str());
      TORCH_CHECK(meta.amax_history.size(0) == recipe.amax_history_len, op, ": meta ", i,
                  "'s amax history has ", meta.amax_history.size(0),
                  " entries but the recipe says ", recipe.amax_history_len,
                  "; build the meta with the recipe's amax_history_len");
      TORCH_CHECK(meta.amax_history.is_contiguous(), op, ": meta ", i,
                  "'s amax_history is not contiguous; build the meta with MakeFp8Meta");
      entries.push_back({meta.amax_history.data_ptr<float>(), meta.scale.data_ptr<float>(),
                         meta.scale_inv.data_ptr<float>(), ScaledMax(recipe, meta.dtype)});
    }
    // One block per entry, all at once: two entries of one meta would race where updating one
    // after the other rolls its history twice.
    std::vector<const float*> histories;
    for (const cuda::Fp8ScaleUpdateEntry& entry : entries) histories.push_back(entry.amax_history);
    std::sort(histories.begin(), histories.end());
    TORCH_CHECK(std::adjacent_find(histories.begin(), histories.end()) == histories.end(), op,
                ": the same meta appears twice in one batch; update it once per batch");
    const c10::cuda::CUDAGuard guard(device);
    CheckCuda(cuda::LaunchUpdateFp8Scales(entries.data(), static_cast<int64_t>(entries.size()),
                                          recipe.amax_history_len,
                                          recipe.amax_compute_algo == Fp8AmaxComputeAlgo::kMax,
                                          CurrentCudaStream(metas[0]->amax_history)),
              op);
    return;
  }
#endif
  for (Fp8Meta* meta : metas) UpdateFp8Scale(recipe, meta);
}

void UpdateAllFp8Scales(const Fp8Recipe& recipe, const std::vector<Fp8LinearMeta*>& metas) {
  std::vector<Fp8Meta*> roles;
  roles.reserve(3 * metas.size());
  for (size_t i = 0; i < metas.size(); ++i) {
    TORCH_CHECK(metas[i] != nullptr, "UpdateAllFp8Scales: meta ", i, " of ", metas.size(),
                " is null; pass the address of each Fp8LinearMeta");
    roles.insert(roles.end(), {&metas[i]->input, &metas[i]->weight, &metas[i]->grad_output});
  }
  UpdateFp8ScaleBatch(recipe, roles);
}

bool SameFp8Recipe(const Fp8Recipe& a, const Fp8Recipe& b) {
  return a.format == b.format && a.margin == b.margin && a.amax_history_len == b.amax_history_len &&
         a.amax_compute_algo == b.amax_compute_algo;
}

std::vector<std::pair<std::string, at::Tensor>> Fp8LinearMetaTensors(const Fp8LinearMeta& meta) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& [role, m] : {std::pair<const char*, const Fp8Meta*>{"input", &meta.input},
                                {"weight", &meta.weight},
                                {"grad_output", &meta.grad_output}}) {
    tensors.emplace_back(absl::StrCat(role, ".amax_history"), m->amax_history);
    tensors.emplace_back(absl::StrCat(role, ".scale"), m->scale);
    tensors.emplace_back(absl::StrCat(role, ".scale_inv"), m->scale_inv);
  }
  return tensors;
}

absl::Status CheckFp8Capability(int major, int minor, std::string_view device_name) {
  if (major > 8 || (major == 8 && minor >= 9)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("FP8 needs compute capability 8.9 or newer (Ada, Hopper); this GPU is ",
                   std::string(device_name), " (sm_", major, minor, "): drop --fp8-format"));
}

absl::Status CheckFp8Device(const c10::Device& device) {
  if (device.is_cpu()) return absl::OkStatus();
  if (device.is_cuda()) {
#ifdef VARUNA_WITH_CUDA_KERNELS
    const int index = device.has_index() ? device.index() : at::cuda::current_device();
    const cudaDeviceProp* properties = at::cuda::getDeviceProperties(index);
    return CheckFp8Capability(properties->major, properties->minor, properties->name);
#else
    return absl::FailedPreconditionError(
        "FP8 on CUDA needs a build with --config=cuda; this build has no CUDA: drop --fp8-format "
        "or rebuild");
#endif
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "FP8 runs on the CPU (emulated, for tests) and on CUDA GPUs of compute capability 8.9 or "
      "newer, not on ",
      device.str(), ": drop --fp8-format"));
}

at::Tensor Fp8Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     const Fp8LinearMeta& meta) {
  CheckLinearArguments(x, weight, bias, meta);
  return Fp8LinearFunction::apply(x, weight,
                                  bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt,
                                  meta, at::GradMode::is_enabled());
}

}  // namespace varuna::kernels
