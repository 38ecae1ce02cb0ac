// Parse: a strict RFC 8259 recursive-descent parser that reports the first error's line
// and column.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string_view>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "varuna/io/json.h"
#include "varuna/io/json_utf8.h"

namespace varuna::json {
namespace {

using internal::AppendUtf8;
using internal::Utf8SequenceLength;

// For a syntactically valid JSON number, a value m such that |x| < 10^m and, unless x is
// zero, |x| >= 10^(m-1); only its sign matters (positive: too large, else too small).
int64_t DecimalMagnitude(std::string_view number) {
  size_t i = number[0] == '-' ? 1 : 0;
  const size_t e = number.find_first_of("eE");
  const std::string_view mantissa = number.substr(i, e == std::string_view::npos ? e : e - i);
  int64_t exponent = 0;
  if (e != std::string_view::npos) {
    // Clamp huge exponents; the digits cannot move the result across a few billion.
    std::string_view digits = number.substr(e + 1);
    const bool negative = !digits.empty() && digits[0] == '-';
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.remove_prefix(1);
    for (char c : digits) {
      exponent = std::min<int64_t>(exponent * 10 + (c - '0'), int64_t{1} << 40);
    }
    if (negative) exponent = -exponent;
  }
  const size_t dot = mantissa.find('.');
  const std::string_view integer = mantissa.substr(0, dot);
  const size_t first_nonzero = integer.find_first_not_of('0');
  if (first_nonzero != std::string_view::npos) {
    return static_cast<int64_t>(integer.size() - first_nonzero) + exponent;
  }
  if (dot == std::string_view::npos) return INT64_MIN / 2;  // zero
  const std::string_view fraction = mantissa.substr(dot + 1);
  const size_t lead = fraction.find_first_not_of('0');
  if (lead == std::string_view::npos) return INT64_MIN / 2;  // zero
  return exponent - static_cast<int64_t>(lead);
}

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Value> ParseDocument() {
    Value value;
    SkipWhitespace();
    if (!ParseValue(0, &value)) return error_;
    SkipWhitespace();
    if (pos_ != text_.size()) {
      Fail(pos_, "unexpected text after the JSON value");
      return error_;
    }
    return value;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }

  void SkipWhitespace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }

  // Records the error at byte offset `at` and returns false.
  bool Fail(size_t at, absl::string_view problem) {
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    error_ = absl::InvalidArgumentError(
        absl::StrCat("line ", line, ", column ", at - line_start + 1, ": ", problem));
    return false;
  }

