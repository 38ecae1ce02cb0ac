// The protobuf wire encoding of the three tensorboard.Event forms the trainer writes (see
// event.proto for the messages and their field numbers):
//   {wall_time, file_version, source_metadata{writer}}       the first event of a file
//   {wall_time, step, session_log{status: START}}            the second: the restart marker
//   {wall_time, step, summary{value{tag, simple_value}}}     one scalar
// encoded as protobuf's own serializer encodes them (proto3: fields in number order, zero
// scalars left out, the oneof's simple_value always present), which the tests check byte for
// byte against the protoc-generated classes.
//
// Why not those classes: the trainer links Debian's libsentencepiece.so.0, which exports its
// own bundled copy of protobuf-lite's symbols; with Debian's libprotobuf.so.32 in the same
// process the two copies interpose and the program crashes while loading. The generated
// classes (//trainer/tensorboard:event_proto) serve the reader and the tests, which do not
// link SentencePiece.
//
// Thread safety: pure functions.
#ifndef VARUNA_TRAINER_TENSORBOARD_EVENT_ENCODING_H_
#define VARUNA_TRAINER_TENSORBOARD_EVENT_ENCODING_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace trainer::tensorboard {

// Event{wall_time, file_version: `version`, source_metadata{writer: `writer`}}.
std::string EncodeFileVersionEvent(double wall_time, absl::string_view version,
                                   absl::string_view writer);

// Event{wall_time, step, session_log{status: START}}.
std::string EncodeSessionStartEvent(double wall_time, int64_t step);

// Event{wall_time, step, summary{value{tag, simple_value: `value`}}}.
std::string EncodeScalarEvent(double wall_time, int64_t step, absl::string_view tag, float value);

}  // namespace trainer::tensorboard

#endif  // VARUNA_TRAINER_TENSORBOARD_EVENT_ENCODING_H_
