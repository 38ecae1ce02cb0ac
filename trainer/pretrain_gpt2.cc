// pretrain_gpt2: Megatron-LM's pretrain_gpt2 in C++, on the Varuna engine.
//
//   bazel run //trainer:pretrain_gpt2                      # the sample run (see README)
//   bazel run //trainer:pretrain_gpt2 -- --preset=gpt2-355m --data-path=DATA_text_document
//       --tokenizer-model=spm.model --batch-size=8 --train-iters=1000 --lr=1.5e-4 --save=ckpts
//
// One step: the data gives this replica's batch, Varuna::step runs forward, backward and the
// update, the LR schedule moves only on applied steps; every --log-interval a line with loss,
// loss scale, grad norm, throughput and MFU; every --eval-interval the validation loss; every
// --save-interval a checkpoint.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/DeviceAccelerator.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "data/tokenizer_status.h"
#include "models/gpt2/config.h"
#include "models/gpt2/flops.h"
#include "models/gpt2/model.h"
#include "models/gpt2/summary.h"
#include "trainer/arguments.h"
#include "trainer/attention_backend.h"
#include "trainer/device_name.h"
#include "trainer/gpt_data.h"
#include "trainer/hf_config.h"
#include "trainer/lr_schedule.h"
#include "trainer/paths.h"
#include "trainer/profile_mode.h"
#include "trainer/sample_corpus.h"
#include "trainer/stop_signal.h"
#include "trainer/throughput.h"
#include "trainer/training_log.h"
#include "varuna/checkpoint/files.h"
#include "varuna/comm/world.h"
#include "varuna/io/json.h"
#include "varuna/pipeline/schedule.h"
#include "varuna/varuna.h"

