// JSON for the files this project reads and writes: checkpoint metadata and markers, safetensors
// headers, profiles, metrics, Hugging Face configs, data-set descriptions. The values are
// nlohmann/json's (Debian's nlohmann-json3-dev); this header adds what our formats need on top.
//
// Value is nlohmann::ordered_json: objects keep their keys in insertion order (assigning to an
// existing key keeps its position), so what we write is stable. Integers are exact: int64, or
// uint64 for the non-negative ones the parser reads (is_number_integer() holds for both); every
// other number is a double. Build and read values with nlohmann's API (`v["key"] = 3`,
// `v.push_back(x)`, `v.is_number_integer()`, `v.get<double>()`). get<>() of another type throws
// nlohmann::json::type_error (numbers convert: get<int64_t>() of 2.5 is 2), so check the type
// first, or use Find and AsInt64 below, when the value comes from a file. Note that size() is 1 for
// a scalar, and that a braced list of string-led pairs is an object (Value{{"a", 1}} is {"a": 1}):
// write Value::array({...}) when an array is meant.
//
// Parse is stricter than nlohmann::json::parse: it rejects a key that appears twice in one
// object (nlohmann would keep one silently) and nesting deeper than kMaxParseDepth, and returns
// errors as a Status instead of throwing. Serialize never throws: invalid UTF-8 is written as
// U+FFFD, NaN and infinities as null.
//
// Thread safety: Value is a plain value type (const access may be concurrent, mutation needs
// exclusive access); the functions are reentrant.
#ifndef VARUNA_IO_JSON_H_
#define VARUNA_IO_JSON_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace varuna::json {

using Value = nlohmann::ordered_json;

// The largest nesting of arrays and objects Parse accepts.
inline constexpr int kMaxParseDepth = 512;

// Parses one JSON text (RFC 8259): one value surrounded by optional whitespace (a leading UTF-8
// byte-order mark is skipped). Strings must be valid UTF-8; escapes decode to UTF-8 and an
// unpaired surrogate escape is an error. Errors, all InvalidArgument:
//   "line L, column C: <problem>" for a syntax error or invalid UTF-8 (columns in bytes);
//   "duplicate object key \"k\" in the object at /files/x" for a repeated key (the location is
//   a JSON pointer, "/" for the outermost object);
//   "number overflow parsing '1e400'" for a number beyond a double's range;
//   "nesting deeper than 512 levels".
absl::StatusOr<Value> Parse(absl::string_view text);

// Writes `value` as JSON text: compact by default, or with `pretty` indented by two spaces with
// one member or element per line. Non-ASCII characters are written as UTF-8; invalid UTF-8 is
// replaced by U+FFFD. Doubles are written in the shortest form that reads back as the same
// double, always with a '.' or an exponent. So Parse(Serialize(v)) == v for every v free of
// NaN, infinities and invalid UTF-8.
std::string Serialize(const Value& value, bool pretty = false);

// The member `key` of `object`, or nullptr if `object` is not an object or has no such key.
const Value* Find(const Value& object, absl::string_view key);

// `value` as an exact int64: nullopt unless it is an integer (signed or unsigned) that int64
// holds. Never for a double, even 2.0. The pointer form gives nullopt for nullptr, so
// AsInt64(Find(object, "key")) reads an optional integer member.
std::optional<int64_t> AsInt64(const Value& value);
std::optional<int64_t> AsInt64(const Value* value);

// The type's name for messages: "null", "bool", "int" (signed or unsigned), "double",
// "string", "array" or "object".
const char* TypeName(const Value& value);

// Whether `s` is valid UTF-8 (no overlong forms, surrogates or code points above U+10FFFF):
// exactly the strings Serialize writes unchanged.
bool IsValidUtf8(absl::string_view s);

}  // namespace varuna::json

#endif  // VARUNA_IO_JSON_H_
