// Argument checks shared by the Gloo and NCCL backends. Header-only because
// libvaruna_gloo.so uses them too. Each returns InvalidArgument naming `what`.
#ifndef VARUNA_COMM_TENSOR_CHECKS_H_
#define VARUNA_COMM_TENSOR_CHECKS_H_

#include <ATen/core/Tensor.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace varuna::comm {

// A defined, dense (strided) and contiguous tensor, the only kind a group reads or writes.
// The layout is checked first: is_contiguous() throws on sparse tensors.
inline absl::Status CheckDenseContiguous(const at::Tensor& tensor, const std::string& what) {
  if (!tensor.defined())
    return absl::InvalidArgumentError(absl::StrCat(what, ": undefined tensor"));
  if (tensor.layout() != at::kStrided) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the tensor must be dense, not ", c10::toString(tensor.layout())));
  }
  if (!tensor.is_contiguous()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the tensor must be contiguous; call .contiguous()"));
  }
  return absl::OkStatus();
}

// Whether AllReduceSum supports `dtype` on every backend.
inline bool IsSummable(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kInt:
    case at::kLong:
    case at::kChar:
    case at::kByte:
      return true;
    default:
      return false;
  }
}

// InvalidArgument saying AllReduceSum cannot sum `tensor`'s dtype.
inline absl::Status UnsummableError(const at::Tensor& tensor, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": summing dtype ", c10::toString(tensor.scalar_type()), " is not supported"));
}

inline absl::Status CheckSummable(const at::Tensor& tensor, const std::string& what) {
  return IsSummable(tensor.scalar_type()) ? absl::OkStatus() : UnsummableError(tensor, what);
}

}  // namespace varuna::comm

#endif  // VARUNA_COMM_TENSOR_CHECKS_H_
