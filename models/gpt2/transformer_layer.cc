#include "models/gpt2/transformer_layer.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "varuna/kernels/bias_dropout_add.h"
#include "varuna/kernels/bias_dropout_add_layer_norm.h"
#include "varuna/kernels/bias_gelu.h"
#include "varuna/kernels/gelu_mlp.h"
#include "varuna/kernels/layer_norm.h"
#include "varuna/kernels/residual_layer_norm.h"

namespace gpt2 {

at::ScalarType AccumulationType(at::ScalarType dtype) {
  return dtype == at::kHalf || dtype == at::kBFloat16 ? at::kFloat : dtype;
}

LinearParams::LinearParams(int64_t in_features, int64_t out_features)
    : torch::nn::Module("LinearParams") {
  weight = register_parameter("weight", at::empty({out_features, in_features}));
  bias = register_parameter("bias", at::empty({out_features}));
}

void LinearParams::EnableFp8(const varuna::kernels::Fp8Recipe& recipe) {
  fp8_recipe_ = recipe;
  fp8_meta_.reset();
}

varuna::kernels::Fp8LinearMeta* LinearParams::fp8_meta() {
  if (!fp8_recipe_) return nullptr;
  if (!fp8_meta_) {
    fp8_meta_ = varuna::kernels::MakeFp8LinearMeta(*fp8_recipe_, weight.device());
  } else if (fp8_meta_->input.scale.device() != weight.device()) {
    // The module moved after the state was made: move it along, keeping the tensors' identity.
    for (auto& [name, tensor] : varuna::kernels::Fp8LinearMetaTensors(*fp8_meta_)) {
      tensor.set_data(tensor.to(weight.device()));
    }
  }
  return &*fp8_meta_;
}

torch::Tensor Linear(LinearParams& params, const torch::Tensor& x, const torch::Tensor& bias) {
  if (varuna::kernels::Fp8LinearMeta* meta = params.fp8_meta()) {
    return varuna::kernels::Fp8Linear(x, params.weight, bias, *meta);
  }
  return at::linear(x, params.weight, bias);
}

LayerNormParams::LayerNormParams(int64_t features) : torch::nn::Module("LayerNormParams") {
  weight = register_parameter("weight", at::empty({features}));
  bias = register_parameter("bias", at::empty({features}));
}

AttentionParams::AttentionParams(int64_t hidden_size) : torch::nn::Module("AttentionParams") {
  c_attn = register_module("c_attn", std::make_shared<LinearParams>(hidden_size, 3 * hidden_size));
  c_proj = register_module("c_proj", std::make_shared<LinearParams>(hidden_size, hidden_size));
}

MlpParams::MlpParams(int64_t hidden_size) : torch::nn::Module("MlpParams") {
  c_fc = register_module("c_fc", std::make_shared<LinearParams>(hidden_size, 4 * hidden_size));
  c_proj = register_module("c_proj", std::make_shared<LinearParams>(4 * hidden_size, hidden_size));
}

torch::Tensor Dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  return at::dropout(x, p, /*train=*/true);
}

torch::Tensor LayerNorm(const LayerNormParams& params, const torch::Tensor& x, double epsilon) {
  return varuna::kernels::LayerNorm(x, params.weight, params.bias, epsilon);
}

torch::Tensor SelfAttention(const AttentionParams& params, const torch::Tensor& x,
                            const torch::Tensor& mask, int64_t num_heads, double dropout,
                            bool training, varuna::kernels::AttentionBackend backend,
                            bool skip_bias_add) {
  const int64_t b = x.size(0);
  const int64_t s = x.size(1);
  const int64_t h = x.size(2);
  const int64_t d = h / num_heads;
  const torch::Tensor c_proj_bias = skip_bias_add ? torch::Tensor() : params.c_proj->bias;
  // [b, s, 3h] -> three [b, heads, s, d]; the columns are [Q | K | V], heads contiguous.
  const torch::Tensor qkv = Linear(*params.c_attn, x, params.c_attn->bias);
  const std::vector<torch::Tensor> parts = qkv.split(h, /*dim=*/-1);
  auto heads = [&](const torch::Tensor& t) { return t.view({b, s, num_heads, d}).transpose(1, 2); };
  const torch::Tensor q = heads(parts[0]);
  const torch::Tensor k = heads(parts[1]);
  const torch::Tensor v = heads(parts[2]);
  if (!mask.defined()) {
    const torch::Tensor context =
        varuna::kernels::CausalAttention(q, k, v, dropout, training, backend);
    return Linear(*params.c_proj, context.transpose(1, 2).reshape({b, s, h}), c_proj_bias);
  }

  // An explicit mask (e.g. --reset-attention-mask): the unfused composition.
  const at::ScalarType acc = AccumulationType(x.scalar_type());
  // Scores [b, heads, s, s] = (Q / sqrt(d)) K^T, scaled before the product (as Megatron's
  // baddbmm alpha does) so that half-precision scores do not overflow; then masked and
  // normalised in `acc`.
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  torch::Tensor scores = at::matmul(q * scale, k.transpose(-2, -1)).to(acc);
  scores.masked_fill_(mask, std::numeric_limits<float>::lowest());
  torch::Tensor probs = at::softmax(scores, /*dim=*/-1);
  probs = Dropout(probs, dropout, training).to(x.scalar_type());

  // [b, heads, s, d] -> [b, s, h], heads back in the order c_attn produced them.
  const torch::Tensor context = at::matmul(probs, v).transpose(1, 2).reshape({b, s, h});
  return Linear(*params.c_proj, context, c_proj_bias);
}

