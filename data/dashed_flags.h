// Megatron spells its tools' flags with dashes (--output-prefix, --json-keys), but an Abseil
// flag's name is a C++ identifier (output_prefix). The data tools accept both spellings by
// rewriting the dashes in each flag's name, before "=", into underscores ahead of
// absl::ParseCommandLine. Values and positional arguments are left unchanged.
#ifndef DATA_DASHED_FLAGS_H_
#define DATA_DASHED_FLAGS_H_

#include <algorithm>
#include <string>
#include <vector>

namespace data {

// Returns argv with "--a-b=c" rewritten to "--a_b=c"; everything after a bare "--" is kept
// as is. The returned pointers point into *storage, which must outlive them.
inline std::vector<char*> UnderscoreFlagNames(int argc, char** argv,
                                              std::vector<std::string>* storage) {
  storage->assign(argv, argv + argc);
  bool flags_ended = false;
  for (size_t i = 1; i < storage->size(); ++i) {
    std::string& arg = (*storage)[i];
    if (arg == "--") flags_ended = true;
    if (flags_ended || arg.size() < 3 || arg[0] != '-') continue;
    const size_t name_begin = arg[1] == '-' ? 2 : 1;
    const size_t name_end = arg.find('=');
    for (size_t c = name_begin; c < std::min(name_end, arg.size()); ++c) {
      if (arg[c] == '-') arg[c] = '_';
    }
  }
  std::vector<char*> result;
  for (std::string& arg : *storage) result.push_back(arg.data());
  result.push_back(nullptr);
  return result;
}

}  // namespace data

#endif  // DATA_DASHED_FLAGS_H_
