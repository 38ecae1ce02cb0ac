#include "varuna/kernels/fused_adam.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <utility>
#include <vector>

#ifdef VARUNA_WITH_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>

#include "varuna/kernels/chunk_table.h"
#include "varuna/kernels/cuda/fused_adam.h"
#include "varuna/kernels/cuda_launch.h"
#endif

namespace varuna::kernels {
namespace {

constexpr const char* kOp = "FusedAdamStep";

// The step's constants, in double, exactly as varuna::Adam::Step computes them.
struct StepConstants {
  double step_size;     // lr / (1 - beta1^t)
  double rsqrt_bias2;   // 1 / sqrt(1 - beta2^t)
  double decay_factor;  // 1 - lr * weight_decay
};

StepConstants ConstantsOf(const AdamHyperparameters& hp) {
  const double t = static_cast<double>(hp.step);
  const double bias1 = 1.0 - std::pow(hp.beta1, t);
  const double bias2 = 1.0 - std::pow(hp.beta2, t);
  return {hp.lr / bias1, 1.0 / std::sqrt(bias2), 1.0 - hp.lr * hp.weight_decay};
}

// The model copy of tensor i, or an undefined tensor when there is none to write.
at::Tensor CopyOf(const std::vector<at::Tensor>& masters,
                  const std::vector<at::Tensor>& model_copies, size_t i) {
  if (model_copies.empty() || !model_copies[i].defined()) return {};
  if (model_copies[i].is_same(masters[i])) return {};
  return model_copies[i];
}

void CheckOperand(const at::Tensor& tensor, const char* list, size_t i, const at::Tensor& master,
                  bool any_float) {
  TORCH_CHECK(tensor.defined(), kOp, ": ", list, "[", i, "] is undefined");
  TORCH_CHECK(tensor.device() == master.device(), kOp, ": ", list, "[", i, "] is on ",
              tensor.device(), " but masters[0] is on ", master.device(),
              "; put all tensors on one device");
  if (any_float) {
    const at::ScalarType dtype = tensor.scalar_type();
    TORCH_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16, kOp, ": ",
                list, "[", i, "] is ", dtype, "; model copies are float32, float16 or bfloat16");
  } else {
    TORCH_CHECK(tensor.scalar_type() == at::kFloat, kOp, ": ", list, "[", i, "] is ",
                tensor.scalar_type(), "; it must be float32");
  }
  TORCH_CHECK(tensor.is_contiguous(), kOp, ": ", list, "[", i,
              "] is not contiguous; pass tensor.contiguous()");
}

void CheckArguments(const std::vector<at::Tensor>& masters, const std::vector<at::Tensor>& grads,
                    const std::vector<at::Tensor>& exp_avg,
                    const std::vector<at::Tensor>& exp_avg_sq,
                    const std::vector<at::Tensor>& model_copies, const std::vector<bool>& decay,
                    const AdamHyperparameters& hp, const at::Tensor& skip,
                    const at::Tensor& grad_scale) {
  const size_t n = masters.size();
  const std::pair<const char*, size_t> lists[] = {{"grads", grads.size()},
                                                  {"exp_avg", exp_avg.size()},
                                                  {"exp_avg_sq", exp_avg_sq.size()},
                                                  {"decay", decay.size()}};
  for (const auto& [name, size] : lists) {
    TORCH_CHECK(size == n, kOp, ": ", n, " masters but ", size, " ", name,
                "; pass one entry per master");
  }
  TORCH_CHECK(model_copies.empty() || model_copies.size() == n, kOp, ": ", n, " masters but ",
              model_copies.size(),
              " model_copies; pass none or one entry (maybe undefined) per "
              "master");
  TORCH_CHECK(hp.step >= 1, kOp, ": step ", hp.step, " is not a step number; the first is 1");
  TORCH_CHECK(hp.beta1 >= 0 && hp.beta1 < 1, kOp, ": beta1 ", hp.beta1, " is outside [0, 1)");
  TORCH_CHECK(hp.beta2 >= 0 && hp.beta2 < 1, kOp, ": beta2 ", hp.beta2, " is outside [0, 1)");
  if (n == 0) return;
  TORCH_CHECK(masters[0].defined(), kOp, ": masters[0] is undefined");
  const at::Tensor& first = masters[0];
  // Tensor i's operands by name; one buffer for all i (this runs every optimizer step).
  std::vector<std::pair<const char*, const at::Tensor*>> operands;
  for (size_t i = 0; i < n; ++i) {
    operands.assign({{"masters", &masters[i]},
                     {"grads", &grads[i]},
                     {"exp_avg", &exp_avg[i]},
                     {"exp_avg_sq", &exp_avg_sq[i]}});
    for (const auto& [name, tensor] : operands) CheckOperand(*tensor, name, i, first, false);
    const at::Tensor copy = CopyOf(masters, model_copies, i);
    if (copy.defined()) {
      CheckOperand(copy, "model_copies", i, first, true);
      operands.emplace_back("model_copies", &model_copies[i]);
    }
    for (size_t a = 1; a < operands.size(); ++a) {
      const at::Tensor& tensor = *operands[a].second;
      TORCH_CHECK(tensor.numel() == masters[i].numel(), kOp, ": ", operands[a].first, "[", i,
                  "] has ", tensor.numel(), " elements but masters[", i, "] has ",
                  masters[i].numel());
      if (tensor.numel() == 0) continue;
      for (size_t b = 0; b < a; ++b) {
        TORCH_CHECK(tensor.data_ptr() != operands[b].second->data_ptr(), kOp, ": ",
                    operands[a].first, "[", i, "] shares memory with ", operands[b].first, "[", i,
                    "]; every operand needs its own tensor");
      }
    }
  }
  for (const auto& [name, flag] :
       {std::pair{"skip", &skip}, std::pair{"grad_scale", &grad_scale}}) {
    if (!flag->defined()) continue;
    TORCH_CHECK(flag->scalar_type() == at::kFloat && flag->numel() == 1, kOp, ": ", name,
                " must be a float32 tensor of one element, not ", flag->scalar_type(), " ",
                flag->sizes());
    TORCH_CHECK(flag->device() == first.device(), kOp, ": ", name, " is on ", flag->device(),
                " but masters[0] is on ", first.device(), "; put all tensors on one device");
  }
}

// The value of a one-element float32 tensor: read from host memory for a CPU tensor (no
// device read, no op dispatched), else through item().
float ScalarOf(const at::Tensor& tensor) {
  return tensor.is_cpu() ? *tensor.data_ptr<float>() : tensor.item<float>();
}

// The LibTorch reference: varuna::Adam::Step's op sequence, per tensor.
void FusedAdamStepReference(const std::vector<at::Tensor>& masters,
                            const std::vector<at::Tensor>& grads,
                            const std::vector<at::Tensor>& exp_avg,
                            const std::vector<at::Tensor>& exp_avg_sq,
                            const std::vector<at::Tensor>& model_copies,
                            const std::vector<bool>& decay, const AdamHyperparameters& hp,
                            const at::Tensor& skip, const at::Tensor& grad_scale) {
  if (skip.defined() && ScalarOf(skip) != 0.0f) return;
  // A tensor's scale is already a float; hp.grad_scale becomes one in mul's scalar conversion.
  const double scale = grad_scale.defined() ? ScalarOf(grad_scale) : hp.grad_scale;
  const StepConstants c = ConstantsOf(hp);
  for (size_t i = 0; i < masters.size(); ++i) {
    if (masters[i].numel() == 0) continue;
    const at::Tensor& m = exp_avg[i];
    const at::Tensor& v = exp_avg_sq[i];
    const at::Tensor& w = masters[i];
    const at::Tensor g = scale == 1.0 ? grads[i] : grads[i].mul(scale);
    m.mul_(hp.beta1).add_(g, 1.0 - hp.beta1);
    v.mul_(hp.beta2).addcmul_(g, g, 1.0 - hp.beta2);
    const at::Tensor denom = v.sqrt().mul_(c.rsqrt_bias2).add_(hp.eps);
    if (decay[i] && hp.weight_decay != 0) w.mul_(c.decay_factor);
    w.addcdiv_(m, denom, -c.step_size);
    const at::Tensor copy = CopyOf(masters, model_copies, i);
    if (copy.defined()) copy.view({-1}).copy_(w.view({-1}));
  }
}

#ifdef VARUNA_WITH_CUDA_KERNELS
void FusedAdamStepCuda(const std::vector<at::Tensor>& masters, const std::vector<at::Tensor>& grads,
                       const std::vector<at::Tensor>& exp_avg,
                       const std::vector<at::Tensor>& exp_avg_sq,
                       const std::vector<at::Tensor>& model_copies, const std::vector<bool>& decay,
                       const AdamHyperparameters& hp, const at::Tensor& skip,
                       const at::Tensor& grad_scale) {
  const c10::Device device = masters[0].device();
  const c10::cuda::CUDAGuard guard(device);
  std::vector<std::vector<at::Tensor>> operands;
  std::vector<int64_t> options;
  operands.reserve(masters.size());
  options.reserve(masters.size());
  for (size_t i = 0; i < masters.size(); ++i) {
    operands.push_back(
        {masters[i], grads[i], exp_avg[i], exp_avg_sq[i], CopyOf(masters, model_copies, i)});
    options.push_back(decay[i] && hp.weight_decay != 0 ? 1 : 0);
  }
  const ChunkTable table(operands, options, cuda::kFusedAdamChunkSize, kOp, /*pinned=*/true);
  if (table.num_chunks() == 0) return;
  const StepConstants c = ConstantsOf(hp);
  cuda::AdamKernelArgs args;
  args.beta1 = static_cast<float>(hp.beta1);
  args.one_minus_beta1 = static_cast<float>(1.0 - hp.beta1);
  args.beta2 = static_cast<float>(hp.beta2);
  args.one_minus_beta2 = static_cast<float>(1.0 - hp.beta2);
  args.rsqrt_bias_correction2 = static_cast<float>(c.rsqrt_bias2);
  args.eps = static_cast<float>(hp.eps);
  args.decay_factor = static_cast<float>(c.decay_factor);
  args.neg_step_size = static_cast<float>(-c.step_size);
  args.grad_scale = static_cast<float>(hp.grad_scale);
  const at::Tensor on_device =
      table.host().to(at::TensorOptions().device(device), /*non_blocking=*/true);
  CheckCuda(cuda::LaunchFusedAdam(table.ViewOf(on_device), args,
                                  skip.defined() ? skip.data_ptr<float>() : nullptr,
                                  grad_scale.defined() ? grad_scale.data_ptr<float>() : nullptr,
                                  CurrentCudaStream(masters[0])),
            kOp);
}
#endif

}  // namespace

void FusedAdamStep(const std::vector<at::Tensor>& masters, const std::vector<at::Tensor>& grads,
                   const std::vector<at::Tensor>& exp_avg,
                   const std::vector<at::Tensor>& exp_avg_sq,
                   const std::vector<at::Tensor>& model_copies, const std::vector<bool>& decay,
                   const AdamHyperparameters& hp, const at::Tensor& skip,
                   const at::Tensor& grad_scale) {
  CheckArguments(masters, grads, exp_avg, exp_avg_sq, model_copies, decay, hp, skip, grad_scale);
  if (masters.empty()) return;
  const at::NoGradGuard no_grad;
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (masters[0].is_cuda()) {
    FusedAdamStepCuda(masters, grads, exp_avg, exp_avg_sq, model_copies, decay, hp, skip,
                      grad_scale);
    return;
  }
#endif
  FusedAdamStepReference(masters, grads, exp_avg, exp_avg_sq, model_copies, decay, hp, skip,
                         grad_scale);
}

}  // namespace varuna::kernels
