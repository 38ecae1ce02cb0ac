#include "data/dataset_tokenizer.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "varuna/io/crc32c.h"
#include "varuna/io/json.h"
#include "varuna/io/posix_file.h"

namespace data {
namespace {

namespace json = varuna::json;

constexpr char kFormat[] = "varuna-dataset-tokenizer/2";
constexpr char kFirstFormat[] = "varuna-dataset-tokenizer/1";  // SentencePiece only
constexpr uint64_t kMaxRecordBytes = 1 << 16;

}  // namespace

std::string DatasetTokenizer::Describe() const {
  return absl::StrCat(TokenizerTypeName(kind), " (", absl::StrJoin(files, ", "), ")");
}

std::string DatasetTokenizer::Flags() const {
  if (kind == TokenizerKind::kSentencePiece) {
    return absl::StrCat("--tokenizer-model=", files.empty() ? "" : files[0]);
  }
  return absl::StrCat("--tokenizer-type=", TokenizerTypeName(kind),
                      " --vocab-file=", files.size() > 0 ? files[0] : "",
                      " --merge-file=", files.size() > 1 ? files[1] : "");
}

std::string DatasetTokenizerPath(const std::string& dataset_prefix) {
  return dataset_prefix + ".tokenizer-record.json";
}

absl::StatusOr<DatasetTokenizer> DescribeTokenizer(const Tokenizer& tokenizer) {
  DatasetTokenizer record;
  record.kind = tokenizer.kind();
  record.vocab_size = tokenizer.vocab_size();
  record.eod_id = tokenizer.eod_id();
  for (const std::string& file : tokenizer.files()) {
    absl::StatusOr<std::string> bytes = varuna::ReadFileToString(file);
    if (!bytes.ok()) return bytes.status();
    record.crc32c = varuna::Crc32cExtend(record.crc32c, bytes->data(), bytes->size());
    std::error_code error;
    const std::filesystem::path absolute = std::filesystem::absolute(file, error);
    record.files.push_back(error ? file : absolute.lexically_normal().string());
  }
  return record;
}

absl::Status WriteDatasetTokenizer(const std::string& dataset_prefix,
                                   const DatasetTokenizer& record) {
  json::Value value = json::Value::object();
  value["format"] = kFormat;
  value["tokenizer_type"] = TokenizerTypeName(record.kind);
  value["tokenizer_files"] = json::Value::array();
  for (const std::string& file : record.files) value["tokenizer_files"].push_back(file);
  value["tokenizer_crc32c"] = absl::StrFormat("%08x", record.crc32c);
  value["vocab_size"] = record.vocab_size;
  value["eod_id"] = record.eod_id;
  const std::string path = DatasetTokenizerPath(dataset_prefix);
  return varuna::WriteFileAtomically(path, path + ".tmp-", {json::Serialize(value), "\n"});
}

absl::StatusOr<std::optional<DatasetTokenizer>> ReadDatasetTokenizer(
    const std::string& dataset_prefix) {
  const std::string path = DatasetTokenizerPath(dataset_prefix);
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::optional<DatasetTokenizer>();
  absl::StatusOr<std::string> text = varuna::ReadFileToString(path, kMaxRecordBytes);
  if (!text.ok()) return text.status();
  auto damaged = [&path](const std::string& why) {
    return absl::DataLossError(absl::StrCat(
        path, " is not a tokenizer record (", why,
        "): delete it, or re-run preprocess_data to write the dataset and its record again"));
  };
  absl::StatusOr<json::Value> value = json::Parse(*text);
  if (!value.ok()) return damaged(std::string(value.status().message()));
  const json::Value* format = json::Find(*value, "format");
  const bool first_format =
      format != nullptr && format->is_string() && format->get<std::string>() == kFirstFormat;
  if (format == nullptr || !format->is_string() ||
      (format->get<std::string>() != kFormat && !first_format)) {
    return damaged(absl::StrCat("its \"format\" is not \"", kFormat, "\""));
  }
  DatasetTokenizer record;
  if (first_format) {
    const json::Value* model = json::Find(*value, "tokenizer_model");
    if (model == nullptr || !model->is_string()) return damaged("it needs \"tokenizer_model\"");
    record.files = {model->get<std::string>()};
  } else {
    const json::Value* type = json::Find(*value, "tokenizer_type");
    const std::optional<TokenizerKind> kind = type != nullptr && type->is_string()
                                                  ? TokenizerKindNamed(type->get<std::string>())
                                                  : std::nullopt;
    const json::Value* files = json::Find(*value, "tokenizer_files");
    if (!kind || files == nullptr || !files->is_array() || files->empty()) {
      return damaged(
          "it needs \"tokenizer_type\" (SentencePieceTokenizer or GPT2BPETokenizer) and a "
          "non-empty list \"tokenizer_files\"");
    }
    record.kind = *kind;
    for (const json::Value& file : *files) {
      if (!file.is_string()) return damaged("\"tokenizer_files\" holds a non-string");
      record.files.push_back(file.get<std::string>());
    }
  }
  const json::Value* crc = json::Find(*value, "tokenizer_crc32c");
  const std::optional<int64_t> vocab = json::AsInt64(json::Find(*value, "vocab_size"));
  const std::optional<int64_t> eod = json::AsInt64(json::Find(*value, "eod_id"));
  if (crc == nullptr || !crc->is_string() ||
      !absl::SimpleHexAtoi(crc->get<std::string>(), &record.crc32c) || !vocab || *vocab <= 0 ||
      !eod) {
    return damaged("it needs a hex \"tokenizer_crc32c\", a positive \"vocab_size\" and \"eod_id\"");
  }
  record.vocab_size = *vocab;
  record.eod_id = *eod;
  return std::optional<DatasetTokenizer>(record);
}

absl::Status CheckDatasetTokenizer(const std::string& dataset_prefix,
                                   const DatasetTokenizer& recorded, const DatasetTokenizer& used,
                                   std::string* warning) {
  if (recorded.kind != used.kind || recorded.vocab_size != used.vocab_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the dataset %s was tokenized with %s, %d ids, but the tokenizer given is %s, %d ids: its "
        "token ids mean other pieces. Pass %s, or re-run preprocess_data with the new tokenizer",
        dataset_prefix, recorded.Describe(), recorded.vocab_size, used.Describe(), used.vocab_size,
        recorded.Flags()));
  }
  if (recorded.crc32c != used.crc32c && warning != nullptr) {
    *warning = absl::StrFormat(
        "the dataset %s was tokenized with %s and the tokenizer given is other files, %s, of the "
        "same kind and vocabulary size (%d): make sure it is the same tokenizer",
        dataset_prefix, recorded.Describe(), used.Describe(), used.vocab_size);
  }
  return absl::OkStatus();
}

}  // namespace data
