#include "varuna/kernels/bias_gelu.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include "varuna/kernels/argument_checks.h"

#ifdef VARUNA_WITH_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>

#include "varuna/kernels/cuda/bias_gelu.h"
#include "varuna/kernels/cuda_launch.h"
#endif

namespace varuna::kernels {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;

void CheckInputs(const at::Tensor& x, const at::Tensor& bias, const char* op) {
  CheckInputAndBias(x, bias, op);
}

// The number of rows of n: the product of x's leading dims (well defined when n == 0 too).
int64_t Rows(const at::Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

at::Tensor ReferenceForward(const at::Tensor& x, const at::Tensor& bias) {
  const at::ScalarType compute = ComputeType(x.scalar_type());
  const at::Tensor u = x.to(compute) + bias.to(compute);
  return at::gelu(u, /*approximate=*/"tanh").to(x.scalar_type());
}

BiasGeluGrads ReferenceBackward(const at::Tensor& grad_output, const at::Tensor& x,
                                const at::Tensor& bias) {
  const at::ScalarType compute = ComputeType(x.scalar_type());
  const at::Tensor u = x.to(compute) + bias.to(compute);
  at::Tensor u2 = u.square();
  const at::Tensor t = (u2 * kCubic).add_(1).mul_(u).mul_(kSqrt2OverPi).tanh_();
  // gelu'(u) = 0.5 (1 + t) + 0.5 u (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 u^2), built in u2.
  const at::Tensor derivative = u2.mul_(3 * kCubic)
                                    .add_(1)
                                    .mul_(kSqrt2OverPi)
                                    .mul_(u)
                                    .mul_(t.square().neg_().add_(1))
                                    .add_(t)
                                    .add_(1)
                                    .mul_(0.5);
  const at::Tensor dx = grad_output.to(compute) * derivative;
  const int64_t n = x.size(-1);
  return {dx.to(x.scalar_type()), dx.reshape({Rows(x), n}).sum(/*dim=*/0).to(bias.scalar_type())};
}

#ifdef VARUNA_WITH_CUDA_KERNELS
at::Tensor CudaForward(const at::Tensor& x, const at::Tensor& bias) {
  const char* op = "BiasGeluForward";
  const c10::cuda::CUDAGuard guard(x.device());
  const cuda::ElementType type = CudaElementType(x.scalar_type(), op);
  at::Tensor output = at::empty(x.sizes(), x.options());
  if (output.numel() == 0) return output;
  CheckCuda(cuda::LaunchBiasGeluForward(type, x.data_ptr(), bias.data_ptr(), output.data_ptr(),
                                        Rows(x), x.size(-1), CurrentCudaStream(x)),
            op);
  return output;
}

BiasGeluGrads CudaBackward(const at::Tensor& grad_output, const at::Tensor& x,
                           const at::Tensor& bias) {
  const char* op = "BiasGeluBackward";
  const c10::cuda::CUDAGuard guard(x.device());
  BiasGeluGrads grads{at::empty(x.sizes(), x.options()), at::empty(bias.sizes(), bias.options())};
  if (x.numel() == 0) {
    grads.bias.zero_();
    return grads;
  }
  const cuda::BiasGeluBackwardArgs args{CudaElementType(x.scalar_type(), op),
                                        grad_output.data_ptr(),
                                        x.data_ptr(),
                                        bias.data_ptr(),
                                        grads.input.data_ptr(),
                                        grads.bias.data_ptr(),
                                        Rows(x),
                                        x.size(-1)};
  int partial_rows = 0;
  CheckCuda(cuda::BiasGeluBackwardPartialRows(args, &partial_rows), op);
  // Freed on return: the caching allocator hands it out again only to work ordered after ours
  // on this stream.
  const at::Tensor workspace = at::empty({partial_rows, x.size(-1)}, x.options().dtype(at::kFloat));
  CheckCuda(cuda::LaunchBiasGeluBackward(args, workspace.data_ptr<float>(), partial_rows,
                                         CurrentCudaStream(x)),
            op);
  return grads;
}
#endif  // VARUNA_WITH_CUDA_KERNELS

struct BiasGeluFunction : torch::autograd::Function<BiasGeluFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& bias) {
    ctx->save_for_backward({x, bias});
    return BiasGeluForward(x, bias);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    BiasGeluGrads grads = BiasGeluBackward(grad_outputs[0], saved[0], saved[1]);
    return {grads.input, grads.bias};
  }
};

}  // namespace

at::Tensor BiasGeluForward(const at::Tensor& x, const at::Tensor& bias) {
  CheckInputs(x, bias, "BiasGeluForward");
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (TakesCudaKernels(x)) return CudaForward(x.contiguous(), bias.contiguous());
#endif
  // Contiguous inputs make ATen's elementwise results contiguous too.
  return ReferenceForward(x.contiguous(), bias);
}

BiasGeluGrads BiasGeluBackward(const at::Tensor& grad_output, const at::Tensor& x,
                               const at::Tensor& bias) {
  const char* op = "BiasGeluBackward";
  CheckInputs(x, bias, op);
  CheckLike(grad_output, x, op, "grad_output", "x");
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (TakesCudaKernels(x)) {
    return CudaBackward(grad_output.contiguous(), x.contiguous(), bias.contiguous());
  }
#endif
  return ReferenceBackward(grad_output.contiguous(), x.contiguous(), bias);
}

at::Tensor BiasGelu(const at::Tensor& x, const at::Tensor& bias) {
  return BiasGeluFunction::apply(x, bias);
}

}  // namespace varuna::kernels
