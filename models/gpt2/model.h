// Gpt2Stage: the GPT-2 language model of Megatron-LM (as Varuna trained it) for one contiguous
// range of cut-point segments, as the Varuna engine sees it (varuna/pipeline/stage_module.h).
//
// With L = num_layers the model has L segments and L - 1 cut points:
//   segment 0        word + position embeddings, embedding dropout, layer 0
//   segment k        layer k                                  (0 < k < L-1)
//   segment L-1      layer L-1, final LayerNorm, LM head, masked-mean cross entropy
// (with L = 1, segment 0 holds everything). Cut point k follows layer k.
//
// A stage allocates ONLY the parameters of its segments (an 8.3B model is never materialised
// whole); their names are the full-model names of parameter_names.h (global layer indices). The
// LM head weight is its own parameter tied to the word embedding (shared_weights()); both start
// equal because initialisation is per parameter name (init.h), so every stage built with the
// same seed holds bit-identical values for the parameters it shares with any other stage.
// Parameters are created on the CPU in float32; move the module with to(device, dtype).
//
// Inputs of Forward (batch first; a stage reads only what its segments need):
//   input_ids       [b, s] int64     segment 0
//   position_ids    [b, s] int64     segment 0
//   labels          [b, s] int64     last segment; values < padded vocab size
//   loss_mask       [b, s] floating  last segment; 1 = counts in the loss, 0 = ignored
//   attention_mask  [b or 1, 1, s, s] bool, optional, true = masked out; absent: causal (the
//                   fused causal attention of Gpt2ExecutionOptions::attention)
// The activation between stages is [b, s, h] in the parameters' dtype.
//
// Dropout draws from LibTorch's default generator (the engine saves and restores it for
// recompute) and follows is_training(). Errors in inputs throw c10::Error naming the input.
//
// Thread safety: none; a stage is used by one thread at a time.
#ifndef MODELS_GPT2_MODEL_H_
#define MODELS_GPT2_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "models/gpt2/config.h"
#include "models/gpt2/transformer_layer.h"
#include "varuna/kernels/fp8_linear.h"
#include "varuna/pipeline/cut_point.h"
#include "varuna/pipeline/stage_module.h"

namespace gpt2 {

// The four linears of a layer by Megatron-core's names (--fp8-linears): linear_qkv (attn.c_attn),
// linear_proj (attn.c_proj), linear_fc1 (mlp.c_fc), linear_fc2 (mlp.c_proj); a flag per linear.
struct Fp8LinearSet {
  bool qkv = true;
  bool proj = true;
  bool fc1 = true;
  bool fc2 = true;

