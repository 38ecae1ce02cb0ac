#include "trainer/fp8_start.h"

#include <cstdint>
#include <vector>

#include "models/gpt2/model.h"
#include "trainer/gpt_engine.h"
#include "trainer/setup.h"
#include "varuna/kernels/fp8_linear.h"

namespace trainer {

absl::Status CheckFp8Start(const TrainerArguments& a, const varuna::LaunchEnvironment& launch) {
  if (a.fp8_format.empty()) return absl::OkStatus();
  absl::StatusOr<gpt2::Gpt2Config> config = ModelConfig(a, /*vocab_size=*/1);
  absl::StatusOr<varuna::VarunaOptions> options = EngineOptions(a, launch);
  if (!config.ok() || !options.ok()) return absl::OkStatus();  // reported by the set-up
  if (absl::Status status = varuna::kernels::CheckFp8Device(options->device); !status.ok()) {
    return status;
  }
  return gpt2::ValidateFp8Shapes(*config, MicroBatchSizes(*options));
}

}  // namespace trainer
