// One GPT-2 transformer layer (pre-LayerNorm, as in GPT-2 and Megatron-LM), its parameter
// holders, and the math of each block as a separate function so that fused kernels can later
// replace one block at a time behind the same module.
//
//   x = x + dropout(SelfAttention(LayerNorm_1(x)))
//   x = x + dropout(Mlp(LayerNorm_2(x)))
//
// With bias-dropout fusion (Megatron's --bias-dropout-fusion), the two output projections run
// without their bias (Megatron's skip_bias_add), and each "x + dropout(... + bias)" is one
// varuna::kernels::BiasDropoutAdd: the same function (bitwise on the CPU in float32, where the
// masks are drawn as at::dropout draws them), one pass over the activations instead of three,
// and the bias gradient summed in the same pass as the input gradient.
//
// With bias-dropout-add-LayerNorm fusion as well (--bias-dropout-add-layernorm-fusion, on with
// --bias-dropout-fusion), the attention's residual add and ln_2 are one
// varuna::kernels::BiasDropoutAddLayerNorm: one pass writes the sum and its normalised form, and
// the backward adds the sum's two gradients in the LayerNorm's pass (bitwise the same on the
// CPU). The MLP's residual add and the next layer's ln_1 are not joined: a cut point (a possible
// stage boundary and recompute boundary) lies between them, so the pair would have to pass and
// keep two tensors [b, s, h] across it (the sum and its normalised form) instead of one, and
// ln_1's parameters belong to the next layer, possibly on another stage.
//
// With the MLP's GEMM epilogues as well (--bias-gelu-gemm-fusion, off by default, with
// --bias-dropout-fusion), the MLP is one varuna::kernels::GeluMlp: c_fc's bias and GeLU in its
// GEMM's epilogue, their gradients in the epilogue of the backward's GEMM through c_proj
// (cuBLASLt on a GPU; bitwise the unfused MLP on the CPU in float32).
//
// With FP8 on (Gpt2ExecutionOptions::fp8), the four linears of a layer (attn.c_attn,
// attn.c_proj, mlp.c_fc, mlp.c_proj) compute through varuna::kernels::Fp8Linear (Linear below);
// LayerNorm, softmax and the residual adds stay as they are.
//
// Parameters are allocated uninitialised on the CPU in float32; Gpt2Stage initialises them by
// name (init.h). Module and parameter names follow parameter_names.h. All functions work in
// float32 and float64, and in float16/bfloat16, where softmax runs in float32.
//
// Thread safety: none; a layer is used by one thread at a time.
#ifndef MODELS_GPT2_TRANSFORMER_LAYER_H_
#define MODELS_GPT2_TRANSFORMER_LAYER_H_

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "models/gpt2/config.h"
#include "varuna/kernels/causal_attention.h"
#include "varuna/kernels/fp8_linear.h"

namespace gpt2 {

// The dtype softmax and the loss are computed in: float32 for half types, else `dtype`.
at::ScalarType AccumulationType(at::ScalarType dtype);

// Parameters of y = x W^T + b: weight [out, in] (LibTorch Linear layout), bias [out]; and, when
// FP8 is on for the layer, its delayed-scaling state (not a parameter or buffer: the optimizer
// and to() never see it).
class LinearParams : public torch::nn::Module {
 public:
  LinearParams(int64_t in_features, int64_t out_features);
  torch::Tensor weight;
  torch::Tensor bias;

  // From now on Linear() computes this layer in FP8 with `recipe` (which must be valid).
  void EnableFp8(const varuna::kernels::Fp8Recipe& recipe);
  // The FP8 state, made fresh on the weight's device at the first call (so after the module has
  // moved to its device); the same tensors on every later call. Null when FP8 is off.
  varuna::kernels::Fp8LinearMeta* fp8_meta();
  const std::optional<varuna::kernels::Fp8Recipe>& fp8_recipe() const { return fp8_recipe_; }

