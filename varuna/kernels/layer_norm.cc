#include "varuna/kernels/layer_norm.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <climits>

#include "varuna/kernels/argument_checks.h"

#ifdef VARUNA_WITH_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>

#include "varuna/kernels/cuda/layer_norm.h"
#include "varuna/kernels/cuda_launch.h"
#endif

namespace varuna::kernels {
namespace {

// x's shape, dtype and device; returns h.
int64_t CheckInput(const at::Tensor& x, const char* op) {
  CheckDefined(x, op, "x");
  TORCH_CHECK(x.dim() >= 1, op, ": x must have shape [..., h], got a 0-dim tensor");
  TORCH_CHECK(x.size(-1) >= 1, op, ": x has shape ", x.sizes(),
              "; its last dim (the normalised one) must be at least 1");
  CheckFloatingType(x, op, "x");
  return x.size(-1);
}

void CheckParameter(const at::Tensor& p, const at::Tensor& x, const char* op, const char* name) {
  CheckDefined(p, op, name);
  TORCH_CHECK(p.dim() == 1 && p.size(0) == x.size(-1), op, ": ", name, " has shape ", p.sizes(),
              " but x has shape ", x.sizes(), "; ", name, " must be [h] = [", x.size(-1), "]");
  TORCH_CHECK(p.scalar_type() == x.scalar_type() || p.scalar_type() == at::kFloat, op, ": ", name,
              " is ", p.scalar_type(), " but x is ", x.scalar_type(), "; ", name,
              " must be x's dtype or float32");
  CheckSameDevice(p, x, op, name, "x");
}

void CheckStatistic(const at::Tensor& s, const at::Tensor& x, const char* op, const char* name) {
  CheckDefined(s, op, name);
  const int64_t rows = x.numel() / x.size(-1);
  const at::ScalarType dtype = ComputeType(x.scalar_type());  // also mean's and rstd's
  TORCH_CHECK(s.dim() == 1 && s.size(0) == rows, op, ": ", name, " has shape ", s.sizes(),
              " but x has ", rows, " rows; pass the ", name, " LayerNormForward returned for x");
  TORCH_CHECK(s.scalar_type() == dtype, op, ": ", name, " is ", s.scalar_type(), " but must be ",
              dtype, " for x of ", x.scalar_type(), "; pass the ", name,
              " LayerNormForward returned for x");
  CheckSameDevice(s, x, op, name, "x");
}

LayerNormForwardResult ReferenceForward(const at::Tensor& x, const at::Tensor& weight,
                                        const at::Tensor& bias, double epsilon) {
  const at::ScalarType compute = ComputeType(x.scalar_type());
  const int64_t h = x.size(-1);
  const at::Tensor xc = x.reshape({-1, h}).to(compute);
  const at::Tensor mean = xc.mean(/*dim=*/1, /*keepdim=*/true);
  at::Tensor centered = xc - mean;
  const at::Tensor var = centered.square().mean(/*dim=*/1, /*keepdim=*/true);
  const at::Tensor rstd = (var + epsilon).rsqrt_();
  at::Tensor y = centered.mul_(rstd).mul_(weight.to(compute)).add_(bias.to(compute));
  return {y.to(x.scalar_type()).reshape(x.sizes()), mean.reshape({-1}), rstd.reshape({-1})};
}

LayerNormGrads ReferenceBackward(const at::Tensor& grad_output, const at::Tensor& x,
                                 const at::Tensor& mean, const at::Tensor& rstd,
                                 const at::Tensor& weight) {
  const at::ScalarType compute = ComputeType(x.scalar_type());
  const int64_t h = x.size(-1);
  const at::Tensor dy = grad_output.reshape({-1, h}).to(compute);
  const at::Tensor r = rstd.reshape({-1, 1});
  const at::Tensor xhat = (x.reshape({-1, h}).to(compute) - mean.reshape({-1, 1})).mul_(r);
  LayerNormGrads grads;
  grads.weight = (dy * xhat).sum(/*dim=*/0).to(weight.scalar_type());
  grads.bias = dy.sum(/*dim=*/0).to(weight.scalar_type());
  const at::Tensor g = dy * weight.to(compute);
  const at::Tensor mean_g = g.mean(/*dim=*/1, /*keepdim=*/true);
  const at::Tensor mean_g_xhat = (g * xhat).mean(/*dim=*/1, /*keepdim=*/true);
  grads.input = (g - mean_g - xhat * mean_g_xhat).mul_(r).to(x.scalar_type()).reshape(x.sizes());
  return grads;
}

#ifdef VARUNA_WITH_CUDA_KERNELS
void CheckKernelHidden(int64_t h, const char* op) {
  TORCH_CHECK(h <= INT_MAX, op, ": rows of ", h,
              " elements are longer than the CUDA kernels take (", INT_MAX, ")");
}

LayerNormForwardResult CudaForward(const at::Tensor& x, const at::Tensor& weight,
                                   const at::Tensor& bias, double epsilon) {
  const char* op = "LayerNormForward";
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t h = x.size(-1);
  CheckKernelHidden(h, op);
  const int64_t rows = x.numel() / h;
  const at::TensorOptions stats = x.options().dtype(at::kFloat);
  LayerNormForwardResult result{at::empty(x.sizes(), x.options()), at::empty({rows}, stats),
                                at::empty({rows}, stats)};
  if (rows == 0) return result;
  const cuda::LayerNormForwardArgs args{CudaElementType(x.scalar_type(), op),
                                        CudaElementType(weight.scalar_type(), op),
                                        x.data_ptr(),
                                        weight.data_ptr(),
                                        bias.data_ptr(),
                                        result.output.data_ptr(),
                                        result.mean.data_ptr<float>(),
                                        result.rstd.data_ptr<float>(),
                                        rows,
                                        h,
                                        static_cast<float>(epsilon)};
  CheckCuda(cuda::LaunchLayerNormForward(args, CurrentCudaStream(x)), op);
  return result;
}

LayerNormGrads CudaBackward(const at::Tensor& grad_output, const at::Tensor& x,
                            const at::Tensor& mean, const at::Tensor& rstd,
                            const at::Tensor& weight) {
  const char* op = "LayerNormBackward";
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t h = x.size(-1);
  CheckKernelHidden(h, op);
  const int64_t rows = x.numel() / h;
  LayerNormGrads grads{at::empty(x.sizes(), x.options()), at::empty({h}, weight.options()),
                       at::empty({h}, weight.options())};
  if (rows == 0) {
    grads.weight.zero_();
    grads.bias.zero_();
    return grads;
  }
  int partial_rows = 0;
  CheckCuda(cuda::LayerNormBackwardPartialRows(rows, h, &partial_rows), op);
  // Freed on return: the caching allocator hands it out again only to work ordered after ours
  // on this stream.
  const at::Tensor workspace = at::empty({2, partial_rows, h}, x.options().dtype(at::kFloat));
  const cuda::LayerNormBackwardArgs args{CudaElementType(x.scalar_type(), op),
                                         CudaElementType(weight.scalar_type(), op),
                                         grad_output.data_ptr(),
                                         x.data_ptr(),
                                         mean.data_ptr<float>(),
                                         rstd.data_ptr<float>(),
                                         weight.data_ptr(),
                                         grads.input.data_ptr(),
                                         grads.weight.data_ptr(),
                                         grads.bias.data_ptr(),
                                         rows,
                                         h};
  CheckCuda(cuda::LaunchLayerNormBackward(args, workspace.data_ptr<float>(), partial_rows,
                                          CurrentCudaStream(x)),
            op);
  return grads;
}
#endif  // VARUNA_WITH_CUDA_KERNELS

struct LayerNormFunction : torch::autograd::Function<LayerNormFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight, const at::Tensor& bias, double epsilon) {
    LayerNormForwardResult result = LayerNormForward(x, weight, bias, epsilon);
    ctx->save_for_backward({x, weight, result.mean, result.rstd});
    return result.output;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    LayerNormGrads grads =
        LayerNormBackward(grad_outputs[0], saved[0], saved[2], saved[3], saved[1]);
    return {grads.input, grads.weight, grads.bias, at::Tensor()};
  }
};

}  // namespace

