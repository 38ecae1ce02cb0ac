#include "varuna/kernels/bias_dropout_add_layer_norm.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include "varuna/kernels/argument_checks.h"
#include "varuna/kernels/bias_dropout_add.h"
#include "varuna/kernels/layer_norm.h"

#ifdef VARUNA_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>

#include <mutex>

#include "varuna/kernels/cuda/bias_dropout_add.h"
#include "varuna/kernels/cuda/bias_dropout_add_layer_norm.h"
#include "varuna/kernels/cuda_launch.h"
#endif

namespace varuna::kernels {
namespace {

constexpr char kForward[] = "BiasDropoutAddLayerNormForward";
constexpr char kBackward[] = "BiasDropoutAddLayerNormBackward";

void CheckProbability(double p, const char* op) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, op, ": the dropout probability p = ", p,
              " is not in [0, 1); choose 0 <= p < 1 (0 disables dropout)");
}

void CheckLayerNormParameter(const at::Tensor& t, const at::Tensor& x, const char* op,
                             const char* name) {
  CheckDefined(t, op, name);
  TORCH_CHECK(t.dim() == 1 && t.size(0) == x.size(-1), op, ": ", name, " has shape ", t.sizes(),
              " but x has shape ", x.sizes(), "; ", name, " must be [h] = [", x.size(-1), "]");
  TORCH_CHECK(t.scalar_type() == x.scalar_type() || t.scalar_type() == at::kFloat, op, ": ", name,
              " is ", t.scalar_type(), " but x is ", x.scalar_type(), "; ", name,
              " must be x's dtype or float32");
  CheckSameDevice(t, x, op, name, "x");
}

void CheckStatistic(const at::Tensor& s, const at::Tensor& r, const char* name) {
  CheckDefined(s, kBackward, name);
  const int64_t rows = r.numel() / r.size(-1);
  const at::ScalarType dtype = ComputeType(r.scalar_type());
  TORCH_CHECK(s.dim() == 1 && s.size(0) == rows && s.scalar_type() == dtype, kBackward, ": ", name,
              " is ", s.scalar_type(), " ", s.sizes(), " but must be ", dtype, " [", rows,
              "] for residual ", r.sizes(), "; pass the ", name,
              " BiasDropoutAddLayerNormForward returned");
  CheckSameDevice(s, r, kBackward, name, "residual");
}

int64_t Rows(const at::Tensor& x) { return x.numel() / x.size(-1); }

// The CPU path (and the CUDA one where the kernels do not apply): the unfused ops themselves.
BiasDropoutAddLayerNormResult ReferenceForward(const at::Tensor& x, const at::Tensor& bias,
                                               const at::Tensor& residual,
                                               const at::Tensor& ln_weight,
                                               const at::Tensor& ln_bias, double p, bool training,
                                               double epsilon) {
  BiasDropoutAddResult sum = BiasDropoutAddForward(x, bias, residual, p, training);
  LayerNormForwardResult norm = LayerNormForward(sum.output, ln_weight, ln_bias, epsilon);
  return {sum.output, norm.output, sum.mask, norm.mean, norm.rstd};
}

BiasDropoutAddLayerNormGrads ReferenceBackward(const at::Tensor& grad_output,
                                               const at::Tensor& grad_residual,
                                               const at::Tensor& residual, const at::Tensor& mask,
                                               const at::Tensor& mean, const at::Tensor& rstd,
                                               const at::Tensor& ln_weight, double p) {
  LayerNormGrads norm = LayerNormBackward(grad_output, residual, mean, rstd, ln_weight);
  // As autograd adds the two gradients of r (in r's dtype).
  at::Tensor total = grad_residual.defined() ? grad_residual + norm.input : norm.input;
  BiasDropoutAddGrads sum = BiasDropoutAddBackward(total, mask, p);
  return {sum.input, sum.bias, total, norm.weight, norm.bias};
}

