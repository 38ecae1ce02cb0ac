// Training FLOPs per iteration of a GPT-2 model by Megatron-LM's formula (Narayanan et al.,
// "Efficient Large-Scale Language Model Training on GPU Clusters", appendix), for reporting
// model FLOPs utilisation. B = global batch in sequences, s = sequence length, L = layers,
// h = hidden size, V = padded vocabulary:
//   model FLOPs (forward + backward):  72 B s L h^2 (1 + s/(6h) + V/(12 L h))
//   with full activation recompute:    96 B s L h^2 (1 + s/(6h) + V/(16 L h))
// The second is the hardware FLOPs when every forward is run twice, as Varuna's recompute does.
//
// Thread safety: pure functions.
#ifndef MODELS_GPT2_FLOPS_H_
#define MODELS_GPT2_FLOPS_H_

#include <cstdint>

#include "models/gpt2/config.h"

namespace gpt2 {

// 72 B s L h^2 (1 + s/(6h) + V/(12 L h)).
double TrainingFlopsPerIteration(int64_t batch, int64_t seq_length, int64_t num_layers,
                                 int64_t hidden_size, int64_t vocab_size);

// 96 B s L h^2 (1 + s/(6h) + V/(16 L h)).
double TrainingFlopsWithFullRecompute(int64_t batch, int64_t seq_length, int64_t num_layers,
                                      int64_t hidden_size, int64_t vocab_size);

// The same for `config` (seq_length, num_layers, hidden_size, padded_vocab_size()) and a global
// batch of `global_batch` sequences.
double TrainingFlopsPerIteration(const Gpt2Config& config, int64_t global_batch);
double TrainingFlopsWithFullRecompute(const Gpt2Config& config, int64_t global_batch);

}  // namespace gpt2

#endif  // MODELS_GPT2_FLOPS_H_
