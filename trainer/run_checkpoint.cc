#include "trainer/run_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "data/dataset_tokenizer.h"
#include "models/gpt2/model_record.h"
#include "trainer/lr_schedule.h"
#include "trainer/setup.h"
#include "varuna/io/user_paths.h"

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
  record.data_fingerprint = absl::StrFormat("%016x", data.indexed().Fingerprint());
  return record;
}

std::string ModelDifferences(const Value& saved, const Value& current) {
  std::vector<std::string> differences;
  for (const gpt2::ModelRecordDifference& d : gpt2::ModelRecordDifferences(saved, current)) {
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
  log.Info(options.staging_dir.empty()
               ? absl::StrFormat("successfully saved checkpoint at iteration %d to %s in %.2f s",
                                 state.iteration, a.save, seconds)
               : absl::StrFormat("staged checkpoint at iteration %d in %s in %.2f s; moving it to "
                                 "%s in the background",
                                 state.iteration, a.checkpoint_tmpdir, seconds, a.save));
  return absl::OkStatus();
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
  auto same_model = [&](const Value& saved) -> absl::Status {
    const Value* saved_model = varuna::json::Find(saved, "model");
    if (saved_model == nullptr || !saved_model->is_object()) {
      return absl::DataLossError(
          absl::StrCat("the checkpoint in ", a.load, " has no model configuration"));
    }
    if (std::string diff = ModelDifferences(*saved_model, record.model); !diff.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpoint in ", a.load, " was written for another model: ", diff,
                       ". Use the model flags it was trained with"));
    }
    return absl::OkStatus();
  };
  absl::StatusOr<varuna::Varuna::Loaded> loaded =
      engine.load_checkpoint(ResolveUserPath(a.load), iteration, same_model);
  if (!loaded.ok()) return loaded.status();
  const Value& saved = loaded->trainer_state;
  if (!loaded->note.empty()) log.Info(absl::StrCat("> checkpoint: ", loaded->note));
  state.iteration = loaded->iteration;
  state.consumed_samples =
      varuna::json::AsInt64(varuna::json::Find(saved, "consumed_samples")).value_or(0);
  state.skipped =
      varuna::json::AsInt64(varuna::json::Find(saved, "skipped_iterations")).value_or(0);
  log.Info(absl::StrFormat("> resumed from %s at iteration %d (%d samples consumed)", a.load,
                           state.iteration, state.consumed_samples));
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

}  // namespace trainer
