// Varuna::checkpoint, finish_checkpoint and load_checkpoint: the engine's state in a
// checkpoint directory written by every rank (see checkpoint/files.h for the files and their
// atomicity, checkpoint/writer.h for staging and sharding).
//
// Per segment, the tensors named "<parameter>", "<parameter>.exp_avg" and
// "<parameter>.exp_avg_sq" (fp32 master weight and Adam moments), and the model's non-parameter
// state (StageModule::named_state, e.g. FP8 amax histories) under its own names. In the metadata,
// under "engine": the segment count, the optimizer step count and the loss scaler's state; under
// "trainer": the caller's state. In each rank's marker: its stage, replica and RNG states.
#include <ATen/ATen.h>

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varuna/checkpoint/files.h"
#include "varuna/checkpoint/writer.h"
#include "varuna/comm/exception_status.h"
#include "varuna/pipeline/rng_state.h"
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

// `hex` as a generator state for `device`, checked against the size of the current one.
absl::StatusOr<at::Tensor> GeneratorStateFromHex(const c10::Device& device, const std::string& hex,
                                                 const std::string& where) {
  const int64_t expected = GeneratorState(device).numel();
  if (hex.size() != static_cast<size_t>(2 * expected) ||
      hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
    return absl::DataLossError(absl::StrCat(where, ": the saved RNG state of ", device.str(),
                                            " is not ", expected, " hex-encoded bytes"));
  }
  const std::string bytes = absl::HexStringToBytes(hex);
  at::Tensor state = at::empty({expected}, at::kByte);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  return state;
}

const json::Value* FindString(const json::Value& object, const char* key) {
  const json::Value* value = json::Find(object, key);
  return value != nullptr && value->is_string() ? value : nullptr;
}

}  // namespace

// This rank's part of a checkpoint, read and checked, not yet applied.
struct Varuna::LoadedState {
  int64_t iteration = 0;
  json::Value trainer;
  std::map<std::string, at::Tensor> tensors;
  int64_t optimizer_steps = 0;
  std::optional<LossScaler::State> scaler;  // set when the saved scale continues
  at::Tensor cpu_rng;
  at::Tensor cuda_rng;  // undefined: keep the current one
  std::string note;     // about the layout and the model's state
  // (the model's state tensor, its saved value), to copy in place.
  std::vector<std::pair<at::Tensor, at::Tensor>> model_state;
};

RankCheckpoint Varuna::RankShare(const CheckpointOptions& options, int64_t iteration) const {
  RankCheckpoint share;
  share.save_dir = options.save_dir;
  share.iteration = iteration;
  share.rank = options_.rank;
  share.world_size = options_.stage_map.world_size();
  share.state = json::Value::object();
  share.state["stage"] = stage();
  share.state["replica"] = replica();
  share.state["cpu_rng_state"] = GeneratorStateHex(c10::Device(c10::kCPU));
  if (options_.device.is_cuda()) {
    share.state["cuda_rng_state"] = GeneratorStateHex(options_.device);
  }

  // Every tensor of the stage, in the optimizer's order (the same on every replica).
  struct Entry {
    int segment;
    std::string name;
    at::Tensor tensor;
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < optimizer_->parameters().size(); ++i) {
    const int segment = model_->SegmentOf(optimizer_->parameters()[i].name);
    for (auto& [name, tensor] : optimizer_->StateOf(i)) entries.push_back({segment, name, tensor});
  }
  const int replicas = options_.stage_map.num_replicas();
  const bool sharded = options.shard && replicas > 1;
  std::vector<int> writer(entries.size(), 0);
  if (sharded) {
    std::vector<int64_t> bytes;
    for (const Entry& entry : entries) {
      bytes.push_back(entry.tensor.numel() * static_cast<int64_t>(entry.tensor.element_size()));
    }
    writer = AssignShards(bytes, replicas);
  }
  // The model's non-parameter state (StageModule::named_state), written by replica 0.
  for (auto& [name, tensor] : model_->named_state()) {
    entries.push_back({model_->SegmentOf(name), name, tensor});
    writer.push_back(0);
  }
  std::map<int, NamedTensors> mine;
  for (size_t k = 0; k < entries.size(); ++k) {
    if (writer[k] == replica()) {
      mine[entries[k].segment].emplace_back(entries[k].name, entries[k].tensor.to(at::kCPU));
    }
  }
  // Replica 0 writes a file for every segment of the stage, so each one is present even
  // when it holds no tensor.
  for (int segment = segments().first; segment <= segments().last; ++segment) {
    auto it = mine.find(segment);
    if (it == mine.end() && replica() != 0) continue;
    RankCheckpoint::Part part;
    part.segment = segment;
    part.shard = sharded ? replica() : -1;
    if (it != mine.end()) part.tensors = std::move(it->second);
    share.parts.push_back(std::move(part));
  }
  return share;
}

