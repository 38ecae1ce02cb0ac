// Serialize: compact or pretty JSON text, shortest round-trip doubles.
#include <charconv>
#include <cmath>
#include <string_view>

#include "varuna/io/json.h"
#include "varuna/io/json_utf8.h"

namespace varuna::json {
namespace {

using internal::Utf8SequenceLength;

void SerializeString(absl::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xF]);
        } else if (c < 0x80) {
          out->push_back(static_cast<char>(c));
        } else {
          const size_t n = Utf8SequenceLength(s, i);
          if (n == 0) {
            out->append("\xEF\xBF\xBD");  // U+FFFD for one invalid byte
          } else {
            out->append(s.data() + i, n);
            i += n;
            continue;
          }
        }
    }
    ++i;
  }
  out->push_back('"');
}

void SerializeDouble(double d, std::string* out) {
  if (!std::isfinite(d)) {
    out->append("null");
    return;
  }
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), d);  // shortest round trip
  const std::string_view text(buffer, result.ptr - buffer);
  out->append(text.data(), text.size());
  if (text.find_first_of(".eE") == std::string_view::npos) out->append(".0");
}

void Indent(int depth, std::string* out) {
  out->push_back('\n');
  out->append(static_cast<size_t>(depth) * 2, ' ');
}

void SerializeValue(const Value& value, bool pretty, int depth, std::string* out) {
  switch (value.type()) {
    case Value::Type::kNull:
      out->append("null");
      return;
    case Value::Type::kBool:
      out->append(value.as_bool() ? "true" : "false");
      return;
    case Value::Type::kInt:
      out->append(std::to_string(value.as_int()));
      return;
    case Value::Type::kDouble:
      SerializeDouble(value.as_double(), out);
      return;
    case Value::Type::kString:
      SerializeString(value.as_string(), out);
      return;
    case Value::Type::kArray: {
      const Value::Array& array = value.as_array();
      out->push_back('[');
      for (size_t i = 0; i < array.size(); ++i) {
        if (i > 0) out->push_back(',');
        if (pretty) Indent(depth + 1, out);
        SerializeValue(array[i], pretty, depth + 1, out);
      }
      if (pretty && !array.empty()) Indent(depth, out);
      out->push_back(']');
      return;
    }
    case Value::Type::kObject: {
      const Value::Object& object = value.as_object();
      out->push_back('{');
      for (size_t i = 0; i < object.size(); ++i) {
        if (i > 0) out->push_back(',');
        if (pretty) Indent(depth + 1, out);
        SerializeString(object[i].first, out);
        out->append(pretty ? ": " : ":");
        SerializeValue(object[i].second, pretty, depth + 1, out);
      }
      if (pretty && !object.empty()) Indent(depth, out);
      out->push_back('}');
      return;
    }
  }
}

}  // namespace

std::string Serialize(const Value& value, bool pretty) {
  std::string out;
  SerializeValue(value, pretty, 0, &out);
  return out;
}

}  // namespace varuna::json
