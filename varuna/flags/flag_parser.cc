#include "varuna/flags/flag_parser.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

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

// The negation of boolean flag `name`, in its spelling: "no-fp16", "no_stop_on_stdin".
std::string NegationOf(const std::string& name) {
  const bool underscores =
      name.find('_') != std::string::npos && name.find('-') == std::string::npos;
  return (underscores ? "no_" : "no-") + name;
}

// `number` as a reader writes it: "1", "-1", "4294967295", "0.5", "1e-08".
std::string Number(double number) {
  if (std::trunc(number) == number && std::fabs(number) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(number));
  }
  return absl::StrFormat("%g", number);
}

// A mistake of the program that registers the flags.
[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "FlagParser: %s\n", message.c_str());
  std::abort();
}

}  // namespace

std::string FlagParser::Key(const std::string& name) {
  std::string key = name;
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

void FlagParser::CheckNewKey(const std::string& key, Type type) const {
  if (index_.count(key) > 0) Die(absl::StrCat("the flag --", key, " is registered twice"));
  auto is_bool = [&](const std::string& other) {
    const auto it = index_.find(other);
    return it != index_.end() && flags_[it->second].type == Type::kBool;
  };
  if (absl::StartsWith(key, "no-") && is_bool(key.substr(3))) {
    Die(absl::StrCat("--", key, " is the negation of the boolean flag --", key.substr(3),
                     ": choose another name"));
  }
  if (type == Type::kBool && index_.count("no-" + key) > 0) {
    Die(absl::StrCat("--no-", key, " is registered, so the boolean flag --", key,
                     " cannot have its negation: choose another name"));
  }
}

void FlagParser::Register(const std::string& name, Type type, void* value, const std::string& help,
                          const std::string& default_text, const std::string& example) {
  CheckNewKey(Key(name), type);
  index_[Key(name)] = flags_.size();
  Flag flag{name, type, value, help, default_text, example, {}};
  switch (type) {
    case Type::kInt64:
      flag.default_number = static_cast<double>(*static_cast<int64_t*>(value));
      break;
    case Type::kInt:
      flag.default_number = *static_cast<int*>(value);
      break;
    case Type::kDouble:
      flag.default_number = *static_cast<double*>(value);
      break;
    case Type::kString:
    case Type::kBool:
    case Type::kStringList:
      break;
  }
  flags_.push_back(std::move(flag));
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
void FlagParser::Add(const std::string& name, std::vector<std::string>* values,
                     const std::string& help) {
  Register(name, Type::kStringList, values, help,
           values->empty() ? "\"\"" : absl::StrJoin(*values, " "), "");
}

void FlagParser::AddAlias(const std::string& alias, const std::string& name) {
  const auto it = index_.find(Key(name));
  if (it == index_.end()) Die(absl::StrCat("AddAlias(\"", alias, "\"): no flag --", name));
  const size_t position = it->second;
  CheckNewKey(Key(alias), flags_[position].type);
  index_[Key(alias)] = position;
  flags_[position].aliases.push_back(alias);
}

FlagParser::Flag& FlagParser::NumericFlag(const std::string& name, const char* what) {
  const auto it = index_.find(Key(name));
  if (it == index_.end()) Die(absl::StrCat(what, ": no flag --", name));
  Flag& flag = flags_[it->second];
  if (flag.type == Type::kString || flag.type == Type::kBool || flag.type == Type::kStringList) {
    Die(absl::StrCat(what, ": --", name, " is not a numeric flag"));
  }
  return flag;
}

void FlagParser::SetMinimum(const std::string& name, double minimum, Bound bound) {
  Flag& flag = NumericFlag(name, "SetMinimum");
  flag.minimum = minimum;
  flag.minimum_bound = bound;
}

void FlagParser::SetMaximum(const std::string& name, double maximum, Bound bound) {
  Flag& flag = NumericFlag(name, "SetMaximum");
  flag.maximum = maximum;
  flag.maximum_bound = bound;
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
    case Type::kStringList:
      *static_cast<std::vector<std::string>*>(flag.value) = {text};
      break;
    case Type::kBool:
      if (!absl::SimpleAtob(text, static_cast<bool*>(flag.value))) {
        return bad("true or false",
                   absl::StrCat("write --", flag.name, " or --", NegationOf(flag.name)));
      }
      break;
  }
  return CheckBounds(flag, text);
}

absl::Status FlagParser::CheckBounds(const Flag& flag, const std::string& text) const {
  if (!flag.minimum && !flag.maximum) return absl::OkStatus();
  auto within = [&](double v) {
    const bool above =
        !flag.minimum ||
        (flag.minimum_bound == Bound::kInclusive ? v >= *flag.minimum : v > *flag.minimum);
    const bool below =
        !flag.maximum ||
        (flag.maximum_bound == Bound::kInclusive ? v <= *flag.maximum : v < *flag.maximum);
    return above && below;
  };
  double value = 0;
  switch (flag.type) {
    case Type::kInt64:
      value = static_cast<double>(*static_cast<const int64_t*>(flag.value));
      break;
    case Type::kInt:
      value = *static_cast<const int*>(flag.value);
      break;
    case Type::kDouble:
      value = *static_cast<const double*>(flag.value);
      break;
    case Type::kString:
    case Type::kBool:
    case Type::kStringList:
      return absl::OkStatus();
  }
  if (within(value)) return absl::OkStatus();
  std::string bounds;
  if (flag.minimum && flag.maximum) {
    bounds = absl::StrCat("in ", flag.minimum_bound == Bound::kInclusive ? "[" : "(",
                          Number(*flag.minimum), ", ", Number(*flag.maximum),
                          flag.maximum_bound == Bound::kInclusive ? "]" : ")");
  } else if (flag.minimum) {
    bounds =
        absl::StrCat(flag.minimum_bound == Bound::kInclusive ? ">= " : "> ", Number(*flag.minimum));
  } else {
    bounds =
        absl::StrCat(flag.maximum_bound == Bound::kInclusive ? "<= " : "< ", Number(*flag.maximum));
  }
  std::vector<std::string> fixes;
  double example = 0;
  if (!flag.example.empty() && absl::SimpleAtod(flag.example, &example) && within(example)) {
    fixes.push_back(absl::StrCat("pass e.g. --", flag.name, "=", flag.example));
  } else if (within(flag.default_number)) {
    fixes.push_back(absl::StrCat("pass e.g. --", flag.name, "=", flag.default_text));
  }
  if (!within(flag.default_number)) {
    fixes.push_back(absl::StrCat("leave --", flag.name, " out for its default"));
  }
  return absl::InvalidArgumentError(absl::StrCat("--", flag.name, "=", text, " must be ", bounds,
                                                 fixes.empty() ? "" : ": ",
                                                 absl::StrJoin(fixes, ", or ")));
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
    if (flag.type == Type::kBool) {
      const size_t negated = Distance(key, Key(NegationOf(flag.name)));
      if (negated < best_distance) {
        best_distance = negated;
        best = NegationOf(flag.name);
      }
    }
  }
  return best.empty() ? "" : absl::StrCat(" (did you mean --", best, "?)");
}

