// Reading back TensorBoard event files of scalars (event_file_writer.h's, or any whose
// summaries hold simple_value scalars): for tests and for checking a run's output. It parses
// with the protoc-generated classes and so links Debian's libprotobuf: not for programs that
// link SentencePiece (see event_encoding.h).
//
// Thread safety: the functions touch only the named files.
#ifndef VARUNA_TRAINER_TENSORBOARD_EVENT_FILE_READER_H_
#define VARUNA_TRAINER_TENSORBOARD_EVENT_FILE_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainer::tensorboard {

struct Scalar {
  std::string tag;
  int64_t step = 0;
  double wall_time = 0;
  float value = 0;
};

// A SessionLog START event (a run's restart marker).
struct SessionStart {
  int64_t step = 0;
  double wall_time = 0;
  size_t scalars_before = 0;  // how many of the file's scalars precede it
};

struct EventFile {
  std::string path;
  std::string file_version;          // of the first event
  std::string writer;                // its SourceMetadata.writer
  std::vector<Scalar> scalars;       // in file order
  std::vector<SessionStart> starts;  // in file order
};

// The file at `path`. Errors: ReadRecords's (checksums, truncation); DataLoss naming the file
// when a record is not an Event or the first event has no file_version.
absl::StatusOr<EventFile> ReadEventFile(const std::string& path);

// The paths of the event files (names starting "events.out.tfevents.") in `dir`, sorted by
// name, which is the order TensorBoard reads them in. Errors: NotFound for a missing `dir`.
absl::StatusOr<std::vector<std::string>> ListEventFiles(const std::string& dir);

// The scalars TensorBoard shows for the run in `dir`: those of its event files in
// ListEventFiles's order, less what TensorBoard's purge_orphaned_data (on by default) hides.
// Its rule (tensorboard/backend/event_processing/plugin_event_accumulator.py,
// _CheckForRestartAndMaybePurge and _Purge): the first SessionLog START of a run marks its
// start; each later START at step S drops every scalar read before it, of any tag, whose step
// is >= S (it keeps step < S). (Older TensorBoards purge at every START, the first too; the
// trainer's first file starts with a START at 0, read before anything, so both agree.)
// Errors: ListEventFiles's and ReadEventFile's.
absl::StatusOr<std::vector<Scalar>> MergedScalars(const std::string& dir);

}  // namespace trainer::tensorboard

#endif  // VARUNA_TRAINER_TENSORBOARD_EVENT_FILE_READER_H_