LayerNormForwardResult LayerNormForward(const at::Tensor& x, const at::Tensor& weight,
                                        const at::Tensor& bias, double epsilon) {
  const char* op = "LayerNormForward";
  CheckInput(x, op);
  CheckParameter(weight, x, op, "weight");
  CheckParameter(bias, x, op, "bias");
  TORCH_CHECK(bias.scalar_type() == weight.scalar_type(), op, ": bias is ", bias.scalar_type(),
              " but weight is ", weight.scalar_type(), "; they must have the same dtype");
  TORCH_CHECK(epsilon >= 0, op, ": epsilon is ", epsilon, "; it must be >= 0 (e.g. 1e-5)");
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (TakesCudaKernels(x)) {
    return CudaForward(x.contiguous(), weight.contiguous(), bias.contiguous(), epsilon);
  }
#endif
  // Contiguous inputs make ATen's elementwise results contiguous too.
  return ReferenceForward(x.contiguous(), weight, bias, epsilon);
}

LayerNormGrads LayerNormBackward(const at::Tensor& grad_output, const at::Tensor& x,
                                 const at::Tensor& mean, const at::Tensor& rstd,
                                 const at::Tensor& weight) {
  const char* op = "LayerNormBackward";
  CheckInput(x, op);
  CheckLike(grad_output, x, op, "grad_output", "x");
  CheckStatistic(mean, x, op, "mean");
  CheckStatistic(rstd, x, op, "rstd");
  CheckParameter(weight, x, op, "weight");
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (TakesCudaKernels(x)) {
    return CudaBackward(grad_output.contiguous(), x.contiguous(), mean.contiguous(),
                        rstd.contiguous(), weight.contiguous());
  }
#endif
  return ReferenceBackward(grad_output.contiguous(), x.contiguous(), mean, rstd, weight);
}

at::Tensor LayerNorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     double epsilon) {
  return LayerNormFunction::apply(x, weight, bias, epsilon);
}

}  // namespace varuna::kernels