absl::Status Varuna::checkpoint(const CheckpointOptions& options, int64_t iteration,
                                const json::Value& trainer_state) {
  if (!optimizer_) {
    return absl::FailedPreconditionError("Varuna::checkpoint called before set_optimizer");
  }
  if (!trainer_state.is_object()) {
    return absl::InvalidArgumentError("Varuna::checkpoint: the trainer state must be an object");
  }
  if (absl::Status status = finish_checkpoint(); !status.ok()) return status;
  if (!checkpoint_writer_ || checkpoint_writer_->staging_dir() != options.staging_dir) {
    checkpoint_writer_ = std::make_unique<CheckpointWriter>(options.staging_dir);
  }
  if (absl::Status status =
          OnRankZero([&] { return BeginCheckpoint(options.save_dir, iteration); });
      !status.ok()) {
    return status;
  }
  if (absl::Status status = AgreeOnStatus(checkpoint_writer_->Write(RankShare(options, iteration)));
      !status.ok()) {
    // Every rank's background move must end before rank 0 removes the directory.
    AgreeOnStatus(checkpoint_writer_->Wait()).IgnoreError();
    OnRankZero([&] { return AbandonCheckpoint(options.save_dir, iteration); }).IgnoreError();
    return status;
  }

  PendingCheckpoint pending;
  pending.options = options;
  pending.iteration = iteration;
  pending.layout = json::Value::object();
  pending.layout["stage_to_rank_map"] = options_.stage_map.ToString();
  pending.layout["num_stages"] = options_.stage_map.num_stages();
  pending.layout["num_replicas"] = options_.stage_map.num_replicas();
  pending.layout["batch_size"] = options_.batch_size;
  pending.layout["chunk_size"] = options_.chunk_size;
  pending.layout["sharded"] = options.shard && options_.stage_map.num_replicas() > 1;
  const LossScaler::State scaler = scaler_->state();
  json::Value scaler_json = json::Value::object();
  scaler_json["scale"] = scaler.scale;
  scaler_json["growth_count"] = scaler.growth_count;
  scaler_json["hysteresis_left"] = scaler.hysteresis_left;
  scaler_json["dynamic_fp16"] = options_.dtype == c10::kHalf && scaler_->dynamic();
  json::Value engine = json::Value::object();
  engine["num_segments"] = model_->num_segments();
  engine["optimizer_steps"] = optimizer_->step_count();
  engine["loss_scaler"] = std::move(scaler_json);
  pending.metadata = json::Value::object();
  pending.metadata["engine"] = std::move(engine);
  pending.metadata["trainer"] = trainer_state;
  pending_checkpoint_ = std::move(pending);
  if (checkpoint_writer_->staged()) return absl::OkStatus();
  return finish_checkpoint();
}

