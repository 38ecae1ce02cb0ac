#include "trainer/setup.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "data/dataset_tokenizer.h"
#include "data/tokenizer_status.h"
#include "models/gpt2/summary.h"
#include "trainer/fp8_flags.h"
#include "trainer/sample_corpus.h"
#include "varuna/checkpoint/manifest.h"
#include "varuna/io/user_paths.h"
#include "varuna/pipeline/schedule.h"

namespace trainer {

using varuna::CheckWritableDirectory;
using varuna::FindRunfile;
using varuna::ResolveUserPath;

data::TokenizerSpec TokenizerFlags(const TrainerArguments& a) {
  return data::TokenizerSpec{a.tokenizer_type, ResolveUserPath(a.tokenizer_model),
                             ResolveUserPath(a.vocab_file), ResolveUserPath(a.merge_file)};
}

absl::StatusOr<Vocabulary> KnownVocabulary(const TrainerArguments& a) {
  if (a.UsesBundledGpt2()) return Vocabulary{kGpt2VocabSize, -1};
  const data::TokenizerSpec spec = TokenizerFlags(a);
  absl::StatusOr<std::optional<data::TokenizerKind>> kind = data::TokenizerKindOf(spec);
  if (!kind.ok()) return kind.status();
  if (kind->has_value()) {
    auto tokenizer = data::LoadTokenizer(spec);
    if (!tokenizer.ok()) return tokenizer.status();
    if (a.vocab_size != 0 && a.vocab_size != (*tokenizer)->vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--vocab-size=", a.vocab_size, " differs from the ",
                       (*tokenizer)->vocab_size(), " ids of the tokenizer (",
                       absl::StrJoin((*tokenizer)->files(), ", "), "): drop --vocab-size"));
    }
    return Vocabulary{(*tokenizer)->vocab_size(), (*tokenizer)->eod_id()};
  }
  if (a.vocab_size > 0) return Vocabulary{a.vocab_size, -1};
  return Vocabulary{a.sample_run ? kSampleVocabSize : kGpt2VocabSize, -1};
}

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

namespace {

// --p2p-backend / --dp-backend (checked by ValidateArguments): unset for auto.
std::optional<varuna::comm::Backend> ParseBackendFlag(const std::string& flag) {
  if (flag == "nccl") return varuna::comm::Backend::kNccl;
  if (flag == "gloo") return varuna::comm::Backend::kGloo;
  return std::nullopt;
}

// The CUDA device of local rank `local_rank`: its own GPU while there are enough, else (only
// with host-staged Gloo for every group) GPU local_rank mod the visible count, shared.
absl::StatusOr<int> CudaDeviceOf(int local_rank, const varuna::VarunaOptions& options) {
  const int gpus = static_cast<int>(at::getNumGPUs());
  if (local_rank >= 0 && local_rank < gpus) return local_rank;
  const bool staged = options.effective_p2p_backend() == varuna::comm::Backend::kGloo &&
                      options.effective_dp_backend() == varuna::comm::Backend::kGloo;
  if (local_rank < 0 || !staged) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--local_rank=", local_rank, " (or LOCAL_RANK) selects CUDA device ", local_rank,
        ", but this process sees ", gpus,
        " CUDA devices: start at most one process per visible GPU, with local ranks from 0, or "
        "let ranks share GPUs with --p2p-backend=gloo --dp-backend=gloo (Varuna's transport "
        "through host memory; NCCL needs a GPU per rank)"));
  }
  return local_rank % gpus;
}

// "pipeline and tied weights over nccl, data parallel over gloo (host-staged); ..." for the
// log: the backends in effect (of the groups the layout has) and, where local ranks
// (LOCAL_WORLD_SIZE) outnumber the visible GPUs, how they share them.
std::string DescribeTransport(const varuna::VarunaOptions& engine,
                              const varuna::LaunchEnvironment& launch) {
  auto name = [&](varuna::comm::Backend backend) -> std::string {
    if (backend == varuna::comm::Backend::kNccl) return "nccl";
    return engine.device.is_cuda() ? "gloo (host-staged)" : "gloo";
  };
  std::vector<std::string> parts;
  if (engine.stage_map.num_stages() > 1) {
    parts.push_back(
        absl::StrCat("pipeline and tied weights over ", name(engine.effective_p2p_backend())));
  }
  if (engine.stage_map.num_replicas() > 1) {
    parts.push_back(absl::StrCat("data parallel over ", name(engine.effective_dp_backend())));
  }
  std::string text = absl::StrJoin(parts, ", ");
  if (!engine.device.is_cuda()) return text;
  const int gpus = static_cast<int>(at::getNumGPUs());
  const int local_ranks = launch.local_world_size.value_or(0);
  if (local_ranks > gpus) {
    absl::StrAppend(&text, "; ", local_ranks, " local ranks share ", gpus,
                    " visible GPU(s): local rank i runs on cuda:(i mod ", gpus, ")");
  }
  return text;
}

}  // namespace

