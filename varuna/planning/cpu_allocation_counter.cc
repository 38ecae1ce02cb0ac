#include "varuna/planning/cpu_allocation_counter.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <c10/core/impl/alloc_cpu.h>

#include <atomic>
#include <cstring>
#include <new>

namespace varuna {

// Allocates like LibTorch's default CPU allocator (c10::alloc_cpu, 64-byte aligned) with a
// header of kHeader bytes in front of each block recording its size and this allocator, so
// that the DataPtr is a plain pointer (context == data, which raw_allocate and raw_deleter
// require) and freeing can subtract the size. The allocator is reference-counted by the counter
// and by every live block, since LibTorch's storages keep a raw pointer to it: it is deleted
// with the last of them.
class CpuAllocationCounter::CountingAllocator : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* data = Allocate(n);
    return c10::DataPtr(data, data, &Free, c10::Device(c10::kCPU));
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Free; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count > 0) std::memcpy(dest, src, count);
  }

  int64_t current() const { return current_.load(); }
  int64_t peak() const { return peak_.load(); }
  int64_t live() const { return live_.load(); }

  // Drops one reference (the counter's, or a block's); deletes the allocator at zero.
  void Release() {
    if (references_.fetch_sub(1) == 1) delete this;
  }

 private:
  static constexpr size_t kHeader = c10::gAlignment >= 32 ? c10::gAlignment : 32;
  struct Header {
    CountingAllocator* owner;
    int64_t bytes;
  };
  static_assert(sizeof(Header) <= kHeader);

  void* Allocate(size_t n) {
    auto* base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    new (base) Header{this, static_cast<int64_t>(n)};
    references_.fetch_add(1);
    live_.fetch_add(1);
    const int64_t now = current_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return base + kHeader;
  }

  static void Free(void* data) {
    if (data == nullptr) return;
    char* base = static_cast<char*>(data) - kHeader;
    const Header header = *reinterpret_cast<Header*>(base);
    c10::free_cpu(base);
    header.owner->current_.fetch_sub(header.bytes);
    header.owner->live_.fetch_sub(1);
    header.owner->Release();
  }

  std::atomic<int64_t> references_{1};  // The counter's.
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> live_{0};  // blocks allocated and not yet freed
};

namespace {
constexpr uint8_t kPriority = 255;
}  // namespace

CpuAllocationCounter::CpuAllocationCounter()
    : allocator_(new CountingAllocator), previous_(c10::GetCPUAllocator()) {
  c10::SetCPUAllocator(allocator_, kPriority);
}

CpuAllocationCounter::~CpuAllocationCounter() {
  c10::SetCPUAllocator(previous_, kPriority);
  allocator_->Release();
}

int64_t CpuAllocationCounter::current_bytes() const { return allocator_->current(); }

int64_t CpuAllocationCounter::peak_bytes() const { return allocator_->peak(); }

int64_t CpuAllocationCounter::live_allocations() const { return allocator_->live(); }

}  // namespace varuna
