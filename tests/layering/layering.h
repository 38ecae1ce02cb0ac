// Layering rules: which package of this repository may use which (layers.txt), and the check
// of one source or BUILD file against them.
//
// A package is a directory with a BUILD file, named by its path ("varuna/pipeline"; "" is the
// workspace root). A file belongs to the package of the deepest directory above it that
// is one. A source file uses the package of each `#include "<path>"` whose path lies in a
// known package or under one of the repository's top-level source directories; a BUILD file
// uses the package of each label "//<package>[:<target>]" it names.
//
// Thread safety: LayerRules is a plain value; the functions are pure.
#ifndef VARUNA_TESTS_LAYERING_LAYERING_H_
#define VARUNA_TESTS_LAYERING_LAYERING_H_

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace varuna::testing {

struct LayerRules {
  // Package -> the other packages it may use.
  std::map<std::string, std::set<std::string>> allowed;

  // The package of a repository path ("varuna/pipeline/stage_map.h" -> "varuna/pipeline"):
  // the longest package in `allowed` that is a directory prefix of `path`, or "" for none.
  std::string PackageOf(absl::string_view path) const;
};

// Parses layers.txt: '#' starts a comment; every other non-blank line is
// "<package>: <package> <package> ...". InvalidArgument naming the line for a line without
// ':', a package listed twice, or a used package that has no line of its own.
absl::StatusOr<LayerRules> ParseLayerRules(absl::string_view text);

// The violations in one file at `path` (relative to the workspace) with `contents`: a source
// file's includes or a BUILD file's labels that use a package its own package may not. Each
// is one line "<path>:<line>: <package> uses <package> (<what>), which layers.txt does not
// allow; ...". A file outside every package in the rules is one violation too.
std::vector<std::string> CheckFile(const LayerRules& rules, const std::string& path,
                                   absl::string_view contents);

// The packages of the source tree at `root`: every directory with a BUILD file, as its path
// relative to `root`, sorted. Left out: the root itself, tests/ and patches/ (which the rules
// exempt), hidden directories, and Bazel's output links (bazel-*).
std::vector<std::string> FindPackages(const std::filesystem::path& root);

// Every violation in the source tree at `root`: one for each package found (FindPackages)
// that has no line in layers.txt, one for each line whose package has no BUILD file, and
// CheckFile's for every BUILD, .h, .cc, .cu and .cuh file of each listed package. `checked`,
// when not null, receives the number of files checked.
std::vector<std::string> CheckTree(const LayerRules& rules, const std::filesystem::path& root,
                                   int* checked = nullptr);

}  // namespace varuna::testing

#endif  // VARUNA_TESTS_LAYERING_LAYERING_H_