int ProcessRank(const TrainerArguments& a, const varuna::LaunchEnvironment& launch) {
  return a.rank >= 0 ? a.rank : launch.rank;
}

absl::StatusOr<std::unique_ptr<TensorBoardLog>> OpenTensorBoardLog(
    const TrainerArguments& a, const varuna::LaunchEnvironment& launch) {
  if (a.tensorboard_dir.empty() || a.profiling || a.print_model_summary) return nullptr;
  if (ProcessRank(a, launch) != 0) return nullptr;
  TensorBoardOptions options;
  options.dir = ResolveUserPath(a.tensorboard_dir);
  options.log_interval = a.tensorboard_log_interval;
  options.queue_size = a.tensorboard_queue_size;
  options.log_loss_scale = a.log_loss_scale_to_tensorboard;
  options.log_validation_ppl = a.log_validation_ppl_to_tensorboard;
  options.log_memory = a.log_memory_to_tensorboard;
  options.log_timers = a.log_timers_to_tensorboard;
  return TensorBoardLog::Open(options);
}

absl::StatusOr<varuna::VarunaOptions> EngineOptions(const TrainerArguments& a,
                                                    const varuna::LaunchEnvironment& launch) {
  varuna::VarunaOptions options;
  const int local_rank = a.local_rank >= 0 ? a.local_rank : launch.local_rank;
  const int world_size = launch.world_size.value_or(0);
  if (!a.stage_to_rank_map.empty()) {
    absl::StatusOr<varuna::StageMap> map = varuna::StageMap::Parse(a.stage_to_rank_map);
    if (!map.ok()) return map.status();
    options.stage_map = *map;
    if (world_size > 0 && world_size != map->world_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--stage_to_rank_map=\"", a.stage_to_rank_map, "\" has ", map->world_size(),
          " ranks but WORLD_SIZE=", world_size, ": start as many processes as the map has"));
    }
  } else if (world_size > 1) {
    options.stage_map = varuna::StageMap::Uniform(1, world_size);  // Data parallel only.
  }
  absl::StatusOr<varuna::ScheduleKind> schedule = varuna::ParseScheduleKind(a.schedule);
  if (!schedule.ok()) return schedule.status();
  options.schedule = *schedule;
  options.rank = ProcessRank(a, launch);
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
  options.p2p_backend = ParseBackendFlag(a.p2p_backend);
  options.dp_backend = ParseBackendFlag(a.dp_backend);
  options.overlap_grad_reduce = a.overlap_grad_reduce;
  options.device = c10::Device(c10::kCPU);
  if (cuda) {
    absl::StatusOr<int> index = CudaDeviceOf(local_rank, options);
    if (!index.ok()) return index.status();
    options.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(*index));
  }
  return options;
}