namespace trainer {
namespace {

using varuna::json::Value;

constexpr char kSampleFolder[] = "varuna_sample_run";
constexpr char kSampleCorpus[] = "data/corpus/fortunes.jsonl";
constexpr int kSampleVocabSize = 4096;

absl::StatusOr<gpt2::Gpt2Config> ModelConfig(const TrainerArguments& a, int64_t vocab_size) {
  absl::StatusOr<gpt2::Gpt2Config> config = gpt2::PresetConfig(a.preset);
  if (!config.ok()) return config.status();
  if (a.num_layers) config->num_layers = a.num_layers;
  if (a.hidden_size) config->hidden_size = a.hidden_size;
  if (a.num_attention_heads) config->num_attention_heads = a.num_attention_heads;
  if (a.seq_length) config->seq_length = a.seq_length;
  if (a.max_position_embeddings) config->max_position_embeddings = a.max_position_embeddings;
  config->vocab_size = static_cast<int>(vocab_size);
  config->make_vocab_size_divisible_by = a.make_vocab_size_divisible_by;
  config->hidden_dropout = a.hidden_dropout;
  config->attention_dropout = a.attention_dropout;
  config->init_method_std = a.init_method_std;
  if (absl::Status status = config->Validate(); !status.ok()) return status;
  return config;
}

// "--hidden-size: checkpoint 128, flags 256; ..." for every model field that differs.
std::string ModelDifferences(const Value& saved, const Value& current) {
  std::vector<std::string> differences;
  for (const auto& [key, value] : current.items()) {
    const Value* old = varuna::json::Find(saved, key);
    const std::string old_text = old ? varuna::json::Serialize(*old) : "missing";
    if (old_text != varuna::json::Serialize(value)) {
      std::string flag = absl::StrCat("--", key);
      std::replace(flag.begin(), flag.end(), '_', '-');
      if (key == "padded_vocab_size") {
        flag =
            "the padded vocabulary (--tokenizer-model, --vocab-size, "
            "--make-vocab-size-divisible-by)";
      }
      differences.push_back(
          absl::StrCat(flag, ": checkpoint ", old_text, ", now ", varuna::json::Serialize(value)));
    }
  }
  return absl::StrJoin(differences, "; ");
}

struct TrainingState {
  int64_t iteration = 0;
  int64_t consumed_samples = 0;
  int64_t skipped = 0;
};

absl::StatusOr<double> Evaluate(varuna::Varuna& engine, const GptData& data, data::Split split,
                                int64_t eval_iters) {
  double total = 0;
  for (int64_t k = 0; k < eval_iters; ++k) {
    absl::StatusOr<varuna::TensorMap> batch = data.EvalBatch(split, k);
    if (!batch.ok()) return batch.status();
    absl::StatusOr<double> loss = engine.evaluate(*batch);
    if (!loss.ok()) return loss.status();
    total += *loss;
  }
  return total / static_cast<double>(eval_iters);
}

// What a checkpoint records besides the engine's state.
struct SavedContext {
  Value model;                  // ModelConfigJson
  std::string tokenizer_model;  // absolute path, for export_hf
  Value lr_schedule;
  std::string data_fingerprint;
};

absl::Status Save(varuna::Varuna& engine, const TrainerArguments& a, const TrainingState& state,
                  const SavedContext& context, TrainingLog& log) {
  Value trainer = Value::object();
  trainer["iteration"] = state.iteration;
  trainer["consumed_samples"] = state.consumed_samples;
  trainer["skipped_iterations"] = state.skipped;
  trainer["model"] = context.model;
  trainer["tokenizer_model"] = context.tokenizer_model;
  trainer["lr_schedule"] = context.lr_schedule;
  trainer["data_fingerprint"] = context.data_fingerprint;
  varuna::CheckpointOptions options;
  options.save_dir = ResolveUserPath(a.save);
  options.staging_dir = a.checkpoint_tmpdir.empty() ? "" : ResolveUserPath(a.checkpoint_tmpdir);
  options.shard = a.shard;
  options.keep_last = static_cast<int>(a.keep_last);
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status status = engine.checkpoint(options, state.iteration, trainer); !status.ok()) {
    return status;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log.Info(options.staging_dir.empty()
               ? absl::StrFormat("saved checkpoint at iteration %d to %s in %.2f s",
                                 state.iteration, a.save, seconds)
               : absl::StrFormat("staged checkpoint at iteration %d in %s in %.2f s; moving it to "
                                 "%s in the background",
                                 state.iteration, a.checkpoint_tmpdir, seconds, a.save));
  return absl::OkStatus();
}

// The engine's options from the flags and the environment (RANK, LOCAL_RANK).
absl::StatusOr<varuna::VarunaOptions> EngineOptions(const TrainerArguments& a) {
  varuna::VarunaOptions options;
  auto from_env = [](int flag, const char* name) -> absl::StatusOr<int> {
    if (flag >= 0) return flag;
    const char* text = std::getenv(name);
    int value = 0;
    if (text != nullptr && !absl::SimpleAtoi(text, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the environment variable ", name, "=\"", text, "\" is not a rank"));
    }
    return value;
  };
  absl::StatusOr<int> rank = from_env(a.rank, "RANK");
  if (!rank.ok()) return rank.status();
  absl::StatusOr<int> local_rank = from_env(a.local_rank, "LOCAL_RANK");
  if (!local_rank.ok()) return local_rank.status();
  absl::StatusOr<int> world_size = from_env(-1, "WORLD_SIZE");
  if (!world_size.ok()) return world_size.status();
  if (!a.stage_to_rank_map.empty()) {
    absl::StatusOr<varuna::StageMap> map = varuna::StageMap::Parse(a.stage_to_rank_map);
    if (!map.ok()) return map.status();
    options.stage_map = *map;
    if (*world_size > 0 && *world_size != map->world_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--stage_to_rank_map=\"", a.stage_to_rank_map, "\" has ", map->world_size(),
          " ranks but WORLD_SIZE=", *world_size, ": start as many processes as the map has"));
    }
  } else if (*world_size > 1) {
    options.stage_map = varuna::StageMap::Uniform(1, *world_size);  // Data parallel only.
  }
  absl::StatusOr<varuna::ScheduleKind> schedule = varuna::ParseScheduleKind(a.schedule);
  if (!schedule.ok()) return schedule.status();
  options.schedule = *schedule;
  options.rank = *rank;
  options.batch_size = a.batch_size;
  options.chunk_size = a.chunk_size;
  options.stage_segments = a.stage_segments;
  options.clip_grad = a.clip_grad;
  options.dtype = a.fp16 ? at::kHalf : a.bf16 ? at::kBFloat16 : at::kFloat;
  const bool cuda = a.device.empty() ? at::hasCUDA() : a.device == "cuda";
  if (cuda && !at::hasCUDA()) {
    return absl::FailedPreconditionError(
        "--device=cuda: no CUDA device is visible to this program (or it was built without "
        "--config=cuda): use --device=cpu, or build with --config=cuda on a GPU host");
  }
  if (cuda && (*local_rank < 0 || static_cast<size_t>(*local_rank) >= at::getNumGPUs())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--local_rank=", *local_rank, " (or LOCAL_RANK) selects CUDA device ", *local_rank,
        ", but this process sees ", at::getNumGPUs(),
        " CUDA devices: start at most one process per visible GPU, with local ranks from 0"));
  }
  options.device = cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(*local_rank))
                        : c10::Device(c10::kCPU);
  return options;
}

