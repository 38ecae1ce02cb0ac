#include "trainer/tensorboard/event_file_reader.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "trainer/tensorboard/event.pb.h"
#include "trainer/tensorboard/event_file_writer.h"
#include "trainer/tensorboard/tf_record.h"

namespace trainer::tensorboard {

absl::StatusOr<EventFile> ReadEventFile(const std::string& path) {
  absl::StatusOr<std::vector<std::string>> records = ReadRecords(path);
  if (!records.ok()) return records.status();
  EventFile file;
  file.path = path;
  for (size_t i = 0; i < records->size(); ++i) {
    ::tensorboard::Event event;
    if (!event.ParseFromString((*records)[i])) {
      return absl::DataLossError(absl::StrCat(path, ": record ", i, " is not an Event"));
    }
    if (i == 0) {
      if (!event.has_file_version()) {
        return absl::DataLossError(
            absl::StrCat(path, ": the first event has no file_version: not an event file"));
      }
      file.file_version = event.file_version();
      file.writer = event.source_metadata().writer();
      continue;
    }
    if (event.has_session_log() &&
        event.session_log().status() == ::tensorboard::SessionLog::START) {
      file.starts.push_back({event.step(), event.wall_time(), file.scalars.size()});
      continue;
    }
    if (!event.has_summary()) continue;
    for (const ::tensorboard::Summary::Value& value : event.summary().value()) {
      if (!value.has_simple_value()) continue;
      file.scalars.push_back({value.tag(), event.step(), event.wall_time(), value.simple_value()});
    }
  }
  if (records->empty()) return absl::DataLossError(absl::StrCat(path, " holds no events"));
  return file;
}

absl::StatusOr<std::vector<std::string>> ListEventFiles(const std::string& dir) {
  std::error_code error;
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (absl::StartsWith(entry.path().filename().string(), kFilePrefix)) {
      paths.push_back(entry.path().string());
    }
  }
  if (error) {
    return absl::NotFoundError(absl::StrCat("cannot list ", dir, ": ", error.message()));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

absl::StatusOr<std::vector<Scalar>> MergedScalars(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> paths = ListEventFiles(dir);
  if (!paths.ok()) return paths.status();
  std::vector<Scalar> shown;
  bool started = false;
  for (const std::string& path : *paths) {
    absl::StatusOr<EventFile> file = ReadEventFile(path);
    if (!file.ok()) return file.status();
    size_t next = 0;
    for (const SessionStart& start : file->starts) {
      shown.insert(shown.end(), file->scalars.begin() + next,
                   file->scalars.begin() + start.scalars_before);
      next = start.scalars_before;
      if (!started) {  // the run's first START: no restart
        started = true;
        continue;
      }
      shown.erase(std::remove_if(shown.begin(), shown.end(),
                                 [&](const Scalar& s) { return s.step >= start.step; }),
                  shown.end());
    }
    shown.insert(shown.end(), file->scalars.begin() + next, file->scalars.end());
  }
  return shown;
}

}  // namespace trainer::tensorboard