LrScheduleOptions LearningRateSchedule(const TrainerArguments& a) {
  LrScheduleOptions options;
  options.max_lr = a.lr;
  options.min_lr = a.min_lr;
  options.style = *ParseLrDecayStyle(a.lr_decay_style);           // checked by ParseArguments
  options.wsd_style = *ParseWsdDecayStyle(a.lr_wsd_decay_style);  // and this one
  // Megatron's: in samples with --train-samples (each step advances the global batch), else in
  // iterations; a warmup given as a count, else the fraction (--warmup) of the decay, rounded
  // down to whole iterations as this trainer always has (Megatron keeps f x T unrounded, so
  // its first step runs at lr 0 even when f x T < 1).
  const bool samples = a.train_samples > 0;
  const int64_t warmup_count = samples ? a.lr_warmup_samples : a.lr_warmup_iters;
  if (samples) {
    options.units_per_step = a.global_batch_size > 0 ? a.global_batch_size : a.batch_size;
    options.decay_steps = a.lr_decay_samples > 0 ? a.lr_decay_samples : a.train_samples;
    options.wsd_decay_steps = a.lr_wsd_decay_samples;
  } else {
    options.decay_steps = a.lr_decay_iters > 0 ? a.lr_decay_iters : a.train_iters;
    options.wsd_decay_steps = a.lr_wsd_decay_iters;
  }
  const double fraction = a.warmup * static_cast<double>(options.decay_steps);
  if (warmup_count > 0 && !a.WasGiven("warmup")) {
    options.warmup_steps = static_cast<double>(warmup_count);
  } else {
    options.warmup_steps = samples ? fraction : std::floor(fraction);
  }
  return options;
}

absl::Status CheckEodToken(const TrainerArguments& a, const Vocabulary& vocabulary) {
  if ((a.eod_mask_loss || a.reset_position_ids || a.reset_attention_mask) && vocabulary.eod < 0 &&
      !a.sample_run) {
    return absl::InvalidArgumentError(
        "--eod-mask-loss, --reset-position-ids and --reset-attention-mask need the EOD token: "
        "give --tokenizer-model");
  }
  return absl::OkStatus();
}

namespace {

// CheckRun's answer about --load (see setup.h).
absl::StatusOr<bool> HasCheckpointToLoad(const TrainerArguments& a) {
  if (a.load.empty()) return false;
  namespace fs = std::filesystem;
  const std::string load = ResolveUserPath(a.load);
  std::error_code error;
  if (fs::exists(load, error) && !fs::is_directory(load, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--load=", a.load,
                     " is a file, not a directory: pass the directory that holds the "
                     "varuna_ckpt_<iteration> directories (the --save directory of the run)"));
  }
  const int64_t named = varuna::CheckpointIterationOf(load);
  if (named >= 0) {
    // The user's own spelling of the parent.
    std::string given = a.load;
    while (given.size() > 1 && given.back() == '/') given.pop_back();
    std::string parent = fs::path(given).parent_path().string();
    if (parent.empty()) parent = ".";
    return absl::InvalidArgumentError(
        absl::StrCat("--load=", a.load,
                     " names one checkpoint; --load takes the directory that holds it: use "
                     "--load=",
                     parent, " (add --load-iteration=", named,
                     " to resume from this one rather "
                     "than the newest)"));
  }
  if (a.resume_step >= 0) {
    if (absl::Status found = varuna::VerifyCheckpoint(load, a.resume_step); !found.ok()) {
      return found;
    }
    return true;
  }
  const bool tracked = fs::exists(fs::path(load) / varuna::kCheckpointTrackerFile, error);
  if (!tracked && varuna::ListCheckpointIterations(load).empty()) return false;
  if (absl::Status found = varuna::LatestCheckpointIteration(load).status(); !found.ok()) {
    return found;
  }
  return true;
}

}  // namespace

absl::StatusOr<bool> CheckRun(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                              const varuna::VarunaOptions& engine,
                              const varuna::LaunchEnvironment& launch) {
  if (absl::Status status = varuna::Varuna::ValidateOptions(engine, config.num_layers);
      !status.ok()) {
    return status;
  }
  const int world_size = engine.stage_map.world_size();
  if (world_size > 1 && !launch.launched()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stage_to_rank_map=\"", a.stage_to_rank_map, "\" has ", world_size,
        " ranks but this process was started alone (WORLD_SIZE is not set): start the job "
        "with //varuna:launch, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT"));
  }
  // Found now rather than at the first checkpoint, --save-interval steps later.
  for (const auto& [flag, dir] : {std::pair<const char*, const std::string&>{"--save", a.save},
                                  {"--checkpoint-tmpdir", a.checkpoint_tmpdir}}) {
    if (dir.empty()) continue;
    if (absl::Status s = CheckWritableDirectory(flag, dir); !s.ok()) return s;
  }
  return HasCheckpointToLoad(a);
}

