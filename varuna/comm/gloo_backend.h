// GlooBackend: creates Gloo process groups. It lives in its own shared library,
// libvaruna_gloo.so, which gloo_loader.cc loads with RTLD_LOCAL | RTLD_DEEPBIND.
//
// Why: libtorch_cpu.so contains its own, newer copy of gloo (built into it statically) and
// exports 337 gloo:: symbols; 309 of them have the same mangled names as symbols of
// Debian's libgloo.so, which is an older and ABI-incompatible version (for instance
// gloo::rendezvous::Store has 3 virtual functions there and more in torch's copy). Linked
// into one program the normal way, the dynamic linker binds each of those names to
// whichever library comes first, so one copy runs the other's code. Loaded with
// RTLD_DEEPBIND, this library and libgloo.so resolve gloo symbols among themselves first,
// and with RTLD_LOCAL libgloo.so never enters the global scope that libtorch_cpu.so uses.
// The wheel ships no gloo headers, so torch's own ProcessGroupGloo cannot be compiled
// against the library that runs; see README, "Communication backends".
//
// The two sides share one libstdc++, LibTorch and Abseil (already loaded by the program),
// so C++ objects may cross; no RTTI or exceptions cross. One caveat of RTLD_DEEPBIND: a
// malloc replacement injected with LD_PRELOAD (tcmalloc, jemalloc) is bypassed inside the
// library, so memory allocated on one side and freed on the other would cross allocators.
// Do not preload an allocator into programs that use Gloo groups.
#ifndef VARUNA_COMM_GLOO_BACKEND_H_
#define VARUNA_COMM_GLOO_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "varuna/comm/group_spec.h"
#include "varuna/comm/process_group.h"

namespace varuna::comm {

class GlooBackend {
 public:
  virtual ~GlooBackend() = default;

  // Creates this rank's member of the group `spec` describes: connects to every other
  // member through spec.store (a full mesh of TCP connections) and returns the group, or
  // Unavailable/DeadlineExceeded if the members did not all arrive within spec.timeout.
  virtual absl::StatusOr<std::unique_ptr<ProcessGroup>> NewGroup(const GroupSpec& spec) = 0;
};

// The entry point libvaruna_gloo.so exports (unmangled, for dlsym). `address` is the
// local IP address or host name other ranks reach this one at. Returns nullptr and sets
// *error if the TCP device cannot be created.
using NewGlooBackendFn = GlooBackend* (*)(const std::string& address, std::string* error);
inline constexpr char kNewGlooBackendSymbol[] = "VarunaNewGlooBackend";

}  // namespace varuna::comm

#endif  // VARUNA_COMM_GLOO_BACKEND_H_
