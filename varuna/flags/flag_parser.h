// FlagParser: the command-line flags of every program in this repository (the trainer and its
// tools, the launcher, the data tools, the benchmarks), with Megatron's and Varuna's spellings.
//
// Megatron's flags use dashes (--num-layers) and Varuna's underscores (--chunk_size,
// --stage_to_rank_map); both spellings of every flag are accepted, since launch scripts mix
// them. Values come as `--name=value` or `--name value`; a boolean flag alone (`--fp16`) means
// true, and `--fp16=false` is accepted. Every boolean flag also has a negation, `--no-fp16`
// (either spelling: `--no_fp16`), meaning false; it takes no value, and giving it together with
// the flag set to true (`--fp16 --no-fp16`, in one call of Parse) is an error naming both.
// `--help`, `-h` and `-help` ask for the help text.
// A numeric flag may have bounds (SetMinimum, SetMaximum), checked on the values given on the
// command line (not on the default, which may be a sentinel such as -1 for "the newest").
// Parsing fails, naming the flag and the fix, on an unknown flag (suggesting the closest known
// one), a missing or malformed value, a value out of bounds ("--clip-grad=-1 must be >= 0: pass
// e.g. --clip-grad=1"), a contradiction, a single-dash argument, or a positional argument where
// none is expected. Help() lists every flag with its help text and default, a boolean flag as
// `--[no-]fp16`.
//
// Registering is the program's own business, so its mistakes are programming errors that abort
// with a message: a name (or alias) registered twice, a name "no-X" beside a boolean flag X
// (`--no-X` would mean two things), an unknown name in AddAlias/SetMinimum/SetMaximum, or a bound
// on a flag that is not numeric.
//
// Thread safety: none. The parser stores pointers to the caller's variables, which must
// outlive it.
#ifndef VARUNA_FLAGS_FLAG_PARSER_H_
#define VARUNA_FLAGS_FLAG_PARSER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace varuna {

class FlagParser {
 public:
  // `program` names the flags in messages when given: "unknown launcher flag --x".
  explicit FlagParser(std::string program = "") : what_(program.empty() ? "" : program + " ") {}

  // Registers a flag. `name` is written without the leading dashes, in its canonical spelling
  // (e.g. "num-layers" or "chunk_size"); the variable's current value is the default. A
  // malformed or out-of-bounds value's message suggests `example` (e.g. "80") when it is given.
  // A boolean flag also accepts `--no-<name>` (see the file comment).
  void Add(const std::string& name, int64_t* value, const std::string& help,
           const std::string& example = "");
  void Add(const std::string& name, int* value, const std::string& help,
           const std::string& example = "");
  void Add(const std::string& name, double* value, const std::string& help,
           const std::string& example = "");
  void Add(const std::string& name, std::string* value, const std::string& help);
  void Add(const std::string& name, bool* value, const std::string& help);
  // A flag of several values, as Megatron's nargs='*' flags (--data-path 0.3 A 0.7 B): every
  // argument after `--name` up to the next one that starts with "--" is a value (at least one),
  // or `--name=value` gives one. A later occurrence replaces the values of an earlier one.
  void Add(const std::string& name, std::vector<std::string>* values, const std::string& help);

  // Another name for the registered flag `name` (Varuna's --ngpus_per_server for
  // --gpus_per_node).
  void AddAlias(const std::string& alias, const std::string& name);

  // A flag this program knows of but does not take (another program's, e.g. Megatron-LM's
  // --tensor-model-parallel-size): giving it, in any form (`--name`, `--name=v`, `--no-name`),
  // fails Parse with InvalidArgument(`message`), which should say why and what to use instead.
  // `name` must not be registered (aborts otherwise).
  void Refuse(const std::string& name, const std::string& message);

  // Whether a bound accepts the value on it: kInclusive (>= minimum, <= maximum) or kExclusive
  // (> minimum, < maximum: --adam-eps > 0, --adam-beta1 < 1).
  enum class Bound { kInclusive, kExclusive };

  // The registered numeric flag `name` accepts only given values >= `minimum` (> for
  // kExclusive). A value out of bounds is an error that states them and suggests a value:
  // "--batch-size=0 must be >= 1: pass e.g. --batch-size=8" (`example` when it is in bounds,
  // else the default when it is); with a default out of bounds (a sentinel such as 0 or -1) it
  // adds ", or leave --name out for its default".
  void SetMinimum(const std::string& name, double minimum, Bound bound = Bound::kInclusive);

  // As SetMinimum, for values <= `maximum` (< for kExclusive). With both bounds the message
  // gives the interval: "--warmup=2 must be in [0, 1]: pass e.g. --warmup=0.01".
  void SetMaximum(const std::string& name, double maximum, Bound bound = Bound::kInclusive);

