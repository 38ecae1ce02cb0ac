// EventFileWriter: a TensorBoard event file of scalars, the file TensorBoard's SummaryWriter
// writes. It is named events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n> (n: 0, or the
// next free number) and holds TFRecord-framed (tf_record.h) tensorboard.Event protos
// (event.proto): first {file_version: "brain.Event:2"}, then, when asked (AddSessionStart),
// a SessionLog START, then one event per scalar, with Summary.Value{tag, simple_value}, which
// TensorBoard shows in its scalars dashboard.
//
// Scalars are queued in memory and written (write(2), no fsync) when the queue holds
// `queue_size` events and on Flush(); a crash loses at most what was queued. Every write
// error is returned, naming the file; after one, the writer refuses further scalars.
//
// Thread safety: none; one thread uses a writer.
#ifndef VARUNA_TRAINER_TENSORBOARD_EVENT_FILE_WRITER_H_
#define VARUNA_TRAINER_TENSORBOARD_EVENT_FILE_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "varuna/io/posix_file.h"

namespace trainer::tensorboard {

inline constexpr char kFileVersion[] = "brain.Event:2";
inline constexpr char kFilePrefix[] = "events.out.tfevents.";

struct EventFileOptions {
  std::string dir;                // Created (with its parents) if missing.
  int64_t queue_size = 1000;      // Events held before they are written; at least 1.
  std::string writer = "varuna";  // SourceMetadata.writer of the first event.
};

class EventFileWriter {
 public:
  // Creates the directory if needed and a new event file in it, and writes the file-version
  // event. Errors name the directory or file and the cause (errno).
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Open(const EventFileOptions& options);
  // Flushes; errors are lost (call Close() to see them).
  ~EventFileWriter();

  // Queues `value` under `tag` at `step`, stamped with the current wall time; writes the
  // queue when it is full. Errors: the write's, or FailedPrecondition after an earlier error
  // or Close().
  absl::Status AddScalar(absl::string_view tag, int64_t step, double value);
  // Queues SessionLog{status: START} at `step`, stamped with the current wall time: when it
  // is not the first START of the directory, TensorBoard (purge_orphaned_data, its default)
  // hides the events at steps >= `step` of the files before this one. Errors as AddScalar's.
  absl::Status AddSessionStart(int64_t step);
  // Writes the queued events to the file.
  absl::Status Flush();
  // Flushes and closes the file.
  absl::Status Close();

  const std::string& path() const { return path_; }

 private:
  EventFileWriter(varuna::PosixFile file, int64_t queue_size)
      : file_(std::move(file)), path_(file_.path()), queue_size_(queue_size) {}

  // Queues an encoded event; writes the queue when it is full.
  absl::Status Add(const std::string& event);

  varuna::PosixFile file_;
  std::string path_;
  int64_t queue_size_;
  std::string queued_;  // Framed records not yet written.
  int64_t queued_events_ = 0;
  absl::Status error_;  // The first error; nothing is written after it.
  bool closed_ = false;
};

// The event file name for `unix_seconds`, `hostname`, `pid` and the number `n`.
std::string EventFileName(int64_t unix_seconds, const std::string& hostname, int64_t pid, int n);

}  // namespace trainer::tensorboard

#endif  // VARUNA_TRAINER_TENSORBOARD_EVENT_FILE_WRITER_H_
