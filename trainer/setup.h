// The set-up steps of pretrain_gpt2, in the order it runs them: from its flags
// (TrainerArguments) to the model configuration, the engine's options, the job's processes, the
// training inputs, the data and the engine. Each step is one function so that the program's
// Run reads as the list of steps; each returns an error that names the flag or file to fix.
//
// Thread safety: the functions are meant for the program's main thread; JoinJob and the
// preparation of the sample corpus coordinate with the job's other processes.
#ifndef VARUNA_TRAINER_SETUP_H_
#define VARUNA_TRAINER_SETUP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/dataset_tokenizer.h"
#include "data/tokenizer_status.h"
#include "models/gpt2/config.h"
#include "trainer/arguments.h"
#include "trainer/fp8_linear_choice.h"
#include "trainer/gpt_data.h"
#include "trainer/gpt_engine.h"
#include "trainer/lr_schedule.h"
#include "trainer/tensorboard_log.h"
#include "trainer/training_log.h"
#include "varuna/comm/heartbeat.h"
#include "varuna/comm/world.h"
#include "varuna/launch/environment.h"
#include "varuna/varuna.h"

namespace trainer {

// The sample run (no --data-path): its folder under the user's directory, the corpus in the
// runfiles, and the size of the tokenizer trained on it.
inline constexpr char kSampleFolder[] = "varuna_sample_run";
inline constexpr char kSampleCorpus[] = "data/corpus/fortunes.jsonl";
inline constexpr int kSampleVocabSize = 4096;
// GPT-2's own vocabulary files in the runfiles (@gpt2_bpe, fetched by ./setup.sh), for the
// sample run with --tokenizer-type=GPT2BPETokenizer.
inline constexpr char kGpt2VocabFile[] = "external/gpt2_bpe/gpt2-vocab.json";
inline constexpr char kGpt2MergeFile[] = "external/gpt2_bpe/gpt2-merges.txt";
inline constexpr int kGpt2VocabSize = 50257;

// The tokenizer flags (--tokenizer-type, --tokenizer-model, --vocab-file, --merge-file), their
// paths resolved against the user's directory.
data::TokenizerSpec TokenizerFlags(const TrainerArguments& a);

// The vocabulary known before any data is prepared: the tokenizer's (with its EOD id),
// --vocab-size, the sample run's, or GPT-2's 50,257. The sample run's tokenizer is made or
// found later (kSampleVocabSize pieces, or GPT-2's kGpt2VocabSize); its EOD id is read then
// (OpenData).
struct Vocabulary {
  int64_t size = 0;
  int64_t eod = -1;  // -1: unknown
  // The tokenizer, described (kind, files, checksum) once OpenData has loaded it; unset while
  // not loaded, or without a tokenizer.
  std::optional<data::DatasetTokenizer> tokenizer;
};
absl::StatusOr<Vocabulary> KnownVocabulary(const TrainerArguments& a);

// The model: --preset with the model flags given over it, for `vocab_size` tokens, validated.
absl::StatusOr<gpt2::Gpt2Config> ModelConfig(const TrainerArguments& a, int64_t vocab_size);

// The engine's options from the flags and the launcher's environment (`launch`: RANK,
// LOCAL_RANK, WORLD_SIZE, read once by the program): stage map, rank, batch, device and dtype.
// --rank and --local_rank, when given, win over RANK and LOCAL_RANK. The world is not joined
// yet.
absl::StatusOr<varuna::VarunaOptions> EngineOptions(const TrainerArguments& a,
                                                    const varuna::LaunchEnvironment& launch);

// The learning-rate schedule of the flags (--lr, --min-lr, --lr-decay-style, --lr-decay-iters,
// --warmup, --lr-warmup-iters, the WSD flags; with --train-samples the sample-based ones, counted
// in samples of the global batch as resolved by ApplyJobShape), whose steps are applied
// optimizer steps.
LrScheduleOptions LearningRateSchedule(const TrainerArguments& a);

// InvalidArgument when a flag needs the EOD token (--eod-mask-loss, --reset-position-ids,
// --reset-attention-mask) and no tokenizer gives it.
absl::Status CheckEodToken(const TrainerArguments& a, const Vocabulary& vocabulary);

// What can be checked before a training run writes anything: the engine's options against the
// model, a multi-rank map started without a launcher (no WORLD_SIZE in `launch`), that --save and
// --checkpoint-tmpdir can be written, and the checkpoint --load names. Returns whether --load names
// a checkpoint to resume from: false without --load, and when its directory does not exist yet or
// holds no varuna_ckpt_<n> directory and no tracker file (the run then starts from scratch, as
// Megatron's does, so that a command with --load=DIR --save=DIR can be re-run after a crash
// before its first checkpoint). Errors: InvalidArgument when --load names a file or one
// varuna_ckpt_<n> directory (the message gives the flags to use instead); NotFound or DataLoss
// when --load-iteration's checkpoint is missing or damaged, or when DIR holds checkpoints and
// none is complete and intact.
absl::StatusOr<bool> CheckRun(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                              const varuna::VarunaOptions& engine,
                              const varuna::LaunchEnvironment& launch);

// The log (stdout and the metrics file, on rank 0 only). A fresh sample run starts a fresh
// metrics file in the sample folder; a resumed one continues it.
absl::StatusOr<std::unique_ptr<TrainingLog>> OpenTrainingLog(const TrainerArguments& a, bool rank0);

// This process's rank: --rank, else the launcher's RANK, else 0.
int ProcessRank(const TrainerArguments& a, const varuna::LaunchEnvironment& launch);

// The TensorBoard log of --tensorboard-dir, on rank 0 (the rank that logs); null without the
// flag, on the other ranks, and for --profiling and --print-model-summary, which train nothing.
// pretrain_gpt2 opens it before anything else and exits with status 2 on an error (a directory
// it cannot create or write), as for a bad flag.
absl::StatusOr<std::unique_ptr<TensorBoardLog>> OpenTensorBoardLog(
    const TrainerArguments& a, const varuna::LaunchEnvironment& launch);

// Where the training data and tokenizer are: the flags', or for the sample run the bundled
// corpus, which rank 0 tokenizes and preprocesses on first use (the other ranks wait for it).
struct TrainingInputs {
  std::string data_prefix;
  data::TokenizerSpec tokenizer;  // no files when none was given
};
// `stop_requested` is polled while the corpus is prepared: a stop then ends it with Cancelled.
absl::StatusOr<TrainingInputs> PrepareInputs(const TrainerArguments& a, const std::string& argv0,
                                             bool rank0, TrainingLog& log,
                                             const std::function<bool()>& stop_requested);

// Joins the job of `world_size` processes started by //varuna:launch, torchrun, or by hand
// with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (`launch`). Once `stop_requested` (may be
// null) returns true, joining, and creating the world's groups later, end with Cancelled.
absl::StatusOr<std::unique_ptr<varuna::comm::World>> JoinWorld(
    const TrainerArguments& a, const varuna::VarunaOptions& engine,
    const varuna::LaunchEnvironment& launch, int world_size, std::function<bool()> stop_requested);

// JoinWorld for a training job: nothing for a single process; otherwise joins, points
// engine->world at the world and logs the layout.
absl::StatusOr<std::unique_ptr<varuna::comm::World>> JoinJob(
    const TrainerArguments& a, varuna::VarunaOptions& engine,
    const varuna::LaunchEnvironment& launch, TrainingLog& log,
    std::function<bool()> stop_requested);

// With --heartbeat-timeout-seconds and a job of several processes, this rank's heartbeat
// (varuna/comm/heartbeat.h): when the job cannot go on (a rank stopped answering, another rank
// failed while this one waits in a transfer that cannot complete, or rank 0 and its store are
// gone) it says why on stderr and this process exits 1 at once (it cannot return from the
// operation it waits in). Null for a single process or with the heartbeat off.
absl::StatusOr<std::unique_ptr<varuna::comm::Heartbeat>> StartHeartbeat(
    const TrainerArguments& a, const varuna::comm::World* world);

// The GPT dataset of this replica (GptData), with the EOD token of the sample run's tokenizer
// and the description of the tokenizer given (Vocabulary::tokenizer) filled into `vocabulary`. A
// dataset whose recorded tokenizer (data/dataset_tokenizer.h) has another vocabulary size than the
// tokenizer given is refused; another file of the same size is a warning in `log`.
absl::StatusOr<std::unique_ptr<GptData>> OpenData(const TrainerArguments& a,
                                                  const gpt2::Gpt2Config& config,
                                                  const TrainingInputs& inputs,
                                                  const varuna::VarunaOptions& engine,
                                                  Vocabulary& vocabulary, TrainingLog& log);

// --fp8-linears as parsed (ParseArguments has checked it).
Fp8LinearsFlag TrainerFp8Linears(const TrainerArguments& a);

// How the model computes, from the flags: the fusions and FP8 (everything of
// gpt2::Gpt2ExecutionOptions but the attention backend, which is chosen where the model is
// built, and with --fp8-linears=auto the FP8 linears, likewise). Training and profile mode both
// take it, so a profile times the model training runs.
gpt2::Gpt2ExecutionOptions TrainerExecutionOptions(const TrainerArguments& a);

// The engine's full options from the flags: Adam's and the loss scaler's among them.
GptEngineOptions TrainerEngineOptions(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                                      const varuna::VarunaOptions& engine);

}  // namespace trainer

#endif  // VARUNA_TRAINER_SETUP_H_
