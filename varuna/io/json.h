// A small JSON library: a Value tree, a strict RFC 8259 parser and a serializer. Used for
// checkpoint metadata, safetensors headers, configs and data-set descriptions.
//
// Value holds one of: null, bool, int64 (exact; sizes, counts, iterations), double, string
// (UTF-8), array, object. Objects keep their keys in insertion order and never hold a key
// twice. Numbers written without fraction or exponent that fit int64 parse as int64;
// every other number parses as double.
//
// The as_*() accessors and the mutators state a precondition on the type; breaking it is a
// programming error and aborts the process with a message naming both types. Check with
// is_*() (or use Find) when the input comes from a file.
//
// Thread safety: a Value is a plain value type (copyable, movable); const methods may be
// called concurrently, mutation needs exclusive access. Parse and Serialize are reentrant.
#ifndef VARUNA_IO_JSON_H_
#define VARUNA_IO_JSON_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace varuna::json {

class Value {
 public:
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject };
  using Array = std::vector<Value>;
  using Member = std::pair<std::string, Value>;
  using Object = std::vector<Member>;  // insertion order, unique keys

  // null.
  Value() = default;
  Value(std::nullptr_t) {}     // NOLINT(google-explicit-constructor)
  Value(bool b) : data_(b) {}  // NOLINT(google-explicit-constructor)
  // Any integer type. Unsigned values above INT64_MAX are stored as double.
  template <typename T,
            typename std::enable_if<std::is_integral<T>::value && !std::is_same<T, bool>::value,
                                    int>::type = 0>
  Value(T i) : data_(FromInteger(i)) {}                  // NOLINT(google-explicit-constructor)
  Value(double d) : data_(d) {}                          // NOLINT(google-explicit-constructor)
  Value(const char* s) : data_(std::string(s)) {}        // NOLINT(google-explicit-constructor)
  Value(std::string s) : data_(std::move(s)) {}          // NOLINT(google-explicit-constructor)
  Value(absl::string_view s) : data_(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  Value(Array a) : data_(std::move(a)) {}                // NOLINT(google-explicit-constructor)
  // Precondition: the keys are unique (not checked).
  explicit Value(Object o) : data_(std::move(o)) {}

  // An empty array / an empty object.
  static Value MakeArray() { return Value(Array()); }
  static Value MakeObject() { return Value(Object()); }

  Type type() const { return static_cast<Type>(data_.index()); }
  // "null", "bool", "int", "double", "string", "array" or "object".
  static const char* TypeName(Type type);

  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_double() const { return type() == Type::kDouble; }
  bool is_number() const { return is_int() || is_double(); }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }

  // Preconditions: the matching is_*(). as_double() also accepts an int (converted).
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;

  // Elements of an array or members of an object; 0 for every other type.
  size_t size() const;
  // Array element i. Preconditions: is_array(), i < size().
  const Value& operator[](size_t i) const;
  Value& operator[](size_t i);

  // The value of `key`, or nullptr if this is not an object or has no such key.
  const Value* Find(absl::string_view key) const;
  Value* Find(absl::string_view key);
  // Sets `key` to `value`: replaces the value in place if the key exists (keeping its
  // position), else appends it. Precondition: is_object(). Linear in the number of keys.
  Value& Set(absl::string_view key, Value value);
  // Removes `key`; returns whether it was there. Precondition: is_object().
  bool Erase(absl::string_view key);
  // Appends an element. Precondition: is_array().
  Value& Append(Value value);

  // Deep equality: same type and equal contents; object members compare in order.
  // An int never equals a double. NaN is unequal to itself.
  friend bool operator==(const Value& a, const Value& b) { return a.data_ == b.data_; }
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }

 private:
  using Data = std::variant<std::monostate, bool, int64_t, double, std::string, Array, Object>;

  template <typename T>
  static Data FromInteger(T i) {
    if (std::is_unsigned<T>::value && static_cast<uint64_t>(i) > INT64_MAX) {
      return Data(static_cast<double>(i));
    }
    return Data(static_cast<int64_t>(i));
  }
  void Require(Type type, const char* what) const;

  Data data_;
};

// Whether `s` is valid UTF-8 (no overlong forms, surrogates or code points above U+10FFFF):
// exactly the strings Serialize writes unchanged.
bool IsValidUtf8(absl::string_view s);

// The largest nesting of arrays and objects Parse accepts.
inline constexpr int kMaxParseDepth = 512;

// Parses one JSON text (RFC 8259): one value surrounded by optional whitespace, nothing
// else. Strings must be valid UTF-8; escapes (including \uXXXX and surrogate pairs) decode
// to UTF-8; unpaired surrogates, raw control characters and invalid UTF-8 are rejected.
// Numbers that overflow a double (e.g. 1e400) are rejected. Duplicate object keys are
// rejected. Returns InvalidArgument "line L, column C: <problem>" (1-based, columns in
// bytes) on any error.
absl::StatusOr<Value> Parse(absl::string_view text);

// Writes `value` as JSON text. Compact by default; `pretty` indents by two spaces with one
// member or element per line. Strings: '"', '\\' and control characters are escaped,
// other characters are written as UTF-8; invalid UTF-8 sequences are replaced by U+FFFD.
// Doubles are written in the shortest form that parses back to the same double, always
// with a '.' or an exponent so they parse back as doubles; NaN and infinities are written
// as null. So Parse(Serialize(v)) == v for every v free of NaN, infinities and invalid
// UTF-8.
std::string Serialize(const Value& value, bool pretty = false);

}  // namespace varuna::json

#endif  // VARUNA_IO_JSON_H_
