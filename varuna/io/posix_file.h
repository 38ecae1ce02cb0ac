// PosixFile: an open file descriptor whose operations return absl::Status, for the files
// the engine writes durably (checkpoints). Every error message names the file and the
// operation and carries strerror(errno); the status code comes from errno.
//
// Thread safety: one PosixFile must not be used from two threads at once; distinct
// objects are independent.
#ifndef VARUNA_IO_POSIX_FILE_H_
#define VARUNA_IO_POSIX_FILE_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace varuna {

// A status with the code of errno value `error` and the message "<message>: <strerror>".
absl::Status ErrnoStatus(int error, absl::string_view message);

class PosixFile {
 public:
  // Opens an existing file for reading.
  static absl::StatusOr<PosixFile> OpenForRead(const std::string& path);
  // Creates (or truncates) a file for writing, mode 0644.
  static absl::StatusOr<PosixFile> Create(const std::string& path);
  // Creates a new file for writing, mode 0644, named `prefix` followed by six unique
  // characters (mkstemp); path() tells the name.
  static absl::StatusOr<PosixFile> CreateUnique(const std::string& prefix);

  PosixFile(PosixFile&& other) noexcept;
  PosixFile& operator=(PosixFile&& other) noexcept;
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;
  // Closes the descriptor if still open; errors are lost (call Close() to see them).
  ~PosixFile();

  // Writes all n bytes (retrying short writes and EINTR).
  absl::Status Write(const void* data, size_t n);
  // Reads up to n bytes; returns how many were read, 0 at end of file.
  absl::StatusOr<size_t> ReadSome(void* data, size_t n);
  // Reads exactly n bytes; OutOfRange "unexpected end of file" if the file ends first.
  absl::Status ReadExactly(void* data, size_t n);
  // The file's current size (fstat).
  absl::StatusOr<uint64_t> Size() const;
  // fsync: the data and metadata written so far are on stable storage.
  absl::Status Sync();
  // Closes the descriptor and reports errors close() saw (e.g. a failed deferred write).
  absl::Status Close();

  const std::string& path() const { return path_; }

 private:
  PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  int fd_ = -1;
  std::string path_;
};

// The whole content of the file at `path`. Errors: errno statuses naming the file; DataLoss
// "<path> is N bytes, too large" when it is larger than `max_bytes`.
absl::StatusOr<std::string> ReadFileToString(
    const std::string& path, uint64_t max_bytes = std::numeric_limits<uint64_t>::max());

// fsyncs a directory so that entries created, renamed or removed in it are durable.
absl::Status SyncDirectory(const std::string& dir);

// Writes the concatenation of `pieces` to `path` so that readers see the old file or the
// whole new one, never a part: into a new file named `temp_prefix` + 6 random characters
// (mode 0644), fsynced, closed, then renamed to `path`. On any error the temporary file is
// removed and `path` is untouched; the status has the errno's code and names the file.
absl::Status WriteFileAtomically(const std::string& path, const std::string& temp_prefix,
                                 std::initializer_list<absl::string_view> pieces);

}  // namespace varuna

#endif  // VARUNA_IO_POSIX_FILE_H_
