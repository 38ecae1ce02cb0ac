#include "trainer/tensorboard/event_encoding.h"

#include <cstring>

namespace trainer::tensorboard {
namespace {

// Wire types.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

void PutVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void PutKey(std::string& out, int field, int wire_type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

template <typename T>
void PutLittleEndian(std::string& out, T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

void PutBytes(std::string& out, int field, absl::string_view bytes) {
  PutKey(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

// proto3 leaves out fields that hold their zero value (a double of +0.0 bits, an int 0, "").
void PutWallTime(std::string& out, double wall_time) {
  uint64_t bits = 0;
  std::memcpy(&bits, &wall_time, sizeof(bits));
  if (bits == 0) return;
  PutKey(out, 1, kFixed64);  // Event.wall_time
  PutLittleEndian(out, wall_time);
}

void PutStep(std::string& out, int64_t step) {
  if (step == 0) return;
  PutKey(out, 2, kVarint);  // Event.step; negative steps take ten bytes, as in protobuf
  PutVarint(out, static_cast<uint64_t>(step));
}

}  // namespace

std::string EncodeFileVersionEvent(double wall_time, absl::string_view version,
                                   absl::string_view writer) {
  std::string event;
  PutWallTime(event, wall_time);
  PutBytes(event, 3, version);  // Event.file_version (a oneof member: always written)
  if (!writer.empty()) {
    std::string metadata;
    PutBytes(metadata, 1, writer);  // SourceMetadata.writer
    PutBytes(event, 10, metadata);  // Event.source_metadata
  }
  return event;
}

std::string EncodeScalarEvent(double wall_time, int64_t step, absl::string_view tag, float value) {
  std::string summary_value;
  if (!tag.empty()) PutBytes(summary_value, 1, tag);  // Summary.Value.tag
  PutKey(summary_value, 2, kFixed32);                 // Summary.Value.simple_value (oneof)
  PutLittleEndian(summary_value, value);
  std::string summary;
  PutBytes(summary, 1, summary_value);  // Summary.value
  std::string event;
  PutWallTime(event, wall_time);
  PutStep(event, step);
  PutBytes(event, 5, summary);  // Event.summary
  return event;
}

std::string EncodeSessionStartEvent(double wall_time, int64_t step) {
  constexpr int kStart = 1;  // SessionLog.SessionStatus.START
  std::string session_log;
  PutKey(session_log, 1, kVarint);  // SessionLog.status
  PutVarint(session_log, kStart);
  std::string event;
  PutWallTime(event, wall_time);
  PutStep(event, step);
  PutBytes(event, 6, session_log);  // Event.session_log (a oneof member: always written)
  return event;
}

}  // namespace trainer::tensorboard
