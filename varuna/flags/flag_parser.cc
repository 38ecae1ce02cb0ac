#include "varuna/flags/flag_parser.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace varuna {
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

bool IsHelp(const std::string& arg) { return arg == "--help" || arg == "-h" || arg == "-help"; }

// "--name" or "--name=value" (not a bare "--").
bool IsFlag(const std::string& arg) { return arg.size() > 2 && absl::StartsWith(arg, "--"); }

// The name of a `--name=value` or `--name` argument.
std::string NameOf(const std::string& arg) {
  const size_t equals = arg.find('=');
  return arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
}

}  // namespace

std::string FlagParser::Key(const std::string& name) {
  std::string key = name;
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

void FlagParser::Register(const std::string& name, Type type, void* value, const std::string& help,
                          const std::string& default_text, const std::string& example) {
  index_[Key(name)] = flags_.size();
  flags_.push_back({name, type, value, help, default_text, example, {}});
}

void FlagParser::Add(const std::string& name, int64_t* value, const std::string& help,
                     const std::string& example) {
  Register(name, Type::kInt64, value, help, absl::StrCat(*value), example);
}
void FlagParser::Add(const std::string& name, int* value, const std::string& help,
                     const std::string& example) {
  Register(name, Type::kInt, value, help, absl::StrCat(*value), example);
}
void FlagParser::Add(const std::string& name, double* value, const std::string& help,
                     const std::string& example) {
  Register(name, Type::kDouble, value, help, absl::StrFormat("%g", *value), example);
}
void FlagParser::Add(const std::string& name, std::string* value, const std::string& help) {
  Register(name, Type::kString, value, help, value->empty() ? "\"\"" : *value, "");
}
void FlagParser::Add(const std::string& name, bool* value, const std::string& help) {
  Register(name, Type::kBool, value, help, *value ? "true" : "false", "");
}

void FlagParser::AddAlias(const std::string& alias, const std::string& name) {
  const size_t position = index_.at(Key(name));
  index_[Key(alias)] = position;
  flags_[position].aliases.push_back(alias);
}

void FlagParser::SetMinimum(const std::string& name, double minimum) {
  flags_[index_.at(Key(name))].minimum = minimum;
}

absl::Status FlagParser::Assign(const Flag& flag, const std::string& text) const {
  auto bad = [&](const char* expected, const std::string& fix) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag.name, "=", text, " is not ", expected,
                                                   fix.empty() ? "" : ": ", fix));
  };
  const std::string example =
      flag.example.empty() ? "" : absl::StrCat("e.g. --", flag.name, "=", flag.example);
  switch (flag.type) {
    case Type::kInt64:
      if (!absl::SimpleAtoi(text, static_cast<int64_t*>(flag.value))) {
        return bad("an integer", example.empty() ? "" : "give a whole number, " + example);
      }
      break;
    case Type::kInt:
      if (!absl::SimpleAtoi(text, static_cast<int*>(flag.value))) {
        return bad("an integer", example.empty() ? "" : "give a whole number, " + example);
      }
      break;
    case Type::kDouble: {
      double parsed = 0;
      if (!absl::SimpleAtod(text, &parsed) || !std::isfinite(parsed)) {
        return bad("a number", example.empty() ? "" : "give one, " + example);
      }
      *static_cast<double*>(flag.value) = parsed;
      break;
    }
    case Type::kString:
      *static_cast<std::string*>(flag.value) = text;
      break;
    case Type::kBool:
      if (!absl::SimpleAtob(text, static_cast<bool*>(flag.value))) {
        return bad("true or false",
                   absl::StrCat("write --", flag.name, " or --", flag.name, "=false"));
      }
      break;
  }
  if (flag.minimum) {
    // The parsed value, as the number it is.
    std::string value;
    bool below = false;
    switch (flag.type) {
      case Type::kInt64:
        value = absl::StrCat(*static_cast<int64_t*>(flag.value));
        below = *static_cast<int64_t*>(flag.value) < *flag.minimum;
        break;
      case Type::kInt:
        value = absl::StrCat(*static_cast<int*>(flag.value));
        below = *static_cast<int*>(flag.value) < *flag.minimum;
        break;
      case Type::kDouble:
        value = absl::StrCat(*static_cast<double*>(flag.value));
        below = *static_cast<double*>(flag.value) < *flag.minimum;
        break;
      case Type::kString:
      case Type::kBool:
        break;
    }
    if (below) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag.name, "=", value, " is not ",
                       flag.type == Type::kDouble ? "a number" : "an integer",
                       " >= ", *flag.minimum, ": pass e.g. --", flag.name, "=", flag.default_text));
    }
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