void FlagParser::Refuse(const std::string& name, const std::string& message) {
  const std::string key = Key(name);
  if (index_.count(key) > 0) {
    std::fprintf(stderr, "FlagParser: --%s is registered and refused at once\n", name.c_str());
    std::abort();
  }
  refused_[key] = message;
}

absl::Status FlagParser::ParseFlag(const std::vector<std::string>& args, size_t* i) {
  const std::string& arg = args[*i];
  const std::string name = NameOf(arg);
  const std::string key = Key(name);
  for (const std::string& refused :
       {key, absl::StartsWith(key, "no-") ? key.substr(3) : std::string()}) {
    if (const auto r = refused_.find(refused); r != refused_.end()) {
      return absl::InvalidArgumentError(r->second);
    }
  }
  auto it = index_.find(key);
  bool negated = false;  // --no-<boolean flag>
  if (it == index_.end() && absl::StartsWith(key, "no-")) {
    if (const auto positive = index_.find(key.substr(3)); positive != index_.end()) {
      const Flag& flag = flags_[positive->second];
      if (flag.type != Type::kBool) {
        return absl::InvalidArgumentError(absl::StrCat(
            "unknown ", what_, "flag --", name, ": only boolean flags have a --no- form, and --",
            flag.name, " takes a value: write --", flag.name, "=<value>"));
      }
      it = positive;
      negated = true;
    }
  }
  if (it == index_.end()) {
    const std::string advice = unknown_flag_advice_ ? unknown_flag_advice_(name)
                                                    : absl::StrCat(Suggest(key), "; see --help");
    return absl::InvalidArgumentError(absl::StrCat("unknown ", what_, "flag --", name, advice));
  }
  const Flag& flag = flags_[it->second];
  const std::string flag_key = Key(flag.name);
  auto contradiction = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag.name, " and --", NegationOf(flag.name), " contradict each other: give one"));
  };
  if (negated) {
    if (arg.find('=') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(arg, ": a negation takes no value: write --",
                                                     name, ", or --", flag.name, "=<true|false>"));
    }
    *static_cast<bool*>(flag.value) = false;
    if (affirmed_.count(flag_key) > 0) return contradiction();
    negated_.insert(flag_key);
    set_.insert(flag_key);
    return absl::OkStatus();
  }
  if (flag.type == Type::kStringList && arg.find('=') == std::string::npos) {
    std::vector<std::string> values;
    while (*i + 1 < args.size() && !absl::StartsWith(args[*i + 1], "--")) {
      values.push_back(args[++*i]);
    }
    if (values.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag.name, " needs a value: write --",
                                                     flag.name, " <value> [<value> ...]"));
    }
    *static_cast<std::vector<std::string>*>(flag.value) = std::move(values);
    set_.insert(flag_key);
    return absl::OkStatus();
  }
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
  if (flag.type == Type::kBool && *static_cast<bool*>(flag.value)) {
    if (negated_.count(flag_key) > 0) return contradiction();
    affirmed_.insert(flag_key);
  }
  set_.insert(flag_key);
  return absl::OkStatus();
}

absl::Status FlagParser::Parse(const std::vector<std::string>& args,
                               std::vector<std::string>* positional) {
  affirmed_.clear();
  negated_.clear();
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
  affirmed_.clear();
  negated_.clear();
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
  // "[no-]fp16" for a boolean flag.
  auto shown = [](const Flag& flag, const std::string& name) {
    if (flag.type != Type::kBool) return name;
    return absl::StrCat("[", NegationOf(name).substr(0, 3), "]", name);
  };
  for (const Flag& flag : flags_) {
    std::string name = shown(flag, flag.name);
    for (const std::string& alias : flag.aliases) {
      absl::StrAppend(&name, ", --", shown(flag, alias));
    }
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
