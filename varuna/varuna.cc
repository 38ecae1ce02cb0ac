#include "varuna/varuna.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace varuna {
namespace {

bool IsFloatingModelDtype(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kHalf || dtype == c10::kBFloat16 ||
         dtype == c10::kDouble;
}

}  // namespace

absl::Status Varuna::ValidateOptions(const VarunaOptions& options, int num_segments) {
  const StageMap& map = options.stage_map;
  if (map.num_stages() != 1 || map.num_replicas() != 1) {
    return absl::UnimplementedError(absl::StrCat(
        "--stage_to_rank_map=\"", map.ToString(), "\" asks for ", map.num_stages(),
        " pipeline stages x ", map.num_replicas(),
        " data-parallel replicas; this build of the engine runs one stage and one replica "
        "only: use --stage_to_rank_map=\"0;\" (or omit it)"));
  }
  if (options.rank != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rank=", options.rank, " is not in the stage map \"", map.ToString(), "\" (rank 0)"));
  }
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch-size=", options.batch_size, " must be at least 1"));
  }
  if (options.chunk_size < 0 || options.chunk_size > options.batch_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--chunk_size=", options.chunk_size, " must be between 1 and --batch-size=",
                     options.batch_size, " (or 0 for one micro-batch per step)"));
  }
  if (!IsFloatingModelDtype(options.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model dtype ", c10::toString(options.dtype),
                     " is not supported: use float32, float16 or bfloat16"));
  }
  if (num_segments < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", num_segments, " segments; it needs at least 1"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Varuna>> Varuna::Create(const StageBuilder& builder,
                                                       int num_segments,
                                                       const VarunaOptions& options) {
  if (absl::Status status = ValidateOptions(options, num_segments); !status.ok()) return status;
  std::shared_ptr<StageModule> model = builder(SegmentRange{0, num_segments - 1});
  model->to(options.device, options.dtype);
  return std::unique_ptr<Varuna>(new Varuna(options, std::move(model)));
}

Varuna::Varuna(const VarunaOptions& options, std::shared_ptr<StageModule> model)
    : options_(options), model_(std::move(model)) {}

std::vector<NamedParameter> Varuna::parameters() const {
  std::vector<NamedParameter> out;
  for (const auto& item : model_->named_parameters(/*recurse=*/true)) {
    out.push_back({item.key(), item.value(), model_->DecaysWeight(item.key())});
  }
  return out;
}

absl::Status Varuna::set_optimizer(std::unique_ptr<Adam> optimizer,
                                   const LossScalerOptions& scaling) {
  const std::vector<NamedParameter> expected = parameters();
  const std::vector<NamedParameter>& given = optimizer->parameters();
  if (given.size() != expected.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the optimizer holds ", given.size(), " parameters but this stage has ",
                     expected.size(), ": build it from Varuna::parameters()"));
  }
  for (size_t i = 0; i < given.size(); ++i) {
    if (given[i].name != expected[i].name || !given[i].tensor.is_same(expected[i].tensor)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer parameter ", i, " is \"", given[i].name, "\" but the stage's is \"",
          expected[i].name, "\" (or another tensor): build it from Varuna::parameters()"));
    }
  }
  tied_pairs_.clear();
  for (const SharedWeight& shared : model_->shared_weights()) {
    std::optional<size_t> first, second;
    for (size_t i = 0; i < given.size(); ++i) {
      if (given[i].name == shared.first) first = i;
      if (given[i].name == shared.second) second = i;
    }
    if (first && second) tied_pairs_.emplace_back(*first, *second);
  }
  optimizer_ = std::move(optimizer);
  LossScalerOptions effective = scaling;
  if (options_.dtype != c10::kHalf) {
    effective.dynamic = false;
    effective.initial_scale = 1.0;
  }
  scaler_ = std::make_unique<LossScaler>(effective);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorMap>> Varuna::SplitBatch(const TensorMap& inputs, int64_t examples,
                                                          int64_t chunk, const char* what) const {
  if (inputs.empty()) return absl::InvalidArgumentError("the batch has no input tensors");
  for (const auto& [name, tensor] : inputs) {
    if (!tensor.defined() || tensor.dim() == 0 || tensor.size(0) != examples) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input \"", name, "\" has ", tensor.defined() && tensor.dim() > 0 ? tensor.size(0) : 0,
          " examples in dimension 0; expected ", examples, what));
    }
  }
  std::vector<TensorMap> micro_batches;
  for (int64_t start = 0; start < examples; start += chunk) {
    const int64_t length = std::min(chunk, examples - start);
    TensorMap micro;
    for (const auto& [name, tensor] : inputs) {
      micro[name] = tensor.narrow(0, start, length).to(options_.device);
    }
    micro_batches.push_back(std::move(micro));
  }
  return micro_batches;
}