#ifdef VARUNA_WITH_CUDA_KERNELS
static_assert(cuda::kBiasDropoutAddLayerNormOffsetIncrement == cuda::kBiasDropoutAddOffsetIncrement,
              "the fused op must advance the generator as BiasDropoutAdd does");

bool TakesFusedKernels(const at::Tensor& x) {
  return TakesCudaKernels(x) && x.size(-1) <= cuda::kBiasDropoutAddLayerNormMaxHidden;
}

// Reserves the Philox numbers of one forward from the default generator of `device`, as
// BiasDropoutAdd does.
void DrawPhilox(const c10::Device& device, uint64_t* seed, uint64_t* offset) {
  auto* generator = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      std::nullopt, at::cuda::detail::getDefaultCUDAGenerator(device.index()));
  at::PhiloxCudaState state;
  {
    std::lock_guard<std::mutex> lock(generator->mutex_);
    state = generator->philox_cuda_state(cuda::kBiasDropoutAddLayerNormOffsetIncrement);
  }
  TORCH_CHECK(!state.captured_, kForward,
              ": dropout under CUDA graph capture is not supported; run without capture");
  *seed = state.seed_.val;
  *offset = state.offset_.val;
}

BiasDropoutAddLayerNormResult CudaForward(const at::Tensor& x, const at::Tensor& bias,
                                          const at::Tensor& residual, const at::Tensor& ln_weight,
                                          const at::Tensor& ln_bias, double p, bool dropout,
                                          double epsilon) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t rows = Rows(x);
  const at::TensorOptions stats = x.options().dtype(at::kFloat);
  BiasDropoutAddLayerNormResult result{at::empty(x.sizes(), x.options()),
                                       at::empty(x.sizes(), x.options()), at::Tensor(),
                                       at::empty({rows}, stats), at::empty({rows}, stats)};
  if (dropout) result.mask = at::empty(x.sizes(), x.options().dtype(at::kBool));
  if (rows == 0) return result;
  cuda::BiasDropoutAddLayerNormForwardArgs args{};
  args.x_type = CudaElementType(x.scalar_type(), kForward);
  args.weight_type = CudaElementType(ln_weight.scalar_type(), kForward);
  args.x = x.data_ptr();
  args.bias = bias.data_ptr();
  args.residual = residual.data_ptr();
  args.ln_weight = ln_weight.data_ptr();
  args.ln_bias = ln_bias.data_ptr();
  args.residual_out = result.residual.data_ptr();
  args.output = result.output.data_ptr();
  args.mask = dropout ? static_cast<uint8_t*>(result.mask.data_ptr()) : nullptr;
  args.mean = result.mean.data_ptr<float>();
  args.rstd = result.rstd.data_ptr<float>();
  args.keep_probability = dropout ? static_cast<float>(1.0 - p) : 1.0f;
  args.rows = rows;
  args.hidden = x.size(-1);
  args.epsilon = static_cast<float>(epsilon);
  if (dropout) DrawPhilox(x.device(), &args.seed, &args.offset);
  CheckCuda(cuda::LaunchBiasDropoutAddLayerNormForward(args, CurrentCudaStream(x)), kForward);
  return result;
}