absl::Status FlagParser::ParseFlag(const std::vector<std::string>& args, size_t* i) {
  const std::string& arg = args[*i];
  const std::string name = NameOf(arg);
  const auto it = index_.find(Key(name));
  if (it == index_.end()) {
    const std::string advice = unknown_flag_advice_
                                   ? unknown_flag_advice_(name)
                                   : absl::StrCat(Suggest(Key(name)), "; see --help");
    return absl::InvalidArgumentError(absl::StrCat("unknown ", what_, "flag --", name, advice));
  }
  const Flag& flag = flags_[it->second];
  std::string value;
  if (arg.find('=') != std::string::npos) {
    value = arg.substr(arg.find('=') + 1);
  } else if (flag.type == Type::kBool) {
    value = "true";
  } else if (*i + 1 < args.size() && !absl::StartsWith(args[*i + 1], "--")) {
    value = args[++*i];
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag.name, " needs a value: write --", flag.name, "=<value>"));
  }
  if (absl::Status status = Assign(flag, value); !status.ok()) return status;
  set_.insert(Key(flag.name));
  return absl::OkStatus();
}

absl::Status FlagParser::Parse(const std::vector<std::string>& args,
                               std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (IsHelp(arg)) {
      help_requested_ = true;
      return absl::OkStatus();
    }
    if (IsFlag(arg)) {
      if (absl::Status status = ParseFlag(args, &i); !status.ok()) return status;
    } else if (positional != nullptr) {
      positional->push_back(arg);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument \"", arg, "\": every argument is a flag --name=value (see --help)"));
    }
  }
  return absl::OkStatus();
}

std::optional<int> FlagParser::ParseMain(const std::string& program, const std::string& usage,
                                         int argc, char** argv,
                                         std::vector<std::string>* positional) {
  const std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  if (absl::Status status = Parse(args, positional); !status.ok()) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), std::string(status.message()).c_str());
    return 2;
  }
  if (help_requested_) {
    std::printf("%s\n\nFlags:\n%s", usage.c_str(), Help().c_str());
    return 0;
  }
  return std::nullopt;
}

absl::Status FlagParser::ParseUntilCommand(const std::vector<std::string>& args,
                                           std::vector<std::string>* command) {
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (IsHelp(arg)) {
      help_requested_ = true;
      continue;
    }
    if (arg.empty() || arg[0] != '-') break;  // the command
    if (!IsFlag(arg)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown ", what_, "argument \"", arg,
                                                     "\": flags are written --name=value; see "
                                                     "--help"));
    }
    if (absl::Status status = ParseFlag(args, &i); !status.ok()) return status;
  }
  command->assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return absl::OkStatus();
}

std::vector<std::string> FlagParser::Names() const {
  std::vector<std::string> names;
  for (const Flag& flag : flags_) names.push_back(flag.name);
  return names;
}

std::string FlagParser::Help() const {
  std::string out;
  for (const Flag& flag : flags_) {
    std::string name = flag.name;
    for (const std::string& alias : flag.aliases) absl::StrAppend(&name, ", --", alias);
    absl::StrAppendFormat(&out, "  --%-32s %s (default %s)\n", name, flag.help, flag.default_text);
  }
  return out;
}

std::string FlagKeyOf(const std::string& arg) {
  return IsFlag(arg) ? FlagParser::Key(NameOf(arg)) : "";
}

std::optional<std::string> FindFlagValue(const std::vector<std::string>& args,
                                         const std::string& name) {
  std::optional<std::string> value;
  const std::string key = FlagParser::Key(name);
  for (size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (FlagKeyOf(args[i]) != key) continue;
    const size_t equals = args[i].find('=');
    if (equals != std::string::npos) {
      value = args[i].substr(equals + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    }
  }
  return value;
}

}  // namespace varuna
