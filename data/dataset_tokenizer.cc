#include "data/dataset_tokenizer.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "varuna/io/crc32c.h"
#include "varuna/io/json.h"
#include "varuna/io/posix_file.h"

namespace data {
namespace {

namespace json = varuna::json;

constexpr char kFormat[] = "varuna-dataset-tokenizer/1";
constexpr uint64_t kMaxRecordBytes = 1 << 16;

}  // namespace

std::string DatasetTokenizerPath(const std::string& dataset_prefix) {
  return dataset_prefix + ".tokenizer-record.json";
}

absl::StatusOr<DatasetTokenizer> DescribeTokenizer(const std::string& model_path,
                                                   int64_t vocab_size, int64_t eod_id) {
  absl::StatusOr<std::string> bytes = varuna::ReadFileToString(model_path);
  if (!bytes.ok()) return bytes.status();
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(model_path, error);
  DatasetTokenizer record;
  record.model_path = error ? model_path : absolute.lexically_normal().string();
  record.model_crc32c = varuna::Crc32c(bytes->data(), bytes->size());
  record.vocab_size = vocab_size;
  record.eod_id = eod_id;
  return record;
}

absl::Status WriteDatasetTokenizer(const std::string& dataset_prefix,
                                   const DatasetTokenizer& record) {
  json::Value value = json::Value::object();
  value["format"] = kFormat;
  value["tokenizer_model"] = record.model_path;
  value["tokenizer_crc32c"] = absl::StrFormat("%08x", record.model_crc32c);
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
  const json::Value* model = json::Find(*value, "tokenizer_model");
  const json::Value* crc = json::Find(*value, "tokenizer_crc32c");
  const std::optional<int64_t> vocab = json::AsInt64(json::Find(*value, "vocab_size"));
  const std::optional<int64_t> eod = json::AsInt64(json::Find(*value, "eod_id"));
  if (format == nullptr || !format->is_string() || format->get<std::string>() != kFormat) {
    return damaged(absl::StrCat("its \"format\" is not \"", kFormat, "\""));
  }
  DatasetTokenizer record;
  uint32_t checksum = 0;
  if (model == nullptr || !model->is_string() || crc == nullptr || !crc->is_string() ||
      !absl::SimpleHexAtoi(crc->get<std::string>(), &checksum) || !vocab || *vocab <= 0 || !eod) {
    return damaged(
        "it needs \"tokenizer_model\", a hex \"tokenizer_crc32c\", a positive \"vocab_size\" "
        "and \"eod_id\"");
  }
  record.model_path = model->get<std::string>();
  record.model_crc32c = checksum;
  record.vocab_size = *vocab;
  record.eod_id = *eod;
  return std::optional<DatasetTokenizer>(record);
}

absl::Status CheckDatasetTokenizer(const std::string& dataset_prefix,
                                   const DatasetTokenizer& recorded, const DatasetTokenizer& used,
                                   std::string* warning) {
  if (recorded.vocab_size != used.vocab_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the dataset %s was tokenized with %s (%d pieces) but the tokenizer given is %s (%d "
        "pieces): its token ids mean other pieces. Pass --tokenizer-model=%s, or re-run "
        "preprocess_data with the new tokenizer",
        dataset_prefix, recorded.model_path, recorded.vocab_size, used.model_path, used.vocab_size,
        recorded.model_path));
  }
  if (recorded.model_crc32c != used.model_crc32c && warning != nullptr) {
    *warning = absl::StrFormat(
        "the dataset %s was tokenized with %s and the tokenizer given is another file, %s, of "
        "the same vocabulary size (%d): make sure it is the same tokenizer",
        dataset_prefix, recorded.model_path, used.model_path, used.vocab_size);
  }
  return absl::OkStatus();
}

}  // namespace data
