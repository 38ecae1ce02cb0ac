#include "trainer/gpt_engine.h"

#include <ATen/ATen.h>

#include <utility>

#include "models/gpt2/model.h"

namespace trainer {

absl::StatusOr<GptEngine> CreateGptEngine(const GptEngineOptions& options) {
  absl::StatusOr<AttentionChoice> attention = ChooseAttentionBackend(
      options.attention_backend, options.engine.device, options.engine.dtype, options.model,
      options.engine.micro_batch_size(), options.deterministic);
  if (!attention.ok()) return attention.status();
  gpt2::Gpt2ExecutionOptions execution;
  execution.attention = attention->backend;
  execution.fused_cross_entropy = options.fused_cross_entropy;
  execution.bias_dropout_fusion = options.bias_dropout_fusion;
  at::manual_seed(options.seed);
  absl::StatusOr<std::unique_ptr<varuna::Varuna>> engine =
      varuna::Varuna::Create(gpt2::Gpt2StageBuilder(options.model, options.seed, execution),
                             options.model.num_layers, options.engine);
  if (!engine.ok()) return engine.status();
  if (absl::Status status = (*engine)->set_optimizer(
          std::make_unique<varuna::Adam>((*engine)->parameters(), options.adam),
          options.loss_scaling);
      !status.ok()) {
    return status;
  }
  return GptEngine{std::move(*engine), std::move(*attention)};
}

}  // namespace trainer
