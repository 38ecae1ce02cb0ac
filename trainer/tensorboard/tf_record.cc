#include "trainer/tensorboard/tf_record.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "varuna/io/crc32c.h"
#include "varuna/io/posix_file.h"

namespace trainer::tensorboard {
namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8u;
constexpr size_t kHeaderBytes = sizeof(uint64_t) + sizeof(uint32_t);
constexpr size_t kFooterBytes = sizeof(uint32_t);

void AppendLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t LoadLittleEndian(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

}  // namespace

uint32_t MaskedCrc32c(const void* data, size_t n) {
  const uint32_t crc = varuna::Crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string FrameRecord(absl::string_view data) {
  std::string record;
  record.reserve(kHeaderBytes + data.size() + kFooterBytes);
  AppendLittleEndian(record, data.size(), 8);
  AppendLittleEndian(record, MaskedCrc32c(record.data(), 8), 4);
  record.append(data.data(), data.size());
  AppendLittleEndian(record, MaskedCrc32c(data.data(), data.size()), 4);
  return record;
}

absl::StatusOr<std::vector<std::string>> ReadRecords(const std::string& path) {
  absl::StatusOr<std::string> content = varuna::ReadFileToString(path);
  if (!content.ok()) return content.status();
  std::vector<std::string> records;
  size_t offset = 0;
  while (offset < content->size()) {
    const char* at = content->data() + offset;
    const size_t left = content->size() - offset;
    auto broken = [&](const std::string& what) {
      return absl::DataLossError(absl::StrCat(path, ": the record at byte ", offset, " ", what,
                                              " (a file cut short by a crash ends this way)"));
    };
    if (left < kHeaderBytes) return broken("is cut short inside its header");
    const uint64_t length = LoadLittleEndian(at, 8);
    if (static_cast<uint32_t>(LoadLittleEndian(at + 8, 4)) != MaskedCrc32c(at, 8)) {
      return broken("has a bad length checksum");
    }
    if (length > left - kHeaderBytes || left - kHeaderBytes - length < kFooterBytes) {
      return broken(absl::StrCat("is cut short: it holds ", length, " bytes, the file ",
                                 left - kHeaderBytes, " more"));
    }
    const char* data = at + kHeaderBytes;
    if (static_cast<uint32_t>(LoadLittleEndian(data + length, 4)) != MaskedCrc32c(data, length)) {
      return broken("has a bad data checksum");
    }
    records.emplace_back(data, length);
    offset += kHeaderBytes + length + kFooterBytes;
  }
  return records;
}

}  // namespace trainer::tensorboard
