// Export of a training checkpoint as a Hugging Face GPT-2 folder, the library behind
// //tools/export_hf. The folder loads with transformers' GPT2LMHeadModel.from_pretrained:
//
//   OUT/model.safetensors   the GPT2LMHeadModel state dict (docs/formats.md 2a), F32, metadata
//                           {"format": "pt"}: every parameter under its Hugging Face key
//                           (gpt2::HuggingFaceName) except lm_head.weight, which transformers
//                           ties to transformer.wte.weight; the four Conv1D weights transposed
//                           to [in, out]; wte with all padded_vocab_size rows the model was
//                           trained with (e.g. 50304 for GPT-2's 50257 ids), so that
//                           transformers' softmax, and so its loss, is the trainer's; with
//                           --trim-padded-vocab cut back to the tokenizer's vocab_size rows
//                           (the padded rows' probability then leaves the softmax: every
//                           token's probability grows a little and the loss falls a little)
//   OUT/config.json         GPT2Config: sizes and dropouts from the checkpoint's model
//                           configuration (dropouts 0.1, noted, if the checkpoint predates them);
//                           vocab_size = wte's rows (padded_vocab_size, or vocab_size trimmed)
//   OUT/generation_config.json  bos = eos = the end-of-document id, pad = the tokenizer's pad
//                           (eos if none)
//   and, when a tokenizer is known (tools/export_hf/hf_tokenizer.h):
//   OUT/tokenizer.json      the tokenizer converted for Hugging Face `tokenizers` (its real
//                           vocab_size ids: the padded ids are never produced)
//   OUT/tokenizer_config.json   model_max_length, the special tokens; tokenizer_class
//                           PreTrainedTokenizerFast (SentencePiece) or GPT2Tokenizer (GPT-2 BPE)
//   OUT/special_tokens_map.json
//   OUT/tokenizer.model     a byte copy of the SentencePiece model, or for GPT-2 BPE
//   OUT/vocab.json, OUT/merges.txt   byte copies of vocab.json and merges.txt
//
// The model configuration comes from the checkpoint metadata's trainer.model object
// (num_layers, hidden_size, num_attention_heads, seq_length, max_position_embeddings,
// padded_vocab_size, vocab_size, optionally layernorm_epsilon, hidden_dropout and
// attention_dropout); the tokenizer from the options or else trainer.tokenizer ({"type",
// "files", "crc32c", "vocab_size"}, docs/checkpoints.md) or, before it, trainer.tokenizer_model.
//
// Nothing is written until the checkpoint has been read and checked whole. The files are
// written into a hidden staging directory beside OUT that is renamed to OUT at the end, so
// OUT either does not appear or is complete; on error the staging directory is removed.
//
// Thread safety: the functions are reentrant; two exports must not target the same OUT.
#ifndef VARUNA_TOOLS_EXPORT_HF_HF_EXPORT_H_
#define VARUNA_TOOLS_EXPORT_HF_HF_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/export_hf/hf_config.h"