absl::Status Varuna::finish_checkpoint() {
  if (!pending_checkpoint_) return absl::OkStatus();
  const PendingCheckpoint pending = std::move(*pending_checkpoint_);
  pending_checkpoint_.reset();
  const std::string& save_dir = pending.options.save_dir;
  if (absl::Status status = AgreeOnStatus(checkpoint_writer_->Wait()); !status.ok()) {
    OnRankZero([&] { return AbandonCheckpoint(save_dir, pending.iteration); }).IgnoreError();
    return status;
  }
  return OnRankZero([&]() -> absl::Status {
    if (absl::Status status =
            FinalizeCheckpoint(save_dir, pending.iteration, options_.stage_map.world_size(),
                               pending.layout, pending.metadata);
        !status.ok()) {
      AbandonCheckpoint(save_dir, pending.iteration).IgnoreError();  // unless COMPLETE is in
      return status;
    }
    if (pending.options.keep_last > 0) {
      return RemoveOldCheckpoints(save_dir, pending.options.keep_last, pending.iteration).status();
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<Varuna::LoadedState> Varuna::ReadState(const std::string& load_dir,
                                                      int64_t iteration,
                                                      const Acceptor& accept) const {
  std::set<int> wanted;
  for (int s = segments().first; s <= segments().last; ++s) wanted.insert(s);
  absl::StatusOr<CheckpointData> data = ReadCheckpoint(load_dir, iteration, wanted);
  if (!data.ok()) return data.status();
  const std::string where = absl::StrCat(load_dir, "/", CheckpointDirName(iteration));

  const json::Value* engine = json::Find(data->metadata, "engine");
  const std::optional<int64_t> steps =
      engine ? json::AsInt64(json::Find(*engine, "optimizer_steps")) : std::nullopt;
  const json::Value* scaler = engine ? json::Find(*engine, "loss_scaler") : nullptr;
  const std::optional<int64_t> num_segments =
      engine ? json::AsInt64(json::Find(*engine, "num_segments")) : std::nullopt;
  const json::Value* trainer = json::Find(data->metadata, "trainer");
  if (!steps.has_value() || scaler == nullptr || !scaler->is_object() ||
      !num_segments.has_value() || trainer == nullptr) {
    return absl::DataLossError(absl::StrCat(where,
                                            "/metadata.json lacks the engine's state "
                                            "(optimizer_steps, loss_scaler, num_segments) or the "
                                            "trainer's"));
  }
  if (accept) {
    if (absl::Status status = accept(*trainer); !status.ok()) return status;
  }
  if (*num_segments != model_->num_segments()) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " holds a model of ", *num_segments, " segments; this model has ",
        model_->num_segments(), ": load it with the model configuration that wrote it"));
  }

  LoadedState state;
  state.iteration = iteration;
  state.trainer = *trainer;
  state.optimizer_steps = *steps;
  for (auto& [segment, named] : data->segments) {
    for (auto& [name, tensor] : named) state.tensors[name] = tensor;
  }
  std::set<std::string> known;  // the checkpoint's names this model loads
  for (size_t i = 0; i < optimizer_->parameters().size(); ++i) {
    for (const auto& [name, current] : optimizer_->StateOf(i)) {
      known.insert(name);
      auto it = state.tensors.find(name);
      if (it == state.tensors.end() || it->second.sizes() != current.sizes()) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, ": tensor ", name,
                         it != state.tensors.end() ? " has another shape" : " is missing",
                         " in segment ", model_->SegmentOf(optimizer_->parameters()[i].name),
                         ": the checkpoint was written for a different model configuration"));
      }
    }
  }

  // The model's non-parameter state: loaded where saved (with its shape); absent, it stays as
  // it is (fresh), and the note says so; saved state this model has no place for (FP8 state of
  // a linear that now computes in its dtype, say) is left out, and the note says that too.
  std::vector<std::string> fresh;
  for (auto& [name, current] : model_->named_state()) {
    known.insert(name);
    auto it = state.tensors.find(name);
    if (it == state.tensors.end()) {
      fresh.push_back(name);
      continue;
    }
    if (it->second.sizes() != current.sizes()) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": model state ", name, " has shape [", absl::StrJoin(it->second.sizes(), ", "),
          "] in the checkpoint but [", absl::StrJoin(current.sizes(), ", "),
          "] in this model: the setting that sizes it differs from the run that wrote the "
          "checkpoint; run with that run's setting"));
    }
    state.model_state.emplace_back(current, it->second);
  }
  std::vector<std::string> notes;
  if (!fresh.empty()) {
    notes.push_back(absl::StrCat("the checkpoint holds none of ", fresh.size(),
                                 " model state tensors (", fresh.front(),
                                 fresh.size() > 1 ? ", ..." : "", "): they start fresh"));
  }
  std::vector<std::string> left_out;
  for (const auto& [name, tensor] : state.tensors) {
    if (known.count(name) == 0) left_out.push_back(name);
  }
  if (!left_out.empty()) {
    notes.push_back(absl::StrCat("this model has no place for ", left_out.size(),
                                 " model state tensors of the checkpoint (", left_out.front(),
                                 left_out.size() > 1 ? ", ..." : "", "): left out"));
  }

  // RNG: under the layout that wrote it, each rank continues its own generator; under another
  // layout, every rank takes rank 0's (as every rank started from one seed).
  const json::Value* saved_map = FindString(data->layout, "stage_to_rank_map");
  const std::string current_map = options_.stage_map.ToString();
  const bool same_layout = saved_map != nullptr &&
                           saved_map->get_ref<const std::string&>() == current_map &&
                           data->rank_states.count(options_.rank) > 0;
  if (!same_layout) {
    notes.push_back(absl::StrCat("the layout changed from \"",
                                 saved_map ? saved_map->get<std::string>() : "unknown", "\" to \"",
                                 current_map, "\": every rank continues rank 0's RNG state"));
  }
  state.note = absl::StrJoin(notes, "; ");
  auto rank_state = data->rank_states.find(same_layout ? options_.rank : 0);
  const json::Value* cpu_rng = rank_state != data->rank_states.end()
                                   ? FindString(rank_state->second, "cpu_rng_state")
                                   : nullptr;
  if (cpu_rng == nullptr) {
    return absl::DataLossError(absl::StrCat(where, "/metadata.json lacks rank ",
                                            same_layout ? options_.rank : 0, "'s cpu_rng_state"));
  }
  absl::StatusOr<at::Tensor> cpu =
      GeneratorStateFromHex(c10::kCPU, cpu_rng->get_ref<const std::string&>(), where);
  if (!cpu.ok()) return cpu.status();
  state.cpu_rng = *cpu;
  // A CUDA state is restored only onto a CUDA device (a run resumed on another device type
  // draws its dropout from a fresh generator there).
  const json::Value* cuda_rng = FindString(rank_state->second, "cuda_rng_state");
  if (options_.device.is_cuda() && cuda_rng != nullptr) {
    absl::StatusOr<at::Tensor> cuda =
        GeneratorStateFromHex(options_.device, cuda_rng->get_ref<const std::string&>(), where);
    if (!cuda.ok()) return cuda.status();
    state.cuda_rng = *cuda;
  }

  // The saved scale continues only from dynamic fp16 to dynamic fp16; otherwise (fp32 or bf16
  // on either side, a static --loss-scale now) the scale set_optimizer chose stands.
  const json::Value* saved_dynamic = json::Find(*scaler, "dynamic_fp16");
  if (options_.dtype == c10::kHalf && scaler_->dynamic() && saved_dynamic != nullptr &&
      saved_dynamic->is_boolean() && saved_dynamic->get<bool>()) {
    LossScaler::State restored = scaler_->state();
    const json::Value* scale = json::Find(*scaler, "scale");
    if (scale && scale->is_number()) restored.scale = scale->get<double>();
    if (auto growth = json::AsInt64(json::Find(*scaler, "growth_count"))) {
      restored.growth_count = *growth;
    }
    if (auto hysteresis = json::AsInt64(json::Find(*scaler, "hysteresis_left"))) {
      restored.hysteresis_left = *hysteresis;
    }
    state.scaler = restored;
  }
  return state;
}

