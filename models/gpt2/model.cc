#include "models/gpt2/model.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"
#include "models/gpt2/init.h"
#include "models/gpt2/parameter_names.h"
#include "varuna/kernels/lm_head_cross_entropy.h"

namespace gpt2 {
namespace {

void CheckOk(const absl::Status& status) {
  TORCH_CHECK(status.ok(), std::string(status.message()));
}

}  // namespace

absl::Status ValidateSegmentRange(const Gpt2Config& config, varuna::SegmentRange range) {
  const int n = config.num_layers;
  if (range.first < 0 || range.last >= n || range.first > range.last) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment range [", range.first, ", ", range.last,
                     "] is not a non-empty range of the ", n, " segments of a ", n,
                     "-layer GPT-2 (--num-layers=", n, "): choose 0 <= first <= last <= ", n - 1));
  }
  return absl::OkStatus();
}

Gpt2Stage::Gpt2Stage(const Gpt2Config& config, varuna::SegmentRange range, uint64_t seed,
                     const Gpt2ExecutionOptions& execution)
    : config_(config),
      range_(range),
      fused_cross_entropy_(execution.fused_cross_entropy),
      gradient_accumulation_fusion_(execution.gradient_accumulation_fusion) {
  CheckOk(config.Validate());
  CheckOk(ValidateSegmentRange(config, range));
  const int64_t h = config.hidden_size;
  const int64_t vocab = config.padded_vocab_size();
  const int last_segment = config.num_layers - 1;

  for (int k = 0; k < last_segment; ++k) cut_points_.emplace_back(k);

  if (range.first == 0) {
    auto wte = register_module("wte", std::make_shared<torch::nn::Module>("Embedding"));
    wte_weight_ = wte->register_parameter("weight", at::empty({vocab, h}));
    auto wpe = register_module("wpe", std::make_shared<torch::nn::Module>("Embedding"));
    wpe_weight_ = wpe->register_parameter("weight", at::empty({config.max_position_embeddings, h}));
  }
  // Layers are children of `h`, named by their global index ("5", "6", ...).
  auto layers = register_module("h", std::make_shared<torch::nn::Module>("Layers"));
  for (int i = range.first; i <= range.last; ++i) {
    layers_.push_back(layers->register_module(
        std::to_string(i),
        std::make_shared<TransformerLayer>(
            config, execution.attention, execution.bias_dropout_fusion,
            execution.bias_dropout_add_layernorm_fusion, execution.bias_gelu_gemm_fusion)));
  }
  if (execution.fp8) {
    const Fp8LinearSet& chosen = execution.fp8_linears;
    for (const std::shared_ptr<TransformerLayer>& layer : layers_) {
      for (auto [on, linear] : {std::pair{chosen.qkv, layer->attn->c_attn.get()},
                                {chosen.proj, layer->attn->c_proj.get()},
                                {chosen.fc1, layer->mlp->c_fc.get()},
                                {chosen.fc2, layer->mlp->c_proj.get()}}) {
        if (on) linear->EnableFp8(*execution.fp8);
      }
    }
  }
  if (range.last == last_segment) {
    ln_f_ = register_module("ln_f", std::make_shared<LayerNormParams>(h));
    lm_head_weight_ = register_parameter(kLmHeadName, at::empty({vocab, h}));
  }

  for (auto& item : named_parameters()) {
    InitializeParameter(config_, seed, item.key(), item.value());
  }
}

