#include "tools/import_hf/hf_import.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "data/dataset_tokenizer.h"
#include "data/tokenizer_status.h"
#include "models/gpt2/model_record.h"
#include "models/gpt2/parameter_names.h"
#include "tools/import_hf/hf_gpt2_config.h"
#include "varuna/checkpoint/files.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/io/json.h"
#include "varuna/io/posix_file.h"
#include "varuna/io/safetensors.h"
#include "varuna/io/user_paths.h"

namespace tools {
namespace {

namespace fs = std::filesystem;
using varuna::NamedTensors;
using varuna::json::Value;

constexpr char kTokenizerSubdir[] = "tokenizer";

std::string ShapeText(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The refusal of a folder that has only PyTorch's pickled weights.
absl::Status PickleOnly(const std::string& in) {
  const std::string bin = (fs::path(in) / "pytorch_model.bin").string();
  const std::string out = (fs::path(in) / "model.safetensors").string();
  return absl::FailedPreconditionError(absl::StrCat(
      in,
      " has pytorch_model.bin but no model.safetensors: import_hf reads only safetensors (a "
      "pickle can run code when loaded). Convert it once, with torch and safetensors installed:\n"
      "  python3 -c \"import torch; from safetensors.torch import save_file; sd = torch.load('",
      bin,
      "', map_location='cpu', weights_only=True); save_file({k: v.clone().contiguous() for k, "
      "v in sd.items()}, '",
      out,
      "', metadata={'format': 'pt'})\"\n"
      "or with transformers: python3 -c \"from transformers import GPT2LMHeadModel; "
      "GPT2LMHeadModel.from_pretrained('",
      in, "').save_pretrained('", in, "', safe_serialization=True)\"\nthen run import_hf again"));
}

// A state-dict key without GPT2LMHeadModel's "transformer." prefix.
std::string BareName(const std::string& key) {
  return std::string(absl::StripPrefix(key, "transformer."));
}

// The attention buffers (causal mask, masked value) older transformers saved with the weights.
bool IsAttentionBuffer(const std::string& bare) {
  return absl::StartsWith(bare, "h.") &&
         (absl::EndsWith(bare, ".attn.bias") || absl::EndsWith(bare, ".attn.masked_bias"));
}

// The tokenizer of the folder, if it has GPT-2's files.
struct FolderTokenizer {
  data::DatasetTokenizer record;  // files: the folder's
  std::vector<std::string> names = {"vocab.json", "merges.txt"};
};

absl::StatusOr<std::optional<FolderTokenizer>> ReadFolderTokenizer(const std::string& in) {
  const std::string vocab = (fs::path(in) / "vocab.json").string();
  const std::string merges = (fs::path(in) / "merges.txt").string();
  std::error_code error;
  const bool has_vocab = fs::exists(vocab, error), has_merges = fs::exists(merges, error);
  if (!has_vocab && !has_merges) return std::optional<FolderTokenizer>();
  if (has_vocab != has_merges) {
    return absl::InvalidArgumentError(
        absl::StrCat(in, " has ", has_vocab ? "vocab.json" : "merges.txt", " but not ",
                     has_vocab ? "merges.txt" : "vocab.json",
                     ": GPT-2's tokenizer needs both; add the missing file or remove the other"));
  }
  data::TokenizerSpec spec;
  spec.type = data::TokenizerTypeName(data::TokenizerKind::kGpt2Bpe);
  spec.vocab_file = vocab;
  spec.merge_file = merges;
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer = data::LoadTokenizer(spec);
  if (!tokenizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(in, ": its vocab.json and merges.txt do not load as GPT-2's tokenizer: ",
                     tokenizer.status().message(), "; fix or remove them"));
  }
  absl::StatusOr<data::DatasetTokenizer> record = data::DescribeTokenizer(**tokenizer);
  if (!record.ok()) return record.status();
  FolderTokenizer folder;
  folder.record = *std::move(record);
  return std::optional<FolderTokenizer>(std::move(folder));
}

// The checkpoint's segments from the folder's tensors (by bare name), for `config` (vocab_size
// the real size, `rows` the rows of the folder's word embedding). All problems are listed.
absl::StatusOr<std::map<int, NamedTensors>> ConvertTensors(
    const gpt2::Gpt2Config& config, int64_t rows, std::map<std::string, at::Tensor> tensors,
    const std::string& source) {
  std::vector<std::string> problems;
  std::optional<at::Tensor> lm_head;
  if (auto it = tensors.find("lm_head.weight"); it != tensors.end()) {
    lm_head = it->second;
    tensors.erase(it);
  }
  std::map<int, NamedTensors> segments;
  at::Tensor wte;
  std::set<std::string> used;
  for (int segment = 0; segment < config.num_layers; ++segment) {
    for (const gpt2::ParameterSpec& spec : gpt2::SegmentParameters(config, segment)) {
      if (spec.name == gpt2::kLmHeadName) {
        if (wte.defined()) segments[segment].emplace_back(spec.name, wte.clone());
        continue;
      }
      const std::string hf = BareName(gpt2::HuggingFaceName(spec.name));
      std::vector<int64_t> expected = spec.shape;
      const bool embedding = spec.name == gpt2::kWordEmbeddingName;
      const bool transposed = gpt2::TransposedInHuggingFace(spec.name);
      if (embedding) expected[0] = rows;
      if (transposed) std::swap(expected[0], expected[1]);
      auto it = tensors.find(hf);
      if (it == tensors.end()) {
        problems.push_back(absl::StrCat(hf, " is missing (", ShapeText(expected), ")"));
        continue;
      }
      used.insert(hf);
      at::Tensor tensor = it->second;
      if (tensor.sizes() != at::IntArrayRef(expected)) {
        problems.push_back(absl::StrCat(hf, " has shape ", ShapeText(tensor.sizes()),
                                        ", config.json gives ", ShapeText(expected)));
        continue;
      }
      if (!at::isFloatingType(tensor.scalar_type())) {
        problems.push_back(
            absl::StrCat(hf, " is ", c10::toString(tensor.scalar_type()), ", not floating-point"));
        continue;
      }
      tensor = tensor.to(at::kFloat);
      if (transposed) tensor = tensor.t();  // Conv1D [in, out] -> Linear [out, in]
      if (embedding) {
        // The padded rows are the mean of the real ones: each padded logit is then the mean of
        // the real logits, whose exponential is at most the mean of theirs (Jensen), so the
        // padded rows together never take more than P / (V + P) of the softmax.
        at::Tensor padded = at::empty(spec.shape, at::kFloat);
        padded.narrow(0, 0, rows).copy_(tensor);
        if (spec.shape[0] > rows) {
          const at::Tensor mean = tensor.to(at::kDouble).mean(0).to(at::kFloat);
          padded.narrow(0, rows, spec.shape[0] - rows)
              .copy_(mean.expand({spec.shape[0] - rows, -1}));
        }
        tensor = padded;
        wte = tensor;
      }
      segments[segment].emplace_back(spec.name, tensor.contiguous());
    }
  }
  for (const auto& [name, tensor] : tensors) {
    if (used.count(name) == 0 && !IsAttentionBuffer(name)) {
      problems.push_back(absl::StrCat(name, " ", ShapeText(tensor.sizes()),
                                      " is not a GPT-2 parameter of this config.json"));
    }
  }
  if (lm_head && wte.defined()) {
    const at::Tensor head = lm_head->to(at::kFloat);
    if (head.sizes() != at::IntArrayRef({rows, config.hidden_size}) ||
        !at::equal(head, wte.narrow(0, 0, rows))) {
      problems.push_back(
          "lm_head.weight differs from transformer.wte.weight: the trainer's LM head is tied to "
          "the word embedding, so an untied head cannot be kept");
    }
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source,
        " does not hold the GPT-2 its config.json describes: ", absl::StrJoin(problems, "; "),
        ". Import the model.safetensors saved with this config.json"));
  }
  return segments;
}

