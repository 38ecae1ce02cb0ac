// The checkpoint report of inspect_checkpoint (see checkpoint_report.h).
#include "tools/inspect_checkpoint/checkpoint_report.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "varuna/checkpoint/files.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/io/crc32c.h"
#include "varuna/io/json.h"
#include "varuna/io/safetensors.h"

namespace tools {
namespace {

using varuna::FlagParser;

namespace fs = std::filesystem;
using varuna::json::Value;

constexpr int kLabelWidth = 13;  // "lr schedule  " and the like

// "label        text\n".
std::string Line(absl::string_view label, absl::string_view text) {
  return absl::StrFormat("%-*s%s\n", kLabelWidth, label, text);
}

// 1234567 -> "1,234,567".
std::string WithCommas(uint64_t n) {
  std::string digits = absl::StrCat(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return digits;
}

// "1 file", "3 files".
std::string Count(int64_t n, absl::string_view noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

// 3584 -> "3.5 KiB".
std::string HumanBytes(uint64_t n) {
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(n);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(n, " bytes") : absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

// A table with aligned columns. Rows with one cell are free text (not aligned, no widths).
class Table {
 public:
  // right[i]: column i is right-aligned (numbers).
  explicit Table(std::vector<bool> right) : right_(std::move(right)) {}
  void Add(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void AddText(std::string text) { rows_.push_back({std::move(text)}); }

  std::string Render(absl::string_view indent) const {
    std::vector<size_t> width(right_.size(), 0);
    for (const auto& row : rows_) {
      if (row.size() == 1) continue;
      for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
        width[i] = std::max(width[i], row[i].size());
      }
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line(indent);
      if (row.size() == 1) {
        absl::StrAppend(&line, row[0]);
      } else {
        for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
          if (i > 0) line += "  ";
          const std::string pad(width[i] - row[i].size(), ' ');
          absl::StrAppend(&line, right_[i] ? pad : "", row[i], right_[i] ? "" : pad);
        }
      }
      line.erase(line.find_last_not_of(' ') + 1);
      absl::StrAppend(&out, line, "\n");
    }
    return out;
  }

 private:
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// The value at root.keys[0].keys[1]..., or nullptr.
const Value* FindPath(const Value& root, std::initializer_list<absl::string_view> keys) {
  const Value* value = &root;
  for (absl::string_view key : keys) {
    value = varuna::json::Find(*value, key);
    if (value == nullptr) return nullptr;
  }
  return value;
}

// A scalar as text: strings unquoted, everything else as JSON.
std::string Text(const Value& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
  return varuna::json::Serialize(value);
}

// "k=v, k=v" for an object's members, "" for anything else.
std::string Members(const Value* object) {
  if (object == nullptr || !object->is_object()) return "";
  std::vector<std::string> parts;
  for (const auto& [key, value] : object->items()) {
    parts.push_back(absl::StrCat(key, "=", Text(value)));
  }
  return absl::StrJoin(parts, ", ");
}

// Count() of an integer value; "<value> <noun>s" for any other.
std::string Count(const Value& n, absl::string_view noun) {
  const std::optional<int64_t> count = varuna::json::AsInt64(n);
  return count.has_value() ? Count(*count, noun) : absl::StrCat(Text(n), " ", noun, "s");
}

std::string SegmentText(int segment) {
  return segment < 0 ? "-" : absl::StrFormat("%03d", segment);
}

std::string ShapeText(const at::Tensor& tensor) {
  return absl::StrCat("[", absl::StrJoin(tensor.sizes(), ", "), "]");
}

// layout, samples, optimizer, trainer, model, tokenizer, lr schedule, data, ranks.
std::string DescribeState(const varuna::CheckpointManifest& manifest) {
  std::string out;
  const Value& layout = manifest.layout;
  std::vector<std::string> parts;
  const Value* stages = varuna::json::Find(layout, "num_stages");
  const Value* replicas = varuna::json::Find(layout, "num_replicas");
  if (stages != nullptr && replicas != nullptr) {
    parts.push_back(absl::StrCat(Count(*stages, "stage"), " x ", Count(*replicas, "replica")));
  }
  if (const Value* map = varuna::json::Find(layout, "stage_to_rank_map")) {
    parts.push_back(absl::StrCat("stage map \"", Text(*map), "\""));
  }
  if (const Value* batch = varuna::json::Find(layout, "batch_size")) {
    parts.push_back(absl::StrCat("batch size ", Text(*batch)));
  }
  if (const Value* chunk = varuna::json::Find(layout, "chunk_size")) {
    parts.push_back(absl::StrCat("chunk size ", Text(*chunk)));
  }
  if (const Value* sharded = varuna::json::Find(layout, "sharded");
      sharded != nullptr && sharded->is_boolean()) {
    parts.push_back(sharded->get<bool>() ? "sharded" : "not sharded");
  }
  out += Line("layout", parts.empty() ? "not recorded" : absl::StrJoin(parts, ", "));

  const Value& meta = manifest.metadata;
  const Value* samples = FindPath(meta, {"trainer", "consumed_samples"});
  out += Line("samples", samples ? absl::StrCat(Text(*samples), " consumed") : "not recorded");
  parts.clear();
  if (const Value* steps = FindPath(meta, {"engine", "optimizer_steps"})) {
    parts.push_back(Count(*steps, "step"));
  }
  if (const Value* scale = FindPath(meta, {"engine", "loss_scaler", "scale"})) {
    const Value* dynamic = FindPath(meta, {"engine", "loss_scaler", "dynamic_fp16"});
    const bool is_dynamic = dynamic != nullptr && dynamic->is_boolean() && dynamic->get<bool>();
    parts.push_back(absl::StrCat("loss scale ", Text(*scale), is_dynamic ? " (dynamic fp16)" : ""));
  }
  out += Line("optimizer", parts.empty() ? "not recorded" : absl::StrJoin(parts, ", "));
  parts.clear();
  if (const Value* iteration = FindPath(meta, {"trainer", "iteration"})) {
    parts.push_back(absl::StrCat("iteration ", Text(*iteration)));
  }
  if (const Value* skipped = FindPath(meta, {"trainer", "skipped_iterations"})) {
    parts.push_back(absl::StrCat(Count(*skipped, "iteration"), " skipped"));
  }
  if (!parts.empty()) out += Line("trainer", absl::StrJoin(parts, ", "));
  const std::string model = Members(FindPath(meta, {"trainer", "model"}));
  out += Line("model", model.empty() ? "not recorded" : model);
  // trainer.tokenizer ({"type", "files", "vocab_size", "crc32c"}): "GPT2BPETokenizer (v.json,
  // m.txt), 50257 ids, crc32c 1a2b3c4d"; before it, trainer.tokenizer_model's path.
  const Value* tokenizer = FindPath(meta, {"trainer", "tokenizer"});
  const Value* files = tokenizer != nullptr ? varuna::json::Find(*tokenizer, "files") : nullptr;
  const Value* type = tokenizer != nullptr ? varuna::json::Find(*tokenizer, "type") : nullptr;
  if (type != nullptr && files != nullptr && files->is_array()) {
    std::vector<std::string> paths;
    for (const Value& file : *files) paths.push_back(Text(file));
    std::string text = absl::StrCat(Text(*type), " (", absl::StrJoin(paths, ", "), ")");
    if (const Value* size = varuna::json::Find(*tokenizer, "vocab_size")) {
      absl::StrAppend(&text, ", ", Count(*size, "id"));
    }
    if (const Value* crc = varuna::json::Find(*tokenizer, "crc32c")) {
      absl::StrAppend(&text, ", crc32c ", Text(*crc));
    }
    out += Line("tokenizer", text);
  } else if (const Value* model = FindPath(meta, {"trainer", "tokenizer_model"});
             model != nullptr && !Text(*model).empty()) {
    out += Line("tokenizer", Text(*model));
  }
  const std::string lr = Members(FindPath(meta, {"trainer", "lr_schedule"}));
  if (!lr.empty()) out += Line("lr schedule", lr);
  const Value* data = FindPath(meta, {"trainer", "data_fingerprint"});
  if (data != nullptr && !Text(*data).empty()) out += Line("data", Text(*data));

  out += Line("ranks", absl::StrCat(manifest.rank_states.size(), " wrote this checkpoint"));
  Table ranks({true, true, true});
  ranks.Add({"rank", "stage", "replica"});
  for (const auto& [rank, state] : manifest.rank_states) {
    const Value* stage = varuna::json::Find(state, "stage");
    const Value* replica = varuna::json::Find(state, "replica");
    ranks.Add({absl::StrCat(rank), stage ? Text(*stage) : "-", replica ? Text(*replica) : "-"});
  }
  out += ranks.Render("  ");
  return out;
}

// The table of segment files and the totals, reading each file once. Sets *status (if OK) to
// the first error found while reading a file or checking its CRC-32C.
std::string DescribeFiles(const varuna::CheckpointManifest& manifest, bool list_tensors,
                          absl::Status* status) {
  std::vector<varuna::CheckpointFile> files = manifest.files;
  std::stable_sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.segment, a.name) < std::make_pair(b.segment, b.name);
  });
  std::map<int, int> files_per_segment;
  for (const auto& file : files) ++files_per_segment[file.segment];

  Table table({true, false, true, true, false, true, true});
  table.Add({"segment", "file", "rank", "size", "crc32c", "tensors", "tensor bytes"});
  std::vector<std::string> problems;
  uint64_t total_size = 0, total_bytes = 0;
  int64_t total_tensors = 0;
  uint64_t segment_size = 0, segment_bytes = 0;
  int64_t segment_tensors = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const varuna::CheckpointFile& record = files[i];
    const std::string path = (fs::path(manifest.dir) / record.name).string();
    absl::StatusOr<varuna::SafetensorsFile> file = varuna::ReadSafetensors(path);
    std::string crc = "?", tensors = "?", bytes = "?";
    std::vector<std::vector<std::string>> tensor_rows;
    if (!file.ok()) {
      problems.push_back(std::string(file.status().message()));
      if (status->ok()) *status = file.status();
    } else {
      const bool crc_ok = file->checksum == record.checksum;
      crc = crc_ok ? "ok" : "MISMATCH";
      if (!crc_ok && status->ok()) {
        *status = absl::DataLossError(
            absl::StrCat(path, ": CRC-32C checksum mismatch: the file (", file->checksum.size,
                         " bytes) has ", varuna::Crc32cToHex(file->checksum.crc32c),
                         ", metadata.json records ", varuna::Crc32cToHex(record.checksum.crc32c),
                         " (the file was damaged after it was written)"));
      }
      uint64_t file_bytes = 0;
      for (const auto& [name, tensor] : file->tensors) {
        file_bytes += tensor.nbytes();
        absl::StatusOr<std::string> dtype = varuna::SafetensorsDtypeName(tensor.scalar_type());
        tensor_rows.push_back(
            {name, dtype.ok() ? *dtype : "?", ShapeText(tensor), WithCommas(tensor.nbytes())});
      }
      tensors = absl::StrCat(file->tensors.size());
      bytes = WithCommas(file_bytes);
      total_tensors += file->tensors.size();
      total_bytes += file_bytes;
      segment_tensors += file->tensors.size();
      segment_bytes += file_bytes;
    }
    total_size += record.checksum.size;
    segment_size += record.checksum.size;
    table.Add({SegmentText(record.segment), record.name,
               record.rank < 0 ? "-" : absl::StrCat(record.rank), WithCommas(record.checksum.size),
               crc, tensors, bytes});
    if (list_tensors && !tensor_rows.empty()) {
      Table sub({false, false, false, true});
      for (auto& row : tensor_rows) sub.Add(std::move(row));
      std::string rendered = sub.Render("");
      for (absl::string_view line : absl::StrSplit(absl::StripSuffix(rendered, "\n"), '\n')) {
        table.AddText(absl::StrCat("           ", line));
      }
    }
    const bool last_of_segment = i + 1 == files.size() || files[i + 1].segment != record.segment;
    if (last_of_segment) {
      const int count = files_per_segment[record.segment];
      if (count > 1) {
        table.Add(
            {"", absl::StrCat("segment ", SegmentText(record.segment), ": ", Count(count, "file")),
             "", WithCommas(segment_size), "", absl::StrCat(segment_tensors),
             WithCommas(segment_bytes)});
      }
      segment_size = segment_bytes = 0;
      segment_tensors = 0;
    }
  }
  table.Add({"total", Count(files.size(), "file"), "", WithCommas(total_size), "",
             absl::StrCat(total_tensors), WithCommas(total_bytes)});

