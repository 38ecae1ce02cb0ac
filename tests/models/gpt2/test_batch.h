// Helpers for the GPT-2 model tests: tiny configs and random micro-batches drawn from their
// own generator, so that building a batch never moves LibTorch's default generator.
#ifndef TESTS_MODELS_GPT2_TEST_BATCH_H_
#define TESTS_MODELS_GPT2_TEST_BATCH_H_

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>
#include <map>
#include <string>

#include "models/gpt2/config.h"
#include "varuna/pipeline/tensor_map.h"

namespace gpt2::testing {

// 4 layers, hidden 16, 2 heads, seq 8 (10 positions), vocab 23 padded to 24, no dropout.
inline Gpt2Config TinyConfig() {
  Gpt2Config config;
  config.num_layers = 4;
  config.hidden_size = 16;
  config.num_attention_heads = 2;
  config.seq_length = 8;
  config.max_position_embeddings = 10;
  config.vocab_size = 23;
  config.make_vocab_size_divisible_by = 8;
  config.hidden_dropout = 0.0;
  config.attention_dropout = 0.0;
  // A larger std than 0.02 makes the tiny model's outputs depend visibly on every weight.
  config.init_method_std = 0.2;
  return config;
}

// input_ids, labels uniform in [0, vocab_size); position_ids 0..s-1; loss_mask of 0/1 with
// the first token always counted.
inline varuna::TensorMap RandomBatch(const Gpt2Config& config, int64_t batch, int64_t seq,
                                     uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  varuna::TensorMap inputs;
  inputs["input_ids"] = at::randint(config.vocab_size, {batch, seq}, generator, at::kLong);
  inputs["labels"] = at::randint(config.vocab_size, {batch, seq}, generator, at::kLong);
  inputs["position_ids"] = at::arange(seq, at::kLong).expand({batch, seq}).contiguous();
  at::Tensor mask = at::randint(2, {batch, seq}, generator, at::kFloat);
  mask.select(1, 0).fill_(1.0);
  inputs["loss_mask"] = mask;
  return inputs;
}

}  // namespace gpt2::testing

#endif  // TESTS_MODELS_GPT2_TEST_BATCH_H_