// The vocabulary known before any data is prepared: the tokenizer's (with its EOD id),
// --vocab-size, the sample run's, or GPT-2's 50,257. The sample run's tokenizer is made later
// with exactly kSampleVocabSize pieces; its EOD id is read then.
struct Vocabulary {
  int64_t size = 0;
  int64_t eod = -1;  // -1: unknown
};

absl::StatusOr<Vocabulary> KnownVocabulary(const TrainerArguments& a) {
  if (!a.tokenizer_model.empty()) {
    auto tokenizer = data::LoadTokenizer(ResolveUserPath(a.tokenizer_model));
    if (!tokenizer.ok()) return tokenizer.status();
    if (a.vocab_size != 0 && a.vocab_size != (*tokenizer)->vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--vocab-size=", a.vocab_size, " differs from the ", (*tokenizer)->vocab_size(),
          " pieces of --tokenizer-model=", a.tokenizer_model, ": drop --vocab-size"));
    }
    return Vocabulary{(*tokenizer)->vocab_size(), (*tokenizer)->eod_id()};
  }
  if (a.vocab_size > 0) return Vocabulary{a.vocab_size, -1};
  return Vocabulary{a.sample_run ? kSampleVocabSize : 50257, -1};
}

// Joins the job of `world_size` processes started by //varuna:launch (or by hand with RANK,
// WORLD_SIZE, MASTER_ADDR and MASTER_PORT).
absl::StatusOr<std::unique_ptr<varuna::comm::World>> JoinWorld(const TrainerArguments& a,
                                                               const varuna::VarunaOptions& engine,
                                                               int world_size) {
  varuna::comm::WorldOptions options;
  options.rank = engine.rank;
  options.world_size = world_size;
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr) {
    options.master_addr = addr;
  }
  if (const char* port = std::getenv("MASTER_PORT"); port != nullptr && *port) {
    if (!absl::SimpleAtoi(port, &options.master_port)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the environment variable MASTER_PORT=\"", port, "\" is not a port"));
    }
  }
  options.backend = varuna::comm::Backend::kGloo;  // The world group agrees on CPU values.
  options.timeout = std::chrono::minutes(a.distributed_timeout_minutes);
  options.cuda_device = engine.device.is_cuda() ? engine.device.index() : 0;
  return varuna::comm::World::Join(options);
}

