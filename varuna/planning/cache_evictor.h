// CacheEvictor: empties a device's last-level cache of whatever a timed pass is about to read,
// by writing a buffer of twice its size (the CPU's highest-level data cache as the kernel
// describes it, else as glibc's sysconf reports L3 or L2; a CUDA device's L2), so that the pass
// reads its data from memory.
//
// Why the profiler needs it: training runs the step's work (the gradient pass and the
// optimizer over a stage's fp32 state) once per step, after every micro-batch has streamed the
// whole stage's weights, activations and gradients through the caches; that state is cold.
// The profiler times the same work on one segment's state in repeated passes, where it stays
// in the cache when it fits. On the 2-core CPU machine (gpt2-tiny as simulator_accuracy runs
// it) that made the profile's step work 17-29% short of training's (docs/profiling.md). The
// same holds for a segment's F, R and B inside a stage whose other segments stream through the
// cache between its passes: the profiler times those cold too (compute_profiler.h).
//
// Thread safety: one evictor per thread; Evict uses the device's current stream on CUDA.
#ifndef VARUNA_PLANNING_CACHE_EVICTOR_H_
#define VARUNA_PLANNING_CACHE_EVICTOR_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace varuna {

// Where Linux describes CPU 0's caches: index<i>/ with level, type and size (e.g. "32768K").
inline constexpr char kCpuCacheDir[] = "/sys/devices/system/cpu/cpu0/cache";

// The size in bytes of the highest-level data or unified cache described under `cache_dir`
// (laid out as kCpuCacheDir); 0 where it describes none (no such directory, unreadable files).
int64_t SysfsLastLevelCacheBytes(const std::string& cache_dir);

class CacheEvictor {
 public:
  // Allocates nothing until the first Evict.
  explicit CacheEvictor(const c10::Device& device);

  // The last-level cache's bytes as the system reports them (32 MiB where it reports none; a
  // build without CUDA reports 0 for a CUDA device, which it cannot use).
  int64_t cache_bytes() const { return cache_bytes_; }

  // Whether a pass over `bytes` of data needs an eviction first: some of the data could stay in
  // the cache between two passes (less than twice its size), and it is at least 8 MiB. Below that
  // a pass takes microseconds (the step's work of the tests' tiny models), and emptying a
  // large cache before each would cost far more profiling time than it corrects.
  bool WorthEvicting(int64_t bytes) const {
    return bytes >= kSmallestEvicted && bytes < 2 * cache_bytes_;
  }
  static constexpr int64_t kSmallestEvicted = int64_t{8} << 20;

  // Writes the buffer (2 x cache_bytes(), allocated on the first call, on the device). On CUDA
  // the write is queued on the current stream, ahead of whatever is queued next.
  void Evict();

 private:
  c10::Device device_;
  int64_t cache_bytes_ = 0;
  at::Tensor buffer_;
  int64_t writes_ = 0;  // varies the written value, so no write is ever skipped as a no-op
};

}  // namespace varuna

#endif  // VARUNA_PLANNING_CACHE_EVICTOR_H_
