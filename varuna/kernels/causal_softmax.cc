#include "varuna/kernels/causal_softmax.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <limits>

#include "varuna/kernels/argument_checks.h"

#ifdef VARUNA_WITH_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>

#include "varuna/kernels/cuda/causal_softmax.h"
#include "varuna/kernels/cuda_launch.h"
#endif

namespace varuna::kernels {
namespace {

void CheckScoresLike(const at::Tensor& t, const char* op, const char* name) {
  CheckDefined(t, op, name);
  TORCH_CHECK(t.dim() >= 2 && t.size(-1) == t.size(-2), op, ": ", name,
              " must have shape [..., s, s] (the last two dims equal), got ", t.sizes());
  const at::ScalarType dtype = t.scalar_type();
  TORCH_CHECK(
      dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kDouble,
      op, ": ", name, " must be float32, float16, bfloat16 or (on the CPU) float64, got ", dtype);
}

// True above the diagonal of an [s, s] matrix: the columns a row may not see.
at::Tensor FutureMask(int64_t s, const at::Device& device) {
  return at::ones({s, s}, at::TensorOptions().dtype(at::kBool).device(device)).triu(/*diagonal=*/1);
}

at::Tensor ReferenceForward(const at::Tensor& scores, double scale) {
  at::Tensor x = scores.to(ComputeType(scores.scalar_type())).mul(scale);
  x.masked_fill_(FutureMask(scores.size(-1), scores.device()),
                 -std::numeric_limits<double>::infinity());
  return at::softmax(x, /*dim=*/-1).to(scores.scalar_type());
}

at::Tensor ReferenceBackward(const at::Tensor& grad_probs, const at::Tensor& probs, double scale) {
  const at::ScalarType compute = ComputeType(probs.scalar_type());
  // probs is 0 above the diagonal, so there p * (g - dot) = 0; g is zeroed there so that it
  // adds nothing to dot whatever it holds.
  const at::Tensor g =
      grad_probs.to(compute).masked_fill(FutureMask(probs.size(-1), probs.device()), 0.0);
  const at::Tensor p = probs.to(compute);
  const at::Tensor dot = (g * p).sum(/*dim=*/-1, /*keepdim=*/true);
  return (g - dot).mul_(p).mul_(scale).to(probs.scalar_type());
}

#ifdef VARUNA_WITH_CUDA_KERNELS
void CheckCudaRowLength(int64_t s, const char* op) {
  TORCH_CHECK(s <= cuda::kCausalSoftmaxMaxColumns, op, ": rows of ", s,
              " columns are longer than the CUDA kernel takes (", cuda::kCausalSoftmaxMaxColumns,
              "); use the sdpa attention backend (--attention-backend=sdpa) for longer sequences");
}

at::Tensor CudaForward(const at::Tensor& scores, double scale) {
  const char* op = "CausalSoftmaxForward";
  const c10::cuda::CUDAGuard guard(scores.device());
  const cuda::ElementType type = CudaElementType(scores.scalar_type(), op);
  if (scores.numel() == 0) return at::empty(scores.sizes(), scores.options());
  const int64_t s = scores.size(-1);
  CheckCudaRowLength(s, op);
  at::Tensor probs = at::empty(scores.sizes(), scores.options());
  CheckCuda(
      cuda::LaunchCausalSoftmaxForward(scores.data_ptr(), probs.data_ptr(), scores.numel() / s, s,
                                       static_cast<float>(scale), type, CurrentCudaStream(scores)),
      op);
  return probs;
}

at::Tensor CudaBackward(const at::Tensor& grad_probs, const at::Tensor& probs, double scale) {
  const char* op = "CausalSoftmaxBackward";
  const c10::cuda::CUDAGuard guard(probs.device());
  const cuda::ElementType type = CudaElementType(probs.scalar_type(), op);
  if (probs.numel() == 0) return at::empty(probs.sizes(), probs.options());
  const int64_t s = probs.size(-1);
  CheckCudaRowLength(s, op);
  at::Tensor grad_scores = at::empty(probs.sizes(), probs.options());
  CheckCuda(cuda::LaunchCausalSoftmaxBackward(
                grad_probs.data_ptr(), probs.data_ptr(), grad_scores.data_ptr(), probs.numel() / s,
                s, static_cast<float>(scale), type, CurrentCudaStream(probs)),
            op);
  return grad_scores;
}
#endif  // VARUNA_WITH_CUDA_KERNELS

struct CausalSoftmaxFunction : torch::autograd::Function<CausalSoftmaxFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& scores,
                            double scale) {
    at::Tensor probs = CausalSoftmaxForward(scores, scale);
    ctx->save_for_backward({probs});
    ctx->saved_data["scale"] = scale;
    return probs;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const at::Tensor probs = ctx->get_saved_variables()[0];
    const double scale = ctx->saved_data["scale"].toDouble();
    return {CausalSoftmaxBackward(grad_outputs[0], probs, scale), at::Tensor()};
  }
};

}  // namespace

at::Tensor CausalSoftmaxForward(const at::Tensor& scores, double scale) {
  CheckScoresLike(scores, "CausalSoftmaxForward", "scores");
  const at::Tensor input = scores.contiguous();
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (input.is_cuda()) return CudaForward(input, scale);
#endif
  return ReferenceForward(input, scale);
}

at::Tensor CausalSoftmaxBackward(const at::Tensor& grad_probs, const at::Tensor& probs,
                                 double scale) {
  const char* op = "CausalSoftmaxBackward";
  CheckScoresLike(probs, op, "probs");
  CheckScoresLike(grad_probs, op, "grad_probs");
  CheckLike(grad_probs, probs, op, "grad_probs", "probs");
  const at::Tensor grad = grad_probs.contiguous();
  const at::Tensor saved = probs.contiguous();
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (saved.is_cuda()) return CudaBackward(grad, saved, scale);
#endif
  return ReferenceBackward(grad, saved, scale);
}

at::Tensor CausalSoftmax(const at::Tensor& scores, double scale) {
  return CausalSoftmaxFunction::apply(scores, scale);
}

}  // namespace varuna::kernels