// Removes what an import that failed wrote into `out` (which was absent or empty).
void Discard(const std::string& out, bool existed) {
  std::error_code error;
  if (!existed) {
    fs::remove_all(out, error);
    return;
  }
  for (const auto& entry : fs::directory_iterator(out, error)) fs::remove_all(entry.path(), error);
}

}  // namespace

absl::StatusOr<HfImportOptions> ParseHfImportArgs(const std::vector<std::string>& args) {
  HfImportOptions options;
  varuna::FlagParser parser;
  parser.Add("make-vocab-size-divisible-by", &options.make_vocab_size_divisible_by,
             "pad the vocabulary to a multiple of this (the trainer's flag; default 128)");
  parser.SetMinimum("make-vocab-size-divisible-by", 1);
  std::vector<std::string> positional;
  if (absl::Status status = parser.Parse(args, &positional); !status.ok()) return status;
  options.flags_help = parser.Help();
  if (parser.help_requested()) {
    options.help_requested = true;
    return options;
  }
  if (positional.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected 2 paths (IN OUT), got ", positional.size(),
                     positional.empty() ? "" : ": ", absl::StrJoin(positional, " ")));
  }
  options.input_dir = positional[0];
  options.output_dir = positional[1];
  return options;
}

std::string HfImportSummary::Report(const std::string& output_dir) const {
  std::vector<std::string> lines;
  lines.push_back(absl::StrFormat(
      "imported GPT-2: %d layers, hidden %d, %d heads, %d positions, vocabulary %d (padded to %d) "
      "-> %s (weights only: %d tensors, no optimizer state)",
      model.num_layers, model.hidden_size, model.num_attention_heads, model.max_position_embeddings,
      model.vocab_size, model.padded_vocab_size(), checkpoint_dir, num_tensors));
  for (const std::string& note : notes) lines.push_back(note);
  std::string tokenizer =
      tokenizer_files.size() == 2
          ? absl::StrCat(" --vocab-file=", tokenizer_files[0], " --merge-file=", tokenizer_files[1])
          : "";
  lines.push_back(absl::StrCat("train from it: pretrain_gpt2 --load=", output_dir,
                               " --finetune --use-checkpoint-args", tokenizer, " --data-path=..."));
  lines.push_back(absl::StrFormat(
      "  (--use-checkpoint-args stands for --num-layers=%d --hidden-size=%d "
      "--num-attention-heads=%d --seq-length=%d --max-position-embeddings=%d%s)",
      model.num_layers, model.hidden_size, model.num_attention_heads, model.seq_length,
      model.max_position_embeddings,
      model.make_vocab_size_divisible_by == 128
          ? ""
          : absl::StrCat(" --make-vocab-size-divisible-by=", model.make_vocab_size_divisible_by)));
  if (tokenizer_files.empty()) {
    lines.push_back(absl::StrFormat(
        "  no GPT-2 tokenizer files (vocab.json, merges.txt) in the folder: give the trainer the "
        "tokenizer the model was trained with, %d ids (--vocab-file and --merge-file, or "
        "--tokenizer-model)",
        model.vocab_size));
  }
  return absl::StrJoin(lines, "\n");
}

