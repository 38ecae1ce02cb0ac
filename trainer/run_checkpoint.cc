#include "trainer/run_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "data/dataset_tokenizer.h"
#include "models/gpt2/model_record.h"
#include "trainer/lr_schedule.h"
#include "trainer/setup.h"
#include "varuna/checkpoint/files.h"
#include "varuna/io/user_paths.h"
#include "varuna/pipeline/rng_state.h"

namespace trainer {

using varuna::ResolveUserPath;
using varuna::json::Value;

RunRecord MakeRunRecord(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                        const std::optional<data::DatasetTokenizer>& tokenizer,
                        const GptData& data) {
  const LrScheduleOptions schedule = LearningRateSchedule(a);
  RunRecord record;
  record.model = gpt2::ModelConfigJson(config);
  record.model_record = gpt2::CheckpointModelJson(config);
  if (tokenizer) {
    // The files' checksum and the vocabulary size are how the export refuses other files.
    record.tokenizer = Value::object();
    record.tokenizer["type"] = data::TokenizerTypeName(tokenizer->kind);
    record.tokenizer["files"] = Value::array();
    for (const std::string& file : tokenizer->files) record.tokenizer["files"].push_back(file);
    record.tokenizer["crc32c"] = absl::StrFormat("%08x", tokenizer->crc32c);
    record.tokenizer["vocab_size"] = tokenizer->vocab_size;
  }
  record.lr_schedule = Value::object();
  record.lr_schedule["lr"] = a.lr;
  record.lr_schedule["min_lr"] = a.min_lr;
  record.lr_schedule["decay_style"] = a.lr_decay_style;
  record.lr_schedule["decay_iters"] = schedule.decay_steps;
  record.lr_schedule["warmup_iters"] = schedule.warmup_steps;
  record.data_fingerprint = absl::StrFormat("%016x", data.Fingerprint());
  return record;
}

std::string ModelDifferences(const Value& saved, const Value& current,
                             const std::vector<std::string>& ignored) {
  std::vector<std::string> differences;
  for (const gpt2::ModelRecordDifference& d : gpt2::ModelRecordDifferences(saved, current)) {
    if (std::find(ignored.begin(), ignored.end(), d.key) != ignored.end()) continue;
    std::string flag = absl::StrCat("--", d.key);
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (d.key == "padded_vocab_size") {
      flag =
          "the padded vocabulary (--tokenizer-model, --vocab-size, --make-vocab-size-divisible-by)";
    }
    differences.push_back(absl::StrCat(flag, ": checkpoint ", d.saved, ", now ", d.now));
  }
  return absl::StrJoin(differences, "; ");
}

absl::Status SaveCheckpoint(varuna::Varuna& engine, const TrainerArguments& a,
                            const TrainingState& state, const RunRecord& record, TrainingLog& log) {
  Value trainer = Value::object();
  trainer["iteration"] = state.iteration;
  trainer["consumed_samples"] = state.consumed_samples;
  trainer["skipped_iterations"] = state.skipped;
  trainer["model"] = record.model_record;
  const bool sentencepiece =
      record.tokenizer.is_object() && record.tokenizer["type"] == "SentencePieceTokenizer";
  trainer["tokenizer_model"] = sentencepiece ? record.tokenizer["files"][0] : Value("");
  trainer["tokenizer"] = record.tokenizer;
  trainer["lr_schedule"] = record.lr_schedule;
  trainer["data_fingerprint"] = record.data_fingerprint;
  varuna::CheckpointOptions options;
  options.save_dir = ResolveUserPath(a.save);
  options.staging_dir = a.checkpoint_tmpdir.empty() ? "" : ResolveUserPath(a.checkpoint_tmpdir);
  options.shard = a.shard;
  options.keep_last = static_cast<int>(a.keep_last);
  log.Info(absl::StrFormat("saving checkpoint at iteration %d to %s", state.iteration, a.save));
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status status = engine.checkpoint(options, state.iteration, trainer); !status.ok()) {
    return status;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log.Info(
      options.staging_dir.empty()
          ? absl::StrFormat("successfully saved checkpoint at iteration %d to %s (took %.2f s)",
                            state.iteration, a.save, seconds)
          : absl::StrFormat("staged checkpoint at iteration %d in %s (took %.2f s); moving it "
                            "to %s in the background",
                            state.iteration, a.checkpoint_tmpdir, seconds, a.save));
  return absl::OkStatus();
}

namespace {

// Whether load_dir/varuna_ckpt_<iteration> holds weights only (trainer.weights_only, import_hf's).
absl::StatusOr<bool> IsWeightsOnly(const std::string& load_dir, int64_t iteration) {
  absl::StatusOr<varuna::CheckpointManifest> manifest =
      varuna::ReadCheckpointManifest(load_dir, iteration, varuna::CheckpointCheck::kSizes);
  if (!manifest.ok()) return manifest.status();
  const Value* trainer = varuna::json::Find(manifest->metadata, "trainer");
  const Value* flag = trainer != nullptr ? varuna::json::Find(*trainer, "weights_only") : nullptr;
  return flag != nullptr && flag->is_boolean() && flag->get<bool>();
}

// A fresh Adam state for the weights loaded: moments zero, step count 0. Adam::LoadStateOf's
// error (it cannot fail for tensors of the optimizer's own shapes, but says so if it does).
absl::Status ResetOptimizer(varuna::Adam& adam) {
  for (size_t i = 0; i < adam.parameters().size(); ++i) {
    const std::string& name = adam.parameters()[i].name;
    const at::Tensor master = adam.master(i).clone();
    if (absl::Status status = adam.LoadStateOf(
            i,
            [&](const std::string& key) { return key == name ? master : at::zeros_like(master); });
        !status.ok()) {
      return absl::InternalError(absl::StrCat("--no-load-optim: resetting the optimizer state of ",
                                              name, " failed: ", status.message()));
    }
  }
  adam.set_step_count(0);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Value> LoadWeights(varuna::Varuna& engine, const std::string& load_dir,
                                  int64_t iteration,
                                  const std::function<absl::Status(const Value&)>& accept) {
  std::set<int> segments;
  for (int s = engine.segments().first; s <= engine.segments().last; ++s) segments.insert(s);
  absl::StatusOr<varuna::CheckpointData> data =
      varuna::ReadCheckpoint(load_dir, iteration, segments);
  if (!data.ok()) return data.status();
  const std::string where = absl::StrCat(load_dir, "/", varuna::CheckpointDirName(iteration));
  const Value* trainer = varuna::json::Find(data->metadata, "trainer");
  if (trainer == nullptr || !trainer->is_object()) {
    return absl::DataLossError(absl::StrCat(where, "/metadata.json has no trainer state"));
  }
  if (accept) {
    if (absl::Status status = accept(*trainer); !status.ok()) return status;
  }
  std::map<std::string, at::Tensor> saved;
  for (auto& [segment, tensors] : data->segments) {
    for (auto& [name, tensor] : tensors) saved[name] = tensor;
  }
  varuna::Adam& adam = engine.optimizer();
  for (size_t i = 0; i < adam.parameters().size(); ++i) {
    const std::string& name = adam.parameters()[i].name;
    auto it = saved.find(name);
    if (it == saved.end() || it->second.sizes() != adam.master(i).sizes()) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": parameter ", name, it == saved.end() ? " is missing" : " has another shape",
          " (segment ", engine.model().SegmentOf(name),
          "): the checkpoint was written for a different model configuration"));
    }
  }
  for (size_t i = 0; i < adam.parameters().size(); ++i) {
    const std::string& name = adam.parameters()[i].name;
    const at::Tensor weight = saved.at(name).to(at::kFloat);
    if (absl::Status status =
            adam.LoadStateOf(i,
                             [&](const std::string& key) {
                               return key == name ? weight : at::zeros_like(adam.master(i));
                             });
        !status.ok()) {
      return status;
    }
  }
  adam.set_step_count(0);
  return *trainer;
}

