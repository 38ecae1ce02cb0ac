// The checkpoints of a training run: what each records besides the engine's state (RunRecord:
// the training state, the model, the tokenizer, the LR schedule, the data's fingerprint), writing
// one (SaveCheckpoint), and resuming from the one --load names (Resume), refusing a checkpoint
// of another model with the differing flags named.
//
// Thread safety: for the program's main thread; saving and loading are collectives of the job.
#ifndef VARUNA_TRAINER_RUN_CHECKPOINT_H_
#define VARUNA_TRAINER_RUN_CHECKPOINT_H_

#include <optional>
#include <string>

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
  std::string data_fingerprint;     // the indexed dataset's, as 16 hex digits
};

// The record of a run of `config` on `data` with the tokenizer `tokenizer` (as OpenData
// described it; unset: none).
RunRecord MakeRunRecord(const TrainerArguments& a, const gpt2::Gpt2Config& config,
                        const std::optional<data::DatasetTokenizer>& tokenizer,
                        const GptData& data);

// "--hidden-size: checkpoint 128, now 256; ..." for every field of `current` (a
// ModelConfigJson) that differs in `saved`; "" when none does.
std::string ModelDifferences(const varuna::json::Value& saved, const varuna::json::Value& current);

// Writes the checkpoint of `state` to --save (staged in --checkpoint-tmpdir when given, sharded
// with --shard, pruned to --keep-last) and logs where and how long it took. The engine's error
// when writing fails.
absl::Status SaveCheckpoint(varuna::Varuna& engine, const TrainerArguments& a,
                            const TrainingState& state, const RunRecord& record, TrainingLog& log);

// With a checkpoint to load (`has_checkpoint`, CheckRun's answer): restores the engine from
// --load (--load-iteration's, else the newest complete one) and returns where training stands;
// otherwise the start (logging that --load holds nothing yet, when given). FailedPrecondition
// naming the differing flags for a checkpoint of another model; DataLoss for one without a
// model record; the engine's error for a missing or damaged one. Data other than the
// checkpoint's (another fingerprint) is a warning in the log.
absl::StatusOr<TrainingState> Resume(const TrainerArguments& a, bool has_checkpoint,
                                     varuna::Varuna& engine, const RunRecord& record,
                                     TrainingLog& log);

}  // namespace trainer

#endif  // VARUNA_TRAINER_RUN_CHECKPOINT_H_