 private:
  std::optional<varuna::kernels::Fp8Recipe> fp8_recipe_;
  std::optional<varuna::kernels::Fp8LinearMeta> fp8_meta_;
};

// y = x W^T + b with `params`' weight and the given `bias` (undefined: none): at::linear, or
// varuna::kernels::Fp8Linear when FP8 is on for `params` (x's rows and both dims must then be
// multiples of 16).
torch::Tensor Linear(LinearParams& params, const torch::Tensor& x, const torch::Tensor& bias);

// Parameters of a LayerNorm over the last dimension: weight and bias [features].
class LayerNormParams : public torch::nn::Module {
 public:
  explicit LayerNormParams(int64_t features);
  torch::Tensor weight;
  torch::Tensor bias;
};

// Fused QKV projection c_attn (h -> 3h, output [Q | K | V]) and output projection c_proj.
class AttentionParams : public torch::nn::Module {
 public:
  explicit AttentionParams(int64_t hidden_size);
  std::shared_ptr<LinearParams> c_attn;
  std::shared_ptr<LinearParams> c_proj;
};

// c_fc (h -> 4h) and c_proj (4h -> h).
class MlpParams : public torch::nn::Module {
 public:
  explicit MlpParams(int64_t hidden_size);
  std::shared_ptr<LinearParams> c_fc;
  std::shared_ptr<LinearParams> c_proj;
};

// at::dropout, skipped entirely (no random numbers drawn) when !training or p == 0.
torch::Tensor Dropout(const torch::Tensor& x, double p, bool training);

// LayerNorm over the last dimension with `params` (varuna::kernels::LayerNorm: fused on CUDA).
torch::Tensor LayerNorm(const LayerNormParams& params, const torch::Tensor& x, double epsilon);

// Multi-head self-attention of x [b, s, h] (already normalised): softmax((Q / sqrt(d)) K^T with
// masked positions excluded) V, then c_proj, with dropout on the probabilities (p = `dropout`,
// when `training`). Returns [b, s, h] in x's dtype, before the residual dropout; without
// c_proj's bias when `skip_bias_add` (the caller adds it, as BiasDropoutAdd does).
// An undefined `mask` means causal: varuna::kernels::CausalAttention with `backend` (the fused
// causal softmax or LibTorch's scaled_dot_product_attention). A defined `mask` is bool,
// broadcastable to [b, heads, s, s], true where a query must not see a key; scores, softmax and
// dropout are then computed unfused in AccumulationType, masked with the lowest finite float.
torch::Tensor SelfAttention(const AttentionParams& params, const torch::Tensor& x,
                            const torch::Tensor& mask, int64_t num_heads, double dropout,
                            bool training, varuna::kernels::AttentionBackend backend,
                            bool skip_bias_add = false);

// c_proj(gelu_tanh(c_fc(x))) for x [b, s, h], the bias and GeLU fused
// (varuna::kernels::BiasGelu); returns [b, s, h], before the residual dropout; without c_proj's
// bias when `skip_bias_add`. With `gemm_epilogues` (which needs `skip_bias_add`), and unless the
// linears are FP8, the whole MLP is varuna::kernels::GeluMlp (bias + GeLU in the GEMMs);
// `gemm_epilogues` without `skip_bias_add` throws c10::Error.
torch::Tensor Mlp(const MlpParams& params, const torch::Tensor& x, bool skip_bias_add = false,
                  bool gemm_epilogues = false);

class TransformerLayer : public torch::nn::Module {
 public:
  // Registers ln_1, attn, ln_2, mlp (uninitialised) for `config`, which must be valid; causal
  // attention runs on `attention_backend`; `bias_dropout_fusion` selects the fused residual
  // adds, and with it `bias_dropout_add_layernorm_fusion` the residual stream's LayerNorms fused
  // with it (ln_1 passing x on, so that x's two gradients meet in its backward pass; the
  // attention residual add + ln_2 as one op), and with it `bias_gelu_gemm_fusion` the MLP as one op
  // with its bias + GeLU in the GEMMs' epilogues (varuna::kernels::GeluMlp; not while its linears
  // are FP8). The parameters and their names are the same either way.
  TransformerLayer(const Gpt2Config& config, varuna::kernels::AttentionBackend attention_backend,
                   bool bias_dropout_fusion = true, bool bias_dropout_add_layernorm_fusion = true,
                   bool bias_gelu_gemm_fusion = false);

  // x [b, s, h] -> [b, s, h]. `mask` as for SelfAttention (undefined: causal). Dropout follows
  // is_training().
  torch::Tensor Forward(const torch::Tensor& x, const torch::Tensor& mask);

  std::shared_ptr<LayerNormParams> ln_1;
  std::shared_ptr<AttentionParams> attn;
  std::shared_ptr<LayerNormParams> ln_2;
  std::shared_ptr<MlpParams> mlp;

 private:
  varuna::kernels::AttentionBackend attention_backend_;
  bool bias_dropout_fusion_;
  bool bias_dropout_add_layernorm_fusion_;  // and bias_dropout_fusion_
  bool bias_gelu_gemm_fusion_;              // and bias_dropout_fusion_
  int64_t num_heads_;
  double hidden_dropout_;
  double attention_dropout_;
  double layernorm_epsilon_;
};

}  // namespace gpt2

#endif  // MODELS_GPT2_TRANSFORMER_LAYER_H_
