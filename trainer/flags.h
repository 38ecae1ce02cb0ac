// FlagParser: command-line flags with Megatron's and Varuna's spellings.
//
// Megatron's flags use dashes (--num-layers) and Varuna's underscores (--chunk_size,
// --stage_to_rank_map); both spellings of every flag are accepted, since launch scripts mix
// them. Values come as `--name=value` or `--name value`; a boolean flag alone (`--fp16`) means
// true, and `--fp16=false` is accepted. Parsing fails, naming the flag, on an unknown flag
// (suggesting the closest known one), a missing or malformed value, or a positional argument
// where none is expected.
//
// Thread safety: none. The parser stores pointers to the caller's variables, which must
// outlive it.
#ifndef VARUNA_TRAINER_FLAGS_H_
#define VARUNA_TRAINER_FLAGS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace trainer {

class FlagParser {
 public:
  // Registers a flag. `name` is written without the leading dashes, in its canonical spelling
  // (e.g. "num-layers" or "chunk_size"); the variable's current value is the default.
  void Add(const std::string& name, int64_t* value, const std::string& help);
  void Add(const std::string& name, int* value, const std::string& help);
  void Add(const std::string& name, double* value, const std::string& help);
  void Add(const std::string& name, std::string* value, const std::string& help);
  void Add(const std::string& name, bool* value, const std::string& help);

  // Parses `args` (without the program name) into the registered variables. "--help" sets
  // help_requested() and stops. Returns InvalidArgument naming the offending flag. Arguments
  // that are not flags go to `positional` (in order), or are an error if it is null.
  absl::Status Parse(const std::vector<std::string>& args,
                     std::vector<std::string>* positional = nullptr);

  bool help_requested() const { return help_requested_; }

  // Whether the flag (canonical name) was given on the command line.
  bool WasSet(const std::string& name) const { return set_.count(Key(name)) > 0; }

  // One line per flag: name, default value and help text, in registration order.
  std::string Help() const;

 private:
  enum class Type { kInt64, kInt, kDouble, kString, kBool };
  struct Flag {
    std::string name;
    Type type;
    void* value;
    std::string help;
    std::string default_text;
  };

  // The spelling-independent key of a name: dashes and underscores are the same.
  static std::string Key(const std::string& name);
  void Register(const std::string& name, Type type, void* value, const std::string& help,
                const std::string& default_text);
  absl::Status Assign(const Flag& flag, const std::string& text) const;
  std::string Suggest(const std::string& key) const;

  std::vector<Flag> flags_;
  std::map<std::string, size_t> index_;  // Key(name) -> position in flags_
  std::set<std::string> set_;
  bool help_requested_ = false;
};

}  // namespace trainer

#endif  // VARUNA_TRAINER_FLAGS_H_
