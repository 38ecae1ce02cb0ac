// Megatron-LM's initialisation of GPT-2 parameters, made independent of how the model is split:
// every parameter is drawn from its own CPU generator seeded from (run seed, parameter name), so
// a stage holding segments [3, 5] gets bit-identical values to the same parameters of the full
// model, and lm_head_weight (seeded with wte.weight's name) equals wte.weight on whichever
// stage it lives, without communication.
//
//   weights                           normal(0, init_method_std)
//   attn.c_proj / mlp.c_proj weights  normal(0, init_method_std / sqrt(2 * num_layers))
//   biases                            0
//   LayerNorm weights / biases        1 / 0
//   lm_head_weight                    the values of wte.weight
//
// Thread safety: pure functions; InitializeParameter writes only `parameter`.
#ifndef MODELS_GPT2_INIT_H_
#define MODELS_GPT2_INIT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "models/gpt2/config.h"

namespace gpt2 {

// FNV-1a 64 over the 8 bytes of `seed` (little-endian) followed by the bytes of `name`.
uint64_t ParameterSeed(uint64_t seed, const std::string& name);

// Fills the CPU tensor `parameter` (any floating dtype) with the initial value of the GPT-2
// parameter `name` (a parameter_names.h name) under `seed`, without recording autograd history
// and without touching LibTorch's default generator. Throws c10::Error naming `name` if it is
// not a GPT-2 parameter name or `parameter` is not on the CPU.
void InitializeParameter(const Gpt2Config& config, uint64_t seed, const std::string& name,
                         at::Tensor& parameter);

}  // namespace gpt2

#endif  // MODELS_GPT2_INIT_H_