absl::StatusOr<HfImportSummary> ImportHuggingFace(const HfImportOptions& options) {
  const std::string in = varuna::WithoutTrailingSlashes(options.input_dir);
  const std::string out = varuna::WithoutTrailingSlashes(options.output_dir);
  std::error_code error;
  if (in.empty() || !fs::is_directory(in, error)) {
    return absl::NotFoundError(absl::StrCat(
        "input ", options.input_dir,
        " is not a directory: pass a Hugging Face GPT-2 folder (config.json, model.safetensors)"));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError("the output directory OUT is empty: give a new directory");
  }
  if (absl::Status s = varuna::CheckNewOutputDirectory(out); !s.ok()) return s;
  const fs::path folder(in);
  const std::string config_path = (folder / "config.json").string();
  const std::string weights_path = (folder / "model.safetensors").string();
  if (!fs::exists(weights_path, error)) {
    if (fs::exists(folder / "pytorch_model.bin", error)) return PickleOnly(in);
    if (fs::exists(folder / "model.safetensors.index.json", error)) {
      return absl::FailedPreconditionError(absl::StrCat(
          in,
          " holds a sharded model.safetensors (model.safetensors.index.json): save it as one "
          "file (transformers: save_pretrained(DIR, max_shard_size=\"100GB\")) and import that"));
    }
    return absl::NotFoundError(absl::StrCat(
        in, " has no model.safetensors: pass the folder transformers' save_pretrained wrote"));
  }
  absl::StatusOr<std::string> config_text = varuna::ReadFileToString(config_path);
  if (!config_text.ok()) {
    return absl::NotFoundError(absl::StrCat(config_path, ": ", config_text.status().message(),
                                            ": a Hugging Face folder needs its config.json"));
  }
  absl::StatusOr<Value> config_json = varuna::json::Parse(*config_text);
  if (!config_json.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_path, " is not JSON: ", config_json.status().message()));
  }
  absl::StatusOr<gpt2::Gpt2Config> config =
      Gpt2ConfigFromHuggingFace(*config_json, config_path, options.make_vocab_size_divisible_by);
  if (!config.ok()) return config.status();

  HfImportSummary summary;
  // The rows of the folder's embedding: config.json's vocab_size. A tokenizer with fewer ids
  // (an export of a trained checkpoint keeps its padded rows) gives the real size.
  const int64_t rows = config->vocab_size;
  absl::StatusOr<std::optional<FolderTokenizer>> tokenizer = ReadFolderTokenizer(in);
  if (!tokenizer.ok()) return tokenizer.status();
  if (tokenizer->has_value()) {
    const int64_t ids = (*tokenizer)->record.vocab_size;
    if (ids > rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(in, ": its tokenizer (vocab.json, merges.txt) has ", ids,
                       " ids but config.json's "
                       "vocab_size is ",
                       rows,
                       ": the model has no row for some ids; import the tokenizer the "
                       "model was trained with"));
    }
    gpt2::Gpt2Config real = *config;
    real.vocab_size = static_cast<int>(ids);
    if (ids < rows && real.padded_vocab_size() >= rows) {
      summary.notes.push_back(absl::StrCat("vocabulary: config.json has ", rows,
                                           " rows, the tokenizer ", ids, " ids; the rows past ",
                                           ids, " are kept as the padded rows"));
      config->vocab_size = static_cast<int>(ids);
    } else if (ids < rows) {
      summary.notes.push_back(absl::StrCat("vocabulary: config.json has ", rows,
                                           " rows, the tokenizer ", ids, " ids; recorded as ", rows,
                                           " (the rows do not fit the tokenizer's padded size)"));
    }
  }
  absl::StatusOr<varuna::SafetensorsFile> file = varuna::ReadSafetensors(weights_path);
  if (!file.ok()) return file.status();
  std::map<std::string, at::Tensor> by_name;
  for (auto& [key, tensor] : file->tensors) {
    if (!by_name.emplace(BareName(key), tensor).second) {
      return absl::InvalidArgumentError(absl::StrCat(weights_path, " holds ", BareName(key),
                                                     " both with and without \"transformer.\": "
                                                     "save the model again with save_pretrained"));
    }
  }
  absl::StatusOr<std::map<int, NamedTensors>> segments =
      ConvertTensors(*config, rows, std::move(by_name), weights_path);
  if (!segments.ok()) return segments.status();
  if (config->padded_vocab_size() > rows) {
    summary.notes.push_back(absl::StrCat(
        "vocabulary: ", rows, " rows padded to ", config->padded_vocab_size(),
        " (--make-vocab-size-divisible-by=", config->make_vocab_size_divisible_by,
        ") with copies of the mean row: the trainer's softmax also covers the padded rows, so its "
        "loss on these weights is above transformers', by at most -log(1 - ",
        config->padded_vocab_size() - rows, "/", config->padded_vocab_size(),
        ") per token; --make-vocab-size-divisible-by=1 imports without padding "
        "(docs/checkpoints.md)"));
  }

  // Write: the tokenizer's copies, then the checkpoint (COMPLETE last).
  const bool existed = fs::exists(out, error);
  summary.checkpoint_dir = (fs::path(out) / varuna::CheckpointDirName(0)).string();
  summary.model = *config;
  Value tokenizer_json = nullptr;
  auto write = [&]() -> absl::Status {
    fs::create_directories(out, error);
    if (error) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create output ", out, ": ", error.message()));
    }
    if (tokenizer->has_value()) {
      const FolderTokenizer& folder_tokenizer = **tokenizer;
      const fs::path dir = fs::absolute(fs::path(out) / kTokenizerSubdir);
      fs::create_directories(dir, error);
      if (error) {
        return absl::PermissionDeniedError(
            absl::StrCat("cannot create ", dir.string(), ": ", error.message()));
      }
      tokenizer_json = Value::object();
      tokenizer_json["type"] = data::TokenizerTypeName(data::TokenizerKind::kGpt2Bpe);
      tokenizer_json["files"] = Value::array();
      for (size_t i = 0; i < folder_tokenizer.names.size(); ++i) {
        absl::StatusOr<std::string> bytes =
            varuna::ReadFileToString(folder_tokenizer.record.files[i]);
        if (!bytes.ok()) return bytes.status();
        const std::string target = (dir / folder_tokenizer.names[i]).string();
        if (absl::Status s = varuna::WriteFileAtomically(
                target, (dir / ("." + folder_tokenizer.names[i] + ".tmp-")).string(), {*bytes});
            !s.ok()) {
          return s;
        }
        tokenizer_json["files"].push_back(target);
        summary.tokenizer_files.push_back(target);
      }
      tokenizer_json["crc32c"] = absl::StrFormat("%08x", folder_tokenizer.record.crc32c);
      tokenizer_json["vocab_size"] = folder_tokenizer.record.vocab_size;
    }
    Value imported = Value::object();
    imported["format"] = "Hugging Face GPT2LMHeadModel (config.json, model.safetensors)";
    imported["folder"] = fs::absolute(in).string();
    imported["model_safetensors_crc32c"] = absl::StrFormat("%08x", file->checksum.crc32c);
    Value trainer = Value::object();
    trainer["iteration"] = 0;
    trainer["consumed_samples"] = 0;
    trainer["skipped_iterations"] = 0;
    trainer["model"] = gpt2::CheckpointModelJson(*config);
    trainer["tokenizer_model"] = "";
    trainer["tokenizer"] = tokenizer_json;
    trainer["weights_only"] = true;
    trainer["imported_from"] = std::move(imported);
    Value engine = Value::object();
    engine["num_segments"] = config->num_layers;
    varuna::CheckpointData data;
    data.iteration = 0;
    data.metadata = Value::object();
    data.metadata["engine"] = std::move(engine);
    data.metadata["trainer"] = std::move(trainer);
    data.layout = Value::object();
    data.layout["imported"] = true;
    for (const auto& [segment, tensors] : *segments) {
      summary.num_tensors += static_cast<int64_t>(tensors.size());
    }
    data.segments = *std::move(segments);
    return varuna::WriteCheckpoint(out, data);
  };
  if (absl::Status status = write(); !status.ok()) {
    Discard(out, existed);
    return status;
  }
  return summary;
}

}  // namespace tools