BiasDropoutAddLayerNormGrads CudaBackward(const at::Tensor& grad_output,
                                          const at::Tensor& grad_residual,
                                          const at::Tensor& residual, const at::Tensor& mask,
                                          const at::Tensor& mean, const at::Tensor& rstd,
                                          const at::Tensor& ln_weight, double p) {
  const c10::cuda::CUDAGuard guard(residual.device());
  const int64_t h = residual.size(-1);
  const int64_t rows = Rows(residual);
  BiasDropoutAddLayerNormGrads grads;
  grads.residual = at::empty(residual.sizes(), residual.options());
  grads.input = mask.defined() ? at::empty(residual.sizes(), residual.options()) : grads.residual;
  grads.bias = at::empty({h}, residual.options());
  grads.ln_weight = at::empty({h}, ln_weight.options());
  grads.ln_bias = at::empty({h}, ln_weight.options());
  if (rows == 0) {
    grads.bias.zero_();
    grads.ln_weight.zero_();
    grads.ln_bias.zero_();
    return grads;
  }
  int partial_rows = 0;
  CheckCuda(cuda::BiasDropoutAddLayerNormBackwardPartialRows(rows, h, &partial_rows), kBackward);
  // Freed on return: the caching allocator hands it out again only to work ordered after ours
  // on this stream.
  const at::Tensor workspace =
      at::empty({3, partial_rows, h}, residual.options().dtype(at::kFloat));
  cuda::BiasDropoutAddLayerNormBackwardArgs args{};
  args.x_type = CudaElementType(residual.scalar_type(), kBackward);
  args.weight_type = CudaElementType(ln_weight.scalar_type(), kBackward);
  args.grad_output = grad_output.data_ptr();
  args.grad_residual = grad_residual.defined() ? grad_residual.data_ptr() : nullptr;
  args.residual_out = residual.data_ptr();
  args.mean = mean.data_ptr<float>();
  args.rstd = rstd.data_ptr<float>();
  args.ln_weight = ln_weight.data_ptr();
  args.mask = mask.defined() ? static_cast<const uint8_t*>(mask.data_ptr()) : nullptr;
  args.grad_residual_in = grads.residual.data_ptr();
  args.grad_input = mask.defined() ? grads.input.data_ptr() : nullptr;
  args.grad_bias = grads.bias.data_ptr();
  args.grad_ln_weight = grads.ln_weight.data_ptr();
  args.grad_ln_bias = grads.ln_bias.data_ptr();
  args.keep_probability = mask.defined() ? static_cast<float>(1.0 - p) : 1.0f;
  args.rows = rows;
  args.hidden = h;
  CheckCuda(cuda::LaunchBiasDropoutAddLayerNormBackward(args, workspace.data_ptr<float>(),
                                                        partial_rows, CurrentCudaStream(residual)),
            kBackward);
  return grads;
}
#endif  // VARUNA_WITH_CUDA_KERNELS

struct BiasDropoutAddLayerNormFunction
    : torch::autograd::Function<BiasDropoutAddLayerNormFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& x, const at::Tensor& bias,
                                                const at::Tensor& residual,
                                                const at::Tensor& ln_weight,
                                                const at::Tensor& ln_bias, double p, bool training,
                                                double epsilon) {
    BiasDropoutAddLayerNormResult result =
        BiasDropoutAddLayerNormForward(x, bias, residual, ln_weight, ln_bias, p, training, epsilon);
    ctx->save_for_backward({result.residual, result.mask, result.mean, result.rstd, ln_weight});
    ctx->saved_data["p"] = p;
    return {result.residual, result.output};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const double p = ctx->saved_data["p"].toDouble();
    // An output nobody used gets an undefined gradient: a zero dr, or a zero dy.
    at::Tensor grad_output = grad_outputs[1];
    if (!grad_output.defined()) grad_output = at::zeros_like(saved[0]);
    BiasDropoutAddLayerNormGrads grads = BiasDropoutAddLayerNormBackward(
        grad_output, grad_outputs[0], saved[0], saved[1], saved[2], saved[3], saved[4], p);
    return {grads.input,   grads.bias,   grads.residual, grads.ln_weight,
            grads.ln_bias, at::Tensor(), at::Tensor(),   at::Tensor()};
  }
};

}  // namespace

