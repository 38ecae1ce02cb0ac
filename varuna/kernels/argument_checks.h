// The argument checks and dtype rules that the single-tensor ops of varuna/kernels (bias_gelu,
// bias_dropout_add, causal_softmax, layer_norm, causal_attention) share, so that they word their
// errors alike.
//
// Each check throws c10::Error "<op>: <what is wrong>; <what to do>" naming the argument; it
// returns normally when the argument is fine. Thread safety: pure functions.
#ifndef VARUNA_KERNELS_ARGUMENT_CHECKS_H_
#define VARUNA_KERNELS_ARGUMENT_CHECKS_H_

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace varuna::kernels {

// Throws "<op>: <name> is an undefined tensor" unless `t` is defined.
void CheckDefined(const at::Tensor& t, const char* op, const char* name);

// Throws "<op>: <name> is on D but <ref_name> is on D'; move them to the same device" unless
// `t` is on `ref`'s device.
void CheckSameDevice(const at::Tensor& t, const at::Tensor& ref, const char* op, const char* name,
                     const char* ref_name);

// `t` is defined and has the dtype and device of `ref`; throws naming the first that differs.
void CheckSameDtypeAndDevice(const at::Tensor& t, const at::Tensor& ref, const char* op,
                             const char* name, const char* ref_name);

// `t` (e.g. an output gradient) is defined and has the shape, dtype and device of `ref`; throws
// naming the first that differs.
void CheckLike(const at::Tensor& t, const at::Tensor& ref, const char* op, const char* name,
               const char* ref_name);

// Throws "<op>: <name> must be float32, float16, bfloat16 or float64, got D" for other dtypes.
void CheckFloatingType(const at::Tensor& t, const char* op, const char* name);

// The input of a bias op: `x` a defined floating-point [..., n] tensor and `bias` a defined [n]
// of x's dtype on x's device; throws naming the first that is not.
void CheckInputAndBias(const at::Tensor& x, const at::Tensor& bias, const char* op);

// The arithmetic type of the ops: fp32 for every dtype but float64, which stays float64.
at::ScalarType ComputeType(at::ScalarType dtype);

// True for the tensors the CUDA kernels take: CUDA tensors of float32, float16 or bfloat16
// (float64 CUDA tensors stay on the reference path with ATen's CUDA ops).
bool TakesCudaKernels(const at::Tensor& t);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_ARGUMENT_CHECKS_H_
