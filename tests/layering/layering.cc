#include "tests/layering/layering.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace varuna::testing {
namespace {

// Packages every package may use: the workspace root (config settings) and the build's
// adapters of third-party code.
bool AlwaysAllowed(const std::string& package) { return package.empty() || package == "patches"; }

bool IsBuildFile(const std::string& path) {
  return path == "BUILD" || absl::EndsWith(path, "/BUILD");
}

std::string Join(const std::set<std::string>& packages) {
  return packages.empty() ? "nothing" : absl::StrJoin(packages, " ");
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool IsCheckedSource(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  return path.filename() == "BUILD" || ext == ".h" || ext == ".cc" || ext == ".cu" || ext == ".cuh";
}

}  // namespace

std::string LayerRules::PackageOf(absl::string_view path) const {
  std::string best;
  bool found = false;
  for (const auto& [package, unused] : allowed) {
    if (absl::StartsWith(path, absl::StrCat(package, "/")) &&
        (!found || package.size() > best.size())) {
      best = package;
      found = true;
    }
  }
  return best;
}

absl::StatusOr<LayerRules> ParseLayerRules(absl::string_view text) {
  LayerRules rules;
  std::vector<std::pair<int, std::string>> used;  // (line, package) to check afterwards
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("layers.txt line ", number, ": \"", line,
                                                     "\" is not \"<package>: <packages>\""));
    }
    const std::string package(absl::StripAsciiWhitespace(line.substr(0, colon)));
    if (rules.allowed.count(package) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("layers.txt line ", number, ": ", package, " has a line already"));
    }
    std::set<std::string>& uses = rules.allowed[package];
    for (absl::string_view other :
         absl::StrSplit(line.substr(colon + 1), absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
      uses.emplace(other);
      used.emplace_back(number, std::string(other));
    }
  }
  for (const auto& [line, package] : used) {
    if (rules.allowed.count(package) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("layers.txt line ", line, ": ", package,
                                                     " is used but has no line of its own"));
    }
  }
  return rules;
}

std::vector<std::string> CheckFile(const LayerRules& rules, const std::string& path,
                                   absl::string_view contents) {
  const bool build_file = IsBuildFile(path);
  const std::string own =
      build_file ? std::string(absl::StripSuffix(absl::StripSuffix(path, "BUILD"), "/"))
                 : rules.PackageOf(path);
  if (rules.allowed.count(own) == 0 || (!build_file && own.empty())) {
    return {absl::StrCat(path, ": its package is not in layers.txt; add a line for it")};
  }
  const std::set<std::string>& allowed = rules.allowed.at(own);
  // Top-level directories whose paths are this repository's (an include of "absl/..." is not).
  std::set<std::string> roots = {"tests"};
  for (const auto& [known, unused] : rules.allowed) roots.insert(known.substr(0, known.find('/')));

  static const std::regex kInclude(R"(^\s*#\s*include\s*"([^"]+)\")");
  static const std::regex kLabel(R"re("//([A-Za-z0-9_/.\-]*)(:[^"]*)?")re");
  std::vector<std::string> violations;
  int number = 0;
  for (absl::string_view line_view : absl::StrSplit(contents, '\n')) {
    ++number;
    const std::string line(line_view);
    std::vector<std::pair<std::string, std::string>> uses;  // (package, what uses it)
    if (build_file) {
      // An alias only forwards a name (`bazel run //varuna:launch`); it uses nothing.
      if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "actual =")) continue;
      for (std::sregex_iterator it(line.begin(), line.end(), kLabel), end; it != end; ++it) {
        const std::string package = (*it)[1];
        const std::string target = (*it)[2];
        // Bazel's pseudo-packages, and visibility declarations (who may use us, not a use).
        if (package == "visibility" || package == "conditions" || target == ":__pkg__" ||
            target == ":__subpackages__") {
          continue;
        }
        uses.emplace_back(package, (*it)[0].str());
      }
    } else if (std::smatch match; std::regex_search(line, match, kInclude)) {
      const std::string included = match[1];
      const size_t slash = included.find('/');
      // Bazel's runfiles library (@bazel_tools) shares the top-level name of our tools/.
      if (absl::StartsWith(included, "tools/cpp/")) continue;
      if (slash != std::string::npos && roots.count(included.substr(0, slash)) > 0) {
        const std::string package = rules.PackageOf(included);
        uses.emplace_back(package.empty() ? included : package,
                          absl::StrCat("#include \"", included, "\""));
      }
    }
    for (const auto& [used, what] : uses) {
      if (used == own || AlwaysAllowed(used) || allowed.count(used) > 0) continue;
      const std::string location = absl::StrCat(path, ":", number, ": ", own, " uses ");
      if (rules.allowed.count(used) == 0) {
        violations.push_back(
            absl::StrCat(location, used, " (", what, "), which is no package of layers.txt"));
      } else {
        violations.push_back(absl::StrCat(location, used, " (", what,
                                          "), which layers.txt does not allow; ", own, " may use ",
                                          Join(allowed)));
      }
    }
  }
  return violations;
}

std::vector<std::string> FindPackages(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::vector<std::string> packages;
  fs::recursive_directory_iterator it(root), end;
  for (; it != end; ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory()) {
      const std::string relative = fs::relative(it->path(), root).string();
      if (absl::StartsWith(name, ".") || absl::StartsWith(name, "bazel-") || relative == "tests" ||
          relative == "patches" || it->is_symlink()) {
        it.disable_recursion_pending();
      }
      continue;
    }
    if (name != "BUILD" || !it->is_regular_file()) continue;
    const std::string package = fs::relative(it->path().parent_path(), root).string();
    if (package != ".") packages.push_back(package);
  }
  std::sort(packages.begin(), packages.end());
  return packages;
}

std::vector<std::string> CheckTree(const LayerRules& rules, const std::filesystem::path& root,
                                   int* checked) {
  std::vector<std::string> violations;
  const std::vector<std::string> packages = FindPackages(root);
  for (const std::string& package : packages) {
    if (rules.allowed.count(package) == 0) {
      violations.push_back(absl::StrCat(
          package, "/BUILD: ", package,
          " is a package but has no line in tests/layering/layers.txt: add one naming the "
          "packages it may use"));
    }
  }
  int files = 0;
  for (const auto& [package, unused] : rules.allowed) {
    if (std::find(packages.begin(), packages.end(), package) == packages.end()) {
      violations.push_back(absl::StrCat("tests/layering/layers.txt: ", package,
                                        " has a line but no BUILD file: remove the line"));
      continue;
    }
    for (const auto& entry : std::filesystem::directory_iterator(root / package)) {
      if (!entry.is_regular_file() || !IsCheckedSource(entry.path())) continue;
      const std::string path = absl::StrCat(package, "/", entry.path().filename().string());
      for (std::string& v : CheckFile(rules, path, ReadFile(entry.path()))) {
        violations.push_back(std::move(v));
      }
      ++files;
    }
  }
  if (checked != nullptr) *checked = files;
  return violations;
}

}  // namespace varuna::testing
