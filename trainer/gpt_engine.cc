#include "trainer/gpt_engine.h"

#include <ATen/ATen.h>

#include <utility>

#include "models/gpt2/model.h"

namespace trainer {

std::vector<int64_t> MicroBatchSizes(const varuna::VarunaOptions& options) {
  const int64_t micro = options.micro_batch_size();
  std::vector<int64_t> sizes = {micro};
  if (options.batch_size % micro != 0) sizes.push_back(options.batch_size % micro);
  return sizes;
}

absl::StatusOr<GptEngine> CreateGptEngine(const GptEngineOptions& options) {
  if (options.execution.fp8) {
    if (absl::Status status = varuna::kernels::CheckFp8Device(options.engine.device);
        !status.ok()) {
      return status;
    }
    if (absl::Status status =
            gpt2::ValidateFp8Shapes(options.model, MicroBatchSizes(options.engine));
        !status.ok()) {
      return status;
    }
  }
  absl::StatusOr<AttentionChoice> attention = ChooseAttentionBackend(
      options.attention_backend, options.engine.device, options.engine.dtype, options.model,
      options.engine.micro_batch_size(), options.deterministic);
  if (!attention.ok()) return attention.status();
  gpt2::Gpt2ExecutionOptions execution = options.execution;
  execution.attention = attention->backend;
  std::string fp8_linears;
  if (execution.fp8) {
    absl::StatusOr<Fp8LinearsChoice> choice = ChooseFp8Linears(
        options.fp8_linears, options.engine.device, options.engine.dtype, options.model,
        options.engine.micro_batch_size(), *execution.fp8, options.engine.world);
    if (!choice.ok()) return choice.status();
    execution.fp8_linears = choice->linears;
    fp8_linears = std::move(choice->reason);
  }
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
  return GptEngine{std::move(*engine), std::move(*attention), std::move(fp8_linears)};
}

}  // namespace trainer
