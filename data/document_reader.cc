#include "data/document_reader.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varuna/io/json.h"

namespace data {
namespace {

bool IsBlank(const std::string& line) {
  for (char c : line) {
    if (c != ' ' && c != '\t' && c != '\f' && c != '\v') return false;
  }
  return true;
}

}  // namespace

bool IsJsonLinesFile(const std::string& path) {
  return absl::EndsWith(path, ".jsonl") || absl::EndsWith(path, ".json");
}

absl::StatusOr<std::unique_ptr<DocumentReader>> DocumentReader::Open(const std::string& path,
                                                                     const std::string& json_key) {
  std::unique_ptr<DocumentReader> reader(new DocumentReader(path, json_key));
  if (!reader->in_.is_open()) {
    return absl::NotFoundError(absl::StrCat("cannot open input file ", path, ": ",
                                            std::strerror(errno), "; check --input"));
  }
  return reader;
}

DocumentReader::DocumentReader(std::string path, std::string json_key)
    : path_(std::move(path)),
      json_key_(std::move(json_key)),
      json_(IsJsonLinesFile(path_)),
      in_(path_, std::ios::binary) {}

bool DocumentReader::ReadLine() {
  if (!std::getline(in_, line_)) return false;
  ++line_number_;
  bytes_read_ += static_cast<int64_t>(line_.size()) + (in_.eof() ? 0 : 1);
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  return true;
}

absl::StatusOr<bool> DocumentReader::Next(std::string* text) {
  absl::StatusOr<bool> result = json_ ? NextJson(text) : NextText(text);
  if (result.ok() && !*result && in_.bad()) {
    return absl::DataLossError(absl::StrCat("error reading input file ", path_, " after line ",
                                            line_number_, ": ", std::strerror(errno),
                                            "; check --input"));
  }
  return result;
}

absl::StatusOr<bool> DocumentReader::NextJson(std::string* text) {
  while (ReadLine()) {
    if (IsBlank(line_)) continue;
    absl::StatusOr<varuna::json::Value> value = varuna::json::Parse(line_);
    if (!value.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, " line ", line_number_, ": invalid JSON (", value.status().message(),
                       "); every line of a .jsonl/.json input must be one JSON object"));
    }
    if (!value->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, " line ", line_number_, ": expected a JSON object, found a ",
                       varuna::json::TypeName(*value),
                       "; every line of a .jsonl/.json input must be one JSON object"));
    }
    const varuna::json::Value* field = varuna::json::Find(*value, json_key_);
    if (field == nullptr) {
      std::vector<std::string> keys;
      for (const auto& [key, unused] : value->items()) keys.push_back("\"" + key + "\"");
      return absl::InvalidArgumentError(
          absl::StrCat(path_, " line ", line_number_, ": the object has no \"", json_key_,
                       "\" field (its keys: ", keys.empty() ? "none" : absl::StrJoin(keys, ", "),
                       "); name the field that holds the document text with --json-keys"));
    }
    if (!field->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, " line ", line_number_, ": field \"", json_key_, "\" is a ",
          varuna::json::TypeName(*field), ", not a string; it must hold the document text"));
    }
    *text = field->get<std::string>();
    return true;
  }
  return false;
}

absl::StatusOr<bool> DocumentReader::NextText(std::string* text) {
  text->clear();
  bool started = false;
  while (ReadLine()) {
    if (IsBlank(line_)) {
      if (started) return true;
      continue;
    }
    if (!varuna::json::IsValidUtf8(line_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, " line ", line_number_,
          ": not UTF-8 text (is it a binary file?); plain-text input must be UTF-8: convert it "
          "(e.g. iconv -t UTF-8) or pass the text file you meant"));
    }
    if (started) text->push_back('\n');
    text->append(line_);
    started = true;
  }
  return started;
}

DocumentSentences::DocumentSentences(std::vector<std::string> files, std::string json_key)
    : files_(std::move(files)), json_key_(std::move(json_key)) {}

bool DocumentSentences::Next(std::string* sentence) {
  while (error_.empty()) {
    if (in_document_) {
      while (position_ < document_.size()) {
        size_t end = document_.find('\n', position_);
        if (end == std::string::npos) end = document_.size();
        const size_t begin = position_;
        position_ = end + 1;
        if (end > begin) {
          sentence->assign(document_, begin, end - begin);
          ++sentences_;
          return true;
        }
      }
      in_document_ = false;
    }
    if (reader_ == nullptr) {
      if (next_file_ == files_.size()) return false;
      absl::StatusOr<std::unique_ptr<DocumentReader>> reader =
          DocumentReader::Open(files_[next_file_++], json_key_);
      if (!reader.ok()) {
        error_ = std::string(reader.status().message());
        return false;
      }
      reader_ = std::move(*reader);
    }
    absl::StatusOr<bool> more = reader_->Next(&document_);
    if (!more.ok()) {
      error_ = std::string(more.status().message());
      return false;
    }
    if (!*more) {
      reader_.reset();
      continue;
    }
    ++documents_;
    position_ = 0;
    in_document_ = true;
  }
  return false;
}

}  // namespace data
