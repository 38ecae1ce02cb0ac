// NumPy .npy files of integers: the format Megatron-LM stores its GPT sample index in
// (np.save / np.load), so index caches written here load in NumPy and caches written by
// Megatron load here.
//
// Format (numpy/lib/format.py): "\x93NUMPY", major and minor version bytes, the header
// length (uint16 little-endian for version 1.0; uint32 for 2.0 and 3.0), then a Python dict
// literal {'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), } padded with spaces
// and ended by '\n' so that the data starts at a multiple of 64 bytes, then the elements in
// C order.
//
// Reading accepts versions 1.0, 2.0 and 3.0, any key order, quoting and padding NumPy may
// write (also Python 2's "3L" shape entries), the element types '<i4', '<u4', '<i8' and
// '<u8', and fortran_order True only for arrays of at most one dimension (where it is the
// same layout). Writing produces exactly what the current NumPy writes for version 1.0.
// This code assumes a little-endian host (x86-64, aarch64).
#ifndef DATA_NPY_H_
#define DATA_NPY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace data {

enum class NpyDtype { kInt32, kUInt32, kInt64, kUInt64 };

// The descr string: "<i4", "<u4", "<i8", "<u8".
const char* NpyDescr(NpyDtype dtype);
// 4 or 8.
int NpyItemSize(NpyDtype dtype);

template <typename T>
struct NpyDtypeOf;
template <>
struct NpyDtypeOf<int32_t> {
  static constexpr NpyDtype value = NpyDtype::kInt32;
};
template <>
struct NpyDtypeOf<uint32_t> {
  static constexpr NpyDtype value = NpyDtype::kUInt32;
};
template <>
struct NpyDtypeOf<int64_t> {
  static constexpr NpyDtype value = NpyDtype::kInt64;
};
template <>
struct NpyDtypeOf<uint64_t> {
  static constexpr NpyDtype value = NpyDtype::kUInt64;
};

// What a header says.
struct NpyHeader {
  NpyDtype dtype = NpyDtype::kInt32;
  std::vector<int64_t> shape;
  // Byte offset of the first element in the file.
  int64_t data_offset = 0;
};

// Parses the start of a .npy file (`bytes` may hold more than the header). `name` (a file
// name) goes into error messages. Returns InvalidArgument (bad magic, version, dict syntax,
// unsupported descr, big-endian data, Fortran order of a 2-D array, ...) saying what is wrong.
absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, const std::string& name);

// The preamble NumPy's np.save writes (version 1.0) for an array of `dtype` and `shape`:
// magic, version, length, dict, padding and '\n'; its length is a multiple of 64.
std::string NpyHeaderBytes(NpyDtype dtype, const std::vector<int64_t>& shape);

// A read-only array of integers: a memory-mapped .npy file (pages shared by every process
// that maps it), or values handed over in memory. Cheap to copy (copies share the storage).
// Immutable after construction: safe to use from several threads.
class NpyArray {
 public:
  NpyArray() = default;

  // Maps `path` (varuna::MappedFile) and validates its header and size. Errors name the
  // file: the errno's status if it cannot be mapped (NotFound if it does not exist,
  // PermissionDenied if it may not be read, ...), InvalidArgument/DataLoss for a bad header
  // or a size that does not match the header (a truncated file).
  static absl::StatusOr<NpyArray> Load(const std::string& path);

  // Takes `values` (C order) with `shape`; values.size() must equal the shape's product.
  template <typename T>
  static NpyArray FromVector(std::vector<T> values, std::vector<int64_t> shape) {
    auto owned = std::make_shared<std::vector<T>>(std::move(values));
    NpyArray array;
    array.dtype_ = NpyDtypeOf<T>::value;
    array.shape_ = std::move(shape);
    array.size_ = static_cast<int64_t>(owned->size());
    array.data_ = std::shared_ptr<const void>(owned, owned->data());
    return array;
  }

  NpyDtype dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  // Number of elements (product of the shape).
  int64_t size() const { return size_; }
  // The elements, C order, typed as dtype().
  const void* data() const { return data_.get(); }

  // Element i (flat, C order) widened to int64; a uint64 above INT64_MAX wraps to negative.
  // Precondition 0 <= i < size() (unchecked).
  int64_t Get(int64_t i) const {
    switch (dtype_) {
      case NpyDtype::kInt32:
        return static_cast<const int32_t*>(data_.get())[i];
      case NpyDtype::kUInt32:
        return static_cast<const uint32_t*>(data_.get())[i];
      case NpyDtype::kInt64:
        return static_cast<const int64_t*>(data_.get())[i];
      case NpyDtype::kUInt64:
        return static_cast<int64_t>(static_cast<const uint64_t*>(data_.get())[i]);
    }
    return 0;
  }

 private:
  NpyDtype dtype_ = NpyDtype::kInt32;
  std::vector<int64_t> shape_;
  int64_t size_ = 0;
  std::shared_ptr<const void> data_;
};

// Writes `array` to `path` as a version 1.0 .npy file, atomically: the bytes go to a new
// temporary file in the same directory (unique per writer), which is flushed to disk and
// renamed over `path`. Concurrent writers and readers therefore never see a partial file,
// and a failed write leaves `path` as it was. Returns an error naming the path (e.g. the
// directory does not exist or is read-only).
absl::Status WriteNpy(const std::string& path, const NpyArray& array);

}  // namespace data

#endif  // DATA_NPY_H_
