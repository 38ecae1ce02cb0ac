#include "varuna/io/json.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace varuna::json {
namespace {

// Thrown by the parse callback to stop the parse with our own message.
struct RejectedInput {
  std::string message;
};

// The parse callback: rejects what nlohmann's parser accepts but our formats must not, a key
// repeated in one object and excessive nesting. Tracks, per open object or array, the keys seen
// so far and where it is (for messages).
class StrictnessCheck {
 public:
  bool operator()(int depth, nlohmann::detail::parse_event_t event, Value& parsed) {
    using Event = nlohmann::detail::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        // `depth` counts the enclosing objects and arrays: 0 for the outermost one.
        if (depth >= kMaxParseDepth) {
          throw RejectedInput{absl::StrCat("nesting deeper than ", kMaxParseDepth, " levels")};
        }
        open_.push_back({event == Event::object_start, {}, std::move(next_name_), 0});
        next_name_ = "0";  // an array's first element; an object's keys set it
        break;
      case Event::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!open_.back().keys.insert(key).second) {
          throw RejectedInput{
              absl::StrCat("duplicate object key \"", key, "\" in the object at ", Where())};
        }
        next_name_ = absl::StrReplaceAll(key, {{"~", "~0"}, {"/", "~1"}});
        break;
      }
      case Event::object_end:
      case Event::array_end:
        open_.pop_back();
        [[fallthrough]];
      case Event::value:
        if (!open_.empty() && !open_.back().is_object) {
          next_name_ = absl::StrCat(++open_.back().elements);
        }
        break;
    }
    return true;
  }

 private:
  struct Open {
    bool is_object;
    std::set<std::string> keys;  // objects: the keys so far
    std::string name;            // its key or index in its parent, escaped for a JSON pointer
    int64_t elements;            // arrays: the elements so far
  };

  // A JSON pointer to the innermost open object or array, "/" for the outermost.
  std::string Where() const {
    if (open_.size() <= 1) return "/";
    std::string pointer;
    for (size_t i = 1; i < open_.size(); ++i) absl::StrAppend(&pointer, "/", open_[i].name);
    return pointer;
  }

  std::vector<Open> open_;
  std::string next_name_;  // the name of the value that comes next
};

}  // namespace

absl::StatusOr<Value> Parse(absl::string_view text) {
  StrictnessCheck check;
  try {
    return Value::parse(text.begin(), text.end(), std::ref(check));
  } catch (const RejectedInput& rejected) {
    return absl::InvalidArgumentError(rejected.message);
  } catch (const nlohmann::json::parse_error& error) {
    // "[json.exception.parse_error.101] parse error at line 3, column 0: <problem>": nlohmann's
    // column is off after a newline, so the location is recomputed from the byte offset of the
    // last character read (error.byte, 1-based).
    absl::string_view problem = error.what();
    if (const size_t end = problem.find(": "); end != absl::string_view::npos) {
      problem.remove_prefix(end + 2);
    }
    const size_t offset = std::min<size_t>(error.byte > 0 ? error.byte - 1 : 0, text.size());
    const absl::string_view before = text.substr(0, offset);
    const size_t line_start = before.rfind('\n') + 1;  // 0 when there is no newline
    return absl::InvalidArgumentError(
        absl::StrCat("line ", 1 + std::count(before.begin(), before.end(), '\n'), ", column ",
                     offset - line_start + 1, ": ", problem));
  } catch (const nlohmann::json::exception& error) {
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'": the problem only.
    absl::string_view problem = error.what();
    if (const size_t end = problem.find("] "); end != absl::string_view::npos) {
      problem.remove_prefix(end + 2);
    }
    return absl::InvalidArgumentError(problem);
  }
}

std::string Serialize(const Value& value, bool pretty) {
  return value.dump(pretty ? 2 : -1, ' ', /*ensure_ascii=*/false,
                    nlohmann::json::error_handler_t::replace);
}

const Value* Find(const Value& object, absl::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

std::optional<int64_t> AsInt64(const Value& value) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

std::optional<int64_t> AsInt64(const Value* value) {
  return value != nullptr ? AsInt64(*value) : std::nullopt;
}

const char* TypeName(const Value& value) {
  switch (value.type()) {
    case Value::value_t::null:
      return "null";
    case Value::value_t::boolean:
      return "bool";
    case Value::value_t::number_integer:
    case Value::value_t::number_unsigned:
      return "int";
    case Value::value_t::number_float:
      return "double";
    case Value::value_t::string:
      return "string";
    case Value::value_t::array:
      return "array";
    case Value::value_t::object:
      return "object";
    default:
      return value.type_name();  // binary, discarded: never parsed or built here
  }
}

bool IsValidUtf8(absl::string_view s) {
  // nlohmann's strict serializer throws exactly on invalid UTF-8.
  try {
    Value(std::string(s)).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

}  // namespace varuna::json