  // What an unknown flag's message says after "unknown flag --<name>": by default the
  // closest known flag ("(did you mean --num-layers?)") and "; see --help".
  void SetUnknownFlagAdvice(std::function<std::string(const std::string& name)> advice) {
    unknown_flag_advice_ = std::move(advice);
  }

  // Parses `args` (without the program name) into the registered variables, in order (the last
  // value of a flag wins). "--help" sets help_requested() and stops. Returns InvalidArgument
  // naming the offending flag at the first bad argument. Arguments that are not flags go to
  // `positional` (in order), or are an error if it is null; a bare "--" is positional too.
  absl::Status Parse(const std::vector<std::string>& args,
                     std::vector<std::string>* positional = nullptr);

  // For programs that start another program (the launcher): parses flags up to the first
  // argument that is not a flag, or up to a bare "--" (dropped); that argument and everything
  // after it go to `command` unchanged. Errors as Parse. "--help" sets help_requested() and
  // parsing goes on.
  absl::Status ParseUntilCommand(const std::vector<std::string>& args,
                                 std::vector<std::string>* command);

  // For a program's main(): Parse of argv[1..argc). Returns nullopt when the program goes on;
  // otherwise the exit status it returns at once: 0 after printing `usage`, "Flags:" and Help()
  // to stdout for --help, or 2 after printing "<program>: error: <message>" to stderr.
  std::optional<int> ParseMain(const std::string& program, const std::string& usage, int argc,
                               char** argv, std::vector<std::string>* positional = nullptr);

  bool help_requested() const { return help_requested_; }

  // Whether the flag (canonical name) was given on the command line.
  bool WasSet(const std::string& name) const { return set_.count(Key(name)) > 0; }

  // The canonical names of the registered flags, in registration order.
  std::vector<std::string> Names() const;

  // One line per flag: name, aliases, help text and default value, in registration order; a
  // boolean flag's names show their negation: "--[no-]fp16".
  std::string Help() const;

  // The spelling-independent key of a flag name: dashes and underscores are the same.
  static std::string Key(const std::string& name);

 private:
  enum class Type { kInt64, kInt, kDouble, kString, kBool, kStringList };
  struct Flag {
    std::string name;
    Type type;
    void* value;
    std::string help;
    std::string default_text;
    std::string example;
    std::vector<std::string> aliases;
    double default_number = 0;  // numeric flags: the default, as a number
    // Numeric flags: the accepted values (SetMinimum, SetMaximum).
    std::optional<double> minimum;
    Bound minimum_bound = Bound::kInclusive;
    std::optional<double> maximum;
    Bound maximum_bound = Bound::kInclusive;
  };

  void Register(const std::string& name, Type type, void* value, const std::string& help,
                const std::string& default_text, const std::string& example);
  // Aborts when `key` may not be added to index_ for a flag of type `type` (see the file
  // comment).
  void CheckNewKey(const std::string& key, Type type) const;
  // The registered numeric flag `name`, for SetMinimum/SetMaximum (`what`); aborts otherwise.
  Flag& NumericFlag(const std::string& name, const char* what);
  // Parses args[*i] (a flag) and, for `--name value`, args[*i + 1].
  absl::Status ParseFlag(const std::vector<std::string>& args, size_t* i);
  absl::Status Assign(const Flag& flag, const std::string& text) const;
  // OK when the value just assigned from `text` lies within the flag's bounds.
  absl::Status CheckBounds(const Flag& flag, const std::string& text) const;
  std::string Suggest(const std::string& key) const;

  std::string what_;  // "" or "<program> "
  std::vector<Flag> flags_;
  std::map<std::string, size_t> index_;         // Key(name or alias) -> position in flags_
  std::map<std::string, std::string> refused_;  // Key(name) -> its message (Refuse)
  std::set<std::string> set_;
  // Keys of the boolean flags set to true, and of those negated, in this call of Parse (or
  // ParseUntilCommand): both is a contradiction.
  std::set<std::string> affirmed_;
  std::set<std::string> negated_;
  std::function<std::string(const std::string&)> unknown_flag_advice_;
  bool help_requested_ = false;
};

// The spelling-independent key (FlagParser::Key) of the flag that argument `arg` sets
// ("--chunk_size=4" -> "chunk-size"), or "" when `arg` is not a flag.
std::string FlagKeyOf(const std::string& arg);

// The value of flag `name` in a program's arguments `args` (either spelling; `--name=value` or
// `--name value`; the last one wins), or nullopt when it is not there. Arguments after a bare
// "--" are not searched. For reading a flag of another program's command line (the launcher
// finding its workers' --save).
std::optional<std::string> FindFlagValue(const std::vector<std::string>& args,
                                         const std::string& name);

}  // namespace varuna

#endif  // VARUNA_FLAGS_FLAG_PARSER_H_
