// NumpyRandomState against values printed by NumPy 2.4 (tests/data/gpt_index_golden.py).
#include "data/numpy_random.h"

#include <cstdint>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// np.random.RandomState(1234).randint(0, 2**32, size=5, dtype=np.uint64)
TEST(NumpyRandomStateTest, RawStreamMatchesRandomStateSeed) {
  NumpyRandomState rng(1234);
  std::vector<uint32_t> words;
  for (int i = 0; i < 5; ++i) words.push_back(rng.NextUInt32());
  EXPECT_THAT(words, ElementsAre(822569775u, 2137449171u, 2671936806u, 3512589365u, 1880026316u));
}

// a = np.arange(1000); np.random.RandomState(1234).shuffle(a)
TEST(NumpyRandomStateTest, ShuffleMatchesNumpyLegacyShuffle) {
  std::vector<int64_t> values(1000);
  std::iota(values.begin(), values.end(), 0);
  NumpyRandomState rng(1234);
  rng.Shuffle(values.data(), static_cast<int64_t>(values.size()));
  const std::vector<int64_t> first(values.begin(), values.begin() + 20);
  const std::vector<int64_t> last(values.end() - 5, values.end());
  EXPECT_THAT(first, ElementsAreArray({681, 990, 155, 768, 438, 363, 688, 555, 620, 99,
                                       756, 428, 888, 89,  982, 495, 29,  175, 466, 40}));
  EXPECT_THAT(last, ElementsAre(204, 53, 294, 723, 815));
}

TEST(NumpyRandomStateTest, ShuffleOrderDoesNotDependOnElementType) {
  std::vector<int32_t> narrow(1000);
  std::vector<uint32_t> unsigned_values(1000);
  std::iota(narrow.begin(), narrow.end(), 0);
  std::iota(unsigned_values.begin(), unsigned_values.end(), 0u);
  NumpyRandomState a(1234), b(1234);
  a.Shuffle(narrow.data(), 1000);
  b.Shuffle(unsigned_values.data(), 1000);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(narrow[i], static_cast<int32_t>(unsigned_values[i]));
  EXPECT_EQ(narrow[0], 681);
}

// RandomState.randint(0, max + 1, dtype=np.uint64) draws by the same masked rejection as
// shuffle's random_interval; these maxima need the 64-bit (two-word) branch.
TEST(NumpyRandomStateTest, IntervalAbove32BitsMatchesNumpy) {
  NumpyRandomState rng(1234);
  std::vector<uint64_t> draws;
  for (int i = 0; i < 4; ++i) draws.push_back(rng.Interval((uint64_t{1} << 40) + 12345));
  EXPECT_THAT(draws,
              ElementsAre(878802328948ull, 656147994617ull, 617876871857ull, 662277595166ull));
  NumpyRandomState rng5(5);
  draws.clear();
  for (int i = 0; i < 4; ++i) draws.push_back(rng5.Interval(uint64_t{1} << 32));
  EXPECT_THAT(draws, ElementsAre(1562238070ull, 4206684233ull, 385778404ull, 2090094288ull));
  // The largest maximum that still draws single 32-bit words.
  NumpyRandomState rng5_32(5);
  draws.clear();
  for (int i = 0; i < 4; ++i) draws.push_back(rng5_32.Interval(0xffffffffull));
  EXPECT_THAT(draws, ElementsAre(953453411ull, 236996814ull, 3739766767ull, 3570525885ull));
}

TEST(NumpyRandomStateTest, ShortShufflesDrawNothing) {
  NumpyRandomState rng(1234);
  int32_t one = 7;
  rng.Shuffle(&one, 1);
  rng.Shuffle(&one, 0);
  EXPECT_EQ(one, 7);
  EXPECT_EQ(rng.Interval(0), 0u);
  EXPECT_EQ(rng.NextUInt32(), 822569775u);  // still the first word of the stream
}

}  // namespace
}  // namespace data
