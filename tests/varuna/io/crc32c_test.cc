#include "varuna/io/crc32c.h"

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna {
namespace {

TEST(Crc32cTest, KnownValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32cExtendPortable(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // RFC 3720 B.4: 32 bytes of zeros, and 32 bytes of 0xFF.
  const std::string zeros(32, '\0');
  const std::string ones(32, '\xFF');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(Crc32cToHex(0xE3069283u), "0xe3069283");
  EXPECT_EQ(Crc32cToHex(0x1u), "0x00000001");
}

TEST(Crc32cTest, FastAndPortableAgreeAtEveryLengthAndAlignment) {
  std::mt19937 rng(5);
  std::string data(300, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t n = 0; offset + n <= data.size(); n += 1 + n / 16) {
      ASSERT_EQ(Crc32c(data.data() + offset, n), Crc32cExtendPortable(0, data.data() + offset, n))
          << offset << " " << n;
    }
  }
}

TEST(Crc32cTest, ExtendEqualsOneShot) {
  const std::string text = "the quick brown fox jumps over the lazy dog, twice over";
  for (size_t split = 0; split <= text.size(); ++split) {
    EXPECT_EQ(Crc32cExtend(Crc32c(text.data(), split), text.data() + split, text.size() - split),
              Crc32c(text.data(), text.size()));
  }
}

TEST(Crc32cTest, ChecksumFileReadsTheWholeFile) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/crc.bin";
  std::string data(3 << 20, '\0');  // larger than the 1 MiB read buffer
  std::mt19937 rng(11);
  for (char& c : data) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary) << data;
  absl::StatusOr<FileChecksum> checksum = ChecksumFile(path);
  ASSERT_TRUE(checksum.ok()) << checksum.status();
  EXPECT_EQ(checksum->size, data.size());
  EXPECT_EQ(checksum->crc32c, Crc32c(data.data(), data.size()));

  checksum = ChecksumFile(path + ".missing");
  ASSERT_FALSE(checksum.ok());
  EXPECT_EQ(checksum.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(checksum.status().message()), ::testing::HasSubstr("crc.bin.missing"));
}

}  // namespace
}  // namespace varuna