  bool all() const { return qkv && proj && fc1 && fc2; }
};

// How the model runs, as opposed to what it computes (Gpt2Config): choices that change speed,
// not the function (up to rounding), and so are not saved with a checkpoint.
struct Gpt2ExecutionOptions {
  // Causal attention: the fused causal softmax between two GEMMs (Megatron's path, and the
  // reference on the CPU) or LibTorch's scaled_dot_product_attention (flash/cuDNN/efficient).
  varuna::kernels::AttentionBackend attention = varuna::kernels::AttentionBackend::kFusedSoftmax;
  // The last stage's LM head and loss: false, at::linear then log_softmax and nll_loss over
  // the whole [tokens, V] logits; true, varuna::kernels::LmHeadCrossEntropy, which holds only a
  // chunk of the logits at a time (Megatron's --cross-entropy-loss-fusion). The same loss.
  bool fused_cross_entropy = false;
  // Megatron's --gradient-accumulation-fusion, so far for the fused LM head only (with
  // fused_cross_entropy): true, each token chunk's dW GEMM adds into the fp32 sum itself (bf16/
  // fp16 inputs, fp32 output, beta = 1: varuna/kernels/weight_gradient_accumulation.h); false,
  // dW in the model's dtype, then added into the sum. The same function (the fused sum rounds
  // less).
  bool gradient_accumulation_fusion = true;
  // The residual connections: true, each "x + dropout(c_proj(...))" runs c_proj without its
  // bias and adds bias, dropout and residual in one op (varuna::kernels::BiasDropoutAdd,
  // Megatron's --bias-dropout-fusion, on by default as there); false, the ATen composition. The
  // same function: bitwise the same loss and gradients on the CPU (where the masks are drawn as
  // at::dropout draws them); on CUDA the same up to rounding and the same dropout distribution.
  bool bias_dropout_fusion = true;
  // With bias_dropout_fusion: the attention's residual add and ln_2 as one op
  // (varuna::kernels::BiasDropoutAddLayerNorm; --bias-dropout-add-layernorm-fusion, on by
  // default). The same function: bitwise on the CPU, the same dropout masks on CUDA.
  bool bias_dropout_add_layernorm_fusion = true;
  // With bias_dropout_fusion: the MLP as one op with its bias + GeLU in c_fc's GEMM epilogue and
  // the GeLU and bias gradients in the backward GEMM's (varuna::kernels::GeluMlp, cuBLASLt's
  // GELU_AUX_BIAS and DGELU_BGRAD on CUDA in fp16/bf16; --bias-gelu-gemm-fusion, off by default
  // until measured on a GPU). The same function: bitwise in float32 (the reference runs the
  // unfused ops); in fp16/bf16 the GeLU's input is kept rounded to the dtype. FP8 linears
  // take precedence: where `fp8` is set and fp8_linears holds mlp.c_fc or mlp.c_proj, the MLP
  // runs unfused.
  bool bias_gelu_gemm_fusion = false;
  // FP8 (Megatron's --fp8-format): set, the linears of every layer that fp8_linears names
  // (all four by default) compute in FP8 with this delayed-scaling recipe
  // (varuna::kernels::Fp8Linear); the embeddings, LayerNorms, attention's softmax and the LM head
  // stay in the model's dtype. Each linear's state (amax histories and scales) is the stage's
  // named_state(), "<linear>.fp8.<role>.<field>", e.g. "h.3.attn.c_attn.fp8.input.amax_history":
  // saved in checkpoints, the amaxes agreed over the replicas with MAX and the scales updated once
  // per step (UpdateStateAfterBackward). Micro-batch x sequence and the hidden size must be
  // multiples of 16 (ValidateFp8Shapes).
  std::optional<varuna::kernels::Fp8Recipe> fp8;
  // With `fp8`: which of the four compute in FP8 (all, by default); the others compute in the
  // model's dtype and have no FP8 state.
  Fp8LinearSet fp8_linears;
};

// OK if FP8 linears can run `config` on micro-batches of each of `micro_batch_sizes` examples:
// every micro-batch's tokens (examples x seq_length) and the hidden size are multiples of 16
// (the FP8 GEMMs' constraint); otherwise InvalidArgument naming the numbers and the fix.
absl::Status ValidateFp8Shapes(const Gpt2Config& config,
                               const std::vector<int64_t>& micro_batch_sizes);

// OK if `range` is a non-empty range of segments of a model with `config` (which must be
// valid); otherwise InvalidArgument naming the range, the model's segment count and the fix.
absl::Status ValidateSegmentRange(const Gpt2Config& config, varuna::SegmentRange range);

class Gpt2Stage : public varuna::StageModule {
 public:
  // Allocates and initialises the parameters of `range` (init.h, under `seed`). Throws
  // c10::Error with Validate()'s or ValidateSegmentRange()'s message if the config or range is
  // invalid; check them first to get an absl::Status instead.
  Gpt2Stage(const Gpt2Config& config, varuna::SegmentRange range, uint64_t seed,
            const Gpt2ExecutionOptions& execution = {});

  varuna::SegmentRange segments() const override { return range_; }
  int num_segments() const override { return config_.num_layers; }

