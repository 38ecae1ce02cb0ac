#include "varuna/kernels/argument_checks.h"

#include <c10/util/Exception.h>

namespace varuna::kernels {

void CheckDefined(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
}

void CheckSameDevice(const at::Tensor& t, const at::Tensor& ref, const char* op, const char* name,
                     const char* ref_name) {
  TORCH_CHECK(t.device() == ref.device(), op, ": ", name, " is on ", t.device(), " but ", ref_name,
              " is on ", ref.device(), "; move them to the same device");
}

void CheckSameDtypeAndDevice(const at::Tensor& t, const at::Tensor& ref, const char* op,
                             const char* name, const char* ref_name) {
  CheckDefined(t, op, name);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), op, ": ", name, " is ", t.scalar_type(),
              " but ", ref_name, " is ", ref.scalar_type(), "; they must have the same dtype");
  CheckSameDevice(t, ref, op, name, ref_name);
}

void CheckLike(const at::Tensor& t, const at::Tensor& ref, const char* op, const char* name,
               const char* ref_name) {
  CheckDefined(t, op, name);
  TORCH_CHECK(t.sizes() == ref.sizes(), op, ": ", name, " has shape ", t.sizes(), " but ", ref_name,
              " has shape ", ref.sizes(), "; they must match");
  CheckSameDtypeAndDevice(t, ref, op, name, ref_name);
}

void CheckFloatingType(const at::Tensor& t, const char* op, const char* name) {
  const at::ScalarType dtype = t.scalar_type();
  TORCH_CHECK(
      dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kDouble,
      op, ": ", name, " must be float32, float16, bfloat16 or float64, got ", dtype);
}

at::ScalarType ComputeType(at::ScalarType dtype) {
  return dtype == at::kDouble ? at::kDouble : at::kFloat;
}

bool TakesCudaKernels(const at::Tensor& t) { return t.is_cuda() && t.scalar_type() != at::kDouble; }

void CheckInputAndBias(const at::Tensor& x, const at::Tensor& bias, const char* op) {
  CheckDefined(x, op, "x");
  CheckDefined(bias, op, "bias");
  TORCH_CHECK(x.dim() >= 1, op, ": x must have shape [..., n], got a 0-dim tensor");
  CheckFloatingType(x, op, "x");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(-1), op, ": bias has shape ", bias.sizes(),
              " but x has shape ", x.sizes(), "; bias must be [n] = [", x.size(-1), "]");
  TORCH_CHECK(bias.scalar_type() == x.scalar_type(), op, ": bias is ", bias.scalar_type(),
              " but x is ", x.scalar_type(), "; they must have the same dtype");
  CheckSameDevice(bias, x, op, "bias", "x");
}

}  // namespace varuna::kernels
