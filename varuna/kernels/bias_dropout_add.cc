#include "varuna/kernels/bias_dropout_add.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include "varuna/kernels/argument_checks.h"

#ifdef VARUNA_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>

#include <mutex>

#include "varuna/kernels/cuda/bias_dropout_add.h"
#include "varuna/kernels/cuda_launch.h"
#endif

namespace varuna::kernels {
namespace {

void CheckProbability(double p, const char* op) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, op, ": the dropout probability p = ", p,
              " is not in [0, 1); choose 0 <= p < 1 (0 disables dropout)");
}

void CheckInputs(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& residual, double p,
                 const char* op) {
  CheckInputAndBias(x, bias, op);
  CheckLike(residual, x, op, "residual", "x");
  CheckProbability(p, op);
}

// The number of rows of n: the product of x's leading dims (well defined when n == 0 too).
int64_t Rows(const at::Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

// The CPU path (and float64 on CUDA): the draws and the arithmetic of
// residual + at::dropout(x + bias, p) on the CPU, in ComputeType.
BiasDropoutAddResult ReferenceForward(const at::Tensor& x, const at::Tensor& bias,
                                      const at::Tensor& residual, double p, bool dropout) {
  const at::ScalarType compute = ComputeType(x.scalar_type());
  const at::Tensor u = x.to(compute) + bias.to(compute);
  if (!dropout) return {(u + residual.to(compute)).to(x.scalar_type()), at::Tensor()};
  // As at::dropout's CPU path: bernoulli_ on a tensor of the input's dtype, then divided by keep.
  at::Tensor noise = at::empty_like(x, at::MemoryFormat::Contiguous).bernoulli_(1.0 - p);
  at::Tensor mask = noise.to(at::kBool);
  noise.div_(1.0 - p);
  at::Tensor output = u.mul_(noise.to(compute)).add_(residual.to(compute)).to(x.scalar_type());
  return {output, mask};
}

BiasDropoutAddGrads ReferenceBackward(const at::Tensor& grad_output, const at::Tensor& mask,
                                      double p) {
  const at::ScalarType dtype = grad_output.scalar_type();
  const at::ScalarType compute = ComputeType(dtype);
  const int64_t n = grad_output.size(-1);
  if (!mask.defined()) {
    return {grad_output,
            grad_output.to(compute).reshape({Rows(grad_output), n}).sum(/*dim=*/0).to(dtype)};
  }
  const at::Tensor dx = grad_output.to(compute) * mask.to(compute).div_(1.0 - p);
  return {dx.to(dtype), dx.reshape({Rows(grad_output), n}).sum(/*dim=*/0).to(dtype)};
}

#ifdef VARUNA_WITH_CUDA_KERNELS
// Reserves the Philox numbers of one forward from the default generator of `device`.
void DrawPhilox(const c10::Device& device, uint64_t* seed, uint64_t* offset, const char* op) {
  auto* generator = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      std::nullopt, at::cuda::detail::getDefaultCUDAGenerator(device.index()));
  at::PhiloxCudaState state;
  {
    std::lock_guard<std::mutex> lock(generator->mutex_);
    state = generator->philox_cuda_state(cuda::kBiasDropoutAddOffsetIncrement);
  }
  TORCH_CHECK(!state.captured_, op,
              ": dropout under CUDA graph capture is not supported; run without capture");
  *seed = state.seed_.val;
  *offset = state.offset_.val;
}

BiasDropoutAddResult CudaForward(const at::Tensor& x, const at::Tensor& bias,
                                 const at::Tensor& residual, double p, bool dropout) {
  const char* op = "BiasDropoutAddForward";
  const c10::cuda::CUDAGuard guard(x.device());
  BiasDropoutAddResult result{at::empty(x.sizes(), x.options()), at::Tensor()};
  if (dropout) result.mask = at::empty(x.sizes(), x.options().dtype(at::kBool));
  if (x.numel() == 0) return result;
  cuda::BiasDropoutAddForwardArgs args{};
  args.type = CudaElementType(x.scalar_type(), op);
  args.x = x.data_ptr();
  args.bias = bias.data_ptr();
  args.residual = residual.data_ptr();
  args.output = result.output.data_ptr();
  args.mask = dropout ? static_cast<uint8_t*>(result.mask.data_ptr()) : nullptr;
  args.keep_probability = static_cast<float>(1.0 - p);
  args.rows = Rows(x);
  args.columns = x.size(-1);
  if (dropout) DrawPhilox(x.device(), &args.seed, &args.offset, op);
  CheckCuda(cuda::LaunchBiasDropoutAddForward(args, CurrentCudaStream(x)), op);
  return result;
}

