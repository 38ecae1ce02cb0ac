// The peak memory of LibTorch's CUDA caching allocator (as PyTorch's
// torch.cuda.max_memory_allocated and reset_peak_memory_stats), for the benchmarks' tables, and
// its cache's release between runs.
//
// Thread safety: as the allocator's statistics (process-wide per device).
#ifndef VARUNA_TESTS_BENCHMARKS_DEVICE_MEMORY_H_
#define VARUNA_TESTS_BENCHMARKS_DEVICE_MEMORY_H_

#include <c10/core/Device.h>

#include <optional>

namespace varuna::benchmarks {

// Peak bytes the allocator held on `device` since the start or the last ResetPeakMemory;
// nullopt on the CPU (or in a build without CUDA).
std::optional<double> PeakMemoryBytes(const c10::Device& device);

// Restarts the peak at what `device` holds now (nothing on the CPU).
void ResetPeakMemory(const c10::Device& device);

// Returns the allocator's cached, unused blocks to the device (torch.cuda.empty_cache), e.g.
// between runs that must each start from an empty device; nothing on the CPU.
void ReleaseCachedMemory(const c10::Device& device);

}  // namespace varuna::benchmarks

#endif  // VARUNA_TESTS_BENCHMARKS_DEVICE_MEMORY_H_
