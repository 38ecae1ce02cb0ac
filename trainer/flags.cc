#include "trainer/flags.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace trainer {
namespace {

// Edit distance, for "did you mean" suggestions.
size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string FlagParser::Key(const std::string& name) {
  std::string key = name;
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

void FlagParser::Register(const std::string& name, Type type, void* value, const std::string& help,
                          const std::string& default_text) {
  index_[Key(name)] = flags_.size();
  flags_.push_back({name, type, value, help, default_text});
}

void FlagParser::Add(const std::string& name, int64_t* value, const std::string& help) {
  Register(name, Type::kInt64, value, help, absl::StrCat(*value));
}
void FlagParser::Add(const std::string& name, int* value, const std::string& help) {
  Register(name, Type::kInt, value, help, absl::StrCat(*value));
}
void FlagParser::Add(const std::string& name, double* value, const std::string& help) {
  Register(name, Type::kDouble, value, help, absl::StrFormat("%g", *value));
}
void FlagParser::Add(const std::string& name, std::string* value, const std::string& help) {
  Register(name, Type::kString, value, help, value->empty() ? "\"\"" : *value);
}
void FlagParser::Add(const std::string& name, bool* value, const std::string& help) {
  Register(name, Type::kBool, value, help, *value ? "true" : "false");
}

absl::Status FlagParser::Assign(const Flag& flag, const std::string& text) const {
  auto bad = [&](const char* expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag.name, "=", text, " is not ", expected));
  };
  switch (flag.type) {
    case Type::kInt64:
      if (!absl::SimpleAtoi(text, static_cast<int64_t*>(flag.value))) return bad("an integer");
      break;
    case Type::kInt:
      if (!absl::SimpleAtoi(text, static_cast<int*>(flag.value))) return bad("an integer");
      break;
    case Type::kDouble: {
      double parsed = 0;
      if (!absl::SimpleAtod(text, &parsed) || !std::isfinite(parsed)) return bad("a number");
      *static_cast<double*>(flag.value) = parsed;
      break;
    }
    case Type::kString:
      *static_cast<std::string*>(flag.value) = text;
      break;
    case Type::kBool:
      if (!absl::SimpleAtob(text, static_cast<bool*>(flag.value))) {
        return bad("true or false");
      }
      break;
  }
  return absl::OkStatus();
}

std::string FlagParser::Suggest(const std::string& key) const {
  std::string best;
  size_t best_distance = 4;  // Suggest only close matches.
  for (const Flag& flag : flags_) {
    const size_t d = Distance(key, Key(flag.name));
    if (d < best_distance) {
      best_distance = d;
      best = flag.name;
    }
  }
  return best.empty() ? "" : absl::StrCat(" (did you mean --", best, "?)");
}

absl::Status FlagParser::Parse(const std::vector<std::string>& args,
                               std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      help_requested_ = true;
      return absl::OkStatus();
    }
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      if (positional != nullptr) {
        positional->push_back(arg);
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument \"", arg, "\": every argument is a flag --name=value (see --help)"));
    }
    const size_t equals = arg.find('=');
    const std::string name =
        arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    const auto it = index_.find(Key(name));
    if (it == index_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, Suggest(Key(name)), "; see --help"));
    }
    const Flag& flag = flags_[it->second];
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (flag.type == Type::kBool) {
      value = "true";
    } else if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", flag.name, " needs a value"));
    }
    if (absl::Status status = Assign(flag, value); !status.ok()) return status;
    set_.insert(Key(flag.name));
  }
  return absl::OkStatus();
}

std::string FlagParser::Help() const {
  std::string out;
  for (const Flag& flag : flags_) {
    absl::StrAppendFormat(&out, "  --%-32s %s (default %s)\n", flag.name, flag.help,
                          flag.default_text);
  }
  return out;
}

}  // namespace trainer