absl::StatusOr<std::unique_ptr<TrainingLog>> OpenTrainingLog(const TrainerArguments& a,
                                                             bool rank0) {
  if (a.sample_run) {
    std::error_code ignored;
    std::filesystem::create_directories(ResolveUserPath(kSampleFolder), ignored);
    if (!a.WasGiven("metrics-file") && a.load.empty()) {
      std::filesystem::remove(ResolveUserPath(a.metrics_file), ignored);
    }
  }
  return TrainingLog::Open(rank0 ? stdout : nullptr,
                           rank0 ? ResolveUserPath(a.metrics_file) : std::string());
}

absl::StatusOr<TrainingInputs> PrepareInputs(const TrainerArguments& a, const std::string& argv0,
                                             bool rank0, TrainingLog& log,
                                             const std::function<bool()>& stop_requested) {
  // One dataset's prefix; a blend's datasets are in a.data_blend / a.split_data_blends.
  TrainingInputs inputs{a.data_blend.prefixes.size() == 1 ? a.data_blend.prefixes[0] : "",
                        TokenizerFlags(a)};
  if (!a.sample_run) return inputs;
  absl::StatusOr<std::string> corpus = FindRunfile(argv0, kSampleCorpus);
  if (!corpus.ok()) return corpus.status();
  // GPT-2's tokenizer: the files given, or GPT-2's own; otherwise a SentencePiece model is
  // trained on the corpus.
  data::TokenizerSpec gpt2;
  if (a.UsesBundledGpt2()) {
    for (auto [name, file] :
         {std::pair<const char*, std::string*>{kGpt2VocabFile, &gpt2.vocab_file},
          {kGpt2MergeFile, &gpt2.merge_file}}) {
      absl::StatusOr<std::string> found = FindRunfile(argv0, name);
      if (!found.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "GPT-2's vocabulary files are not in this build (", found.status().message(),
            "): run ./setup.sh, which fetches them into .deps/gpt2, then build again"));
      }
      *file = *found;
    }
    gpt2.type = a.tokenizer_type;
  } else if (!inputs.tokenizer.vocab_file.empty()) {
    gpt2 = inputs.tokenizer;
  }
  const std::string folder = ResolveUserPath(kSampleFolder);
  log.Info(absl::StrCat("> sample run: no --data-path given, so training ", a.preset,
                        " on the bundled corpus; outputs in ", folder));
  // Rank 0 prepares the corpus before it joins the job; the others wait for it in JoinJob.
  absl::StatusOr<SampleCorpus> sample =
      rank0 ? PrepareSampleCorpus(
                  *corpus, folder, kSampleVocabSize, gpt2,
                  [&log](const std::string& line) { log.Info(line); }, stop_requested)
            : SampleCorpusPaths(folder, gpt2);
  if (!sample.ok()) return sample.status();
  return TrainingInputs{sample->data_prefix, sample->tokenizer};
}

absl::StatusOr<std::unique_ptr<varuna::comm::World>> JoinWorld(
    const TrainerArguments& a, const varuna::VarunaOptions& engine,
    const varuna::LaunchEnvironment& launch, int world_size, std::function<bool()> stop_requested) {
  varuna::comm::WorldOptions options;
  options.rank = engine.rank;
  options.world_size = world_size;
  if (!launch.master_addr.empty()) options.master_addr = launch.master_addr;
  if (launch.master_port > 0) options.master_port = launch.master_port;
  options.backend = varuna::comm::Backend::kGloo;  // The world group agrees on CPU values.
  options.timeout = std::chrono::minutes(a.distributed_timeout_minutes);
  options.cuda_device = engine.device.is_cuda() ? engine.device.index() : 0;
  options.stop_requested = std::move(stop_requested);
  return varuna::comm::World::Join(options);
}

absl::StatusOr<std::unique_ptr<varuna::comm::World>> JoinJob(
    const TrainerArguments& a, varuna::VarunaOptions& engine,
    const varuna::LaunchEnvironment& launch, TrainingLog& log,
    std::function<bool()> stop_requested) {
  const int world_size = engine.stage_map.world_size();
  if (world_size == 1) return nullptr;
  absl::StatusOr<std::unique_ptr<varuna::comm::World>> world =
      JoinWorld(a, engine, launch, world_size, std::move(stop_requested));
  if (!world.ok()) return world.status();
  engine.world = world->get();
  log.Info(absl::StrFormat("> joined a job of %d processes: %d stages x %d replicas (%s); %s",
                           world_size, engine.stage_map.num_stages(),
                           engine.stage_map.num_replicas(), engine.stage_map.ToString(),
                           DescribeTransport(engine, launch)));
  return world;
}