namespace tools {

// What to export and where. Paths are used as given (the program resolves relative ones).
struct HfExportOptions {
  // --help was given: print kHfExportUsage and `flags_help` (every flag with its default).
  bool help_requested = false;
  std::string flags_help;
  // CKPT: a save directory holding varuna_ckpt_<n> directories (the newest complete one is
  // exported unless `iteration` is set), or one varuna_ckpt_<n> directory itself.
  std::string checkpoint;
  // OUT: the folder to create. It must not exist or be an empty directory; missing parent
  // directories are created.
  std::string output_dir;
  // --iteration: the checkpoint of a save directory to export; -1: the newest complete one.
  int64_t iteration = -1;
  // The tokenizer, by the trainer's (Megatron's) flags, as data::TokenizerKindOf reads them:
  // --tokenizer-model, the SentencePiece model to copy, or --vocab-file and --merge-file, GPT-2
  // BPE's vocab.json and merges.txt; --tokenizer-type, if given, must name their kind. None
  // takes the checkpoint's (trainer.tokenizer, or trainer.tokenizer_model before it), and with
  // neither no tokenizer is exported. A checkpoint that records its tokenizer's crc32c and
  // vocab_size refuses other files.
  std::string tokenizer_type;
  std::string tokenizer_model;
  std::string vocab_file;
  std::string merge_file;
  // --vocab-size: the real vocabulary size, for checkpoints that predate trainer.model's
  // vocab_size; 0 takes the checkpoint's (or, failing that, the tokenizer's).
  int64_t vocab_size = 0;
  // --trim-padded-vocab: export only the real vocab_size rows of the word embedding (config
  // vocab_size = the tokenizer's size), as exports before issue 25 did; a warning says that the
  // loss then differs from the trainer's. Default: every padded_vocab_size row.
  bool trim_padded_vocab = false;
};

// The usage line of export_hf.
inline constexpr char kHfExportUsage[] =
    "usage: export_hf CKPT OUT [--tokenizer-model PATH | --vocab-file PATH --merge-file PATH]\n"
    "                 [--tokenizer-type TYPE] [--iteration N] [--vocab-size N]\n"
    "                 [--trim-padded-vocab]\n"
    "  CKPT  a --save directory (exports its newest complete checkpoint, or --iteration N)\n"
    "        or one varuna_ckpt_<n> directory in it\n"
    "  OUT   the Hugging Face folder to create (must not exist or be empty)\n"
    "  The word embedding keeps the padded rows the model was trained with (config.json\n"
    "  vocab_size = the padded vocabulary), so transformers' loss equals the trainer's;\n"
    "  --trim-padded-vocab cuts it to the tokenizer's ids (the loss then shifts slightly).";

// Parses export_hf's arguments (without the program name): two positional paths and the
// flags above, as "--flag value" or "--flag=value". Errors: InvalidArgument naming the
// argument (missing or extra positionals, unknown flag, missing or malformed value);
// the program prints kHfExportUsage with it and exits 2.
absl::StatusOr<HfExportOptions> ParseHfExportArgs(const std::vector<std::string>& args);

// What an export did.
struct HfExportSummary {
  std::string checkpoint_dir;  // the varuna_ckpt_<n> directory read
  int64_t iteration = 0;
  int64_t num_tensors = 0;  // in model.safetensors
  uint64_t bytes = 0;       // size of model.safetensors
  std::string output_dir;
  std::string tokenizer_model;               // the copied SentencePiece model, "" if none
  std::vector<std::string> tokenizer_files;  // the copied tokenizer files, none if none
  int64_t vocab_rows = 0;             // rows of transformer.wte.weight = config.json's vocab_size
  std::vector<std::string> notes;     // for stdout: which checkpoint, where the vocab came from
  std::vector<std::string> warnings;  // for stderr: e.g. lm_head_weight differs from wte,
                                      // --trim-padded-vocab shifts the loss

  // "exported <checkpoint_dir> (iteration N): T tensors, B bytes -> <output_dir>".
  std::string Line() const;
};

// Exports options.checkpoint into options.output_dir (see the file comment). Errors, each
// naming the input and the fix, with nothing written: NotFound for a missing CKPT or
// checkpoint (and the statuses of varuna::LatestCheckpointIteration / ReadCheckpoint for
// incomplete or damaged ones, DataLoss mostly); InvalidArgument for --iteration that
// contradicts a varuna_ckpt_<n> CKPT, a missing vocab_size (pass --vocab-size or the
// tokenizer), a vocab_size above padded_vocab_size, tokenizer flags TokenizerKindOf refuses, a
// tokenizer other than the one the checkpoint records with its crc32c and vocab_size (another
// kind, size or bytes: the message names both and the flags to pass), a tokenizer whose size
// differs from vocab_size, or one that cannot be converted; DataLoss for a
// missing model configuration (gpt2::ReadModelRecord),
// a missing GPT-2 parameter or one with the wrong shape; FailedPrecondition if OUT exists
// and is not an empty directory; NotFound / InvalidArgument from data::LoadTokenizer for a
// missing or unusable tokenizer; errno statuses naming the path for I/O.
absl::StatusOr<HfExportSummary> ExportHuggingFace(const HfExportOptions& options);

}  // namespace tools

#endif  // VARUNA_TOOLS_EXPORT_HF_HF_EXPORT_H_
