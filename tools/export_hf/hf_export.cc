#include "tools/export_hf/hf_export.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "data/dataset_tokenizer.h"
#include "data/sentencepiece_model.h"
#include "data/tokenizer_status.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model_record.h"
#include "models/gpt2/parameter_names.h"
#include "tools/export_hf/hf_tokenizer.h"
#include "varuna/checkpoint/files.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/io/crc32c.h"
#include "varuna/io/posix_file.h"
#include "varuna/io/safetensors.h"
#include "varuna/io/user_paths.h"

namespace tools {
namespace {

using varuna::FlagParser;

namespace fs = std::filesystem;
using varuna::NamedTensors;
using varuna::json::Value;

// A status with the code of `status` and `prefix` before its message.
absl::Status WithPrefix(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

std::string ShapeText(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The checkpoint to read: load_dir/varuna_ckpt_<iteration>.
struct CheckpointSource {
  std::string load_dir;
  int64_t iteration = 0;
  std::string dir;  // load_dir/varuna_ckpt_<iteration>
  std::string note;
};

absl::StatusOr<CheckpointSource> FindCheckpoint(const HfExportOptions& options) {
  const std::string path = varuna::WithoutTrailingSlashes(options.checkpoint);
  std::error_code error;
  if (path.empty() || !fs::is_directory(path, error)) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", options.checkpoint,
                     " is not a directory: pass a --save directory of pretrain_gpt2 or one "
                     "varuna_ckpt_<n> directory in it"));
  }
  CheckpointSource source;
  const int64_t named = varuna::CheckpointIterationOf(path);
  if (named >= 0) {
    if (options.iteration >= 0 && options.iteration != named) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--iteration=", options.iteration, " contradicts checkpoint ", path, " (iteration ",
          named, "): drop --iteration or pass the save directory instead"));
    }
    const std::string parent = fs::path(path).parent_path().string();
    source.load_dir = parent.empty() ? "." : parent;
    source.iteration = named;
  } else if (options.iteration >= 0) {
    source.load_dir = path;
    source.iteration = options.iteration;
    if (!fs::is_directory(fs::path(path) / varuna::CheckpointDirName(options.iteration), error)) {
      return absl::NotFoundError(
          absl::StrCat("--iteration=", options.iteration, ": ", path, " has no ",
                       varuna::CheckpointDirName(options.iteration),
                       ": pick the iteration of an existing checkpoint or drop --iteration"));
    }
  } else {
    source.load_dir = path;
    absl::StatusOr<int64_t> latest = varuna::LatestCheckpointIteration(path, &source.note);
    if (!latest.ok()) {
      return WithPrefix(latest.status(),
                        absl::StrCat("checkpoint ", path, " has no checkpoint to export: "));
    }
    source.iteration = *latest;
  }
  source.dir = (fs::path(source.load_dir) / varuna::CheckpointDirName(source.iteration)).string();
  return source;
}

// The tokenizer to export and where it came from; no files if none is known.
struct TokenizerChoice {
  data::TokenizerSpec spec;
  std::optional<data::TokenizerKind> kind;
  std::string origin;  // for messages
  // What the checkpoint records of its tokenizer when it records its checksum and size
  // (trainer.tokenizer's crc32c and vocab_size): the files exported must be these.
  std::optional<data::DatasetTokenizer> recorded;
};

// The flags that name `spec`: "--tokenizer-model=F" or "--vocab-file=V --merge-file=M".
std::string SpecFlags(const data::TokenizerSpec& spec, data::TokenizerKind kind) {
  if (kind == data::TokenizerKind::kSentencePiece) {
    return absl::StrCat("--tokenizer-model=", spec.model_file);
  }
  return absl::StrCat("--vocab-file=", spec.vocab_file, " --merge-file=", spec.merge_file);
}