torch::Tensor Mlp(const MlpParams& params, const torch::Tensor& x, bool skip_bias_add,
                  bool gemm_epilogues) {
  TORCH_CHECK(!gemm_epilogues || skip_bias_add,
              "Mlp: the GEMM epilogues' MLP leaves c_proj's bias to the caller; pass "
              "skip_bias_add");
  if (gemm_epilogues && params.c_fc->fp8_meta() == nullptr &&
      params.c_proj->fp8_meta() == nullptr) {
    return varuna::kernels::GeluMlp(x, params.c_fc->weight, params.c_fc->bias,
                                    params.c_proj->weight);
  }
  const torch::Tensor inner =
      varuna::kernels::BiasGelu(Linear(*params.c_fc, x, torch::Tensor()), params.c_fc->bias);
  return Linear(*params.c_proj, inner, skip_bias_add ? torch::Tensor() : params.c_proj->bias);
}

TransformerLayer::TransformerLayer(const Gpt2Config& config,
                                   varuna::kernels::AttentionBackend attention_backend,
                                   bool bias_dropout_fusion, bool bias_dropout_add_layernorm_fusion,
                                   bool bias_gelu_gemm_fusion)
    : torch::nn::Module("TransformerLayer"),
      attention_backend_(attention_backend),
      bias_dropout_fusion_(bias_dropout_fusion),
      bias_dropout_add_layernorm_fusion_(bias_dropout_fusion && bias_dropout_add_layernorm_fusion),
      bias_gelu_gemm_fusion_(bias_dropout_fusion && bias_gelu_gemm_fusion),
      num_heads_(config.num_attention_heads),
      hidden_dropout_(config.hidden_dropout),
      attention_dropout_(config.attention_dropout),
      layernorm_epsilon_(config.layernorm_epsilon) {
  const int64_t h = config.hidden_size;
  ln_1 = register_module("ln_1", std::make_shared<LayerNormParams>(h));
  attn = register_module("attn", std::make_shared<AttentionParams>(h));
  ln_2 = register_module("ln_2", std::make_shared<LayerNormParams>(h));
  mlp = register_module("mlp", std::make_shared<MlpParams>(h));
}

torch::Tensor TransformerLayer::Forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const bool training = is_training();
  if (!bias_dropout_fusion_) {
    const torch::Tensor attention =
        SelfAttention(*attn, LayerNorm(*ln_1, x, layernorm_epsilon_), mask, num_heads_,
                      attention_dropout_, training, attention_backend_);
    const torch::Tensor y = x + Dropout(attention, hidden_dropout_, training);
    const torch::Tensor mlp_out = Mlp(*mlp, LayerNorm(*ln_2, y, layernorm_epsilon_));
    return y + Dropout(mlp_out, hidden_dropout_, training);
  }
  // The projections without their bias; bias, dropout and the residual add in one op each.
  torch::Tensor residual = x;
  torch::Tensor normalized;
  if (bias_dropout_add_layernorm_fusion_) {
    // ln_1 passes x on to the residual add: x's two gradients are added in its backward pass.
    varuna::kernels::ResidualLayerNormOutputs out =
        varuna::kernels::ResidualLayerNorm(x, ln_1->weight, ln_1->bias, layernorm_epsilon_);
    residual = out.residual;
    normalized = out.output;
  } else {
    normalized = LayerNorm(*ln_1, x, layernorm_epsilon_);
  }
  const torch::Tensor attention =
      SelfAttention(*attn, normalized, mask, num_heads_, attention_dropout_, training,
                    attention_backend_, /*skip_bias_add=*/true);
  torch::Tensor y;
  if (bias_dropout_add_layernorm_fusion_) {
    // The attention residual add and ln_2 in one op: y and ln_2(y) from one pass.
    varuna::kernels::BiasDropoutAddLayerNormOutputs out = varuna::kernels::BiasDropoutAddLayerNorm(
        attention, attn->c_proj->bias, residual, ln_2->weight, ln_2->bias, hidden_dropout_,
        training, layernorm_epsilon_);
    y = out.residual;
    normalized = out.output;
  } else {
    y = varuna::kernels::BiasDropoutAdd(attention, attn->c_proj->bias, x, hidden_dropout_,
                                        training);
    normalized = LayerNorm(*ln_2, y, layernorm_epsilon_);
  }
  const torch::Tensor mlp_out =
      Mlp(*mlp, normalized, /*skip_bias_add=*/true, bias_gelu_gemm_fusion_);
  return varuna::kernels::BiasDropoutAdd(mlp_out, mlp->c_proj->bias, y, hidden_dropout_, training);
}

}  // namespace gpt2