absl::StatusOr<std::unique_ptr<varuna::comm::Heartbeat>> StartHeartbeat(
    const TrainerArguments& a, const varuna::comm::World* world) {
  if (world == nullptr || a.heartbeat_timeout_seconds == 0) return nullptr;
  varuna::comm::HeartbeatOptions options;
  options.timeout = std::chrono::seconds(a.heartbeat_timeout_seconds);
  options.interval =
      std::min<std::chrono::milliseconds>(std::chrono::seconds(2), options.timeout / 4);
  return varuna::comm::Heartbeat::Start(world->options(), options, [](const absl::Status& s) {
    std::fprintf(stderr, "pretrain_gpt2: error: %s\n", std::string(s.message()).c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    // This rank is blocked in an operation that cannot complete.
    std::_Exit(1);
  });
}

absl::StatusOr<std::unique_ptr<GptData>> OpenData(const TrainerArguments& a,
                                                  const gpt2::Gpt2Config& config,
                                                  const TrainingInputs& inputs,
                                                  const varuna::VarunaOptions& engine,
                                                  Vocabulary& vocabulary, TrainingLog& log) {
  absl::StatusOr<std::optional<data::TokenizerKind>> kind = data::TokenizerKindOf(inputs.tokenizer);
  if (!kind.ok()) return kind.status();
  std::unique_ptr<data::Tokenizer> tokenizer;
  if (kind->has_value()) {
    absl::StatusOr<std::unique_ptr<data::Tokenizer>> loaded = data::LoadTokenizer(inputs.tokenizer);
    if (!loaded.ok()) return loaded.status();
    tokenizer = *std::move(loaded);
  }
  if (a.sample_run) vocabulary.eod = tokenizer->eod_id();
  if (tokenizer != nullptr) {
    absl::StatusOr<data::DatasetTokenizer> described = data::DescribeTokenizer(*tokenizer);
    if (!described.ok()) return described.status();
    vocabulary.tokenizer = *std::move(described);
  }
  // Every dataset: the sample corpus, --data-path's, or each split's (in that order).
  GptDataOptions options;
  options.data_prefix = inputs.data_prefix;
  if (!a.sample_run) {
    options.blend = a.data_blend;
    options.split_blends = a.split_data_blends;
  }
  std::vector<std::string> prefixes;
  for (const data::Blend* blend : {&options.blend, &options.split_blends[0],
                                   &options.split_blends[1], &options.split_blends[2]}) {
    for (const std::string& prefix : blend->prefixes) {
      if (std::find(prefixes.begin(), prefixes.end(), prefix) == prefixes.end()) {
        prefixes.push_back(prefix);
      }
    }
  }
  if (prefixes.empty()) prefixes.push_back(inputs.data_prefix);
  // The tokenizer preprocess_data recorded beside each dataset, against the one given; without
  // a tokenizer, the records of a blend's datasets against each other (one vocabulary for all).
  std::vector<std::string> unrecorded;
  std::optional<std::pair<std::string, data::DatasetTokenizer>> first_record;
  for (const std::string& prefix : prefixes) {
    absl::StatusOr<std::optional<data::DatasetTokenizer>> recorded =
        data::ReadDatasetTokenizer(prefix);
    if (!recorded.ok()) return recorded.status();
    if (!recorded->has_value()) {
      unrecorded.push_back(prefix);
      continue;
    }
    std::string warning;
    if (vocabulary.tokenizer) {
      if (absl::Status s =
              data::CheckDatasetTokenizer(prefix, **recorded, *vocabulary.tokenizer, &warning);
          !s.ok()) {
        return s;
      }
    } else if (first_record) {
      if (absl::Status s =
              data::CheckDatasetTokenizer(prefix, **recorded, first_record->second, &warning);
          !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("the datasets of a blend must share one tokenizer, but ", prefix,
                         " differs from ", first_record->first, ": ", s.message()));
      }
    }
    if (!first_record) first_record.emplace(prefix, **recorded);
    if (!warning.empty()) log.Info(absl::StrCat("> warning: ", warning));
  }
  options.vocab_size = vocabulary.size;
  options.split = a.split;
  options.seq_length = config.seq_length;
  options.seed = static_cast<uint32_t>(a.seed);
  options.cache_dir = ResolveUserPath(a.data_cache_path);
  options.batch_size = a.batch_size;
  options.dp_rank = engine.stage_map.Position(engine.rank).replica;
  options.dp_size = engine.stage_map.num_replicas();
  options.train_iters = a.train_iters;
  options.train_samples = a.train_samples;
  options.eval_iters = a.eval_interval > 0 ? a.eval_iters : 0;
  options.eval_interval = a.eval_interval;
  options.batch.eod_token = vocabulary.eod;
  options.batch.eod_mask_loss = a.eod_mask_loss;
  options.batch.reset_position_ids = a.reset_position_ids;
  options.batch.reset_attention_mask = a.reset_attention_mask;
  options.progress = [&log](const std::string& line) { log.Info(line); };
  absl::StatusOr<std::unique_ptr<GptData>> data = GptData::Open(options);
  if (!data.ok()) return data;
  for (const auto& indexed : (*data)->datasets()) {
    if (std::find(unrecorded.begin(), unrecorded.end(), indexed->prefix()) == unrecorded.end()) {
      continue;
    }
    // Open checked every token id against the vocabulary; nothing more can be checked.
    log.Info(absl::StrFormat(
        "> warning: %s has no tokenizer record (%s; Megatron's tools write none), so the "
        "tokenizer cannot be checked against the data: every token id is below the %d of the "
        "vocabulary (the largest is %d); make sure the data was tokenized with this tokenizer",
        indexed->prefix(), data::DatasetTokenizerPath(indexed->prefix()), vocabulary.size,
        indexed->largest_token_id()));
  }
  return data;
}

