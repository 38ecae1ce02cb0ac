// The GPT-2 engine of a training run: Varuna over this rank's GPT-2 stages
// (gpt2::Gpt2StageBuilder), with the attention backend chosen for the device and micro-batch,
// the initial weights drawn from `seed`, and Adam with fp32 master weights and the loss scaler
// installed. pretrain_gpt2 and the throughput benchmark both build their engine here, so the
// benchmark measures the engine the trainer runs.
//
// Thread safety: CreateGptEngine seeds LibTorch's global generator (at::manual_seed); call it
// from the thread that trains, before any other random draw that must be reproducible.
#ifndef VARUNA_TRAINER_GPT_ENGINE_H_
#define VARUNA_TRAINER_GPT_ENGINE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model.h"
#include "trainer/attention_backend.h"
#include "trainer/fp8_linear_choice.h"
#include "varuna/optim/adam.h"
#include "varuna/optim/loss_scaler.h"
#include "varuna/varuna.h"

namespace trainer {

struct GptEngineOptions {
  gpt2::Gpt2Config model;
  // Stage map, rank, batch and micro-batch, device, dtype, clipping, schedule, world.
  varuna::VarunaOptions engine;
  std::string attention_backend = "auto";  // --attention-backend
  // --deterministic: the mode is on (EnterDeterministicMode ran); the attention backend is
  // chosen among the deterministic ones.
  bool deterministic = false;
  // How the model computes: the fusions and FP8 (TrainerExecutionOptions in trainer/setup.h
  // reads them from the flags). Its `attention` and `fp8_linears` are ignored: CreateGptEngine
  // sets them from what it chooses by attention_backend and fp8_linears.
  gpt2::Gpt2ExecutionOptions execution;
  // --fp8-linears, with execution.fp8 (trainer/fp8_linear_choice.h).
  Fp8LinearsFlag fp8_linears;
  uint64_t seed = 1234;  // the initial weights
  varuna::AdamOptions adam;
  varuna::LossScalerOptions loss_scaling;
};

struct GptEngine {
  std::unique_ptr<varuna::Varuna> varuna;  // with its optimizer set
  AttentionChoice attention;               // the backend in use and why (for the log)
  std::string fp8_linears;                 // with FP8: the linears in FP8 and why (for the log)
};

// The sizes of the micro-batches a step of `options` runs: the micro-batch size, and the last
// one's when it is smaller.
std::vector<int64_t> MicroBatchSizes(const varuna::VarunaOptions& options);

// Builds the engine. Errors: those of ChooseAttentionBackend (a bad --attention-backend), and
// with fp8 those of varuna::kernels::CheckFp8Device, gpt2::ValidateFp8Shapes and
// ChooseFp8Linears; Varuna::Create (options that do not fit the model) and
// Varuna::set_optimizer.
absl::StatusOr<GptEngine> CreateGptEngine(const GptEngineOptions& options);

}  // namespace trainer

#endif  // VARUNA_TRAINER_GPT_ENGINE_H_
