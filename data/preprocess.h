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
  // A progress line (ProgressLine) every this many documents (0: none by count).
  int64_t log_interval = 10000;
  // A progress line also when this many seconds have passed since the last one, so that long
  // documents still show progress (0: none by time).
  double log_seconds = 10;
  // Where progress and summary lines go; nullptr for silence. Never into the output files.
  std::ostream* log = nullptr;
  // Seconds on a monotonic clock, for the progress lines' rates and time left and the
  // summary; unset: std::chrono::steady_clock. Tests inject a fake one.
  std::function<double()> clock;
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

// How far preprocessing is, for a progress line.
struct PreprocessProgress {
  int64_t documents = 0;    // documents done (written or skipped as empty)
  int64_t tokens = 0;       // tokens written
  int64_t bytes_done = 0;   // input bytes read through the last document done
  int64_t bytes_total = 0;  // the inputs' sizes; 0: unknown
  double seconds = 0;       // since preprocessing started
};

// The progress line: Megatron's "Processed N documents (X docs/s, Y MB/s" with the tokens,
// then the share of the input bytes done and the time left at the rate so far, e.g.
//   "Processed 12345 documents (2469.0 docs/s, 0.89 MB/s, 987654 tokens): 4.4 MB of 120.0 MB
//   (3.7%), about 2 min 10 s left"
// Sizes in B, kB, MB or GB (powers of 1000); time left in s, "M min S s" or "H h M min",
// rounded to the second or minute; "time left unknown" before any byte is done or any time
// has passed. Without a total (bytes_total 0) the line ends after the rates.
std::string ProgressLine(const PreprocessProgress& progress);

// Seconds left to read `bytes_total` at the rate `bytes_done` / `seconds`; negative (unknown)
// if bytes_done or seconds is not positive; 0 once bytes_done >= bytes_total.
double SecondsLeft(int64_t bytes_done, int64_t bytes_total, double seconds);

// `bytes` as "35 B", "4.5 kB", "120.0 MB" or "1.25 GB" (powers of 1000).
std::string FormatBytes(int64_t bytes);

// `seconds` (>= 0) as "7 s", "2 min 8 s" or "1 h 5 min", rounded to the unit last shown.
std::string FormatDuration(double seconds);

}  // namespace data

#endif  // DATA_PREPROCESS_H_
