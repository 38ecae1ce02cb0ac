// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected, initial value and final XOR
// 0xFFFFFFFF), the checksum of checkpoint files. Uses the SSE4.2 crc32 instruction where
// the CPU has it and a table-driven implementation otherwise; both give the same values.
// Check value: Crc32c("123456789") == 0xE3069283.
//
// Thread safety: all functions are pure and reentrant.
#ifndef VARUNA_IO_CRC32C_H_
#define VARUNA_IO_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace varuna {

// The CRC-32C of `crc`'s data followed by data[0, n). Extend(Extend(0, a), b) equals the
// CRC of a followed by b; Crc32cExtend(0, p, n) == Crc32c(p, n).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

// The portable table-driven implementation (the reference for tests).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);

// Size and CRC-32C of a whole file.
struct FileChecksum {
  uint64_t size = 0;
  uint32_t crc32c = 0;

  friend bool operator==(const FileChecksum& a, const FileChecksum& b) {
    return a.size == b.size && a.crc32c == b.crc32c;
  }
  friend bool operator!=(const FileChecksum& a, const FileChecksum& b) { return !(a == b); }
};

// Reads the file at `path` once. Errors: an errno-derived status (NotFound, ...) naming the
// file if it cannot be opened or read.
absl::StatusOr<FileChecksum> ChecksumFile(const std::string& path);

// "0x" followed by 8 lower-case hex digits, as stored in checkpoint metadata.
std::string Crc32cToHex(uint32_t crc);

}  // namespace varuna

#endif  // VARUNA_IO_CRC32C_H_
