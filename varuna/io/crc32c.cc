#include "varuna/io/crc32c.h"

#include <array>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "varuna/io/posix_file.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace varuna {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78;  // 0x1EDC6F41 bit-reversed

// Slicing-by-8 tables: kTables[0] is the classic byte table; kTables[k][b] is the CRC of
// byte b followed by k zero bytes.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables tables{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? kPolynomial : 0);
    tables[0][b] = crc;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t prev = tables[k - 1][b];
      tables[k][b] = (prev >> 8) ^ tables[0][prev & 0xFF];
    }
  }
  return tables;
}

constexpr Tables kTables = MakeTables();

uint32_t ExtendRawPortable(uint32_t crc, const uint8_t* p, size_t n) {
  while (n >= 8) {
    uint32_t lo;
    uint32_t hi;
    std::memcpy(&lo, p, 4);  // little-endian hosts only (static_assert below)
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^
          kTables[4][lo >> 24] ^ kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^
          kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    crc = (crc >> 8) ^ kTables[0][(crc ^ *p) & 0xFF];
    ++p;
    --n;
  }
  return crc;
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "crc32c.cc assumes a little-endian host");

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t ExtendRawSse42(uint32_t crc, const uint8_t* p,
                                                          size_t n) {
  uint64_t crc64 = crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc64 = _mm_crc32_u64(crc64, word);
    p += 8;
    n -= 8;
  }
  crc = static_cast<uint32_t>(crc64);
  while (n > 0) {
    crc = _mm_crc32_u8(crc, *p);
    ++p;
    --n;
  }
  return crc;
}

bool HaveSse42() {
  static const bool have = __builtin_cpu_supports("sse4.2");  // immutable after init
  return have;
}
#endif

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n) {
  return ~ExtendRawPortable(~crc, static_cast<const uint8_t*>(data), n);
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
#if defined(__x86_64__)
  if (HaveSse42()) return ~ExtendRawSse42(~crc, static_cast<const uint8_t*>(data), n);
#endif
  return Crc32cExtendPortable(crc, data, n);
}

absl::StatusOr<FileChecksum> ChecksumFile(const std::string& path) {
  absl::StatusOr<PosixFile> file = PosixFile::OpenForRead(path);
  if (!file.ok()) return file.status();
  FileChecksum result;
  std::vector<char> buffer(1 << 20);
  while (true) {
    absl::StatusOr<size_t> got = file->ReadSome(buffer.data(), buffer.size());
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    result.crc32c = Crc32cExtend(result.crc32c, buffer.data(), *got);
    result.size += *got;
  }
  return result;
}

std::string Crc32cToHex(uint32_t crc) { return absl::StrFormat("0x%08x", crc); }

}  // namespace varuna