absl::Status Varuna::ApplyState(const LoadedState& state) {
  auto find = [&state](const std::string& name) {
    auto it = state.tensors.find(name);
    return it == state.tensors.end() ? at::Tensor() : it->second;
  };
  for (size_t i = 0; i < optimizer_->parameters().size(); ++i) {
    if (absl::Status status = optimizer_->LoadStateOf(i, find); !status.ok()) return status;
  }
  optimizer_->set_step_count(state.optimizer_steps);
  {
    at::NoGradGuard no_grad;
    for (const auto& [tensor, saved] : state.model_state) tensor.copy_(saved);
  }
  if (state.scaler) scaler_->set_state(*state.scaler);
  try {
    SetGeneratorState(c10::Device(c10::kCPU), state.cpu_rng);
    if (state.cuda_rng.defined()) SetGeneratorState(options_.device, state.cuda_rng);
  } catch (const std::exception& e) {
    return absl::DataLossError(
        absl::StrCat("the saved RNG state is invalid: ", comm::OneLineMessage(e)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Varuna::Loaded> Varuna::load_checkpoint(const std::string& load_dir,
                                                       std::optional<int64_t> iteration,
                                                       const Acceptor& accept) {
  if (!optimizer_) {
    return absl::FailedPreconditionError("Varuna::load_checkpoint called before set_optimizer");
  }
  std::set<int64_t> rejected;
  std::vector<std::string> skipped;
  while (true) {
    int64_t candidate = iteration.value_or(-1);
    std::string note;
    if (!iteration) {
      // Rank 0 chooses, so that every rank loads the same checkpoint.
      absl::StatusOr<int64_t> latest = int64_t{-1};
      absl::Status chosen = OnRankZero([&] {
        latest = LatestCheckpointIteration(load_dir, &note, rejected);
        return latest.status();
      });
      if (!chosen.ok()) {
        return skipped.empty() ? chosen
                               : absl::Status(chosen.code(),
                                              absl::StrCat(chosen.message(), "; rejected earlier: ",
                                                           absl::StrJoin(skipped, "; ")));
      }
      std::vector<double> agreed = {options_.rank == 0 ? static_cast<double>(*latest) : 0.0};
      if (absl::Status status = AllRanksSum(agreed); !status.ok()) return status;
      candidate = static_cast<int64_t>(agreed[0]);
    }
    absl::StatusOr<LoadedState> state = ReadState(load_dir, candidate, accept);
    absl::Status agreed = AgreeOnStatus(state.status());
    if (agreed.ok()) {
      // Checked on every rank; applying cannot fail but for a corrupt RNG state.
      if (absl::Status status = AgreeOnStatus(ApplyState(*state)); !status.ok()) return status;
      std::vector<std::string> notes;
      if (!note.empty()) notes.push_back(note);
      if (!skipped.empty()) {
        notes.push_back(
            absl::StrCat("skipped as damaged or incomplete: ", absl::StrJoin(skipped, "; ")));
      }
      if (!state->note.empty()) notes.push_back(state->note);
      return Loaded{candidate, state->trainer, absl::StrJoin(notes, "; ")};
    }
    if (iteration || agreed.code() != absl::StatusCode::kDataLoss) return agreed;
    rejected.insert(candidate);
    skipped.push_back(absl::StrCat(CheckpointDirName(candidate), " (", agreed.message(), ")"));
  }
}

}  // namespace varuna
