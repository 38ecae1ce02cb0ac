#include "varuna/adam.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
  }
}

void Adam::Step() {
  at::NoGradGuard no_grad;
  ++step_count_;
  const double t = static_cast<double>(step_count_);
  const double bias1 = 1.0 - std::pow(options_.beta1, t);
  const double bias2 = 1.0 - std::pow(options_.beta2, t);
  const double step_size = options_.lr / bias1;
  const double rsqrt_bias2 = 1.0 / std::sqrt(bias2);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor& m = exp_avg_[i];
    at::Tensor& v = exp_avg_sq_[i];
    const at::Tensor& g = master_grads_[i];
    at::Tensor& w = masters_[i];
    m.mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
    v.mul_(options_.beta2).addcmul_(g, g, 1.0 - options_.beta2);
    at::Tensor denom = v.sqrt().mul_(rsqrt_bias2).add_(options_.eps);
    if (parameters_[i].decay && options_.weight_decay != 0) {
      w.mul_(1.0 - options_.lr * options_.weight_decay);
    }
    w.addcdiv_(m, denom, -step_size);
    if (!w.is_same(parameters_[i].tensor)) parameters_[i].tensor.copy_(w);
  }
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