  // Runs the held segments (see the header comment for inputs). Returns the activation
  // [b, s, h] leaving segments().last, or, when the range ends at the last segment, the scalar
  // loss sum(ce * loss_mask) / sum(loss_mask) with ce the per-token cross entropy, computed and
  // returned in float32 (also for float16/bfloat16 models; float64 for a float64 model). The
  // loss is NaN if loss_mask sums to 0.
  torch::Tensor Forward(const torch::Tensor& activation, const varuna::TensorMap& inputs) override;

  // Like Forward, for a range ending at the last segment, but returns the logits [b, s, V]
  // (V = padded vocab size, in the parameters' dtype) instead of the loss; reads no labels or
  // loss_mask. For evaluation and tests.
  torch::Tensor Logits(const torch::Tensor& activation, const varuna::TensorMap& inputs);

  // {{"wte.weight", "lm_head_weight"}}.
  std::vector<varuna::SharedWeight> shared_weights() const override;

  // Per parameter_names.h, for every full-model name (held or not); -1 if unknown.
  int SegmentOf(const std::string& parameter_name) const override;

  // The FP8 state of every held linear, "<linear>.fp8.<role>.<field>" (see
  // Gpt2ExecutionOptions::fp8); empty without FP8. SegmentOf maps these names to their layer.
  std::vector<std::pair<std::string, at::Tensor>> named_state() override;
  // Every held linear's amax_history[0] of each role (the amaxes of this step).
  std::vector<at::Tensor> replica_max_state() override;
  // varuna::kernels::UpdateFp8Scales on every held FP8 linear.
  void UpdateStateAfterBackward() override;

  // False for biases and LayerNorm weights, true otherwise (parameter_names.h).
  bool DecaysWeight(const std::string& parameter_name) const override;
  // The number of tokens the loss counts: the sum of "loss_mask" (the loss is their mean).
  double LossWeight(const varuna::TensorMap& micro_batch) const override;

  // All L - 1 cut points of the full model (index k follows layer k). Forward applies those
  // inside segments(): k in [first, min(last, L - 2)]. Observers set here see the activation
  // crossing them.
  std::vector<varuna::CutPoint>& cut_points() { return cut_points_; }
  const std::vector<varuna::CutPoint>& cut_points() const { return cut_points_; }

  const Gpt2Config& config() const { return config_; }

 private:
  // Segments [first, last] up to the final LayerNorm output [b, s, h] when the range ends at
  // the last segment, else the activation leaving the range.
  torch::Tensor RunSegments(const torch::Tensor& activation, const varuna::TensorMap& inputs);
  torch::Tensor Embed(const varuna::TensorMap& inputs);
  torch::Tensor AttentionMask(const varuna::TensorMap& inputs, const torch::Tensor& x) const;
  std::string Where() const;  // "Gpt2Stage(segments [a, b] of L)" for messages
  // The four linears of each held layer by full-model name ("h.3.attn.c_attn"), in layer
  // order; those not computing in FP8 have no fp8_meta().
  std::vector<std::pair<std::string, LinearParams*>> LayerLinears() const;

  Gpt2Config config_;
  varuna::SegmentRange range_;
  std::vector<varuna::CutPoint> cut_points_;

  // Held parts; null where the range does not hold them.
  torch::Tensor wte_weight_;
  torch::Tensor wpe_weight_;
  std::vector<std::shared_ptr<TransformerLayer>> layers_;  // layers_[i] = layer first + i
  std::shared_ptr<LayerNormParams> ln_f_;
  torch::Tensor lm_head_weight_;
  bool fused_cross_entropy_ = false;
  bool gradient_accumulation_fusion_ = true;
};

// A StageBuilder (varuna/pipeline/stage_module.h) that builds Gpt2Stage(config, range, seed,
// execution) for the range it is given; the built stage throws as the constructor does for an
// invalid range.
varuna::StageBuilder Gpt2StageBuilder(const Gpt2Config& config, uint64_t seed,
                                      const Gpt2ExecutionOptions& execution = {});

}  // namespace gpt2

#endif  // MODELS_GPT2_MODEL_H_