absl::StatusOr<std::vector<double>> Varuna::LossWeights(
    const std::vector<TensorMap>& micro_batches) const {
  std::vector<double> weights;
  double total = 0;
  for (const TensorMap& micro : micro_batches) {
    weights.push_back(model_->LossWeight(micro));
    total += weights.back();
  }
  if (!(total > 0)) {
    return absl::InvalidArgumentError(
        "nothing in the batch counts towards the loss (its loss weight, e.g. the sum of the "
        "loss mask, is 0)");
  }
  for (double& weight : weights) weight /= total;
  return weights;
}

double Varuna::GatherMasterGrads(double scale) {
  at::NoGradGuard no_grad;
  const std::vector<NamedParameter>& params = optimizer_->parameters();
  std::vector<at::Tensor>& grads = optimizer_->MasterGrads();
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& grad = params[i].tensor.grad();
    if (grad.defined()) {
      grads[i].copy_(grad).div_(scale);
    } else {
      grads[i].zero_();
    }
  }
  std::vector<bool> duplicate(params.size(), false);
  for (const auto& [first, second] : tied_pairs_) {
    grads[first].add_(grads[second]);
    grads[second].copy_(grads[first]);
    duplicate[second] = true;
  }
  double sum_of_squares = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (duplicate[i]) continue;
    sum_of_squares += grads[i].to(at::kDouble).pow(2).sum().item<double>();
  }
  return sum_of_squares;
}

void Varuna::ZeroModelGrads() {
  for (auto& param : model_->parameters()) {
    if (param.grad().defined()) param.mutable_grad().reset();
  }
}

absl::StatusOr<StepResult> Varuna::step(const TensorMap& inputs) {
  if (!optimizer_) {
    return absl::FailedPreconditionError("Varuna::step called before set_optimizer");
  }
  const int64_t examples = options_.batch_size;
  const int64_t chunk = options_.chunk_size > 0 ? options_.chunk_size : examples;
  absl::StatusOr<std::vector<TensorMap>> micro_batches =
      SplitBatch(inputs, examples, chunk, " (--batch-size)");
  if (!micro_batches.ok()) return micro_batches.status();

  StepResult result;
  result.loss_scale = scaler_->scale();
  model_->train();
  ZeroModelGrads();
  absl::StatusOr<std::vector<double>> weights = LossWeights(*micro_batches);
  if (!weights.ok()) return weights.status();
  double loss_sum = 0;
  for (size_t i = 0; i < micro_batches->size(); ++i) {
    const double weight = (*weights)[i];
    if (weight == 0) continue;  // Nothing in it counts (e.g. every token masked).
    at::Tensor loss = model_->Forward(at::Tensor(), (*micro_batches)[i]);
    (loss.to(at::kFloat) * (weight * result.loss_scale)).backward();
    loss_sum += weight * loss.detach().to(at::kDouble).item<double>();
  }
  result.loss = loss_sum;

  const double sum_of_squares = GatherMasterGrads(result.loss_scale);
  result.overflow = !std::isfinite(sum_of_squares);
  result.grad_norm = std::sqrt(sum_of_squares);
  ZeroModelGrads();
  scaler_->Update(result.overflow);
  if (result.overflow) return result;

  if (options_.clip_grad > 0) {
    const double coefficient = options_.clip_grad / (result.grad_norm + 1e-6);
    if (coefficient < 1.0) {
      at::NoGradGuard no_grad;
      for (at::Tensor& grad : optimizer_->MasterGrads()) grad.mul_(coefficient);
    }
  }
  optimizer_->Step();
  return result;
}

absl::StatusOr<double> Varuna::evaluate(const TensorMap& inputs) {
  if (inputs.empty()) return absl::InvalidArgumentError("the batch has no input tensors");
  const int64_t examples = inputs.begin()->second.defined() && inputs.begin()->second.dim() > 0
                               ? inputs.begin()->second.size(0)
                               : 0;
  if (examples == 0) return absl::InvalidArgumentError("the evaluation batch is empty");
  const int64_t chunk = options_.chunk_size > 0 ? options_.chunk_size : options_.batch_size;
  absl::StatusOr<std::vector<TensorMap>> micro_batches =
      SplitBatch(inputs, examples, chunk, ", as the batch's first input");
  if (!micro_batches.ok()) return micro_batches.status();
  at::NoGradGuard no_grad;
  model_->eval();
  absl::StatusOr<std::vector<double>> weights = LossWeights(*micro_batches);
  if (!weights.ok()) return weights.status();
  double loss_sum = 0;
  for (size_t i = 0; i < micro_batches->size(); ++i) {
    if ((*weights)[i] == 0) continue;
    loss_sum += (*weights)[i] *
                model_->Forward(at::Tensor(), (*micro_batches)[i]).to(at::kDouble).item<double>();
  }
  model_->train();
  return loss_sum;
}

}  // namespace varuna
