// Loads libvaruna_gloo.so, the library that holds the Gloo backend, in isolation from the
// gloo copy inside libtorch_cpu.so (gloo_backend.h explains why).
#ifndef VARUNA_COMM_GLOO_LOADER_H_
#define VARUNA_COMM_GLOO_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "varuna/comm/gloo_backend.h"

namespace varuna::comm {

// The library's file name, as built by //varuna/comm:libvaruna_gloo.so.
inline constexpr char kGlooLibraryName[] = "libvaruna_gloo.so";

// Finds the library -- $VARUNA_GLOO_LIBRARY if set, else in the program's Bazel runfiles,
// else next to the program -- loads it with RTLD_LOCAL | RTLD_DEEPBIND and creates a backend
// listening on `address`. The library stays loaded for the life of the process, so groups
// may outlive the backend. Returns NotFound naming the places searched; Internal with the
// loader's message (for instance when Debian's libgloo0 is not installed); or Unavailable
// when the backend cannot listen on `address`.
absl::StatusOr<std::unique_ptr<GlooBackend>> LoadGlooBackend(const std::string& address);

}  // namespace varuna::comm

#endif  // VARUNA_COMM_GLOO_LOADER_H_
