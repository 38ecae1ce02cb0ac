#include "trainer/host_malloc.h"

#include <climits>
#include <cstring>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace trainer {

bool UserTunesMalloc(const char* glibc_tunables) {
  return glibc_tunables != nullptr && std::strstr(glibc_tunables, "glibc.malloc.") != nullptr;
}

bool KeepFreedHostMemory(const char* glibc_tunables) {
#ifdef __GLIBC__
  if (UserTunesMalloc(glibc_tunables)) return false;
  // Setting either threshold turns off glibc's dynamic adjustment of both, so both are set.
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHostMmapThresholdBytes)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
#else
  (void)glibc_tunables;
  return false;
#endif
}

}  // namespace trainer
