// Import of a Hugging Face GPT-2 folder as a training checkpoint, the library behind
// //tools/import_hf. The folder is what transformers' save_pretrained writes for a
// GPT2LMHeadModel:
//
//   IN/config.json          GPT2Config (read by tools/import_hf/hf_gpt2_config.h)
//   IN/model.safetensors    the state dict; keys with or without the "transformer." prefix
//                           (GPT2LMHeadModel or GPT2Model), F32, F16 or BF16; lm_head.weight,
//                           if present, must equal the word embedding (tied); the attention
//                           buffers older versions saved (attn.bias, attn.masked_bias) are
//                           skipped
//   IN/vocab.json, IN/merges.txt   optional: GPT-2's byte-level BPE, copied and recorded
//
// and writes OUT/varuna_ckpt_0 (docs/checkpoints.md) as pretrain_gpt2 writes its checkpoints,
// one segment file per layer under the model's parameter names (models/gpt2/parameter_names.h):
// the four Conv1D matrices transposed back to [out, in]; the word embedding padded to the padded
// vocabulary (a multiple of --make-vocab-size-divisible-by) with copies of its mean row (the
// padded rows then take at most P / (V + P) of the trainer's softmax) and stored twice,
// as wte.weight in segment 0 and as the tied lm_head_weight in the last segment, as the trainer
// stores the pair; fp32. The metadata records the model (trainer.model, gpt2::CheckpointModelJson:
// vocab_size the real size, padded_vocab_size the rows), iteration 0, the tokenizer when the
// folder has one, and "weights_only": true: there is no optimizer state and no RNG state, so the
// trainer loads it only with --finetune or --no-load-optim. Any pipeline x data-parallel layout
// loads it (each stage reads its own segments).
//
// Nothing is written until the folder has been read and checked whole; OUT must be absent or
// empty, and on error it is left as it was (a checkpoint without its COMPLETE marker is never
// loaded).
//
// Thread safety: reentrant; two imports must not target the same OUT.
#ifndef VARUNA_TOOLS_IMPORT_HF_HF_IMPORT_H_
#define VARUNA_TOOLS_IMPORT_HF_HF_IMPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/gpt2/config.h"

namespace tools {

struct HfImportOptions {
  // --help was given: print kHfImportUsage and `flags_help`.
  bool help_requested = false;
  std::string flags_help;
  // IN: the Hugging Face folder.
  std::string input_dir;
  // OUT: the checkpoint directory to create (it gets varuna_ckpt_0 and Megatron's tracker
  // latest_checkpointed_iteration.txt); absent or empty.
  std::string output_dir;
  // --make-vocab-size-divisible-by: the trainer's flag of the same name, which must then be the
  // same (or given by --use-checkpoint-args).
  int make_vocab_size_divisible_by = 128;
};

inline constexpr char kHfImportUsage[] =
    "usage: import_hf IN OUT [--make-vocab-size-divisible-by N]\n"
    "  IN   a Hugging Face GPT-2 folder (config.json, model.safetensors; vocab.json and\n"
    "       merges.txt optional)\n"
    "  OUT  the checkpoint directory to create (gets varuna_ckpt_0); then train with\n"
    "       pretrain_gpt2 --load=OUT --finetune --use-checkpoint-args";

// Parses import_hf's arguments (without the program name). InvalidArgument naming the argument;
// the program prints kHfImportUsage with it and exits 2.
absl::StatusOr<HfImportOptions> ParseHfImportArgs(const std::vector<std::string>& args);

// What an import did.
struct HfImportSummary {
  std::string checkpoint_dir;  // OUT/varuna_ckpt_0
  gpt2::Gpt2Config model;      // vocab_size the real size
  int64_t num_tensors = 0;     // stored, the tied pair counted twice
  // The tokenizer recorded and copied into OUT (vocab.json, merges.txt), absolute; none if the
  // folder has none.
  std::vector<std::string> tokenizer_files;
  std::vector<std::string> notes;  // for stdout

  // The imported model and the pretrain_gpt2 flags that train from it.
  std::string Report(const std::string& output_dir) const;
};

// Imports options.input_dir into options.output_dir (see the file comment). Errors, each naming
// the input and the fix, with nothing written: NotFound for a missing IN or config.json;
// FailedPrecondition for a folder with pytorch_model.bin and no model.safetensors (the message
// gives the one-line conversion) or an OUT that is not empty; InvalidArgument for a config.json
// that describes another model (every field named, Gpt2ConfigFromHuggingFace), a tensor that is
// missing, unexpected, of the wrong shape or dtype (listed by name with both shapes), an
// lm_head.weight that differs from the word embedding, or tokenizer files that do not load or
// have another vocabulary size; DataLoss for a malformed model.safetensors; errno statuses
// naming the path for I/O.
absl::StatusOr<HfImportSummary> ImportHuggingFace(const HfImportOptions& options);

}  // namespace tools

#endif  // VARUNA_TOOLS_IMPORT_HF_HF_IMPORT_H_