// The checkpoint's trainer.tokenizer ({"type", "files"[, "crc32c", "vocab_size"]}) or, for
// checkpoints before it, trainer.tokenizer_model. `spec` gets its files; `recorded` its checksum
// and size when it has them. False when the checkpoint records no (readable) tokenizer.
bool RecordedTokenizer(const Value& metadata, data::TokenizerSpec* spec,
                       std::optional<data::DatasetTokenizer>* recorded) {
  const Value* trainer = varuna::json::Find(metadata, "trainer");
  if (trainer == nullptr) return false;
  const Value* tokenizer = varuna::json::Find(*trainer, "tokenizer");
  if (tokenizer != nullptr && tokenizer->is_object()) {
    const Value* type = varuna::json::Find(*tokenizer, "type");
    const Value* files = varuna::json::Find(*tokenizer, "files");
    if (type != nullptr && type->is_string() && files != nullptr && files->is_array()) {
      std::vector<std::string> paths;
      for (const Value& file : *files) {
        if (file.is_string()) paths.push_back(file.get<std::string>());
      }
      data::DatasetTokenizer record;
      if (*type == data::TokenizerTypeName(data::TokenizerKind::kSentencePiece) &&
          paths.size() == 1) {
        spec->model_file = paths[0];
      } else if (*type == data::TokenizerTypeName(data::TokenizerKind::kGpt2Bpe) &&
                 paths.size() == 2) {
        spec->vocab_file = paths[0];
        spec->merge_file = paths[1];
        record.kind = data::TokenizerKind::kGpt2Bpe;
      } else {
        return false;
      }
      spec->type = type->get<std::string>();
      record.files = std::move(paths);
      const Value* crc = varuna::json::Find(*tokenizer, "crc32c");
      const std::optional<int64_t> vocab =
          varuna::json::AsInt64(varuna::json::Find(*tokenizer, "vocab_size"));
      if (crc != nullptr && crc->is_string() &&
          absl::SimpleHexAtoi(crc->get<std::string>(), &record.crc32c) && vocab && *vocab > 0) {
        record.vocab_size = *vocab;
        *recorded = std::move(record);
      }
      return true;
    }
  }
  const Value* saved = varuna::json::Find(*trainer, "tokenizer_model");
  if (saved != nullptr && saved->is_string() && !saved->get_ref<const std::string&>().empty()) {
    spec->model_file = saved->get<std::string>();
    return true;
  }
  return false;
}

absl::StatusOr<TokenizerChoice> ChooseTokenizer(const HfExportOptions& options,
                                                const Value& metadata, const std::string& source) {
  TokenizerChoice choice;
  data::TokenizerSpec recorded_spec;
  const bool recorded = RecordedTokenizer(metadata, &recorded_spec, &choice.recorded);
  const data::TokenizerSpec given{options.tokenizer_type, options.tokenizer_model,
                                  options.vocab_file, options.merge_file};
  absl::StatusOr<std::optional<data::TokenizerKind>> kind = data::TokenizerKindOf(given);
  if (!kind.ok()) return kind.status();
  if (kind->has_value()) {
    choice.spec = given;
    choice.kind = *kind;
    choice.origin = SpecFlags(given, **kind);
    return choice;
  }
  if (!recorded) return choice;
  kind = data::TokenizerKindOf(recorded_spec);
  if (!kind.ok() || !kind->has_value()) return choice;
  choice.spec = recorded_spec;
  choice.kind = *kind;
  choice.origin = absl::StrCat(
      "the tokenizer ",
      **kind == data::TokenizerKind::kSentencePiece
          ? recorded_spec.model_file
          : absl::StrCat(recorded_spec.vocab_file, ", ", recorded_spec.merge_file),
      " recorded in checkpoint ", source,
      " (pass --tokenizer-model PATH, or --vocab-file PATH --merge-file PATH, to use other "
      "files)");
  return choice;
}

