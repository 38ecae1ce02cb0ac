#include "varuna/comm/gloo_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace varuna::comm {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

std::string ProgramPath() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.string();
}

// Where the library may be, in the order searched.
std::vector<std::string> CandidatePaths() {
  std::vector<std::string> paths;
  if (const char* explicit_path = std::getenv("VARUNA_GLOO_LIBRARY")) {
    paths.push_back(explicit_path);
    return paths;
  }
  const std::string program = ProgramPath();
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::Create(program, &error));
  if (runfiles != nullptr) {
    const std::string path =
        runfiles->Rlocation(absl::StrCat("varuna/varuna/comm/", kGlooLibraryName));
    if (!path.empty()) paths.push_back(path);
  }
  if (!program.empty()) {
    paths.push_back((std::filesystem::path(program).parent_path() / kGlooLibraryName).string());
  }
  return paths;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooBackend>> LoadGlooBackend(const std::string& address) {
  const std::vector<std::string> candidates = CandidatePaths();
  std::string found;
  for (const std::string& path : candidates) {
    if (access(path.c_str(), R_OK) == 0) {
      found = path;
      break;
    }
  }
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "cannot find ", kGlooLibraryName,
        " (the Gloo backend); looked in: ", absl::StrJoin(candidates, ", "),
        ". Run the program through bazel run/test, or set VARUNA_GLOO_LIBRARY to its path"));
  }
  // Never closed: groups created by the backend run code from this library.
  void* handle = dlopen(found.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (handle == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot load ", found, ": ", dlerror(),
                     ". It needs Debian's libgloo0 (./setup.sh installs libgloo-dev)"));
  }
  auto new_backend = reinterpret_cast<NewGlooBackendFn>(dlsym(handle, kNewGlooBackendSymbol));
  if (new_backend == nullptr) {
    return absl::InternalError(
        absl::StrCat(found, " does not export ", kNewGlooBackendSymbol, "; rebuild it"));
  }
  std::string error;
  std::unique_ptr<GlooBackend> backend(new_backend(address, &error));
  if (backend == nullptr) return absl::UnavailableError(error);
  return backend;
}

}  // namespace varuna::comm
