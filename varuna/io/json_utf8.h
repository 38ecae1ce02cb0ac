// Internal to //varuna:json: UTF-8 helpers shared by the parser and the serializer.
#ifndef VARUNA_IO_JSON_UTF8_H_
#define VARUNA_IO_JSON_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace varuna::json::internal {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is invalid (overlong
// forms, surrogates, code points above U+10FFFF and truncated sequences are invalid).
size_t Utf8SequenceLength(absl::string_view s, size_t i);

// Appends the UTF-8 encoding of a code point (at most U+10FFFF, not a surrogate).
void AppendUtf8(uint32_t code_point, std::string* out);

}  // namespace varuna::json::internal

#endif  // VARUNA_IO_JSON_UTF8_H_