// InvalidArgument naming both tokenizers and the flags to pass unless `used` is the tokenizer
// the checkpoint records (`recorded`: the same kind, vocabulary size and bytes).
absl::Status CheckRecordedTokenizer(const data::DatasetTokenizer& recorded,
                                    const data::DatasetTokenizer& used, const std::string& origin,
                                    const std::string& source) {
  std::string difference;
  if (recorded.kind != used.kind) {
    difference = absl::StrCat("another kind (", data::TokenizerTypeName(used.kind), ", not ",
                              data::TokenizerTypeName(recorded.kind), ")");
  } else if (recorded.vocab_size != used.vocab_size) {
    difference = absl::StrCat("another vocabulary (", used.vocab_size, " ids, not ",
                              recorded.vocab_size, ")");
  } else if (recorded.crc32c != used.crc32c) {
    difference =
        absl::StrFormat("other bytes (crc32c %08x, not %08x)", used.crc32c, recorded.crc32c);
  } else {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "checkpoint %s was trained with %s, %d ids, crc32c %08x, but %s is %s: %s, so its ids "
      "would mean other pieces. Export with the tokenizer the model was trained with: pass %s "
      "(or leave the tokenizer flags out to use the recorded files)",
      source, recorded.Describe(), recorded.vocab_size, recorded.crc32c, origin, used.Describe(),
      difference, recorded.Flags()));
}

// Converts segment `segment`'s tensors to Hugging Face tensors appended to `out`, the word
// embedding with its first `vocab_rows` rows. Keeps the full wte.weight and lm_head_weight in
// *wte / *lm_head for the tie check.
absl::Status ConvertSegment(const gpt2::ModelRecord& config, int64_t vocab_rows, int segment,
                            NamedTensors tensors, const std::string& source, NamedTensors* out,
                            at::Tensor* wte, at::Tensor* lm_head) {
  gpt2::Gpt2Config shapes;  // only the sizes SegmentParameters reads
  shapes.num_layers = static_cast<int>(config.num_layers);
  shapes.hidden_size = static_cast<int>(config.hidden_size);
  shapes.num_attention_heads = static_cast<int>(config.num_attention_heads);
  shapes.seq_length = static_cast<int>(config.seq_length);
  shapes.max_position_embeddings = static_cast<int>(config.max_position_embeddings);
  shapes.vocab_size = static_cast<int>(config.padded_vocab_size);
  shapes.make_vocab_size_divisible_by = 1;
  std::map<std::string, at::Tensor*> by_name;
  for (auto& [name, tensor] : tensors) by_name[name] = &tensor;
  for (const gpt2::ParameterSpec& spec : gpt2::SegmentParameters(shapes, segment)) {
    auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint ", source, " has no tensor ", spec.name, " (segment ", segment,
          ") that its model configuration needs: the checkpoint is damaged or incomplete; "
          "export an intact one (--iteration N)"));
    }
    at::Tensor tensor = *it->second;
    if (tensor.sizes() != at::IntArrayRef(spec.shape)) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint ", source, ": tensor ", spec.name, " has shape ", ShapeText(tensor.sizes()),
          " but its model configuration (trainer.model) needs ", ShapeText(spec.shape),
          ": the checkpoint is damaged or its metadata belongs to another model"));
    }
    if (tensor.scalar_type() != at::kFloat) tensor = tensor.to(at::kFloat);
    if (spec.name == gpt2::kLmHeadName) {
      *lm_head = tensor;  // tied to wte: transformers rebuilds lm_head.weight from it
      continue;
    }
    if (spec.name == gpt2::kWordEmbeddingName) {
      *wte = tensor;
      if (vocab_rows < tensor.size(0)) tensor = tensor.narrow(0, 0, vocab_rows);
    } else if (gpt2::TransposedInHuggingFace(spec.name)) {
      tensor = tensor.t();  // LibTorch Linear [out, in] -> Conv1D [in, out]
    }
    out->emplace_back(gpt2::HuggingFaceName(spec.name), tensor);
  }
  return absl::OkStatus();
}

// A file of the folder besides model.safetensors: its name and contents.
struct FolderFile {
  std::string name;
  std::string contents;
};

FolderFile JsonFile(std::string name, const Value& json) {
  return {std::move(name), varuna::json::Serialize(json, /*pretty=*/true) + "\n"};
}

