// The parameters of the GPT-2 model by name: which exist, their shapes, the segment that owns
// each, whether weight decay applies, and the matching Hugging Face GPT2LMHeadModel key.
//
// These names are the model's checkpoint keys and never change. <i> is the GLOBAL layer index,
// also on a stage that holds only some layers. h = hidden_size, V = padded vocab size,
// P = max_position_embeddings, L = num_layers. Linear weights use LibTorch's [out, in] layout.
//
//   name                         shape       segment  decay  Hugging Face key (T = transposed)
//   wte.weight                   [V, h]      0        yes    transformer.wte.weight
//   wpe.weight                   [P, h]      0        yes    transformer.wpe.weight
//   h.<i>.ln_1.weight / .bias    [h]         i        no     transformer.h.<i>.ln_1.*
//   h.<i>.attn.c_attn.weight     [3h, h]     i        yes    transformer.h.<i>.attn.c_attn.weight T
//   h.<i>.attn.c_attn.bias       [3h]        i        no     transformer.h.<i>.attn.c_attn.bias
//   h.<i>.attn.c_proj.weight     [h, h]      i        yes    transformer.h.<i>.attn.c_proj.weight T
//   h.<i>.attn.c_proj.bias       [h]         i        no     transformer.h.<i>.attn.c_proj.bias
//   h.<i>.ln_2.weight / .bias    [h]         i        no     transformer.h.<i>.ln_2.*
//   h.<i>.mlp.c_fc.weight        [4h, h]     i        yes    transformer.h.<i>.mlp.c_fc.weight T
//   h.<i>.mlp.c_fc.bias          [4h]        i        no     transformer.h.<i>.mlp.c_fc.bias
//   h.<i>.mlp.c_proj.weight      [h, 4h]     i        yes    transformer.h.<i>.mlp.c_proj.weight T
//   h.<i>.mlp.c_proj.bias        [h]         i        no     transformer.h.<i>.mlp.c_proj.bias
//   ln_f.weight / .bias          [h]         L-1      no     transformer.ln_f.*
//   lm_head_weight               [V, h]      L-1      yes    lm_head.weight
//
// c_attn's 3h output rows are [Q | K | V], heads contiguous inside each block (Hugging Face
// order, not Megatron's per-head interleaving). lm_head_weight is a separate parameter tied to
// wte.weight (see SharedWeight in varuna/pipeline/stage_module.h); on export, slice wte.weight and
// lm_head_weight back to the tokenizer's vocab_size rows.
//
// Thread safety: pure functions.
#ifndef MODELS_GPT2_PARAMETER_NAMES_H_
#define MODELS_GPT2_PARAMETER_NAMES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt2/config.h"

namespace gpt2 {

// The tied pair: the word embedding on segment 0 and the LM head on the last segment.
inline constexpr char kWordEmbeddingName[] = "wte.weight";
inline constexpr char kLmHeadName[] = "lm_head_weight";

struct ParameterSpec {
  std::string name;
  std::vector<int64_t> shape;

  int64_t numel() const;
};

// The parameters of `segment` (0 <= segment < config.num_layers) in the model's registration
// order; empty for a segment outside the model. Allocates nothing but the list.
std::vector<ParameterSpec> SegmentParameters(const Gpt2Config& config, int segment);

// The segment owning the full-model parameter `name` of a model with `config`, or -1 if the
// model has no such parameter (unknown name, or a layer index >= num_layers).
int SegmentOfParameter(const Gpt2Config& config, const std::string& name);

// False for biases and LayerNorm weights, true for every other weight (embeddings and
// lm_head_weight decay, as in Megatron's parameter groups). Names that are not GPT-2
// parameters follow the same rule: false iff they end in ".bias".
bool DecaysWeight(const std::string& name);

// The Hugging Face GPT2LMHeadModel key of `name` ("transformer." + name, and lm_head_weight ->
// lm_head.weight), or "" if `name` is not a GPT-2 parameter name.
std::string HuggingFaceName(const std::string& name);

// True for the four Linear weights Hugging Face stores as Conv1D [in, out] (attn.c_attn,
// attn.c_proj, mlp.c_fc, mlp.c_proj): transpose them on export and import.
bool TransposedInHuggingFace(const std::string& name);

}  // namespace gpt2

#endif  // MODELS_GPT2_PARAMETER_NAMES_H_