absl::Status ValidateFp8Shapes(const Gpt2Config& config,
                               const std::vector<int64_t>& micro_batch_sizes) {
  if (config.hidden_size % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fp8-format needs --hidden-size to be a multiple of 16 (the FP8 GEMMs' constraint); "
        "it is ",
        config.hidden_size, ": choose a multiple of 16, or drop --fp8-format"));
  }
  for (int64_t examples : micro_batch_sizes) {
    const int64_t tokens = examples * config.seq_length;
    if (tokens % 16 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fp8-format needs every micro-batch's tokens (examples x --seq-length) to be a "
          "multiple of 16 (the FP8 GEMMs' constraint); a micro-batch of ",
          examples, " x ", config.seq_length, " = ", tokens,
          " tokens is not: choose --seq-length, --micro-batch-size and --batch-size so that it "
          "is (a --seq-length that is a multiple of 16 always works), or drop --fp8-format"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, LinearParams*>> Gpt2Stage::LayerLinears() const {
  std::vector<std::pair<std::string, LinearParams*>> out;
  for (size_t k = 0; k < layers_.size(); ++k) {
    const TransformerLayer& layer = *layers_[k];
    const std::string prefix = absl::StrCat("h.", range_.first + static_cast<int>(k), ".");
    out.emplace_back(prefix + "attn.c_attn", layer.attn->c_attn.get());
    out.emplace_back(prefix + "attn.c_proj", layer.attn->c_proj.get());
    out.emplace_back(prefix + "mlp.c_fc", layer.mlp->c_fc.get());
    out.emplace_back(prefix + "mlp.c_proj", layer.mlp->c_proj.get());
  }
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> Gpt2Stage::named_state() {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& [name, linear] : LayerLinears()) {
    varuna::kernels::Fp8LinearMeta* meta = linear->fp8_meta();
    if (meta == nullptr) continue;
    for (auto& [field, tensor] : varuna::kernels::Fp8LinearMetaTensors(*meta)) {
      out.emplace_back(absl::StrCat(name, ".fp8.", field), tensor);
    }
  }
  return out;
}

std::vector<at::Tensor> Gpt2Stage::replica_max_state() {
  std::vector<at::Tensor> out;
  for (auto& [name, linear] : LayerLinears()) {
    varuna::kernels::Fp8LinearMeta* meta = linear->fp8_meta();
    if (meta == nullptr) continue;
    for (varuna::kernels::Fp8Meta* role : {&meta->input, &meta->weight, &meta->grad_output}) {
      out.push_back(role->amax_history.narrow(0, 0, 1));
    }
  }
  return out;
}

void Gpt2Stage::UpdateStateAfterBackward() {
  // One batched update (on CUDA one kernel launch per 96 roles) per run of layers that share a
  // recipe: every FP8 layer of a stage, in practice.
  const varuna::kernels::Fp8Recipe* recipe = nullptr;
  std::vector<varuna::kernels::Fp8LinearMeta*> metas;
  for (auto& [name, linear] : LayerLinears()) {
    varuna::kernels::Fp8LinearMeta* meta = linear->fp8_meta();
    if (meta == nullptr) continue;
    if (recipe != nullptr && !varuna::kernels::SameFp8Recipe(*recipe, *linear->fp8_recipe())) {
      varuna::kernels::UpdateAllFp8Scales(*recipe, metas);
      metas.clear();
    }
    recipe = &*linear->fp8_recipe();
    metas.push_back(meta);
  }
  if (recipe != nullptr) varuna::kernels::UpdateAllFp8Scales(*recipe, metas);
}

std::string Gpt2Stage::Where() const {
  return absl::StrCat("Gpt2Stage(segments [", range_.first, ", ", range_.last, "] of ",
                      config_.num_layers, ")");
}

namespace {

const torch::Tensor& Input(const varuna::TensorMap& inputs, const std::string& key,
                           const std::string& where) {
  auto it = inputs.find(key);
  TORCH_CHECK(it != inputs.end() && it->second.defined(), where, ": input '", key,
              "' is missing from the micro-batch: the batch must provide input_ids, "
              "position_ids, labels and loss_mask");
  return it->second;
}

}  // namespace

torch::Tensor Gpt2Stage::Embed(const varuna::TensorMap& inputs) {
  const torch::Tensor& ids = Input(inputs, "input_ids", Where());
  const torch::Tensor& positions = Input(inputs, "position_ids", Where());
  TORCH_CHECK(ids.dim() == 2 && ids.scalar_type() == at::kLong, Where(),
              ": input 'input_ids' must be int64 [batch, seq], got ", ids.scalar_type(), " ",
              ids.sizes());
  TORCH_CHECK(positions.sizes() == ids.sizes() && positions.scalar_type() == at::kLong, Where(),
              ": input 'position_ids' must be int64 of the shape of input_ids ", ids.sizes(),
              ", got ", positions.scalar_type(), " ", positions.sizes());
  TORCH_CHECK(ids.size(1) <= config_.max_position_embeddings, Where(), ": sequence length ",
              ids.size(1), " exceeds --max-position-embeddings=", config_.max_position_embeddings,
              ": shorten the samples or build the model with more positions");
  const torch::Tensor x = at::embedding(wte_weight_, ids) + at::embedding(wpe_weight_, positions);
  return Dropout(x, config_.hidden_dropout, is_training());
}

torch::Tensor Gpt2Stage::AttentionMask(const varuna::TensorMap& inputs,
                                       const torch::Tensor& x) const {
  const int64_t b = x.size(0);
  const int64_t s = x.size(1);
  auto it = inputs.find("attention_mask");
  if (it == inputs.end() || !it->second.defined()) return {};  // causal
  const torch::Tensor& mask = it->second;
  TORCH_CHECK(mask.scalar_type() == at::kBool && mask.dim() == 4 &&
                  (mask.size(0) == b || mask.size(0) == 1) && mask.size(1) == 1 &&
                  mask.size(2) == s && mask.size(3) == s,
              Where(), ": input 'attention_mask' must be bool [", b, " or 1, 1, ", s, ", ", s,
              "] (true = masked out), got ", mask.scalar_type(), " ", mask.sizes(),
              ": pass the mask from the batch, or leave it out for a causal mask");
  return mask;
}

torch::Tensor Gpt2Stage::RunSegments(const torch::Tensor& activation,
                                     const varuna::TensorMap& inputs) {
  const int last_segment = config_.num_layers - 1;
  torch::Tensor x;
  if (range_.first == 0) {
    x = Embed(inputs);
  } else {
    TORCH_CHECK(activation.defined(), Where(),
                ": no activation given: a stage that does not start at segment 0 needs the "
                "activation [batch, seq, ",
                config_.hidden_size, "] of the previous stage");
    TORCH_CHECK(activation.dim() == 3 && activation.size(2) == config_.hidden_size, Where(),
                ": the activation must be [batch, seq, ", config_.hidden_size, "], got ",
                activation.sizes(), ": check that the previous stage runs the same model");
    x = activation;
  }
  const torch::Tensor mask = AttentionMask(inputs, x);
  for (int i = range_.first; i <= range_.last; ++i) {
    x = layers_[i - range_.first]->Forward(x, mask);
    if (i < last_segment) x = cut_points_[i](x);
  }
  if (range_.last == last_segment) x = LayerNorm(*ln_f_, x, config_.layernorm_epsilon);
  return x;
}

torch::Tensor Gpt2Stage::Logits(const torch::Tensor& activation, const varuna::TensorMap& inputs) {
  TORCH_CHECK(range_.last == config_.num_layers - 1, Where(),
              ": Logits needs the stage that holds the last segment (the LM head)");
  return at::linear(RunSegments(activation, inputs), lm_head_weight_);
}

torch::Tensor Gpt2Stage::Forward(const torch::Tensor& activation, const varuna::TensorMap& inputs) {
  const torch::Tensor hidden = RunSegments(activation, inputs);
  if (range_.last < config_.num_layers - 1) return hidden;
  const torch::Tensor& labels = Input(inputs, "labels", Where());
  const torch::Tensor& loss_mask = Input(inputs, "loss_mask", Where());
  const at::IntArrayRef tokens = hidden.sizes().slice(0, 2);
  TORCH_CHECK(labels.sizes() == tokens && labels.scalar_type() == at::kLong, Where(),
              ": input 'labels' must be int64 ", tokens, " like the tokens, got ",
              labels.scalar_type(), " ", labels.sizes());
  TORCH_CHECK(loss_mask.sizes() == tokens && at::isFloatingType(loss_mask.scalar_type()), Where(),
              ": input 'loss_mask' must be floating-point ", tokens, " like the tokens, got ",
              loss_mask.scalar_type(), " ", loss_mask.sizes());
  if (fused_cross_entropy_) {
    return varuna::kernels::LmHeadCrossEntropy(hidden.flatten(0, 1), lm_head_weight_,
                                               labels.flatten(), loss_mask.flatten(),
                                               /*chunk_tokens=*/0, gradient_accumulation_fusion_);
  }
  const torch::Tensor logits = at::linear(hidden, lm_head_weight_);
  // Per-token cross entropy in float32 (float64 for float64 models), then the masked mean.
  // log_softmax reads the half-precision logits itself (on CUDA, fp16 ones without an fp32
  // copy of the [tokens, V] logits, and their gradient comes back in fp16).
  const at::ScalarType acc = AccumulationType(logits.scalar_type());
  const torch::Tensor log_probs = at::log_softmax(logits.flatten(0, 1), /*dim=*/-1, acc);
  const torch::Tensor losses =
      at::nll_loss(log_probs, labels.flatten(), /*weight=*/{}, at::Reduction::None);
  const torch::Tensor mask = loss_mask.flatten().to(acc);
  return (losses * mask).sum() / mask.sum();
}

std::vector<varuna::SharedWeight> Gpt2Stage::shared_weights() const {
  return {{kWordEmbeddingName, kLmHeadName}};
}

int Gpt2Stage::SegmentOf(const std::string& parameter_name) const {
  // A linear's FP8 state, "<linear>.fp8.<role>.<field>", lives with the linear's weight.
  if (const size_t fp8 = parameter_name.find(".fp8."); fp8 != std::string::npos) {
    return SegmentOfParameter(config_, parameter_name.substr(0, fp8) + ".weight");
  }
  return SegmentOfParameter(config_, parameter_name);
}

double Gpt2Stage::LossWeight(const varuna::TensorMap& micro_batch) const {
  return micro_batch.at("loss_mask").sum().item<double>();
}

bool Gpt2Stage::DecaysWeight(const std::string& parameter_name) const {
  return gpt2::DecaysWeight(parameter_name);
}

varuna::StageBuilder Gpt2StageBuilder(const Gpt2Config& config, uint64_t seed,
                                      const Gpt2ExecutionOptions& execution) {
  return [config, seed,
          execution](varuna::SegmentRange range) -> std::shared_ptr<varuna::StageModule> {
    return std::make_shared<Gpt2Stage>(config, range, seed, execution);
  };
}

}  // namespace gpt2