absl::StatusOr<TrainingState> Resume(const TrainerArguments& a, bool has_checkpoint,
                                     varuna::Varuna& engine, const RunRecord& record,
                                     TrainingLog& log) {
  TrainingState state;
  if (!has_checkpoint) {
    if (!a.load.empty()) {
      log.Info(absl::StrCat("> --load=", a.load,
                            " holds no checkpoint yet: starting from scratch at iteration 0"));
    }
    return state;
  }
  std::optional<int64_t> iteration;
  if (a.resume_step >= 0) iteration = a.resume_step;
  const std::string load_dir = ResolveUserPath(a.load);
  // Without the optimizer state only the weights' shapes must match.
  const bool fresh_optimizer = a.finetune || !a.load_optim;
  const std::vector<std::string> ignored =
      fresh_optimizer ? std::vector<std::string>{"seq_length", "vocab_size"}
                      : std::vector<std::string>{};
  auto same_model = [&](const Value& saved) -> absl::Status {
    const Value* saved_model = varuna::json::Find(saved, "model");
    if (saved_model == nullptr || !saved_model->is_object()) {
      return absl::DataLossError(
          absl::StrCat("the checkpoint in ", a.load, " has no model configuration"));
    }
    if (std::string diff = ModelDifferences(*saved_model, record.model, ignored); !diff.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpoint in ", a.load, " was written for another model: ", diff,
                       ". Use the model flags it was trained with (or --use-checkpoint-args)"));
    }
    return absl::OkStatus();
  };
  // A checkpoint without optimizer state (import_hf's) loads only as weights, as in Megatron.
  absl::StatusOr<int64_t> chosen =
      iteration ? absl::StatusOr<int64_t>(*iteration) : varuna::LatestCheckpointIteration(load_dir);
  if (!chosen.ok()) return chosen.status();
  absl::StatusOr<bool> weights_only = IsWeightsOnly(load_dir, *chosen);
  if (!weights_only.ok()) return weights_only.status();
  if (*weights_only && !fresh_optimizer) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint ", a.load, "/", varuna::CheckpointDirName(*chosen),
        " holds weights only (no optimizer or RNG state; import_hf writes such checkpoints): pass "
        "--finetune to train from these weights starting at iteration 0, or --no-load-optim to "
        "keep its iteration (",
        *chosen, ") and data position"));
  }
  // Megatron's words around a load, with how long it took.
  log.Info(iteration
               ? absl::StrFormat("loading checkpoint from %s at iteration %d", a.load, *iteration)
               : absl::StrFormat("loading checkpoint from %s", a.load));
  const auto load_start = std::chrono::steady_clock::now();
  Value saved;
  int64_t loaded_iteration = *chosen;
  if (a.finetune || *weights_only) {
    absl::StatusOr<Value> trainer_state = LoadWeights(engine, load_dir, *chosen, same_model);
    if (!trainer_state.ok()) return trainer_state.status();
    saved = *std::move(trainer_state);
  } else {
    std::optional<varuna::RngState> generators;
    if (!a.load_rng) generators = varuna::RngState::Capture(engine.options().device);
    absl::StatusOr<varuna::Varuna::Loaded> loaded =
        engine.load_checkpoint(load_dir, iteration, same_model);
    if (!loaded.ok()) return loaded.status();
    if (generators) generators->Restore();
    if (!a.load_optim) {
      if (absl::Status status = ResetOptimizer(engine.optimizer()); !status.ok()) return status;
    }
    if (!loaded->note.empty()) log.Info(absl::StrCat("> checkpoint: ", loaded->note));
    saved = loaded->trainer_state;
    loaded_iteration = loaded->iteration;
  }
  log.Info(absl::StrFormat(
      "successfully loaded checkpoint from %s at iteration %d (took %.2f s)", a.load,
      loaded_iteration,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count()));
  if (const Value* model = varuna::json::Find(saved, "model"); fresh_optimizer && model) {
    if (std::string diff = ModelDifferences(*model, record.model); !diff.empty()) {
      log.Info(absl::StrCat("> note: the weights' shapes match; besides them ", diff));
    }
  }
  if (a.finetune) {
    log.Info(absl::StrFormat(
        "> --finetune: the weights of %s at iteration %d; starting at iteration 0 with a fresh "
        "optimizer, LR schedule, loss scale and RNG, no samples consumed",
        a.load, loaded_iteration));
    return state;
  }
  state.iteration = loaded_iteration;
  state.consumed_samples =
      varuna::json::AsInt64(varuna::json::Find(saved, "consumed_samples")).value_or(0);
  state.skipped =
      varuna::json::AsInt64(varuna::json::Find(saved, "skipped_iterations")).value_or(0);
  log.Info(absl::StrFormat("> resumed from %s at iteration %d (%d samples consumed)%s%s", a.load,
                           state.iteration, state.consumed_samples,
                           a.load_optim ? "" : "; --no-load-optim: a fresh optimizer",
                           a.load_rng || *weights_only ? "" : "; --no-load-rng: --seed's RNG"));
  const Value* fingerprint = varuna::json::Find(saved, "data_fingerprint");
  const std::string& now = record.data_fingerprint;
  if (fingerprint != nullptr && fingerprint->is_string() &&
      fingerprint->get_ref<const std::string&>() != now) {
    log.Info(absl::StrCat("> warning: the checkpoint was trained on other data (index fingerprint ",
                          fingerprint->get_ref<const std::string&>(), ", now ", now,
                          "): the data stream continues at the same position of this data"));
  }
  return state;
}

