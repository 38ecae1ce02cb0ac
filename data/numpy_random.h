// NumpyRandomState: the part of NumPy's legacy np.random.RandomState that Megatron's GPT
// dataset uses to shuffle its indices, reproduced bit for bit so that an index built here
// equals the one Megatron builds from the same data and seed.
//
// - RandomState(seed) for an integer seed is MT19937 seeded with init_genrand(seed), which is
//   exactly std::mt19937(seed).
// - RandomState.shuffle(x) on a 1-D array is Fisher-Yates from the back: for i = n-1 down to
//   1, j = Interval(i), swap(x[i], x[j]).
// - Interval(max) draws uniformly from [0, max] by masked rejection: mask = max with every
//   lower bit set; draw (32-bit words if max fits 32 bits, else two words high-then-low)
//   until (draw & mask) <= max.
// Verified against NumPy 2.4 (tests/data/numpy_random_test.cc, tests/data/gpt_index_golden.py).
//
// Not thread-safe: one instance per thread.
#ifndef DATA_NUMPY_RANDOM_H_
#define DATA_NUMPY_RANDOM_H_

#include <cstdint>
#include <random>
#include <utility>

namespace data {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  // The next raw 32-bit word of the MT19937 stream.
  uint32_t NextUInt32() { return static_cast<uint32_t>(mt_()); }

  // Two words, the first one as the high half (NumPy's next_uint64 for MT19937).
  uint64_t NextUInt64() {
    const uint64_t high = NextUInt32();
    return (high << 32) | NextUInt32();
  }

  // A uniform integer in [0, max], drawn as NumPy's random_interval does.
  uint64_t Interval(uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
    uint64_t value;
    if (max <= 0xffffffffULL) {
      do {
        value = NextUInt32() & mask;
      } while (value > max);
    } else {
      do {
        value = NextUInt64() & mask;
      } while (value > max);
    }
    return value;
  }

  // Shuffles values[0, n) in place as RandomState.shuffle does for a 1-D array.
  template <typename T>
  void Shuffle(T* values, int64_t n) {
    for (int64_t i = n - 1; i > 0; --i) {
      const uint64_t j = Interval(static_cast<uint64_t>(i));
      std::swap(values[i], values[j]);
    }
  }

 private:
  std::mt19937 mt_;
};

}  // namespace data

#endif  // DATA_NUMPY_RANDOM_H_
