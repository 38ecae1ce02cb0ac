// The checkpoints of a training run: what each records besides the engine's state (RunRecord:
// the training state, the model, the tokenizer, the LR schedule, the data's fingerprint), writing
// one (SaveCheckpoint), and resuming from the one --load names (Resume; or taking only its
// weights, LoadWeights: --finetune, --no-load-optim, import_hf's weights-only checkpoints),
// refusing a checkpoint of another model with the differing flags named; --use-checkpoint-args
// (UseCheckpointArgs).
//
// Thread safety: for the program's main thread; saving and loading are collectives of the job.
#ifndef VARUNA_TRAINER_RUN_CHECKPOINT_H_
#define VARUNA_TRAINER_RUN_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/dataset_tokenizer.h"
#include "models/gpt2/config.h"
#include "trainer/arguments.h"
#include "trainer/gpt_data.h"
#include "trainer/training_log.h"
#include "trainer/training_state.h"
#include "varuna/io/json.h"
#include "varuna/varuna.h"

namespace trainer {

// What a checkpoint of this run records besides the engine's state and the TrainingState.
struct RunRecord {
  varuna::json::Value model;         // gpt2::ModelConfigJson: compared on resume
  varuna::json::Value model_record;  // gpt2::CheckpointModelJson: what the checkpoint records
  // The tokenizer, for the Hugging Face export: {"type": "SentencePieceTokenizer" or
  // "GPT2BPETokenizer", "files": [absolute paths], "crc32c": of the files' bytes,
  // "vocab_size"} (data::DescribeTokenizer's); null for none. A SentencePiece model's path is
  // also "tokenizer_model", as checkpoints before GPT-2 BPE recorded it.
  varuna::json::Value tokenizer;
  varuna::json::Value lr_schedule;  // lr, min_lr, decay_style, decay_iters, warmup_iters
  std::string data_fingerprint;     // GptData::Fingerprint() (every dataset of a blend), hex
};

// The record of a run of `config` on `data` with the tokenizer `tokenizer` (as OpenData
// described it; unset: none).
RunRecord MakeRunRecord(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                        const std::optional<data::DatasetTokenizer>& tokenizer,
                        const GptData& data);

// "--hidden-size: checkpoint 128, now 256; ..." for every field of `current` (a
// ModelConfigJson) that differs in `saved`, except those of `ignored` (e.g. "seq_length");
// "" when none does.
std::string ModelDifferences(const varuna::json::Value& saved, const varuna::json::Value& current,
                             const std::vector<std::string>& ignored = {});

// Writes the checkpoint of `state` to --save (staged in --checkpoint-tmpdir when given, sharded
// with --shard, pruned to --keep-last) and logs where and how long it took. The engine's error
// when writing fails.
absl::Status SaveCheckpoint(varuna::Varuna& engine, const TrainerArguments& a,
                            const TrainingState& state, const RunRecord& record, TrainingLog& log);

// With a checkpoint to load (`has_checkpoint`, CheckRun's answer): restores the engine from
// --load (--load-iteration's, else the newest complete one) and returns where training stands;
// otherwise the start (logging that --load holds nothing yet, when given). As Megatron's
// load_checkpoint:
//   default          the weights, the optimizer state (so the LR schedule), the loss scale, the
//                    RNG, the iteration and data position: the run continues
//   --finetune       the weights only: iteration 0, no samples consumed, a fresh optimizer, LR
//                    schedule, loss scale and RNG (--seed's)
//   --no-load-optim  the weights, the iteration and data position, the RNG; a fresh optimizer
//                    (Adam's moments and step count, so the LR schedule restarts its warmup; the
//                    loss scale of a dynamic --fp16 run continues, as the engine keeps it)
//   --no-load-rng    the generators stay as --seed made them
// A weights-only checkpoint (trainer.weights_only: import_hf's) holds no optimizer or RNG state:
// it loads with --finetune or --no-load-optim, and without either is refused
// (FailedPrecondition naming both flags), as Megatron refuses a checkpoint without optimizer
// state. With --finetune or --no-load-optim only the weights' shapes must match (the sequence
// length and the real vocabulary size may differ); otherwise FailedPrecondition naming every
// differing flag for a checkpoint of another model. DataLoss for one without a model record;
// the engine's error for a missing or damaged one. Data other than the checkpoint's (another
// fingerprint) is a warning in the log. Every rank reads its own segments; with --finetune or
// --no-load-optim an error on one rank (a damaged file) ends that rank, and the job with it.
absl::StatusOr<TrainingState> Resume(const TrainerArguments& a, bool has_checkpoint,
                                     varuna::Varuna& engine, const RunRecord& record,
                                     TrainingLog& log);

// Loads only the parameters of load_dir/varuna_ckpt_<iteration> (this rank's segments) into
// `engine`'s optimizer (fp32 masters) and model, with Adam's moments zeroed and its step count
// 0; the loss scale and the RNG are left alone. `accept`, if given, sees the checkpoint's
// trainer state first (an error from it is returned, nothing loaded). Returns the trainer state.
// Errors: those of varuna::ReadCheckpoint (NotFound, DataLoss naming the file);
// FailedPrecondition naming a parameter that is missing or has another shape.
absl::StatusOr<varuna::json::Value> LoadWeights(
    varuna::Varuna& engine, const std::string& load_dir, int64_t iteration,
    const std::function<absl::Status(const varuna::json::Value&)>& accept);

// --use-checkpoint-args (before anything reads the model flags): sets the model's shape in `a`
// (num_layers, hidden_size, num_attention_heads, max_position_embeddings, seq_length and, when
// the default does not give the checkpoint's padded vocabulary, make_vocab_size_divisible_by)
// from the model record of the checkpoint --load names (--load-iteration's, else the newest
// complete one), and returns a line for the log. --seq-length given explicitly wins (it shapes
// no weight). Errors: InvalidArgument naming, for every shape flag given explicitly with another
// value, the flag and both values; NotFound / DataLoss when --load holds checkpoints but none
// complete, when --load-iteration's is missing, or when it has no model record. A --load that
// holds no checkpoint at all (the first run of a job) changes nothing and returns a line saying
// so, as Megatron does.
absl::StatusOr<std::string> UseCheckpointArgs(TrainerArguments& a);

}  // namespace trainer

#endif  // VARUNA_TRAINER_RUN_CHECKPOINT_H_
