#include "varuna/io/user_paths.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace varuna {
namespace {

bool IsReadable(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

std::string CurrentDirectory() {
  std::vector<char> buffer(4096);
  if (::getcwd(buffer.data(), buffer.size()) != nullptr) return buffer.data();
  return ".";
}

}  // namespace

std::string UserDirectory(const std::map<std::string, std::string>& environment) {
  const auto dir = environment.find("BUILD_WORKING_DIRECTORY");
  if (dir != environment.end() && !dir->second.empty()) return dir->second;
  return CurrentDirectory();
}

std::string UserDirectory() {
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr && *dir) {
    return dir;
  }
  return CurrentDirectory();
}

std::string ResolveUserPath(const std::string& path,
                            const std::map<std::string, std::string>& environment) {
  if (path.empty() || path[0] == '/') return path;
  return absl::StrCat(UserDirectory(environment), "/", path);
}

std::string ResolveUserPath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return absl::StrCat(UserDirectory(), "/", path);
}

std::string WithoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

absl::Status CheckNewOutputDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::symlink_status(dir, error);
  if (!fs::exists(status)) return absl::OkStatus();
  if (fs::is_directory(status) && fs::is_empty(dir, error) && !error) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("output ", dir,
                   " exists and is not an empty directory: choose a new directory or remove it "
                   "first (nothing was written)"));
}

absl::Status CheckWritableDirectory(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  const std::string given = absl::StrCat(flag, "=", path);
  fs::path existing = fs::path(ResolveUserPath(path));
  std::error_code error;
  while (!fs::exists(existing, error) && existing.has_parent_path() &&
         existing.parent_path() != existing) {
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat(given, ": ", existing.string(),
                     " is not a directory, so nothing can be written there: choose a directory"));
  }
  if (access(existing.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(given, ": cannot write into ", existing.string(), " (", std::strerror(errno),
                     "): choose a directory you can write to, or fix its permissions"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FindRunfile(const std::string& argv0,
                                        const std::string& workspace_path) {
  std::vector<std::string> candidates;
  if (const char* dir = std::getenv("RUNFILES_DIR"); dir != nullptr && *dir) {
    candidates.push_back(absl::StrCat(dir, "/varuna/", workspace_path));
  }
  candidates.push_back(absl::StrCat(argv0, ".runfiles/varuna/", workspace_path));
  // The program found through PATH (e.g. from the GPU bundle): argv0 is then a bare name.
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error)
    candidates.push_back(absl::StrCat(self.string(), ".runfiles/varuna/", workspace_path));
  if (const char* dir = std::getenv("TEST_SRCDIR"); dir != nullptr && *dir) {
    candidates.push_back(absl::StrCat(dir, "/varuna/", workspace_path));
  }
  candidates.push_back(workspace_path);
  if (const char* dir = std::getenv("BUILD_WORKSPACE_DIRECTORY"); dir != nullptr && *dir) {
    candidates.push_back(absl::StrCat(dir, "/", workspace_path));
  }
  for (const std::string& candidate : candidates) {
    if (IsReadable(candidate)) {
      return candidate[0] == '/' ? candidate : absl::StrCat(CurrentDirectory(), "/", candidate);
    }
  }
  return absl::NotFoundError(absl::StrCat("cannot find the bundled file ", workspace_path,
                                          " (looked in ", absl::StrJoin(candidates, ", "),
                                          "): run the program with `bazel run`"));
}

}  // namespace varuna
