#include "trainer/profile_mode.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "trainer/hf_config.h"
#include "varuna/json.h"
#include "varuna/profile.h"
#include "varuna/profiler.h"

namespace trainer {
namespace {

// "hidden_size: profile 64, now 32; ..." for every model field that differs.
std::string ModelDifferences(const std::string& saved_text, const varuna::json::Value& now) {
  absl::StatusOr<varuna::json::Value> saved = varuna::json::Parse(saved_text);
  if (!saved.ok() || !saved->is_object()) return "the profile's model is not a JSON object";
  std::vector<std::string> differences;
  for (const auto& [key, value] : now.as_object()) {
    const varuna::json::Value* old = saved->Find(key);
    const std::string old_text = old ? varuna::json::Serialize(*old) : "missing";
    const std::string now_text = varuna::json::Serialize(value);
    if (old_text != now_text) {
      differences.push_back(absl::StrCat(key, ": profile ", old_text, ", now ", now_text));
    }
  }
  return absl::StrJoin(differences, "; ");
}

}  // namespace

absl::Status RunProfiling(const gpt2::Gpt2Config& config, const ProfileModeOptions& options,
                          TrainingLog& log) {
  const auto start = std::chrono::steady_clock::now();
  const varuna::json::Value model_json = ModelConfigJson(config);
  const std::string model = varuna::json::Serialize(model_json);
  const std::string dtype = varuna::ProfileDtypeName(options.dtype);

  std::optional<varuna::Profile> existing;
  absl::StatusOr<varuna::Profile> read = varuna::ReadProfile(options.dir);
  if (read.ok()) {
    std::string difference;
    if (read->model != model) {
      difference = ModelDifferences(read->model, model_json);
      if (difference.empty()) difference = "the model configuration";
    } else if (read->device != options.device_name) {
      difference = absl::StrCat("device: profile ", read->device, ", now ", options.device_name);
    } else if (read->dtype != dtype) {
      difference = absl::StrCat("dtype: profile ", read->dtype, ", now ", dtype);
    }
    if (!difference.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the profile in ", options.dir, " is of another model or device (", difference,
          "): use another --profile-dir, or the flags that profile was made with"));
    }
    existing = *std::move(read);
    log.Info(absl::StrCat("> profiling: extending the profile in ", options.dir));
  } else if (!absl::IsNotFound(read.status())) {
    return read.status();
  }

  varuna::ProfilerOptions profiler;
  profiler.micro_batch_sizes = options.micro_batch_sizes;
  profiler.device = options.device;
  profiler.dtype = options.dtype;
  profiler.progress = [&log](const std::string& line) { log.Info(line); };
  const int64_t seq = config.seq_length;
  const int64_t vocab = config.vocab_size;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  varuna::InputMaker inputs = [seq, vocab, &generator](int b) {
    varuna::TensorMap map;
    map["input_ids"] = at::randint(vocab, {b, seq}, generator, at::kLong);
    map["position_ids"] = at::arange(seq, at::kLong).unsqueeze(0).repeat({b, 1});
    map["labels"] = at::randint(vocab, {b, seq}, generator, at::kLong);
    map["loss_mask"] = at::ones({b, seq}, at::kFloat);
    return map;
  };
  log.Info(absl::StrFormat("> profiling %d segments at micro-batch sizes %s on %s (%s)",
                           config.num_layers, absl::StrJoin(options.micro_batch_sizes, ","),
                           options.device_name, dtype));
  absl::StatusOr<varuna::Profile> measured =
      varuna::ProfileSegments(gpt2::Gpt2StageBuilder(config, options.seed, options.execution),
                              config.num_layers, inputs, profiler, existing ? &*existing : nullptr);
  if (!measured.ok()) return measured.status();
  measured->model = model;
  measured->device = options.device_name;

  varuna::Profile result = *measured;
  if (existing) {
    result = *std::move(existing);
    if (absl::Status status = varuna::MergeProfile(*measured, result); !status.ok()) {
      return status;
    }
  }
  if (absl::Status status = varuna::WriteProfile(result, options.dir); !status.ok()) {
    return status;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log.Info(absl::StrFormat(
      "> profile written to %s in %.1f s (micro-batch sizes measured on every segment: %s)",
      options.dir, seconds, absl::StrJoin(result.CommonMicroBatchSizes(), ",")));
  return absl::OkStatus();
}

}  // namespace trainer
