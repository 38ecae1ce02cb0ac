// Paths of a program run by `bazel run`: the user's files and the program's bundled data.
//
// Under `bazel run` the program starts in its runfiles tree, not where the user typed the
// command; Bazel passes the user's directory as BUILD_WORKING_DIRECTORY. Relative paths on the
// command line therefore resolve against BUILD_WORKING_DIRECTORY when it is set and against
// the current directory otherwise (running bazel-bin/... directly).
#ifndef VARUNA_IO_USER_PATHS_H_
#define VARUNA_IO_USER_PATHS_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace varuna {

// The directory relative paths are resolved against (see above): BUILD_WORKING_DIRECTORY of
// `environment` (NAME -> value) when it is set and not empty, else the current directory.
std::string UserDirectory(const std::map<std::string, std::string>& environment);
// The same for this process's environment.
std::string UserDirectory();

// `path` made absolute against UserDirectory(environment); "" and absolute paths stay as they
// are.
std::string ResolveUserPath(const std::string& path,
                            const std::map<std::string, std::string>& environment);
// The same for this process's environment.
std::string ResolveUserPath(const std::string& path);

// OK if the program can write into directory `path` (creating it and its missing parents
// where needed), checked without creating or writing anything: `path`, or else its nearest
// existing ancestor, must be a directory this process may write to. Otherwise
// FailedPrecondition naming `flag` (e.g. "--save"), the path and why.
absl::Status CheckWritableDirectory(const std::string& flag, const std::string& path);

// `path` without trailing slashes ("/" stays "/"): "out/" and "out" name one directory.
std::string WithoutTrailingSlashes(std::string path);

// OK if `dir`, a program's output directory, does not exist or is an empty directory (a
// program that writes a whole folder never mixes its files with others'). Otherwise
// FailedPrecondition naming `dir` and saying to choose a new one or remove it; nothing is
// written either way.
absl::Status CheckNewOutputDirectory(const std::string& dir);

// The absolute path of a data file of this workspace (e.g. "data/corpus/fortunes.jsonl"),
// found in the runfiles of `argv0` (RUNFILES_DIR, <argv0>.runfiles/varuna/, the same next to
// the running executable, or the current directory as under `bazel run`). NotFound naming the file
// and the places searched.
absl::StatusOr<std::string> FindRunfile(const std::string& argv0,
                                        const std::string& workspace_path);

}  // namespace varuna

#endif  // VARUNA_IO_USER_PATHS_H_