absl::StatusOr<std::string> UseCheckpointArgs(TrainerArguments& a) {
  const std::string load_dir = ResolveUserPath(a.load);
  // As Megatron's load_args_from_checkpoint: the first run of a job whose --load is also its
  // --save finds nothing yet, and trains with the flags given.
  if (a.resume_step < 0 && varuna::ListCheckpointIterations(load_dir).empty()) {
    return absl::StrCat("> --use-checkpoint-args: --load=", a.load,
                        " holds no checkpoint yet to provide the model's flags: using the flags "
                        "given");
  }
  absl::StatusOr<int64_t> iteration = a.resume_step >= 0
                                          ? absl::StatusOr<int64_t>(a.resume_step)
                                          : varuna::LatestCheckpointIteration(load_dir);
  if (!iteration.ok()) {
    return absl::Status(iteration.status().code(),
                        absl::StrCat("--use-checkpoint-args: ", iteration.status().message()));
  }
  absl::StatusOr<varuna::CheckpointManifest> manifest =
      varuna::ReadCheckpointManifest(load_dir, *iteration, varuna::CheckpointCheck::kSizes);
  if (!manifest.ok()) return manifest.status();
  absl::StatusOr<gpt2::ModelRecord> model =
      gpt2::ReadModelRecord(manifest->metadata, manifest->dir);
  if (!model.ok()) return model.status();
  struct Shape {
    const char* flag;
    int* value;
    int64_t saved;
  };
  const Shape shapes[] = {
      {"num-layers", &a.num_layers, model->num_layers},
      {"hidden-size", &a.hidden_size, model->hidden_size},
      {"num-attention-heads", &a.num_attention_heads, model->num_attention_heads},
      {"max-position-embeddings", &a.max_position_embeddings, model->max_position_embeddings},
  };
  std::vector<std::string> conflicts;
  std::vector<std::string> taken;
  for (const Shape& shape : shapes) {
    if (a.WasGiven(shape.flag) && *shape.value != shape.saved) {
      conflicts.push_back(
          absl::StrCat("--", shape.flag, "=", *shape.value, ", checkpoint ", shape.saved));
      continue;
    }
    *shape.value = static_cast<int>(shape.saved);
    taken.push_back(absl::StrCat("--", shape.flag, "=", shape.saved));
  }
  // The sequence length shapes no weight: one given explicitly wins.
  if (!a.WasGiven("seq-length")) {
    a.seq_length = static_cast<int>(model->seq_length);
    taken.push_back(absl::StrCat("--seq-length=", model->seq_length));
  }
  // The padded vocabulary: this run's tokenizer size rounded up must give the checkpoint's rows.
  // The record keeps the padded size, not the divisor; the smallest divisor that gives it from
  // the recorded vocabulary is taken when the flag's value does not.
  const int64_t padded = model->padded_vocab_size;
  const int64_t vocab = model->vocab_size > 0 ? model->vocab_size : padded;
  auto pads_to = [&](int64_t divisor) { return (vocab + divisor - 1) / divisor * divisor; };
  if (pads_to(a.make_vocab_size_divisible_by) != padded) {
    if (a.WasGiven("make-vocab-size-divisible-by")) {
      conflicts.push_back(
          absl::StrCat("--make-vocab-size-divisible-by=", a.make_vocab_size_divisible_by,
                       " pads the vocabulary of ", vocab, " ids to ",
                       pads_to(a.make_vocab_size_divisible_by), ", checkpoint ", padded, " rows"));
    } else {
      int64_t divisor = padded - vocab + 1;
      while (padded % divisor != 0) ++divisor;
      a.make_vocab_size_divisible_by = static_cast<int>(divisor);
      taken.push_back(absl::StrCat("--make-vocab-size-divisible-by=", divisor));
    }
  }
  if (!conflicts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--use-checkpoint-args: the model flags given differ from the checkpoint ",
                     manifest->dir, ": ", absl::StrJoin(conflicts, "; "),
                     ". Drop those flags (--use-checkpoint-args supplies them) or give the "
                     "checkpoint's values"));
  }
  return absl::StrCat("> --use-checkpoint-args: the model of ", manifest->dir, ": ",
                      absl::StrJoin(taken, " "), " (", vocab, " ids, padded to ", padded, ")");
}

}  // namespace trainer
