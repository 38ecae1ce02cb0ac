// Reads documents out of the input files of preprocessing and tokenizer training, the way
// Megatron's tools/preprocess_data.py takes them:
// - *.jsonl and *.json: "loose JSON", one JSON object per line; the document is the string
//   field named by the JSON key (default "text"). Blank lines are skipped.
// - any other file: plain text in UTF-8; documents are blocks of lines separated by blank
//   (empty or whitespace-only) lines, and a document's lines are joined with '\n'.
// A trailing '\r' is dropped from every line (files written on Windows).
#ifndef DATA_DOCUMENT_READER_H_
#define DATA_DOCUMENT_READER_H_

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace data {

// Whether `path` is read as JSON lines (it ends in .jsonl or .json).
bool IsJsonLinesFile(const std::string& path);

// Documents of one file, in file order. Not thread-safe.
class DocumentReader {
 public:
  // Opens `path`; NotFound (naming the file) if it cannot be opened. `json_key` is the
  // field that holds the text in a JSON-lines file; ignored for plain text.
  static absl::StatusOr<std::unique_ptr<DocumentReader>> Open(const std::string& path,
                                                              const std::string& json_key);

  // Reads the next document into *text and returns true, or returns false at the end of
  // the file. Returns InvalidArgument naming the file and line for a line that is not a
  // JSON object, lacks the key, or whose key is not a string, and for a plain-text line that
  // is not UTF-8 (a binary file, say); DataLoss on a read error.
  absl::StatusOr<bool> Next(std::string* text);

  // Bytes consumed so far (line terminators included).
  int64_t bytes_read() const { return bytes_read_; }
  const std::string& path() const { return path_; }

 private:
  DocumentReader(std::string path, std::string json_key);
  absl::StatusOr<bool> NextJson(std::string* text);
  absl::StatusOr<bool> NextText(std::string* text);
  // Reads one line into line_ (without terminator); false at end of file.
  bool ReadLine();

  const std::string path_;
  const std::string json_key_;
  const bool json_;
  std::ifstream in_;
  std::string line_;
  int64_t line_number_ = 0;
  int64_t bytes_read_ = 0;
};

// The lines of every document of `files`, one training sentence per non-empty line, for
// tokenizer training (SentencePiece trains on lines). Stops at the first reader error,
// which error() then reports.
class DocumentSentences : public SentenceSource {
 public:
  DocumentSentences(std::vector<std::string> files, std::string json_key);
  bool Next(std::string* sentence) override;
  std::string error() const override { return error_; }

  int64_t documents() const { return documents_; }
  int64_t sentences() const { return sentences_; }

 private:
  const std::vector<std::string> files_;
  const std::string json_key_;
  size_t next_file_ = 0;
  std::unique_ptr<DocumentReader> reader_;
  std::string document_;
  size_t position_ = 0;  // start of the next line in document_
  bool in_document_ = false;
  std::string error_;
  int64_t documents_ = 0;
  int64_t sentences_ = 0;
};

}  // namespace data

#endif  // DATA_DOCUMENT_READER_H_