  int segments = 0;
  for (const auto& [segment, count] : files_per_segment) segments += segment >= 0 ? 1 : 0;
  std::string out = Line("segments", absl::StrCat(segments, " in ", Count(files.size(), "file")));
  out += table.Render("  ");
  for (const std::string& problem : problems) out += Line("", problem);
  out += Line("totals", absl::StrCat(Count(files.size(), "file"), ", ",
                                     Count(total_tensors, "tensor"), ", ", HumanBytes(total_bytes),
                                     " of tensors, ", HumanBytes(total_size), " on disk"));
  return out;
}

// The files under a checkpoint directory, with their sizes, for one without a usable
// metadata.json.
std::string DescribeDiskFiles(const std::string& dir) {
  Table table({false, true});
  table.Add({"file", "size"});
  std::vector<std::pair<std::string, uint64_t>> entries;
  std::error_code error;
  for (fs::recursive_directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    entries.emplace_back(fs::relative(it->path(), dir, error).string(), it->file_size(error));
  }
  std::sort(entries.begin(), entries.end());
  for (const auto& [name, size] : entries) table.Add({name, WithCommas(size)});
  return Line("on disk", absl::StrCat(Count(entries.size(), "file"), " (metadata.json unusable)")) +
         table.Render("  ");
}

// The full report of load_dir/varuna_ckpt_<iteration>.
CheckpointInspection ReportCheckpoint(const std::string& load_dir, int64_t iteration,
                                      bool list_tensors) {
  CheckpointInspection result;
  result.iteration = iteration;
  const std::string dir = (fs::path(load_dir) / varuna::CheckpointDirName(iteration)).string();
  // Sizes here; every file's CRC-32C is checked as DescribeFiles reads it.
  absl::StatusOr<varuna::CheckpointManifest> manifest =
      varuna::ReadCheckpointManifest(load_dir, iteration, varuna::CheckpointCheck::kSizes);
  result.status = manifest.status();
  if (absl::IsNotFound(result.status)) return result;
  const std::string files =
      manifest.ok() ? DescribeFiles(*manifest, list_tensors, &result.status) : "";
  std::string& out = result.report;
  out += Line("checkpoint", dir);
  out += Line("iteration", absl::StrCat(iteration));
  out += Line("status", result.status.ok()
                            ? "valid: complete, every file's size and CRC-32C match metadata.json"
                            : absl::StrCat("INVALID: ", result.status.message()));
  if (!manifest.ok()) {
    out += DescribeDiskFiles(dir);
    return result;
  }
  out += DescribeState(*manifest);
  out += files;
  return result;
}

// The listing of a save directory and the full report of the chosen checkpoint.
CheckpointInspection ReportSaveDir(const std::string& save_dir, const InspectOptions& options) {
  CheckpointInspection result;
  std::string& out = result.report;
  const std::vector<int64_t> iterations = varuna::ListCheckpointIterations(save_dir);
  out += Line("save dir", save_dir);
  if (iterations.empty()) {
    result.status = absl::NotFoundError(
        absl::StrCat(save_dir,
                     " holds no varuna_ckpt_<iteration> directory: pass the --save directory of a "
                     "run that has saved a checkpoint, or one varuna_ckpt_<n> directory"));
    out += Line("checkpoints", "none");
    return result;
  }
  out += Line("checkpoints", absl::StrCat(iterations.size(),
                                          ", newest first (sizes and CRC-32C checked, as "
                                          "--load does when it reads one)"));
  // --load picks with the size check, then reads the files and moves on to the next
  // checkpoint when a CRC-32C does not match (Varuna::load_checkpoint): the listing checks
  // every file so that it says what --load will do.
  std::map<int64_t, absl::Status> checked;
  std::set<int64_t> damaged;
  for (int64_t iteration : iterations) {
    checked[iteration] =
        varuna::VerifyCheckpoint(save_dir, iteration, varuna::CheckpointCheck::kChecksums);
    if (!checked[iteration].ok()) damaged.insert(iteration);
  }
  std::string note;
  absl::StatusOr<int64_t> latest = varuna::LatestCheckpointIteration(save_dir, &note, damaged);
  Table table({true, false});
  table.Add({"iteration", "status"});
  for (int64_t iteration : iterations) {
    const absl::Status& s = checked[iteration];
    std::string text = s.ok() ? "complete, intact" : absl::StrCat("NOT LOADABLE: ", s.message());
    if (latest.ok() && *latest == iteration) text += "  <- --load resumes here";
    table.Add({absl::StrCat(iteration), text});
  }
  out += table.Render("  ");
  out += Line("--load", latest.ok() ? note : absl::StrCat("fails: ", latest.status().message()));

  int64_t chosen = latest.ok() ? *latest : iterations.front();
  if (options.iteration >= 0) {
    if (std::find(iterations.begin(), iterations.end(), options.iteration) == iterations.end()) {
      result.status = absl::NotFoundError(
          absl::StrCat("--iteration=", options.iteration, ": ", save_dir, " has no ",
                       varuna::CheckpointDirName(options.iteration), " (it has iterations [",
                       absl::StrJoin(iterations, ", "), "]): pick one of those"));
      return result;
    }
    chosen = options.iteration;
  }
  CheckpointInspection full = ReportCheckpoint(save_dir, chosen, options.list_tensors);
  absl::StrAppend(&out, "\n", full.report);
  result.status = full.status;
  result.iteration = chosen;
  return result;
}

}  // namespace