// Writes the folder into a staging directory beside `out`, then renames it to `out`.
absl::Status WriteFolder(const std::string& out, const NamedTensors& tensors,
                         const std::vector<FolderFile>& files, uint64_t* bytes) {
  const fs::path target(out);
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code error;
  fs::create_directories(parent, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", parent.string(),
                                                    ", the "
                                                    "parent of output ",
                                                    out, ": ", error.message()));
  }
  std::string staging =
      (parent / absl::StrCat(".", target.filename().string(), ".export-XXXXXX")).string();
  if (::mkdtemp(staging.data()) == nullptr) {
    return varuna::ErrnoStatus(errno, absl::StrCat("cannot create a staging directory in ",
                                                   parent.string(), " for output ", out));
  }
  auto write = [&]() -> absl::Status {
    if (::chmod(staging.c_str(), 0755) != 0) {
      return varuna::ErrnoStatus(errno, absl::StrCat("chmod ", staging));
    }
    varuna::FileChecksum written;
    if (absl::Status s = varuna::WriteSafetensors(staging + "/model.safetensors", tensors,
                                                  {{"format", "pt"}}, &written);
        !s.ok()) {
      return s;
    }
    *bytes = written.size;
    for (const FolderFile& file : files) {
      if (absl::Status s = varuna::WriteFileAtomically(
              staging + "/" + file.name, staging + "/." + file.name + ".tmp-", {file.contents});
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = varuna::SyncDirectory(staging); !s.ok()) return s;
    if (::rename(staging.c_str(), out.c_str()) != 0) {
      if (errno == ENOTEMPTY || errno == EEXIST || errno == ENOTDIR) {
        return absl::FailedPreconditionError(
            absl::StrCat("output ", out,
                         " appeared or was filled during the export: choose a new "
                         "directory or remove it first"));
      }
      return varuna::ErrnoStatus(errno, absl::StrCat("cannot rename ", staging, " to ", out));
    }
    return varuna::SyncDirectory(parent.string());
  };
  absl::Status status = write();
  if (!status.ok()) fs::remove_all(staging, error);
  return status;
}

}  // namespace

std::string HfExportSummary::Line() const {
  return absl::StrFormat("exported %s (iteration %d): %d tensors, %d bytes -> %s", checkpoint_dir,
                         iteration, num_tensors, bytes, output_dir);
}

absl::StatusOr<HfExportOptions> ParseHfExportArgs(const std::vector<std::string>& args) {
  HfExportOptions options;
  FlagParser parser;
  parser.Add("tokenizer-model", &options.tokenizer_model, "the SentencePiece model to copy");
  parser.Add("tokenizer-type", &options.tokenizer_type,
             "SentencePieceTokenizer or GPT2BPETokenizer (\"\": from the files given)");
  parser.Add("vocab-file", &options.vocab_file, "GPT-2 BPE's vocab.json to copy");
  parser.Add("merge-file", &options.merge_file, "GPT-2 BPE's merges.txt to copy");
  parser.Add("iteration", &options.iteration, "the checkpoint to export (-1: the newest)", "1000");
  parser.Add("vocab-size", &options.vocab_size, "the real vocabulary (0: from the checkpoint)",
             "50257");
  parser.Add("trim-padded-vocab", &options.trim_padded_vocab,
             "export only the tokenizer's rows of the word embedding, not the padded ones the "
             "model was trained with (transformers' loss then differs slightly from the "
             "trainer's)");
  parser.SetMinimum("iteration", 0);  // given: an iteration of a saved checkpoint
  parser.SetMinimum("vocab-size", 1);
  std::vector<std::string> positional;
  if (absl::Status status = parser.Parse(args, &positional); !status.ok()) return status;
  options.flags_help = parser.Help();
  if (parser.help_requested()) {
    options.help_requested = true;
    return options;
  }
  for (const auto& [flag, value, example] :
       {std::make_tuple("tokenizer-model", &options.tokenizer_model, "tok.model"),
        std::make_tuple("vocab-file", &options.vocab_file, "gpt2-vocab.json"),
        std::make_tuple("merge-file", &options.merge_file, "gpt2-merges.txt")}) {
    if (parser.WasSet(flag) && value->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " needs a path: e.g. --", flag, "=", example,
                       ", or drop it to use the tokenizer the checkpoint records"));
    }
  }
  // The same checks as the trainer's (which kind, both GPT-2 files).
  if (absl::StatusOr<std::optional<data::TokenizerKind>> kind =
          data::TokenizerKindOf({options.tokenizer_type, options.tokenizer_model,
                                 options.vocab_file, options.merge_file});
      !kind.ok()) {
    return kind.status();
  }
  if (positional.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected 2 paths (CKPT OUT), got ", positional.size(),
                     positional.empty() ? "" : ": ", absl::StrJoin(positional, " ")));
  }
  options.checkpoint = positional[0];
  options.output_dir = positional[1];
  return options;
}

