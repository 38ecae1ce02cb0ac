#include "trainer/host_malloc.h"

#include <climits>
#include <cstring>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace trainer {

bool UserTunesMalloc(const EnvironmentLookup& getenv) {
  for (const char* variable : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                               "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"}) {
    if (getenv(variable) != nullptr) return true;
  }
  const char* tunables = getenv("GLIBC_TUNABLES");
  if (tunables == nullptr) return false;
  for (const char* tunable : {"glibc.malloc.mmap_threshold=", "glibc.malloc.trim_threshold=",
                              "glibc.malloc.top_pad=", "glibc.malloc.mmap_max="}) {
    if (std::strstr(tunables, tunable) != nullptr) return true;
  }
  return false;
}

bool KeepFreedHostMemory(const EnvironmentLookup& getenv) {
#ifdef __GLIBC__
  if (UserTunesMalloc(getenv)) return false;
  // Setting either threshold turns off glibc's dynamic adjustment of both, so both are set.
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHostMmapThresholdBytes)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
#else
  (void)getenv;
  return false;
#endif
}

}  // namespace trainer