// --profiling: measures the model's segments into the profile directory instead of training.
absl::Status ProfileMode(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                         const varuna::VarunaOptions& engine) {
  // Launched (WORLD_SIZE > 1): every rank profiles its share; the stage map plays no part.
  int world_size = 1;
  if (const char* text = std::getenv("WORLD_SIZE"); text != nullptr && *text) {
    if (!absl::SimpleAtoi(text, &world_size) || world_size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("the environment variable WORLD_SIZE=\"", text,
                                                     "\" is not a number of processes"));
    }
  }
  int gpus_per_node = 0;  // 0: LOCAL_WORLD_SIZE is not set
  if (const char* text = std::getenv("LOCAL_WORLD_SIZE"); text != nullptr && *text) {
    if (!absl::SimpleAtoi(text, &gpus_per_node) || gpus_per_node < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("the environment variable LOCAL_WORLD_SIZE=\"", text,
                       "\" is not a number of processes per node: set it to the processes each "
                       "node runs (//varuna:launch sets it to --gpus_per_node)"));
    }
  }
  // The sample run's default metrics file is for training; profiling writes one only if asked.
  const bool rank0 = engine.rank == 0;
  const std::string metrics = !rank0 || (a.sample_run && !a.WasGiven("metrics-file"))
                                  ? ""
                                  : ResolveUserPath(a.metrics_file);
  absl::StatusOr<std::unique_ptr<TrainingLog>> log =
      TrainingLog::Open(rank0 ? stdout : nullptr, metrics);
  if (!log.ok()) return log.status();
  std::unique_ptr<varuna::comm::World> world;
  if (world_size > 1) {
    absl::StatusOr<std::unique_ptr<varuna::comm::World>> joined = JoinWorld(a, engine, world_size);
    if (!joined.ok()) return joined.status();
    world = std::move(*joined);
    if (gpus_per_node == 0) {
      (*log)->Info(
          "> LOCAL_WORLD_SIZE is not set: every process counts as a node of its own for the "
          "communication curves");
    }
  }
  absl::StatusOr<AttentionChoice> attention =
      ChooseAttentionBackend(a.attention_backend, engine.device, engine.dtype, config,
                             /*micro_batch=*/a.profile_micro_batch_sizes.back());
  if (!attention.ok()) return attention.status();
  (*log)->Info(absl::StrCat("> attention: ", attention->reason));
  ProfileModeOptions options;
  options.dir = ResolveUserPath(a.profile_dir.empty() ? a.save : a.profile_dir);
  options.micro_batch_sizes = a.profile_micro_batch_sizes;
  options.segments = a.profile_segments;
  options.device = engine.device;
  options.device_name = DeviceName(engine.device);
  options.dtype = engine.dtype;
  options.seed = static_cast<uint64_t>(a.seed);
  options.execution.attention = attention->backend;
  options.world = world.get();
  options.gpus_per_node = std::max(gpus_per_node, 1);
  at::manual_seed(a.seed);
  return RunProfiling(config, options, **log);
}

