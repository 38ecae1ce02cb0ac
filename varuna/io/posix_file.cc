#include "varuna/io/posix_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace varuna {

absl::Status ErrnoStatus(int error, absl::string_view message) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      absl::StrCat(message, ": ", std::strerror(error)));
}

absl::StatusOr<PosixFile> PosixFile::OpenForRead(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path, " for reading"));
  return PosixFile(fd, path);
}

absl::StatusOr<PosixFile> PosixFile::Create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot create ", path));
  return PosixFile(fd, path);
}

absl::StatusOr<PosixFile> PosixFile::CreateUnique(const std::string& prefix) {
  std::string path = prefix + "XXXXXX";
  const int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot create a file named ", path));
  if (::fchmod(fd, 0644) != 0) {
    const int error = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return ErrnoStatus(error, absl::StrCat("cannot set the mode of ", path));
  }
  return PosixFile(fd, std::move(path));
}

PosixFile::PosixFile(PosixFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

PosixFile& PosixFile::operator=(PosixFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

PosixFile::~PosixFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status PosixFile::Write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t written = ::write(fd_, p, n);
    if (written < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("cannot write to ", path_));
    }
    p += written;
    n -= static_cast<size_t>(written);
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> PosixFile::ReadSome(void* data, size_t n) {
  while (true) {
    const ssize_t got = ::read(fd_, data, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) return ErrnoStatus(errno, absl::StrCat("cannot read ", path_));
  }
}

absl::Status PosixFile::ReadExactly(void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    absl::StatusOr<size_t> got = ReadSome(p, n);
    if (!got.ok()) return got.status();
    if (*got == 0) return absl::OutOfRangeError(absl::StrCat(path_, ": unexpected end of file"));
    p += *got;
    n -= *got;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> PosixFile::Size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoStatus(errno, absl::StrCat("cannot stat ", path_));
  return static_cast<uint64_t>(st.st_size);
}

absl::Status PosixFile::Sync() {
  if (::fsync(fd_) != 0) return ErrnoStatus(errno, absl::StrCat("cannot fsync ", path_));
  return absl::OkStatus();
}

absl::Status PosixFile::Close() {
  const int fd = std::exchange(fd_, -1);
  if (fd >= 0 && ::close(fd) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot close ", path_));
  }
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return ErrnoStatus(errno, absl::StrCat("cannot open directory ", dir, " to fsync it"));
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0) return ErrnoStatus(error, absl::StrCat("cannot fsync directory ", dir));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes) {
  absl::StatusOr<PosixFile> file = PosixFile::OpenForRead(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<uint64_t> size = file->Size();
  if (!size.ok()) return size.status();
  if (*size > max_bytes) {
    return absl::DataLossError(absl::StrCat(path, " is ", *size, " bytes, too large"));
  }
  std::string content(*size, '\0');
  if (absl::Status s = file->ReadExactly(content.data(), content.size()); !s.ok()) return s;
  return content;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& temp_prefix,
                                 std::initializer_list<absl::string_view> pieces) {
  absl::StatusOr<PosixFile> file = PosixFile::CreateUnique(temp_prefix);
  if (!file.ok()) return file.status();
  const std::string temp = file->path();
  absl::Status status;
  for (absl::string_view piece : pieces) {
    if (status.ok()) status = file->Write(piece.data(), piece.size());
  }
  if (status.ok()) status = file->Sync();
  if (absl::Status closed = file->Close(); status.ok()) status = closed;
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, absl::StrCat("cannot rename ", temp, " to ", path));
  }
  if (!status.ok()) ::unlink(temp.c_str());
  return status;
}

}  // namespace varuna
