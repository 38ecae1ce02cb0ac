// TFRecord framing, the container of TensorBoard event files: each record is
//
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   `length` bytes of data        | uint32 masked CRC-32C of the data
//
// where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2^32) and CRC-32C is
// varuna/io/crc32c.h's. Writing is FrameRecord; reading a whole file is ReadRecords, which
// checks both checksums of every record.
//
// Thread safety: all functions are pure or touch only the named file.
#ifndef VARUNA_TRAINER_TENSORBOARD_TF_RECORD_H_
#define VARUNA_TRAINER_TENSORBOARD_TF_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace trainer::tensorboard {

// The masked CRC-32C of data[0, n).
uint32_t MaskedCrc32c(const void* data, size_t n);

// `data` framed as one record, ready to append to a file.
std::string FrameRecord(absl::string_view data);

// The data of every record in the file at `path`, in order. Errors: the file's errno status;
// DataLoss naming the file and the record's offset for a bad length or data checksum or a
// record cut short (a file that ends inside a record, as after a crash mid-write).
absl::StatusOr<std::vector<std::string>> ReadRecords(const std::string& path);

}  // namespace trainer::tensorboard

#endif  // VARUNA_TRAINER_TENSORBOARD_TF_RECORD_H_