absl::StatusOr<HfExportSummary> ExportHuggingFace(const HfExportOptions& options) {
  const std::string out = varuna::WithoutTrailingSlashes(options.output_dir);
  if (out.empty()) {
    return absl::InvalidArgumentError(
        "the output directory OUT is empty: give a new directory to write, e.g. gpt2-hf");
  }
  if (absl::Status s = varuna::CheckNewOutputDirectory(out); !s.ok()) return s;
  absl::StatusOr<CheckpointSource> found = FindCheckpoint(options);
  if (!found.ok()) return found.status();
  const CheckpointSource& source = *found;
  HfExportSummary summary;
  summary.checkpoint_dir = source.dir;
  summary.iteration = source.iteration;
  summary.output_dir = out;
  if (!source.note.empty()) summary.notes.push_back("checkpoint: " + source.note);

  // Segment 0 first: it carries the metadata, which says how many segments there are.
  auto read_segment = [&](int segment) -> absl::StatusOr<varuna::CheckpointData> {
    absl::StatusOr<varuna::CheckpointData> data =
        varuna::ReadCheckpoint(source.load_dir, source.iteration, {segment});
    if (!data.ok() && absl::IsNotFound(data.status())) {
      return absl::DataLossError(absl::StrCat("checkpoint ", source.dir, " has no segment ",
                                              segment, " (the model's layer ", segment,
                                              "): ", data.status().message()));
    }
    return data;
  };
  absl::StatusOr<varuna::CheckpointData> first = read_segment(0);
  if (!first.ok()) return first.status();
  absl::StatusOr<gpt2::ModelRecord> config = gpt2::ReadModelRecord(first->metadata, source.dir);
  if (!config.ok()) return config.status();

  // The tokenizer and the real vocabulary size.
  absl::StatusOr<TokenizerChoice> chosen = ChooseTokenizer(options, first->metadata, source.dir);
  if (!chosen.ok()) return chosen.status();
  const TokenizerChoice& choice = *chosen;
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::vector<FolderFile> tokenizer_copies;  // the tokenizer's files, byte for byte
  std::optional<HfTokenizerFiles> hf_tokenizer;
  if (choice.kind.has_value()) {
    absl::StatusOr<std::unique_ptr<data::Tokenizer>> loaded = data::LoadTokenizer(choice.spec);
    if (!loaded.ok()) return WithPrefix(loaded.status(), absl::StrCat(choice.origin, ": "));
    tokenizer = std::move(*loaded);
    const bool sentencepiece = *choice.kind == data::TokenizerKind::kSentencePiece;
    const std::vector<std::string> names =
        sentencepiece ? std::vector<std::string>{"tokenizer.model"}
                      : std::vector<std::string>{"vocab.json", "merges.txt"};
    const std::vector<std::string> paths = tokenizer->files();
    data::DatasetTokenizer used;
    used.kind = tokenizer->kind();
    used.vocab_size = tokenizer->vocab_size();
    used.files = paths;
    for (size_t i = 0; i < paths.size() && i < names.size(); ++i) {
      absl::StatusOr<std::string> bytes = varuna::ReadFileToString(paths[i]);
      if (!bytes.ok()) return bytes.status();
      used.crc32c = varuna::Crc32cExtend(used.crc32c, bytes->data(), bytes->size());
      tokenizer_copies.push_back({names[i], *std::move(bytes)});
    }
    if (choice.recorded.has_value()) {
      if (absl::Status s =
              CheckRecordedTokenizer(*choice.recorded, used, choice.origin, source.dir);
          !s.ok()) {
        return s;
      }
    }
    absl::StatusOr<HfTokenizerFiles> converted;
    if (sentencepiece) {
      absl::StatusOr<data::SentencePieceModel> proto =
          data::ParseSentencePieceModel(tokenizer_copies[0].contents, paths[0]);
      if (!proto.ok()) return WithPrefix(proto.status(), absl::StrCat(choice.origin, ": "));
      if (static_cast<int>(proto->pieces.size()) != tokenizer->vocab_size() ||
          proto->eos_id != tokenizer->eod_id()) {
        return absl::DataLossError(
            absl::StrCat(choice.origin, ": the model file's pieces (", proto->pieces.size(),
                         ", eos ", proto->eos_id, ") disagree with what SentencePiece loaded (",
                         tokenizer->vocab_size(), ", eos ", tokenizer->eod_id(),
                         "): the file changed while it was read; run the export again"));
      }
      converted = HuggingFaceTokenizer(*proto, config->max_position_embeddings, paths[0]);
      summary.tokenizer_model = paths[0];
    } else {
      converted = HuggingFaceGpt2Tokenizer(*tokenizer, tokenizer_copies[1].contents,
                                           config->max_position_embeddings, paths[1]);
    }
    if (!converted.ok()) return WithPrefix(converted.status(), absl::StrCat(choice.origin, ": "));
    hf_tokenizer = std::move(*converted);
    summary.tokenizer_files = paths;
  } else {
    summary.notes.push_back(
        "no tokenizer known (the checkpoint records none): the tokenizer files are not "
        "written; pass --tokenizer-model PATH (SentencePiece) or --vocab-file PATH --merge-file "
        "PATH (GPT-2 BPE) to include them");
  }
  if (!config->dropout_recorded) {
    summary.notes.push_back(
        absl::StrCat("dropout unknown: checkpoint ", source.dir,
                     " predates trainer.model.hidden_dropout/attention_dropout; config.json gets ",
                     config->hidden_dropout,
                     " (Megatron's default) for resid_pdrop, embd_pdrop and attn_pdrop"));
  }
  const int64_t recorded_vocab = config->vocab_size;
  if (options.vocab_size > 0) {
    config->vocab_size = options.vocab_size;
    if (recorded_vocab > 0 && recorded_vocab != options.vocab_size) {
      summary.warnings.push_back(absl::StrCat("--vocab-size=", options.vocab_size,
                                              " overrides the checkpoint's vocab_size ",
                                              recorded_vocab));
    }
  } else if (recorded_vocab == 0 && tokenizer != nullptr) {
    config->vocab_size = tokenizer->vocab_size();
    summary.notes.push_back(absl::StrCat("vocab_size ", config->vocab_size, " taken from ",
                                         absl::StrJoin(tokenizer->files(), ", "),
                                         " (the checkpoint predates trainer.model.vocab_size)"));
  }
  if (config->vocab_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint ", source.dir,
        " predates trainer.model.vocab_size (the tokenizer's real "
        "vocabulary; it records only padded_vocab_size ",
        config->padded_vocab_size,
        "): pass --vocab-size N, or the tokenizer (--tokenizer-model PATH, or --vocab-file PATH "
        "--merge-file PATH)"));
  }
  if (config->vocab_size > config->padded_vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocab_size ", config->vocab_size, " exceeds the checkpoint's padded_vocab_size ",
        config->padded_vocab_size, ": pass the tokenizer's real --vocab-size"));
  }
  if (tokenizer != nullptr && tokenizer->vocab_size() != config->vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        choice.origin, " has ", tokenizer->vocab_size(), " pieces but the model's vocab_size is ",
        config->vocab_size, ": pass the tokenizer the model was trained with (",
        *choice.kind == data::TokenizerKind::kSentencePiece ? "--tokenizer-model"
                                                            : "--vocab-file, --merge-file",
        ")"));
  }

  // The word embedding's rows: all the trainer's softmax ran over, or the real ones.
  summary.vocab_rows = options.trim_padded_vocab ? config->vocab_size : config->padded_vocab_size;
  const int64_t padded_ids = config->padded_vocab_size - config->vocab_size;
  if (options.trim_padded_vocab && padded_ids > 0) {
    summary.warnings.push_back(absl::StrCat(
        "--trim-padded-vocab: the word embedding keeps ", config->vocab_size, " of its ",
        config->padded_vocab_size, " rows, so the ", padded_ids,
        " padded ids the model was trained with are no longer in the softmax: each real id's "
        "probability is divided by 1 minus the share those rows had (a few 1e-4 for a trained "
        "model), so transformers' loss comes out lower than the trainer's by about that share "
        "(a few 1e-5 relative); leave the flag out to export the rows as trained"));
  } else if (options.trim_padded_vocab) {
    summary.notes.push_back(absl::StrCat("--trim-padded-vocab: nothing to trim, the vocabulary (",
                                         config->vocab_size, ") was not padded"));
  } else if (padded_ids > 0) {
    summary.notes.push_back(absl::StrCat(
        "vocab_size ", config->padded_vocab_size, " in config.json: the word embedding keeps the ",
        padded_ids, " padded rows after the ", config->vocab_size,
        " real ids, as the model was trained, so transformers' loss is the trainer's (the "
        "tokenizer never produces ids ",
        config->vocab_size, "..", config->padded_vocab_size - 1,
        "); --trim-padded-vocab exports the real rows only"));
  }

  // The tensors, one segment at a time so that only one segment's optimizer state is held.
  NamedTensors tensors;
  at::Tensor wte, lm_head;
  for (int segment = 0; segment < config->num_layers; ++segment) {
    NamedTensors segment_tensors;
    if (segment == 0) {
      segment_tensors = std::move(first->segments[0]);
    } else {
      absl::StatusOr<varuna::CheckpointData> data = read_segment(segment);
      if (!data.ok()) return data.status();
      segment_tensors = std::move(data->segments[segment]);
    }
    if (absl::Status s =
            ConvertSegment(*config, summary.vocab_rows, segment, std::move(segment_tensors),
                           source.dir, &tensors, &wte, &lm_head);
        !s.ok()) {
      return s;
    }
  }
  if (!at::equal(wte, lm_head)) {
    summary.warnings.push_back(
        absl::StrCat("lm_head_weight differs from wte.weight in ", source.dir,
                     " (they should be tied): exported wte.weight, which transformers also uses as "
                     "lm_head.weight"));
  }

  std::vector<FolderFile> files;
  int64_t eos = config->vocab_size - 1, pad = eos;
  if (hf_tokenizer.has_value()) {
    eos = hf_tokenizer->eos_id;
    pad = hf_tokenizer->pad_id;
    for (FolderFile& copy : tokenizer_copies) files.push_back(std::move(copy));
    files.push_back(JsonFile("tokenizer.json", hf_tokenizer->tokenizer));
    files.push_back(JsonFile("tokenizer_config.json", hf_tokenizer->tokenizer_config));
    files.push_back(JsonFile("special_tokens_map.json", hf_tokenizer->special_tokens_map));
  }
  files.insert(
      files.begin(),
      JsonFile("config.json", HuggingFaceConfigJson(*config, eos, options.trim_padded_vocab)));
  files.push_back(
      JsonFile("generation_config.json", HuggingFaceGenerationConfigJson(eos, eos, pad)));
  if (absl::Status s = WriteFolder(out, tensors, files, &summary.bytes); !s.ok()) return s;
  summary.num_tensors = static_cast<int64_t>(tensors.size());
  return summary;
}

}  // namespace tools
