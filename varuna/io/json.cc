#include "varuna/io/json.h"

#include <cstdio>
#include <cstdlib>

#include "varuna/io/json_utf8.h"

namespace varuna::json {

// ---------------------------------------------------------------------------------------
// Value

const char* Value::TypeName(Type type) {
  switch (type) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kDouble:
      return "double";
    case Type::kString:
      return "string";
    case Type::kArray:
      return "array";
    case Type::kObject:
      return "object";
  }
  return "unknown";
}

void Value::Require(Type type, const char* what) const {
  if (this->type() == type) return;
  std::fprintf(stderr, "varuna::json::Value::%s called on a %s value (needs %s)\n", what,
               TypeName(this->type()), TypeName(type));
  std::abort();
}

bool Value::as_bool() const {
  Require(Type::kBool, "as_bool");
  return std::get<bool>(data_);
}

int64_t Value::as_int() const {
  Require(Type::kInt, "as_int");
  return std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (is_int()) return static_cast<double>(std::get<int64_t>(data_));
  Require(Type::kDouble, "as_double");
  return std::get<double>(data_);
}

const std::string& Value::as_string() const {
  Require(Type::kString, "as_string");
  return std::get<std::string>(data_);
}

const Value::Array& Value::as_array() const {
  Require(Type::kArray, "as_array");
  return std::get<Array>(data_);
}

Value::Array& Value::as_array() {
  Require(Type::kArray, "as_array");
  return std::get<Array>(data_);
}

const Value::Object& Value::as_object() const {
  Require(Type::kObject, "as_object");
  return std::get<Object>(data_);
}

size_t Value::size() const {
  if (is_array()) return std::get<Array>(data_).size();
  if (is_object()) return std::get<Object>(data_).size();
  return 0;
}

const Value& Value::operator[](size_t i) const {
  const Array& array = as_array();
  if (i >= array.size()) {
    std::fprintf(stderr, "varuna::json::Value::operator[]: index %zu out of range (size %zu)\n", i,
                 array.size());
    std::abort();
  }
  return array[i];
}

Value& Value::operator[](size_t i) {
  return const_cast<Value&>(static_cast<const Value&>(*this)[i]);
}

const Value* Value::Find(absl::string_view key) const {
  if (!is_object()) return nullptr;
  for (const Member& member : std::get<Object>(data_)) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

Value* Value::Find(absl::string_view key) {
  return const_cast<Value*>(static_cast<const Value&>(*this).Find(key));
}

Value& Value::Set(absl::string_view key, Value value) {
  Require(Type::kObject, "Set");
  if (Value* existing = Find(key)) {
    *existing = std::move(value);
    return *existing;
  }
  Object& object = std::get<Object>(data_);
  object.emplace_back(std::string(key), std::move(value));
  return object.back().second;
}

bool Value::Erase(absl::string_view key) {
  Require(Type::kObject, "Erase");
  Object& object = std::get<Object>(data_);
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (it->first == key) {
      object.erase(it);
      return true;
    }
  }
  return false;
}

Value& Value::Append(Value value) {
  Require(Type::kArray, "Append");
  Array& array = std::get<Array>(data_);
  array.push_back(std::move(value));
  return array.back();
}

// ---------------------------------------------------------------------------------------
// UTF-8

namespace internal {

size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

void AppendUtf8(uint32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

}  // namespace internal

bool IsValidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = internal::Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace varuna::json
