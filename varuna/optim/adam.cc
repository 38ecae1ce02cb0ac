#include "varuna/optim/adam.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varuna/kernels/fused_adam.h"

namespace varuna {

Adam::Adam(std::vector<NamedParameter> parameters, const AdamOptions& options)
    : parameters_(std::move(parameters)), options_(options) {
  at::NoGradGuard no_grad;
  for (const NamedParameter& p : parameters_) {
    const bool is_fp32 = p.tensor.scalar_type() == at::kFloat;
    masters_.push_back(is_fp32 ? p.tensor : p.tensor.detach().to(at::kFloat));
    master_grads_.push_back(at::zeros_like(masters_.back()));
    exp_avg_.push_back(at::zeros_like(masters_.back()));
    exp_avg_sq_.push_back(at::zeros_like(masters_.back()));
    model_copies_.push_back(is_fp32 ? at::Tensor() : p.tensor);
    decay_.push_back(p.decay);
  }
}

namespace {

kernels::AdamHyperparameters HyperparametersOf(const AdamOptions& options, int64_t step) {
  kernels::AdamHyperparameters hp;
  hp.lr = options.lr;
  hp.beta1 = options.beta1;
  hp.beta2 = options.beta2;
  hp.eps = options.eps;
  hp.weight_decay = options.weight_decay;
  hp.step = step;
  return hp;
}

}  // namespace

void Adam::Step(double grad_scale) {
  ++step_count_;
  kernels::AdamHyperparameters hp = HyperparametersOf(options_, step_count_);
  hp.grad_scale = grad_scale;
  kernels::FusedAdamStep(masters_, master_grads_, exp_avg_, exp_avg_sq_, model_copies_, decay_, hp);
}

void Adam::StepOnDevice(const at::Tensor& grad_scale, const at::Tensor& skip) {
  kernels::FusedAdamStep(masters_, master_grads_, exp_avg_, exp_avg_sq_, model_copies_, decay_,
                         HyperparametersOf(options_, step_count_ + 1), skip, grad_scale);
}

std::vector<at::Tensor>& Adam::MasterGrads() {
  for (size_t i = 0; i < master_grads_.size(); ++i) {
    if (!master_grads_[i].defined()) master_grads_[i] = at::empty_like(masters_[i]);
  }
  return master_grads_;
}

void Adam::ReleaseMasterGrads() {
  for (at::Tensor& grad : master_grads_) grad = at::Tensor();
}

std::vector<std::pair<std::string, at::Tensor>> Adam::StateOf(size_t i) const {
  const std::string& name = parameters_[i].name;
  return {{name, masters_[i]},
          {name + ".exp_avg", exp_avg_[i]},
          {name + ".exp_avg_sq", exp_avg_sq_[i]}};
}

absl::Status Adam::LoadTensors(size_t i, const at::Tensor& master, const at::Tensor& exp_avg,
                               const at::Tensor& exp_avg_sq) {
  const std::string& name = parameters_[i].name;
  const std::pair<const char*, const at::Tensor*> parts[] = {
      {"", &master}, {".exp_avg", &exp_avg}, {".exp_avg_sq", &exp_avg_sq}};
  for (const auto& [suffix, tensor] : parts) {
    if (!tensor->defined()) {
      return absl::NotFoundError(absl::StrCat("tensor ", name, suffix, " is missing"));
    }
    if (tensor->sizes() != masters_[i].sizes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", name, suffix, " has shape ", "[", absl::StrJoin(tensor->sizes(), ", "), "]",
          ", the model expects ", "[", absl::StrJoin(masters_[i].sizes(), ", "), "]"));
    }
  }
  at::NoGradGuard no_grad;
  masters_[i].copy_(master);
  exp_avg_[i].copy_(exp_avg);
  exp_avg_sq_[i].copy_(exp_avg_sq);
  if (!masters_[i].is_same(parameters_[i].tensor)) parameters_[i].tensor.copy_(masters_[i]);
  return absl::OkStatus();
}

}  // namespace varuna