absl::Status Run(const TrainerArguments& a, const std::string& argv0) {
  // Everything that can be checked without touching a file is checked first.
  absl::StatusOr<Vocabulary> vocabulary = KnownVocabulary(a);
  if (!vocabulary.ok()) return vocabulary.status();
  absl::StatusOr<gpt2::Gpt2Config> config = ModelConfig(a, vocabulary->size);
  if (!config.ok()) return config.status();
  if ((a.eod_mask_loss || a.reset_position_ids || a.reset_attention_mask) && vocabulary->eod < 0 &&
      !a.sample_run) {
    return absl::InvalidArgumentError(
        "--eod-mask-loss, --reset-position-ids and --reset-attention-mask need the EOD token: "
        "give --tokenizer-model");
  }
  if (a.print_model_summary) {
    std::printf("%s", gpt2::FormatSummary(*config, gpt2::Summarize(*config)).c_str());
    return absl::OkStatus();
  }
  absl::StatusOr<varuna::VarunaOptions> engine_options_or = EngineOptions(a);
  if (!engine_options_or.ok()) return engine_options_or.status();
  varuna::VarunaOptions& engine_options = *engine_options_or;
  // This rank's GPU becomes the process's current device before anything touches CUDA, so
  // that work naming no device (c10d's, NCCL's, LibTorch's) lands there and not on GPU 0.
  if (engine_options.device.is_cuda()) {
    at::accelerator::setDeviceIndex(engine_options.device.index());
  }
  if (a.profiling) return ProfileMode(a, *config, engine_options);
  // From here on SIGUSR1/SIGTERM mean "checkpoint and stop" (read at the first step), so one
  // that comes while the job is still starting up is not lost.
  const StopSignal stop_signal;
  if (absl::Status status = varuna::Varuna::ValidateOptions(engine_options, config->num_layers);
      !status.ok()) {
    return status;
  }
  const int world_size = engine_options.stage_map.world_size();
  if (world_size > 1 && std::getenv("WORLD_SIZE") == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stage_to_rank_map=\"", a.stage_to_rank_map, "\" has ", world_size,
        " ranks but this process was started alone (WORLD_SIZE is not set): start the job "
        "with //varuna:launch, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT"));
  }
  if (!a.load.empty()) {
    const std::string load = ResolveUserPath(a.load);
    absl::Status found = a.resume_step >= 0 ? varuna::VerifyCheckpoint(load, a.resume_step)
                                            : varuna::LatestCheckpointIteration(load).status();
    if (!found.ok()) return found;
  }

  if (a.sample_run) {
    std::error_code ignored;
    std::filesystem::create_directories(ResolveUserPath(kSampleFolder), ignored);
    // A fresh sample run starts a fresh metrics file; a resumed one continues it.
    if (!a.WasGiven("metrics-file") && a.load.empty()) {
      std::filesystem::remove(ResolveUserPath(a.metrics_file), ignored);
    }
  }
  const bool rank0 = engine_options.rank == 0;
  absl::StatusOr<std::unique_ptr<TrainingLog>> log_or = TrainingLog::Open(
      rank0 ? stdout : nullptr, rank0 ? ResolveUserPath(a.metrics_file) : std::string());
  if (!log_or.ok()) return log_or.status();
  TrainingLog& log = **log_or;

  // Data and tokenizer.
  std::string data_prefix = ResolveUserPath(a.data_path);
  std::string tokenizer_model = ResolveUserPath(a.tokenizer_model);
  if (a.sample_run) {
    absl::StatusOr<std::string> corpus = FindRunfile(argv0, kSampleCorpus);
    if (!corpus.ok()) return corpus.status();
    const std::string folder = ResolveUserPath(kSampleFolder);
    log.Info(absl::StrCat("> sample run: no --data-path given, so training ", a.preset,
                          " on the bundled corpus; outputs in ", folder));
    // Rank 0 prepares the corpus before it joins the job; the others wait for it in Join.
    absl::StatusOr<SampleCorpus> sample =
        rank0 ? PrepareSampleCorpus(*corpus, folder, kSampleVocabSize,
                                    [&log](const std::string& line) { log.Info(line); })
              : SampleCorpusPaths(folder);
    if (!sample.ok()) return sample.status();
    data_prefix = sample->data_prefix;
    tokenizer_model = sample->tokenizer_model;
  }
  std::unique_ptr<varuna::comm::World> world;
  if (world_size > 1) {
    absl::StatusOr<std::unique_ptr<varuna::comm::World>> joined =
        JoinWorld(a, engine_options, world_size);
    if (!joined.ok()) return joined.status();
    world = std::move(*joined);
    engine_options.world = world.get();
    log.Info(absl::StrFormat("> joined a job of %d processes: %d stages x %d replicas (%s)",
                             world_size, engine_options.stage_map.num_stages(),
                             engine_options.stage_map.num_replicas(),
                             engine_options.stage_map.ToString()));
  }
  if (a.sample_run) {
    auto tokenizer = data::LoadTokenizer(tokenizer_model);
    if (!tokenizer.ok()) return tokenizer.status();
    vocabulary->eod = (*tokenizer)->eod_id();
  }
  const int64_t vocab_size = vocabulary->size;
  const int64_t eod = vocabulary->eod;
  log.Info(gpt2::FormatSummary(*config, gpt2::Summarize(*config)));

  GptDataOptions data_options;
  data_options.data_prefix = data_prefix;
  data_options.vocab_size = vocab_size;
  data_options.split = a.split;
  data_options.seq_length = config->seq_length;
  data_options.seed = static_cast<uint32_t>(a.seed);
  data_options.cache_dir = ResolveUserPath(a.data_cache_path);
  data_options.batch_size = a.batch_size;
  data_options.dp_rank = engine_options.stage_map.Position(engine_options.rank).replica;
  data_options.dp_size = engine_options.stage_map.num_replicas();
  data_options.train_iters = a.train_iters;
  data_options.eval_iters = a.eval_interval > 0 ? a.eval_iters : 0;
  data_options.batch.eod_token = eod;
  data_options.batch.eod_mask_loss = a.eod_mask_loss;
  data_options.batch.reset_position_ids = a.reset_position_ids;
  data_options.batch.reset_attention_mask = a.reset_attention_mask;
  absl::StatusOr<std::unique_ptr<GptData>> data = GptData::Open(data_options);
  if (!data.ok()) return data.status();
  log.Info(absl::StrCat("> data: ", (*data)->Describe()));

  // Engine and optimizer.
  absl::StatusOr<AttentionChoice> attention = ChooseAttentionBackend(
      a.attention_backend, engine_options.device, engine_options.dtype, *config,
      /*micro_batch=*/a.chunk_size > 0 ? a.chunk_size : a.batch_size);
  if (!attention.ok()) return attention.status();
  log.Info(absl::StrCat("> attention: ", attention->reason));
  gpt2::Gpt2ExecutionOptions execution;
  execution.attention = attention->backend;
  at::manual_seed(a.seed);
  absl::StatusOr<std::unique_ptr<varuna::Varuna>> engine_or = varuna::Varuna::Create(
      gpt2::Gpt2StageBuilder(*config, static_cast<uint64_t>(a.seed), execution), config->num_layers,
      engine_options);
  if (!engine_or.ok()) return engine_or.status();
  varuna::Varuna& engine = **engine_or;
  varuna::AdamOptions adam;
  adam.lr = a.lr;
  adam.beta1 = a.adam_beta1;
  adam.beta2 = a.adam_beta2;
  adam.eps = a.adam_eps;
  adam.weight_decay = a.weight_decay;
  varuna::LossScalerOptions scaling;
  scaling.dynamic = a.loss_scale == 0;
  scaling.initial_scale = a.loss_scale > 0 ? a.loss_scale : a.initial_loss_scale;
  scaling.min_scale = a.min_loss_scale;
  scaling.growth_interval = a.loss_scale_window;
  scaling.hysteresis = a.hysteresis;
  if (absl::Status status =
          engine.set_optimizer(std::make_unique<varuna::Adam>(engine.parameters(), adam), scaling);
      !status.ok()) {
    return status;
  }
  const int64_t decay_steps = a.lr_decay_iters > 0 ? a.lr_decay_iters : a.train_iters;
  const int64_t warmup_steps = static_cast<int64_t>(a.warmup * static_cast<double>(decay_steps));
  absl::StatusOr<LrDecayStyle> style = ParseLrDecayStyle(a.lr_decay_style);
  LrSchedule schedule({a.lr, a.min_lr, *style, warmup_steps, decay_steps});

  // Resume.
  SavedContext saved_context;
  saved_context.model = ModelConfigJson(*config);
  saved_context.tokenizer_model =
      tokenizer_model.empty() ? "" : std::filesystem::absolute(tokenizer_model).string();
  saved_context.lr_schedule = Value::object();
  saved_context.lr_schedule["lr"] = a.lr;
  saved_context.lr_schedule["min_lr"] = a.min_lr;
  saved_context.lr_schedule["decay_style"] = a.lr_decay_style;
  saved_context.lr_schedule["decay_iters"] = decay_steps;
  saved_context.lr_schedule["warmup_iters"] = warmup_steps;
  saved_context.data_fingerprint = absl::StrFormat("%016x", (*data)->indexed().Fingerprint());
  const Value& model_json = saved_context.model;
  TrainingState state;
  if (!a.load.empty()) {
    std::optional<int64_t> iteration;
    if (a.resume_step >= 0) iteration = a.resume_step;
    auto same_model = [&](const Value& saved) -> absl::Status {
      const Value* saved_model = varuna::json::Find(saved, "model");
      if (saved_model == nullptr || !saved_model->is_object()) {
        return absl::DataLossError(
            absl::StrCat("the checkpoint in ", a.load, " has no model configuration"));
      }
      if (std::string diff = ModelDifferences(*saved_model, model_json); !diff.empty()) {
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
    const std::string& now = saved_context.data_fingerprint;
    if (fingerprint != nullptr && fingerprint->is_string() &&
        fingerprint->get_ref<const std::string&>() != now) {
      log.Info(
          absl::StrCat("> warning: the checkpoint was trained on other data (index "
                       "fingerprint ",
                       fingerprint->get_ref<const std::string&>(), ", now ", now,
                       "): the data stream continues at the same position of this data"));
    }
  }

  const int64_t global_batch = a.batch_size * engine_options.stage_map.num_replicas();
  const double flops_per_iteration = gpt2::TrainingFlopsPerIteration(*config, global_batch);
  const double tokens_per_iteration =
      static_cast<double>(global_batch) * static_cast<double>(config->seq_length);
  const std::string device_name = DeviceName(engine_options.device);
  const std::optional<double> peak =
      a.peak_tflops > 0 ? std::optional<double>(a.peak_tflops) : PeakTflops(device_name);
  // The FLOP/s are the whole job's (global batch, all stages), so MFU divides them by the peak
  // of all its devices.
  const std::optional<double> job_peak =
      peak ? std::optional<double>(*peak * world_size) : std::nullopt;
  log.Info(
      absl::StrFormat("> training %s for %d iterations on %s (%s), global batch %d x %d tokens, "
                      "%.3g GFLOP per iteration (Megatron's formula)",
                      a.preset, a.train_iters, device_name, c10::toString(engine_options.dtype),
                      global_batch, config->seq_length, flops_per_iteration / 1e9));

  if (a.eval_interval > 0 && state.iteration == 0) {
    absl::StatusOr<double> loss = Evaluate(engine, **data, data::Split::kValid, a.eval_iters);
    if (!loss.ok()) return loss.status();
    log.Eval({0, "validation", *loss});
  }

  double loss_sum = 0;
  int64_t loss_count = 0;
  double last_grad_norm = 0;
  // Time spent in steps since the last log line (evaluations and checkpoints left out).
  double interval_seconds = 0;
  int64_t interval_steps = 0;
  bool saved_last = false;
  bool stopped = false;
  const int64_t first_iteration = state.iteration;
  while (state.iteration < a.train_iters) {
    const auto step_start = std::chrono::steady_clock::now();
    engine.optimizer().set_lr(schedule.At(engine.optimizer().step_count()));
    absl::StatusOr<varuna::TensorMap> batch = (*data)->TrainBatch(state.consumed_samples);
    if (!batch.ok()) return batch.status();
    absl::StatusOr<varuna::StepResult> result = engine.step(*batch, stop_signal.requested());
    if (!result.ok()) return result.status();
    if (result->completed_checkpoint >= 0) {
      log.Info(absl::StrFormat("checkpoint at iteration %d is complete in %s",
                               result->completed_checkpoint, a.save));
    }
    interval_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
    ++state.iteration;
    ++interval_steps;
    state.consumed_samples += global_batch;
    saved_last = false;
    if (result->overflow) {
      ++state.skipped;
      log.Info(absl::StrFormat("iteration %d skipped: inf/NaN in the gradients (loss scale %g)",
                               state.iteration, result->loss_scale));
    } else {
      loss_sum += result->loss;
      ++loss_count;
      last_grad_norm = result->grad_norm;
    }

    if (state.iteration % a.log_interval == 0) {
      const double seconds = interval_seconds / static_cast<double>(interval_steps);
      const Throughput throughput =
          MeasureThroughput(flops_per_iteration, tokens_per_iteration, seconds, job_peak);
      StepRecord record;
      record.iteration = state.iteration;
      record.train_iters = a.train_iters;
      record.consumed_samples = state.consumed_samples;
      record.ms_per_iteration = seconds * 1e3;
      record.lr = engine.optimizer().options().lr;
      record.loss = loss_count > 0 ? loss_sum / static_cast<double>(loss_count)
                                   : std::numeric_limits<double>::quiet_NaN();
      record.loss_scale = engine.loss_scale();
      record.grad_norm = last_grad_norm;
      record.skipped = state.skipped;
      record.tokens_per_sec = throughput.tokens_per_second;
      record.tflops = throughput.tflops;
      record.mfu = throughput.mfu;
      log.Step(record);
      loss_sum = 0;
      loss_count = 0;
      interval_steps = 0;
      interval_seconds = 0;
    }
    if (result->stop) {
      stopped = true;
      log.Info(absl::StrFormat(
          "stop requested (%s) at iteration %d: %s",
          *stop_signal.signal_name() ? stop_signal.signal_name() : "a signal on another rank",
          state.iteration,
          a.save.empty() ? "exiting without a checkpoint (no --save)"
                         : "checkpointing and exiting"));
      break;
    }
    if (a.eval_interval > 0 && state.iteration % a.eval_interval == 0 &&
        state.iteration < a.train_iters) {
      absl::StatusOr<double> loss = Evaluate(engine, **data, data::Split::kValid, a.eval_iters);
      if (!loss.ok()) return loss.status();
      log.Eval({state.iteration, "validation", *loss});
    }
    if (!a.save.empty() && a.save_interval > 0 && state.iteration % a.save_interval == 0) {
      if (absl::Status s = Save(engine, a, state, saved_context, log); !s.ok()) return s;
      saved_last = true;
    }
    if (a.exit_interval > 0 && state.iteration % a.exit_interval == 0) {
      log.Info(absl::StrFormat("exiting at iteration %d (--exit-interval=%d)", state.iteration,
                               a.exit_interval));
      break;
    }
  }

  // A run that took no step (resumed at or past --train-iters) rewrites nothing.
  if (!a.save.empty() && !saved_last && state.iteration > first_iteration) {
    if (absl::Status s = Save(engine, a, state, saved_context, log); !s.ok()) return s;
  }
  if (!a.checkpoint_tmpdir.empty() && !a.save.empty() && state.iteration > first_iteration) {
    log.Info("waiting for the background checkpoint move to finish");
  }
  if (absl::Status s = engine.finish_checkpoint(); !s.ok()) return s;
  if (stopped) return absl::OkStatus();  // preempted: exit promptly
  if (a.eval_interval > 0) {
    for (data::Split split : {data::Split::kValid, data::Split::kTest}) {
      if (!(*data)->has(split)) continue;
      absl::StatusOr<double> loss = Evaluate(engine, **data, split, a.eval_iters);
      if (!loss.ok()) return loss.status();
      log.Eval({state.iteration, split == data::Split::kValid ? "validation" : "test", *loss});
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace trainer

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<trainer::TrainerArguments> arguments = trainer::ParseArguments(args);
  if (!arguments.ok()) {
    std::fprintf(stderr, "pretrain_gpt2: error: %s\n",
                 std::string(arguments.status().message()).c_str());
    return 2;
  }
  if (arguments->help_requested) {
    std::printf(
        "Usage: bazel run //trainer:pretrain_gpt2 -- [flags]\n"
        "Pretrains GPT-2 (Megatron-LM's pretrain_gpt2 on the Varuna engine). Without "
        "--data-path it trains\ngpt2-tiny on the bundled sample corpus. Flags (dashes and "
        "underscores are interchangeable):\n%s",
        arguments->help.c_str());
    return 0;
  }
  absl::Status status;
  try {
    status = trainer::Run(*arguments, argv[0]);
  } catch (const std::exception& e) {  // LibTorch reports, e.g., CUDA out of memory this way.
    status = absl::InternalError(e.what());
  }
  if (!status.ok()) {
    std::fprintf(stderr, "pretrain_gpt2: error: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
