// CpuAllocationCounter: counts the bytes LibTorch allocates on the CPU while it is alive, for the
// profiler's activation-memory measurement on the CPU and the trainer's memory statistics of a
// CPU run (where there is no allocator statistics API like CUDA's caching allocator has).
//
// While an instance lives, it is LibTorch's CPU allocator (c10::SetCPUAllocator): every CPU
// allocation is made as LibTorch's default CPU allocator makes it (c10::alloc_cpu, same
// alignment; a small header in front of each block is not counted) and its requested size is
// added to a running total; freeing such an allocation, whenever it happens, subtracts it again.
// current_bytes() is the total of the allocations made while the counter was installed and not yet
// freed; peak_bytes() the largest value it reached. Allocations made before the counter was
// installed are not counted, nor is their freeing. The destructor puts the previous allocator back.
// Allocations that outlive the counter keep working (they hold the allocator's state, not the
// counter).
//
// Caveats: c10::SetCPUAllocator only replaces an allocator of lower or equal priority and does
// not report the current priority, so the counter installs and restores with the highest
// priority (255); afterwards, lower-priority SetCPUAllocator calls have no effect. Installing
// and removing are not synchronised with other threads running LibTorch CPU operations: create
// and destroy a counter only while no other thread does. Counting itself is thread-safe
// (LibTorch's intra-op threads may allocate).
#ifndef VARUNA_PLANNING_CPU_ALLOCATION_COUNTER_H_
#define VARUNA_PLANNING_CPU_ALLOCATION_COUNTER_H_

#include <c10/core/Allocator.h>

#include <cstdint>

namespace varuna {

class CpuAllocationCounter {
 public:
  CpuAllocationCounter();
  ~CpuAllocationCounter();
  CpuAllocationCounter(const CpuAllocationCounter&) = delete;
  CpuAllocationCounter& operator=(const CpuAllocationCounter&) = delete;

  // Bytes allocated since construction and still live.
  int64_t current_bytes() const;
  // The highest current_bytes() since construction.
  int64_t peak_bytes() const;
  // How many of the allocations made since construction are still live.
  int64_t live_allocations() const;

  // The allocator that counts (shared with the allocations it made).
  class CountingAllocator;

 private:
  CountingAllocator* allocator_;  // Reference-counted: see the .cc.
  c10::Allocator* previous_ = nullptr;
};

}  // namespace varuna

#endif  // VARUNA_PLANNING_CPU_ALLOCATION_COUNTER_H_
