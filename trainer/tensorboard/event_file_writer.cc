#include "trainer/tensorboard/event_file_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trainer/tensorboard/event_encoding.h"
#include "trainer/tensorboard/tf_record.h"

namespace trainer::tensorboard {
namespace {

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

std::string EventFileName(int64_t unix_seconds, const std::string& hostname, int64_t pid, int n) {
  return absl::StrCat(kFilePrefix, unix_seconds, ".", hostname, ".", pid, ".", n);
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Open(
    const EventFileOptions& options) {
  if (options.queue_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the event queue size ", options.queue_size, " must be at least 1"));
  }
  std::error_code error;
  std::filesystem::create_directories(options.dir, error);
  if (error || !std::filesystem::is_directory(options.dir)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the directory ", options.dir, ": ",
                     error ? error.message() : "a file of that name is in the way"));
  }
  const double now = WallTime();
  const std::string host = HostName();
  std::string path;
  for (int n = 0;; ++n) {
    path = (std::filesystem::path(options.dir) /
            EventFileName(static_cast<int64_t>(now), host, getpid(), n))
               .string();
    if (!std::filesystem::exists(path)) break;
  }
  absl::StatusOr<varuna::PosixFile> file = varuna::PosixFile::Create(path);
  if (!file.ok()) return file.status();
  std::unique_ptr<EventFileWriter> writer(
      new EventFileWriter(*std::move(file), options.queue_size));
  writer->queued_ = FrameRecord(EncodeFileVersionEvent(now, kFileVersion, options.writer));
  if (absl::Status status = writer->Flush(); !status.ok()) return status;
  return writer;
}

EventFileWriter::~EventFileWriter() {
  if (!closed_) Close().IgnoreError();
}

absl::Status EventFileWriter::AddScalar(absl::string_view tag, int64_t step, double value) {
  return Add(EncodeScalarEvent(WallTime(), step, tag, static_cast<float>(value)));
}

absl::Status EventFileWriter::AddSessionStart(int64_t step) {
  return Add(EncodeSessionStartEvent(WallTime(), step));
}

absl::Status EventFileWriter::Add(const std::string& event) {
  if (!error_.ok()) return error_;
  if (closed_) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  queued_ += FrameRecord(event);
  if (++queued_events_ >= queue_size_) return Flush();
  return absl::OkStatus();
}

absl::Status EventFileWriter::Flush() {
  if (!error_.ok()) return error_;
  if (closed_ || queued_.empty()) return absl::OkStatus();
  if (absl::Status status = file_.Write(queued_.data(), queued_.size()); !status.ok()) {
    error_ = absl::Status(status.code(),
                          absl::StrCat("writing the TensorBoard events: ", status.message()));
    return error_;
  }
  queued_.clear();
  queued_events_ = 0;
  return absl::OkStatus();
}

absl::Status EventFileWriter::Close() {
  if (closed_) return error_;
  absl::Status status = Flush();
  closed_ = true;
  if (absl::Status closing = file_.Close(); status.ok() && !closing.ok()) status = closing;
  if (error_.ok()) error_ = status;
  return status;
}

}  // namespace trainer::tensorboard