BiasDropoutAddLayerNormResult BiasDropoutAddLayerNormForward(const at::Tensor& x,
                                                             const at::Tensor& bias,
                                                             const at::Tensor& residual,
                                                             const at::Tensor& ln_weight,
                                                             const at::Tensor& ln_bias, double p,
                                                             bool training, double epsilon) {
  CheckInputAndBias(x, bias, kForward);
  TORCH_CHECK(x.size(-1) >= 1, kForward, ": x has shape ", x.sizes(),
              "; its last dim (the normalised one) must be at least 1");
  CheckLike(residual, x, kForward, "residual", "x");
  CheckLayerNormParameter(ln_weight, x, kForward, "ln_weight");
  CheckLayerNormParameter(ln_bias, x, kForward, "ln_bias");
  TORCH_CHECK(ln_bias.scalar_type() == ln_weight.scalar_type(), kForward, ": ln_bias is ",
              ln_bias.scalar_type(), " but ln_weight is ", ln_weight.scalar_type(),
              "; they must have the same dtype");
  CheckProbability(p, kForward);
  TORCH_CHECK(epsilon >= 0, kForward, ": epsilon is ", epsilon, "; it must be >= 0 (e.g. 1e-5)");
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (TakesFusedKernels(x)) {
    return CudaForward(x.contiguous(), bias.contiguous(), residual.contiguous(),
                       ln_weight.contiguous(), ln_bias.contiguous(), p, training && p > 0.0,
                       epsilon);
  }
#endif
  return ReferenceForward(x, bias, residual, ln_weight, ln_bias, p, training, epsilon);
}

BiasDropoutAddLayerNormGrads BiasDropoutAddLayerNormBackward(
    const at::Tensor& grad_output, const at::Tensor& grad_residual, const at::Tensor& residual,
    const at::Tensor& mask, const at::Tensor& mean, const at::Tensor& rstd,
    const at::Tensor& ln_weight, double p) {
  CheckDefined(residual, kBackward, "residual");
  TORCH_CHECK(residual.dim() >= 1 && residual.size(-1) >= 1, kBackward, ": residual has shape ",
              residual.sizes(),
              "; it must be the [..., h] BiasDropoutAddLayerNormForward returned");
  CheckFloatingType(residual, kBackward, "residual");
  CheckLike(grad_output, residual, kBackward, "grad_output", "residual");
  if (grad_residual.defined())
    CheckLike(grad_residual, residual, kBackward, "grad_residual", "residual");
  if (mask.defined()) {
    TORCH_CHECK(mask.scalar_type() == at::kBool && mask.sizes() == residual.sizes(), kBackward,
                ": mask is ", mask.scalar_type(), " ", mask.sizes(), "; it must be the bool mask ",
                residual.sizes(), " BiasDropoutAddLayerNormForward returned");
    CheckSameDevice(mask, residual, kBackward, "mask", "residual");
  }
  CheckStatistic(mean, residual, "mean");
  CheckStatistic(rstd, residual, "rstd");
  CheckLayerNormParameter(ln_weight, residual, kBackward, "ln_weight");
  CheckProbability(p, kBackward);
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (TakesFusedKernels(residual)) {
    return CudaBackward(grad_output.contiguous(),
                        grad_residual.defined() ? grad_residual.contiguous() : grad_residual,
                        residual.contiguous(), mask.defined() ? mask.contiguous() : mask,
                        mean.contiguous(), rstd.contiguous(), ln_weight.contiguous(), p);
  }
#endif
  return ReferenceBackward(grad_output, grad_residual, residual, mask, mean, rstd, ln_weight, p);
}

BiasDropoutAddLayerNormOutputs BiasDropoutAddLayerNorm(const at::Tensor& x, const at::Tensor& bias,
                                                       const at::Tensor& residual,
                                                       const at::Tensor& ln_weight,
                                                       const at::Tensor& ln_bias, double p,
                                                       bool training, double epsilon) {
  torch::autograd::variable_list outputs = BiasDropoutAddLayerNormFunction::apply(
      x, bias, residual, ln_weight, ln_bias, p, training, epsilon);
  return {outputs[0], outputs[1]};
}

}  // namespace varuna::kernels