absl::StatusOr<InspectOptions> ParseInspectArgs(const std::vector<std::string>& args) {
  InspectOptions options;
  FlagParser parser;
  parser.Add("iteration", &options.iteration, "the checkpoint to report (-1: the one --load uses)",
             "1000");
  parser.SetMinimum("iteration", 0);  // given: an iteration of a saved checkpoint
  parser.Add("tensors", &options.list_tensors, "list every tensor");
  std::vector<std::string> positional;
  if (absl::Status status = parser.Parse(args, &positional); !status.ok()) return status;
  options.flags_help = parser.Help();
  if (parser.help_requested()) {
    options.help_requested = true;
    return options;
  }
  if (positional.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected one directory DIR, got ", positional.size(),
                     positional.empty() ? "" : ": ", absl::StrJoin(positional, " ")));
  }
  options.path = positional[0];
  return options;
}

CheckpointInspection InspectCheckpoint(const InspectOptions& options) {
  std::string path = options.path.empty() ? "" : fs::path(options.path).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::error_code error;
  if (path.empty() || !fs::is_directory(path, error)) {
    CheckpointInspection result;
    result.status = absl::NotFoundError(
        absl::StrCat("DIR ", options.path,
                     " is not a directory: pass a --save directory of pretrain_gpt2 or one "
                     "varuna_ckpt_<n> directory in it"));
    return result;
  }
  const int64_t named = varuna::CheckpointIterationOf(path);
  if (named < 0) return ReportSaveDir(path, options);
  if (options.iteration >= 0 && options.iteration != named) {
    CheckpointInspection result;
    result.status = absl::InvalidArgumentError(
        absl::StrCat("--iteration=", options.iteration, " contradicts DIR ", path, " (iteration ",
                     named, "): drop --iteration or pass the save directory instead"));
    return result;
  }
  std::string parent = fs::path(path).parent_path().string();
  if (parent.empty()) parent = ".";
  return ReportCheckpoint(parent, named, options.list_tensors);
}

}  // namespace tools
