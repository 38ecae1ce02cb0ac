// Varuna::checkpoint and Varuna::load_checkpoint: the engine's state in a checkpoint
// directory (see checkpoint_files.h for the files and their atomicity).
//
// Per segment, the tensors named "<parameter>", "<parameter>.exp_avg" and
// "<parameter>.exp_avg_sq" (fp32 master weight and Adam moments). In the metadata, under
// "engine": the optimizer step count, the loss scaler's state and the CPU RNG state; under
// "trainer": the caller's state.
#include <ATen/ATen.h>

#include <cstring>
#include <map>
#include <set>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "varuna/checkpoint_files.h"
#include "varuna/rng_state.h"
#include "varuna/varuna.h"

namespace varuna {
namespace {

// The state of `device`'s default generator (CPU: the Mersenne Twister; CUDA: seed and
// offset), as hex.
std::string GeneratorStateHex(const c10::Device& device) {
  const at::Tensor state = GeneratorState(device).contiguous();
  return absl::BytesToHexString(absl::string_view(static_cast<const char*>(state.data_ptr()),
                                                  static_cast<size_t>(state.numel())));
}

absl::Status SetGeneratorStateHex(const c10::Device& device, const std::string& hex) {
  const std::string bytes = absl::HexStringToBytes(hex);
  at::Tensor state = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  try {
    SetGeneratorState(device, state);
  } catch (const std::exception& e) {
    return absl::DataLossError(
        absl::StrCat("the saved RNG state of ", device.str(), " is invalid: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Varuna::checkpoint(const std::string& save_dir, int64_t iteration,
                                const json::Value& trainer_state) {
  if (!optimizer_) {
    return absl::FailedPreconditionError("Varuna::checkpoint called before set_optimizer");
  }
  CheckpointData data;
  data.iteration = iteration;
  for (size_t i = 0; i < optimizer_->parameters().size(); ++i) {
    const int segment = model_->SegmentOf(optimizer_->parameters()[i].name);
    for (auto& [name, tensor] : optimizer_->StateOf(i)) {
      data.segments[segment].emplace_back(name, tensor.to(at::kCPU));
    }
  }
  const LossScaler::State scaler = scaler_->state();
  json::Value scaler_json = json::Value::MakeObject();
  scaler_json.Set("scale", scaler.scale);
  scaler_json.Set("growth_count", scaler.growth_count);
  scaler_json.Set("hysteresis_left", scaler.hysteresis_left);
  scaler_json.Set("dynamic_fp16", options_.dtype == c10::kHalf && scaler_->dynamic());
  json::Value engine = json::Value::MakeObject();
  engine.Set("num_segments", model_->num_segments());
  engine.Set("optimizer_steps", optimizer_->step_count());
  engine.Set("loss_scaler", std::move(scaler_json));
  engine.Set("cpu_rng_state", GeneratorStateHex(c10::Device(c10::kCPU)));
  if (options_.device.is_cuda()) engine.Set("cuda_rng_state", GeneratorStateHex(options_.device));
  data.metadata = json::Value::MakeObject();
  data.metadata.Set("engine", std::move(engine));
  data.metadata.Set("trainer", trainer_state);
  return WriteCheckpoint(save_dir, data);
}

absl::StatusOr<Varuna::Loaded> Varuna::load_checkpoint(const std::string& load_dir,
                                                       std::optional<int64_t> iteration,
                                                       const Acceptor& accept) {
  if (!optimizer_) {
    return absl::FailedPreconditionError("Varuna::load_checkpoint called before set_optimizer");
  }
  std::string note;
  if (!iteration) {
    absl::StatusOr<int64_t> latest = LatestCheckpointIteration(load_dir, &note);
    if (!latest.ok()) return latest.status();
    iteration = *latest;
  }
  std::set<int> segments;
  for (int s = model_->segments().first; s <= model_->segments().last; ++s) segments.insert(s);
  absl::StatusOr<CheckpointData> data = ReadCheckpoint(load_dir, *iteration, segments);
  if (!data.ok()) return data.status();
  const std::string where = absl::StrCat(load_dir, "/varuna_ckpt_", *iteration);

  const json::Value* engine = data->metadata.Find("engine");
  const json::Value* steps = engine ? engine->Find("optimizer_steps") : nullptr;
  const json::Value* scaler = engine ? engine->Find("loss_scaler") : nullptr;
  const json::Value* rng = engine ? engine->Find("cpu_rng_state") : nullptr;
  const json::Value* num_segments = engine ? engine->Find("num_segments") : nullptr;
  const json::Value* trainer = data->metadata.Find("trainer");
  if (steps == nullptr || !steps->is_int() || scaler == nullptr || !scaler->is_object() ||
      rng == nullptr || !rng->is_string() || num_segments == nullptr || !num_segments->is_int() ||
      trainer == nullptr) {
    return absl::DataLossError(
        absl::StrCat(where,
                     "/metadata.json lacks the engine's state (optimizer_steps, "
                     "loss_scaler, cpu_rng_state, num_segments) or the trainer's"));
  }
  if (accept) {
    if (absl::Status status = accept(*trainer); !status.ok()) return status;
  }
  if (num_segments->as_int() != model_->num_segments()) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " holds a model of ", num_segments->as_int(), " segments; this model has ",
        model_->num_segments(), ": load it with the model configuration that wrote it"));
  }

  // Check everything before changing anything.
  std::map<std::string, at::Tensor> tensors;
  for (auto& [segment, named] : data->segments) {
    for (auto& [name, tensor] : named) tensors[name] = tensor;
  }
  auto find = [&tensors](const std::string& name) {
    auto it = tensors.find(name);
    return it == tensors.end() ? at::Tensor() : it->second;
  };
  for (size_t i = 0; i < optimizer_->parameters().size(); ++i) {
    for (const auto& [name, current] : optimizer_->StateOf(i)) {
      const at::Tensor saved = find(name);
      if (!saved.defined() || saved.sizes() != current.sizes()) {
        return absl::FailedPreconditionError(absl::StrCat(
            where, ": tensor ", name, saved.defined() ? " has another shape" : " is missing",
            " in segment ", model_->SegmentOf(optimizer_->parameters()[i].name),
            ": the checkpoint was written for a different model configuration"));
      }
    }
  }
  // The RNG states are the one thing left that can be rejected: restore them first. A CUDA
  // state is restored only onto a CUDA device (a run resumed on another device type draws
  // its dropout from a fresh generator there).
  if (absl::Status status = SetGeneratorStateHex(c10::Device(c10::kCPU), rng->as_string());
      !status.ok()) {
    return status;
  }
  const json::Value* cuda_rng = engine->Find("cuda_rng_state");
  if (options_.device.is_cuda() && cuda_rng != nullptr && cuda_rng->is_string()) {
    if (absl::Status status = SetGeneratorStateHex(options_.device, cuda_rng->as_string());
        !status.ok()) {
      return status;
    }
  }
  for (size_t i = 0; i < optimizer_->parameters().size(); ++i) {
    if (absl::Status status = optimizer_->LoadStateOf(i, find); !status.ok()) return status;
  }
  optimizer_->set_step_count(steps->as_int());
  // The saved scale continues only from dynamic fp16 to dynamic fp16; otherwise (fp32 or bf16
  // on either side, a static --loss-scale now) the scale set_optimizer chose stands.
  const json::Value* saved_dynamic = scaler->Find("dynamic_fp16");
  if (options_.dtype == c10::kHalf && scaler_->dynamic() && saved_dynamic != nullptr &&
      saved_dynamic->is_bool() && saved_dynamic->as_bool()) {
    LossScaler::State state = scaler_->state();
    const json::Value* scale = scaler->Find("scale");
    const json::Value* growth = scaler->Find("growth_count");
    const json::Value* hysteresis = scaler->Find("hysteresis_left");
    if (scale && scale->is_number()) state.scale = scale->as_double();
    if (growth && growth->is_int()) state.growth_count = growth->as_int();
    if (hysteresis && hysteresis->is_int()) state.hysteresis_left = hysteresis->as_int();
    scaler_->set_state(state);
  }
  return Loaded{*iteration, *trainer, note};
}

}  // namespace varuna