  static std::string Describe(char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) return absl::StrCat("'", std::string(1, c), "'");
    char buffer[8];
    std::snprintf(buffer, sizeof(buffer), "0x%02X", u);
    return absl::StrCat("byte ", buffer);
  }

  bool ParseValue(int depth, Value* out) {
    if (AtEnd()) return Fail(pos_, "unexpected end of input, expected a value");
    switch (Peek()) {
      case '{':
        return ParseObject(depth + 1, out);
      case '[':
        return ParseArray(depth + 1, out);
      case '"': {
        std::string s;
        if (!ParseString(&s)) return false;
        *out = Value(std::move(s));
        return true;
      }
      case 't':
        return ParseLiteral("true", Value(true), out);
      case 'f':
        return ParseLiteral("false", Value(false), out);
      case 'n':
        return ParseLiteral("null", Value(), out);
      default:
        if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) return ParseNumber(out);
        return Fail(pos_, absl::StrCat("unexpected ", Describe(Peek()), ", expected a value"));
    }
  }

  bool ParseLiteral(absl::string_view word, Value value, Value* out) {
    if (text_.substr(pos_, word.size()) != word) {
      return Fail(pos_, absl::StrCat("invalid literal, expected '", word, "'"));
    }
    pos_ += word.size();
    *out = std::move(value);
    return true;
  }

  bool CheckDepth(int depth) {
    if (depth > kMaxParseDepth) {
      return Fail(pos_, absl::StrCat("nesting deeper than ", kMaxParseDepth, " levels"));
    }
    return true;
  }

  bool ParseArray(int depth, Value* out) {
    if (!CheckDepth(depth)) return false;
    ++pos_;  // '['
    Value::Array array;
    SkipWhitespace();
    if (!AtEnd() && Peek() == ']') {
      ++pos_;
      *out = Value(std::move(array));
      return true;
    }
    while (true) {
      SkipWhitespace();
      array.emplace_back();
      if (!ParseValue(depth, &array.back())) return false;
      SkipWhitespace();
      if (AtEnd())
        return Fail(pos_, "unexpected end of input inside an array, expected ',' or ']'");
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == ']') {
        ++pos_;
        *out = Value(std::move(array));
        return true;
      }
      return Fail(
          pos_, absl::StrCat("unexpected ", Describe(Peek()), " in an array, expected ',' or ']'"));
    }
  }

  bool ParseObject(int depth, Value* out) {
    if (!CheckDepth(depth)) return false;
    ++pos_;  // '{'
    Value::Object object;
    std::unordered_set<std::string> keys;
    SkipWhitespace();
    if (!AtEnd() && Peek() == '}') {
      ++pos_;
      *out = Value(std::move(object));
      return true;
    }
    while (true) {
      SkipWhitespace();
      if (AtEnd()) return Fail(pos_, "unexpected end of input inside an object, expected a key");
      if (Peek() != '"') {
        return Fail(pos_, absl::StrCat("unexpected ", Describe(Peek()),
                                       " in an object, expected a string key"));
      }
      const size_t key_pos = pos_;
      std::string key;
      if (!ParseString(&key)) return false;
      if (!keys.insert(key).second) {
        return Fail(key_pos, absl::StrCat("duplicate object key \"", key, "\""));
      }
      SkipWhitespace();
      if (AtEnd() || Peek() != ':') return Fail(pos_, "expected ':' after an object key");
      ++pos_;
      SkipWhitespace();
      Value value;
      if (!ParseValue(depth, &value)) return false;
      object.emplace_back(std::move(key), std::move(value));
      SkipWhitespace();
      if (AtEnd()) {
        return Fail(pos_, "unexpected end of input inside an object, expected ',' or '}'");
      }
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        *out = Value(std::move(object));
        return true;
      }
      return Fail(pos_, absl::StrCat("unexpected ", Describe(Peek()),
                                     " in an object, expected ',' or '}'"));
    }
  }

  // Reads 4 hex digits at pos_.
  bool ParseHex4(uint32_t* out) {
    if (pos_ + 4 > text_.size()) return Fail(pos_, "truncated \\u escape, expected 4 hex digits");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text_[pos_ + k];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Fail(pos_ + k, "invalid \\u escape, expected 4 hex digits");
      }
    }
    pos_ += 4;
    *out = v;
    return true;
  }

  bool ParseString(std::string* out) {
    const size_t start = pos_;
    ++pos_;  // '"'
    while (true) {
      if (AtEnd()) return Fail(start, "unterminated string");
      const char c = Peek();
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Fail(pos_, "raw control character in a string, write it as an escape such as \\n");
      }
      if (c != '\\') {
        const size_t n = Utf8SequenceLength(text_, pos_);
        if (n == 0) return Fail(pos_, "invalid UTF-8 in a string");
        out->append(text_.data() + pos_, n);
        pos_ += n;
        continue;
      }
      const size_t escape_pos = pos_;
      ++pos_;
      if (AtEnd()) return Fail(start, "unterminated string");
      const char e = Peek();
      ++pos_;
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!ParseHex4(&cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Fail(escape_pos, "unpaired low surrogate in a \\u escape");
          }
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") {
              return Fail(escape_pos, "high surrogate not followed by a \\u low surrogate");
            }
            pos_ += 2;
            uint32_t low = 0;
            if (!ParseHex4(&low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) {
              return Fail(escape_pos, "high surrogate not followed by a \\u low surrogate");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Fail(escape_pos, absl::StrCat("invalid escape \\", Describe(e)));
      }
    }
  }

  bool ParseNumber(Value* out) {
    const size_t start = pos_;
    const auto digit = [&]() { return !AtEnd() && Peek() >= '0' && Peek() <= '9'; };
    bool integral = true;
    if (Peek() == '-') ++pos_;
    if (!digit()) return Fail(pos_, "invalid number, expected a digit");
    if (Peek() == '0') {
      ++pos_;
      if (digit()) return Fail(start, "invalid number, leading zeros are not allowed");
    } else {
      while (digit()) ++pos_;
    }
    if (!AtEnd() && Peek() == '.') {
      integral = false;
      ++pos_;
      if (!digit()) return Fail(pos_, "invalid number, expected a digit after '.'");
      while (digit()) ++pos_;
    }
    if (!AtEnd() && (Peek() == 'e' || Peek() == 'E')) {
      integral = false;
      ++pos_;
      if (!AtEnd() && (Peek() == '+' || Peek() == '-')) ++pos_;
      if (!digit()) return Fail(pos_, "invalid number, expected a digit in the exponent");
      while (digit()) ++pos_;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integral) {
      int64_t i;
      const auto result = std::from_chars(first, last, i);
      if (result.ec == std::errc() && result.ptr == last) {
        *out = Value(i);
        return true;
      }
      // Too large for int64: fall through to double.
    }
    double d;
    const auto result = std::from_chars(first, last, d);
    if (result.ec == std::errc::result_out_of_range) {
      // Underflow rounds to zero; overflow has no JSON representation (no infinities).
      if (DecimalMagnitude(std::string_view(first, last - first)) <= 0) {
        *out = Value(first[0] == '-' ? -0.0 : 0.0);
        return true;
      }
      return Fail(start, "number out of the range of a double");
    }
    if (result.ec != std::errc() || result.ptr != last) {
      return Fail(start, "invalid number");
    }
    *out = Value(d);
    return true;
  }

  absl::string_view text_;
  size_t pos_ = 0;
  absl::Status error_;
};

}  // namespace

absl::StatusOr<Value> Parse(absl::string_view text) { return Parser(text).ParseDocument(); }

}  // namespace varuna::json