BiasDropoutAddGrads CudaBackward(const at::Tensor& grad_output, const at::Tensor& mask, double p) {
  const char* op = "BiasDropoutAddBackward";
  const c10::cuda::CUDAGuard guard(grad_output.device());
  const int64_t n = grad_output.size(-1);
  BiasDropoutAddGrads grads{
      mask.defined() ? at::empty(grad_output.sizes(), grad_output.options()) : grad_output,
      at::empty({n}, grad_output.options())};
  if (grad_output.numel() == 0) {
    grads.bias.zero_();
    return grads;
  }
  cuda::BiasDropoutAddBackwardArgs args{};
  args.type = CudaElementType(grad_output.scalar_type(), op);
  args.grad_output = grad_output.data_ptr();
  args.mask = mask.defined() ? static_cast<const uint8_t*>(mask.data_ptr()) : nullptr;
  args.grad_input = mask.defined() ? grads.input.data_ptr() : nullptr;
  args.grad_bias = grads.bias.data_ptr();
  args.keep_probability = mask.defined() ? static_cast<float>(1.0 - p) : 1.0f;
  args.rows = Rows(grad_output);
  args.columns = n;
  int partial_rows = 0;
  CheckCuda(cuda::BiasDropoutAddBackwardPartialRows(args, &partial_rows), op);
  // Freed on return: the caching allocator hands it out again only to work ordered after ours
  // on this stream.
  const at::Tensor workspace =
      at::empty({partial_rows, n}, grad_output.options().dtype(at::kFloat));
  CheckCuda(cuda::LaunchBiasDropoutAddBackward(args, workspace.data_ptr<float>(), partial_rows,
                                               CurrentCudaStream(grad_output)),
            op);
  return grads;
}
#endif  // VARUNA_WITH_CUDA_KERNELS

struct BiasDropoutAddFunction : torch::autograd::Function<BiasDropoutAddFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& bias, const at::Tensor& residual, double p,
                            bool training) {
    BiasDropoutAddResult result = BiasDropoutAddForward(x, bias, residual, p, training);
    ctx->save_for_backward({result.mask});
    ctx->saved_data["p"] = p;
    return result.output;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const double p = ctx->saved_data["p"].toDouble();
    BiasDropoutAddGrads grads = BiasDropoutAddBackward(grad_outputs[0], saved[0], p);
    return {grads.input, grads.bias, grad_outputs[0], at::Tensor(), at::Tensor()};
  }
};

}  // namespace

BiasDropoutAddResult BiasDropoutAddForward(const at::Tensor& x, const at::Tensor& bias,
                                           const at::Tensor& residual, double p, bool training) {
  CheckInputs(x, bias, residual, p, "BiasDropoutAddForward");
  const bool dropout = training && p > 0.0;
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (TakesCudaKernels(x)) {
    return CudaForward(x.contiguous(), bias.contiguous(), residual.contiguous(), p, dropout);
  }
#endif
  // Contiguous inputs make ATen's elementwise results contiguous too.
  return ReferenceForward(x.contiguous(), bias, residual.contiguous(), p, dropout);
}

BiasDropoutAddGrads BiasDropoutAddBackward(const at::Tensor& grad_output, const at::Tensor& mask,
                                           double p) {
  const char* op = "BiasDropoutAddBackward";
  CheckDefined(grad_output, op, "grad_output");
  TORCH_CHECK(grad_output.dim() >= 1, op,
              ": grad_output must have shape [..., n], got a 0-dim tensor");
  CheckFloatingType(grad_output, op, "grad_output");
  CheckProbability(p, op);
  if (mask.defined()) {
    TORCH_CHECK(mask.scalar_type() == at::kBool, op, ": mask is ", mask.scalar_type(),
                "; it must be the bool mask BiasDropoutAddForward returned");
    TORCH_CHECK(mask.sizes() == grad_output.sizes(), op, ": mask has shape ", mask.sizes(),
                " but grad_output has shape ", grad_output.sizes(), "; they must match");
    CheckSameDevice(mask, grad_output, op, "mask", "grad_output");
  }
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (TakesCudaKernels(grad_output)) {
    return CudaBackward(grad_output.contiguous(), mask.defined() ? mask.contiguous() : mask, p);
  }
#endif
  return ReferenceBackward(grad_output.contiguous(), mask.defined() ? mask.contiguous() : mask, p);
}

at::Tensor BiasDropoutAdd(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& residual,
                          double p, bool training) {
  return BiasDropoutAddFunction::apply(x, bias, residual, p, training);
}

}  // namespace varuna::kernels
