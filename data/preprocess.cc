#include "data/preprocess.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "data/dataset_tokenizer.h"
#include "data/document_reader.h"
#include "data/tokenizer_status.h"

namespace data {
namespace {

// A batch ends after this many documents or this many bytes of text.
constexpr size_t kBatchDocuments = 256;
constexpr size_t kBatchBytes = 1 << 20;

struct Batch {
  int64_t index = 0;
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> tokens;
  size_t text_bytes = 0;
  // Per text: the input bytes consumed when it had been read (all files so far).
  std::vector<int64_t> bytes_read;
  int64_t input_bytes_end = 0;  // input bytes consumed when the batch was complete
};

// The state the reader, the workers and the writer share; everything is guarded by mu.
struct Pipeline {
  std::mutex mu;
  std::condition_variable changed;  // any change below
  std::deque<Batch> todo;           // read, not yet tokenized
  std::map<int64_t, Batch> done;    // tokenized, not yet written, by index
  int64_t in_flight = 0;            // read and not yet written
  int64_t batches_read = 0;
  bool reader_done = false;
  absl::Status reader_status;
  bool cancel = false;
};

// Splits the inputs into batches of documents and queues them, at most `max_in_flight`
// batches ahead of the writer.
void ReadInputs(const PreprocessOptions& options, int64_t max_in_flight, Pipeline* pipeline) {
  Batch batch;
  int64_t bytes_of_finished_files = 0;
  absl::Status status;
  std::unique_ptr<DocumentReader> reader;
  auto push = [&]() {
    batch.input_bytes_end = bytes_of_finished_files + (reader ? reader->bytes_read() : 0);
    std::unique_lock<std::mutex> lock(pipeline->mu);
    pipeline->changed.wait(lock,
                           [&] { return pipeline->cancel || pipeline->in_flight < max_in_flight; });
    if (pipeline->cancel) return false;
    batch.index = pipeline->batches_read++;
    ++pipeline->in_flight;
    pipeline->todo.push_back(std::move(batch));
    batch = Batch();
    pipeline->changed.notify_all();
    return true;
  };
  for (const std::string& file : options.input_files) {
    absl::StatusOr<std::unique_ptr<DocumentReader>> opened =
        DocumentReader::Open(file, options.json_key);
    if (!opened.ok()) {
      status = opened.status();
      break;
    }
    reader = std::move(*opened);
    std::string text;
    while (true) {
      absl::StatusOr<bool> more = reader->Next(&text);
      if (!more.ok()) status = more.status();
      if (!more.ok() || !*more) break;
      batch.text_bytes += text.size();
      batch.texts.push_back(std::move(text));
      batch.bytes_read.push_back(bytes_of_finished_files + reader->bytes_read());
      if (batch.texts.size() >= kBatchDocuments || batch.text_bytes >= kBatchBytes) {
        if (!push()) return;
      }
    }
    if (!status.ok()) break;
    bytes_of_finished_files += reader->bytes_read();
    reader.reset();
  }
  if (status.ok() && !batch.texts.empty() && !push()) return;
  std::lock_guard<std::mutex> lock(pipeline->mu);
  pipeline->reader_status = status;
  pipeline->reader_done = true;
  pipeline->changed.notify_all();
}

// Tokenizes queued batches until the reader is done and the queue is empty.
void Tokenize(const Tokenizer& tokenizer, bool append_eod, Pipeline* pipeline) {
  while (true) {
    Batch batch;
    {
      std::unique_lock<std::mutex> lock(pipeline->mu);
      pipeline->changed.wait(lock, [&] {
        return pipeline->cancel || !pipeline->todo.empty() || pipeline->reader_done;
      });
      if (pipeline->cancel || pipeline->todo.empty()) return;
      batch = std::move(pipeline->todo.front());
      pipeline->todo.pop_front();
    }
    batch.tokens.reserve(batch.texts.size());
    for (const std::string& text : batch.texts) {
      batch.tokens.push_back(tokenizer.Encode(text));
      if (append_eod && !batch.tokens.back().empty()) {
        batch.tokens.back().push_back(tokenizer.eod_id());
      }
    }
    batch.texts.clear();
    std::lock_guard<std::mutex> lock(pipeline->mu);
    pipeline->done.emplace(batch.index, std::move(batch));
    pipeline->changed.notify_all();
  }
}

absl::Status ValidateOptions(const PreprocessOptions& options) {
  if (options.input_files.empty()) {
    return absl::InvalidArgumentError(
        "no input files (--input is empty): give text or .jsonl "
        "files, comma-separated");
  }
  if (options.output_prefix.empty()) {
    return absl::InvalidArgumentError(
        "no output prefix (--output-prefix is empty): e.g. --output-prefix=out/corpus writes "
        "out/corpus_text_document.bin and .idx");
  }
  if (options.json_key.empty() || options.json_key.find_first_of(", ") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--json-keys='", options.json_key,
                     "' must name exactly one field (e.g. text); one dataset is written per run"));
  }
  if (options.workers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers=", options.workers, " must be >= 0 (0: one per hardware thread)"));
  }
  if (options.log_interval < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-interval=", options.log_interval, " must be >= 0 (0: no progress)"));
  }
  if (!(options.log_seconds >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-seconds=", options.log_seconds,
                     " must be >= 0 (e.g. 10; 0: progress by --log-interval only)"));
  }
  for (const std::string& file : options.input_files) {
    if (!std::ifstream(file).good()) {
      return absl::NotFoundError(
          absl::StrCat("input file ", file, " does not exist or cannot be read; check --input"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string DatasetPrefix(const std::string& output_prefix, const std::string& json_key) {
  return absl::StrCat(output_prefix, "_", json_key, "_document");
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1000) return absl::StrFormat("%d B", bytes);
  if (bytes < 1000 * 1000) return absl::StrFormat("%.1f kB", bytes / 1e3);
  if (bytes < 1000 * 1000 * 1000) return absl::StrFormat("%.1f MB", bytes / 1e6);
  return absl::StrFormat("%.2f GB", bytes / 1e9);
}

std::string FormatDuration(double seconds) {
  const int64_t whole = std::llround(std::max(0.0, seconds));
  if (whole < 60) return absl::StrFormat("%d s", whole);
  if (whole < 3600) return absl::StrFormat("%d min %d s", whole / 60, whole % 60);
  const int64_t minutes = (whole + 30) / 60;  // rounded to the minute
  return absl::StrFormat("%d h %d min", minutes / 60, minutes % 60);
}

double SecondsLeft(int64_t bytes_done, int64_t bytes_total, double seconds) {
  if (bytes_done <= 0 || !(seconds > 0)) return -1;
  if (bytes_done >= bytes_total) return 0;
  return static_cast<double>(bytes_total - bytes_done) * seconds / static_cast<double>(bytes_done);
}

std::string ProgressLine(const PreprocessProgress& progress) {
  const double s = progress.seconds > 0 ? progress.seconds : 1e-9;
  std::string line = absl::StrFormat("Processed %d documents (%.1f docs/s, %.2f MB/s, %d tokens)",
                                     progress.documents, progress.documents / s,
                                     progress.bytes_done / s / 1e6, progress.tokens);
  if (progress.bytes_total <= 0) return line;
  const double left = SecondsLeft(progress.bytes_done, progress.bytes_total, progress.seconds);
  absl::StrAppendFormat(
      &line, ": %s of %s (%.1f%%), %s", FormatBytes(progress.bytes_done),
      FormatBytes(progress.bytes_total), 100.0 * progress.bytes_done / progress.bytes_total,
      left < 0 ? "time left unknown" : absl::StrCat("about ", FormatDuration(left), " left"));
  return line;
}

absl::StatusOr<PreprocessStats> Preprocess(const PreprocessOptions& options) {
  const std::function<double()> now = options.clock ? options.clock : [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  const double start = now();
  auto elapsed = [&now, start] { return now() - start; };
  if (absl::Status status = ValidateOptions(options); !status.ok()) return status;
  // The inputs' sizes, for the share done; 0 (no share printed) if one cannot be read.
  int64_t bytes_total = 0;
  for (const std::string& file : options.input_files) {
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(file, error);
    if (error) {
      bytes_total = 0;
      break;
    }
    bytes_total += static_cast<int64_t>(size);
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(options.tokenizer);
  if (!tokenizer.ok()) return tokenizer.status();

  PreprocessStats stats;
  stats.dataset_prefix = DatasetPrefix(options.output_prefix, options.json_key);
  stats.vocab_size = (*tokenizer)->vocab_size();
  stats.dtype = BestFittingDtype(stats.vocab_size);
  stats.workers =
      options.workers > 0 ? options.workers : std::max(1u, std::thread::hardware_concurrency());
  absl::StatusOr<std::unique_ptr<IndexedDatasetBuilder>> builder =
      IndexedDatasetBuilder::Create(stats.dataset_prefix, stats.dtype);
  if (!builder.ok()) {
    return absl::Status(builder.status().code(),
                        absl::StrCat(builder.status().message(),
                                     " (from --output-prefix=", options.output_prefix, ")"));
  }

  Pipeline pipeline;
  const int64_t max_in_flight = 4 * static_cast<int64_t>(stats.workers) + 2;
  std::thread reader(ReadInputs, std::cref(options), max_in_flight, &pipeline);
  std::vector<std::thread> workers;
  for (int i = 0; i < stats.workers; ++i) {
    workers.emplace_back(Tokenize, std::cref(**tokenizer), options.append_eod, &pipeline);
  }

  // Write batches in input order.
  absl::Status status;
  double last_line = 0;  // seconds since the start at the last progress line
  for (int64_t next = 0;; ++next) {
    Batch batch;
    {
      std::unique_lock<std::mutex> lock(pipeline.mu);
      pipeline.changed.wait(lock, [&] {
        return pipeline.done.count(next) > 0 || !pipeline.reader_status.ok() ||
               (pipeline.reader_done && next == pipeline.batches_read);
      });
      if (!pipeline.reader_status.ok()) {
        status = pipeline.reader_status;
        break;
      }
      if (pipeline.done.count(next) == 0) break;  // every batch written
      auto it = pipeline.done.find(next);
      batch = std::move(it->second);
      pipeline.done.erase(it);
      --pipeline.in_flight;
      pipeline.changed.notify_all();
    }
    if (options.stop_requested && options.stop_requested()) {
      status = absl::CancelledError(absl::StrCat("preprocessing into ", stats.dataset_prefix,
                                                 " stopped on request; nothing was written"));
      break;
    }
    for (size_t i = 0; i < batch.tokens.size(); ++i) {
      const std::vector<int32_t>& tokens = batch.tokens[i];
      if (tokens.empty()) {
        ++stats.empty_documents;
      } else {
        status = (*builder)->AddDocument(tokens);
        if (!status.ok()) break;
        ++stats.documents;
        stats.tokens += static_cast<int64_t>(tokens.size());
      }
      if (options.log == nullptr) continue;
      const int64_t processed = stats.documents + stats.empty_documents;
      const bool by_count = options.log_interval > 0 && processed % options.log_interval == 0;
      double seconds = -1;
      if (options.log_seconds > 0) seconds = elapsed();
      if (by_count || (seconds >= 0 && seconds - last_line >= options.log_seconds)) {
        if (seconds < 0) seconds = elapsed();
        last_line = seconds;
        *options.log << ProgressLine(
                            {processed, stats.tokens, batch.bytes_read[i], bytes_total, seconds})
                     << std::endl;
      }
    }
    stats.input_bytes = batch.input_bytes_end;
    if (!status.ok()) break;
  }
  {
    std::lock_guard<std::mutex> lock(pipeline.mu);
    pipeline.cancel = true;
    pipeline.changed.notify_all();
  }
  reader.join();
  for (std::thread& worker : workers) worker.join();
  if (!status.ok()) return status;  // the builder's destructor removes its temporary files

  if (stats.documents == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no documents found in --input=", absl::StrJoin(options.input_files, ","),
                     " (", stats.empty_documents, " empty ones skipped): give files with text",
                     IsJsonLinesFile(options.input_files.front())
                         ? absl::StrCat(" in the \"", options.json_key, "\" field")
                         : ""));
  }
  if (absl::Status finished = (*builder)->Finish(); !finished.ok()) return finished;
  // Which tokenizer made the ids, so that training with another one is caught.
  absl::StatusOr<DatasetTokenizer> record = DescribeTokenizer(**tokenizer);
  if (!record.ok()) return record.status();
  if (absl::Status s = WriteDatasetTokenizer(stats.dataset_prefix, *record); !s.ok()) return s;
  stats.seconds = elapsed();
  if (options.log != nullptr) {
    const double s = stats.seconds > 0 ? stats.seconds : 1e-9;
    *options.log << absl::StrFormat(
                        "Wrote %s.bin/.idx: %d documents (%d empty skipped), %d tokens (%s, vocab "
                        "%d), %.2f MB of input in %.2f s (%.1f docs/s, %.2f MB/s, %.0f tokens/s) "
                        "with %d workers",
                        stats.dataset_prefix, stats.documents, stats.empty_documents, stats.tokens,
                        TokenDtypeName(stats.dtype), stats.vocab_size, stats.input_bytes / 1e6,
                        stats.seconds, stats.documents / s, stats.input_bytes / s / 1e6,
                        stats.tokens / s, stats.workers)
                 << std::endl;
  }
  return stats;
}

}  // namespace data
