// MappedFile: the whole content of a file, memory-mapped read-only (mmap PROT_READ,
// MAP_SHARED), so that every process mapping the same file shares its pages and bytes are
// read from the page cache on demand. Readers of large read-only data (datasets, index
// caches) use it instead of reading the file into memory.
//
// Ownership: a MappedFile owns its mapping and unmaps it when destroyed; the descriptor is
// closed as soon as the mapping exists. Movable, not copyable: a move hands the mapping over
// and leaves the source empty (data() == nullptr, size() == 0). A default-constructed or
// moved-from MappedFile, like the mapping of an empty file, is an empty view.
//
// Errors: Open returns the errno's status (absl::ErrnoToStatusCode: ENOENT NotFound, EACCES
// PermissionDenied, ENOMEM ResourceExhausted, ...) with a message that starts with the path:
// "<path>: <strerror>" when the file cannot be opened, "<path>: cannot stat: <strerror>" or
// "<path>: cannot memory-map: <strerror>" when a later step fails. A directory or another
// file that is not a regular file is not mapped: "<path>: Is a directory"
// (FailedPrecondition), or "<path>: not a regular file" (FailedPrecondition).
//
// Thread safety: the bytes never change through this object and all methods are const
// except assignment, so one MappedFile may be read from several threads at once. The file
// itself must not shrink while mapped: reading a page past its new end raises SIGBUS.
#ifndef VARUNA_IO_MAPPED_FILE_H_
#define VARUNA_IO_MAPPED_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace varuna {

class MappedFile {
 public:
  // Opens, maps and closes the regular file at `path`. An empty file maps to an empty view.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  // An empty view that maps nothing.
  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // The file's first byte, or nullptr for an empty view.
  const char* data() const { return data_; }
  // The file's size in bytes at Open.
  size_t size() const { return size_; }
  // data() and size() as one view.
  absl::string_view view() const { return absl::string_view(data_, size_); }

 private:
  MappedFile(const char* data, size_t size) : data_(data), size_(size) {}
  void Unmap();

  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace varuna

#endif  // VARUNA_IO_MAPPED_FILE_H_
