// Preprocessing, Megatron's tools/preprocess_data.py in C++: text files in, one indexed
// dataset (<output_prefix>_<json_key>_document.bin/.idx, Megatron's naming) out. Each input
// document is tokenized, followed by the EOD id (append_eod), and stored as one sequence
// and one document; documents with no tokens are skipped, as Megatron's 2020 tool does.
//
// One reader thread splits the inputs into documents (document_reader.h), `workers`
// threads tokenize batches of them in parallel, and the calling thread writes the batches
// in input order, so the output is byte-for-byte the same for any number of workers.
// Memory stays bounded: a few batches per worker are in flight at a time.
#ifndef DATA_PREPROCESS_H_
#define DATA_PREPROCESS_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/indexed_dataset.h"
#include "data/tokenizer_status.h"

namespace data {

struct PreprocessOptions {
  // Files to read, in this order: *.jsonl/*.json are JSON lines, others plain text
  // (document_reader.h). Required.
  std::vector<std::string> input_files;
  // The dataset is written to <output_prefix>_<json_key>_document.bin/.idx. Required; its
  // directory must exist.
  std::string output_prefix;
  // The tokenizer, by Megatron's flags: a SentencePiece model (//data:train_tokenizer) or
  // GPT-2's vocab.json + merges.txt. Required.
  TokenizerSpec tokenizer;
  // Field of each JSON line that holds the document text; also names the output. One key.
  std::string json_key = "text";
  // Append the tokenizer's EOD id after every document.
  bool append_eod = true;
  // Tokenizing threads; 0 means one per hardware thread.
  int workers = 0;
  // A progress line every this many documents (0: none).
  int64_t log_interval = 10000;
  // Where progress and summary lines go; nullptr for silence.
  std::ostream* log = nullptr;
  // Polled between batches of documents; once it returns true, Preprocess stops and returns
  // Cancelled, leaving nothing behind (a stop signal, say). Unset: never.
  std::function<bool()> stop_requested;
};

struct PreprocessStats {
  std::string dataset_prefix;   // <output_prefix>_<json_key>_document
  int64_t documents = 0;        // documents written
  int64_t empty_documents = 0;  // documents skipped because they had no tokens
  int64_t tokens = 0;           // tokens written, EOD included
  int64_t input_bytes = 0;      // bytes read from the inputs
  double seconds = 0;           // wall time of the whole run
  int workers = 0;              // tokenizing threads used
  int vocab_size = 0;           // of the tokenizer
  TokenDtype dtype = TokenDtype::kUInt16;
};

// The dataset prefix Preprocess writes for `output_prefix` and `json_key`.
std::string DatasetPrefix(const std::string& output_prefix, const std::string& json_key);

// Tokenizes the inputs into a new dataset, replacing an existing one only on success.
// Errors (no files written or changed): InvalidArgument for bad options, a bad JSON line
// (naming the file and line), a missing JSON key, or inputs without any document; NotFound
// for a missing input file or tokenizer model; PermissionDenied for an unwritable output.
absl::StatusOr<PreprocessStats> Preprocess(const PreprocessOptions& options);

// "Processed 12000 documents (3456.7 docs/s, 2.31 MB/s, 1234567 tokens)", the progress line.
std::string ProgressLine(int64_t documents, int64_t bytes, int64_t tokens, double seconds);

}  // namespace data

#endif  // DATA_PREPROCESS_H_