Fp8LinearsFlag TrainerFp8Linears(const TrainerArguments& a) {
  return ParseFp8Linears(a.fp8_linears).value_or(Fp8LinearsFlag{});
}

gpt2::Gpt2ExecutionOptions TrainerExecutionOptions(const TrainerArguments& a) {
  gpt2::Gpt2ExecutionOptions execution;
  execution.fused_cross_entropy = a.cross_entropy_loss_fusion;
  execution.gradient_accumulation_fusion = a.gradient_accumulation_fusion;
  execution.bias_dropout_fusion = a.bias_dropout_fusion;
  execution.bias_dropout_add_layernorm_fusion = a.bias_dropout_add_layernorm_fusion;
  execution.bias_gelu_gemm_fusion = a.bias_gelu_gemm_fusion;
  // Checked by ParseArguments; off (nullopt) without --fp8-format.
  execution.fp8 = Fp8RecipeFromFlags(a.fp8_format, a.fp8_amax_history_len, a.fp8_amax_compute_algo,
                                     a.fp8_margin, /*others_given=*/false)
                      .value_or(std::nullopt);
  // Checked by ParseArguments too; auto is resolved by CreateGptEngine (or the profile mode),
  // with all four until then.
  execution.fp8_linears = TrainerFp8Linears(a).linears;
  return execution;
}

GptEngineOptions TrainerEngineOptions(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                                      const varuna::VarunaOptions& engine) {
  GptEngineOptions options;
  options.model = config;
  options.engine = engine;
  options.attention_backend = a.attention_backend;
  options.deterministic = a.deterministic;
  options.execution = TrainerExecutionOptions(a);
  options.fp8_linears = TrainerFp8Linears(a);
  options.seed = static_cast<uint64_t>(a.seed);
  options.adam.lr = a.lr;
  options.adam.beta1 = a.adam_beta1;
  options.adam.beta2 = a.adam_beta2;
  options.adam.eps = a.adam_eps;
  options.adam.weight_decay = a.weight_decay;
  options.loss_scaling.dynamic = a.loss_scale == 0;
  options.loss_scaling.initial_scale = a.loss_scale > 0 ? a.loss_scale : a.initial_loss_scale;
  options.loss_scaling.min_scale = a.min_loss_scale;
  options.loss_scaling.growth_interval = a.loss_scale_window;
  options.loss_scaling.hysteresis = a.hysteresis;
  return options;
}

}  // namespace trainer
