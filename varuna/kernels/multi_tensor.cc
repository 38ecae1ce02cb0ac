#include "varuna/kernels/multi_tensor.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#ifdef VARUNA_WITH_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>

#include "varuna/kernels/chunk_table.h"
#include "varuna/kernels/cuda/multi_tensor.h"
#include "varuna/kernels/cuda_launch.h"
#endif

namespace varuna::kernels {
namespace {

// What one call computes: destination writes, the inf/NaN flag, the sum of squares.
struct Work {
  bool write = false;
  bool check = false;
  bool norm = false;
};

bool IsSourceType(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16;
}

void CheckTensor(const at::Tensor& tensor, const char* op, const char* list, size_t i,
                 const c10::Device& device) {
  TORCH_CHECK(tensor.defined(), op, ": ", list, "[", i, "] is undefined");
  TORCH_CHECK(tensor.device() == device, op, ": ", list, "[", i, "] is on ", tensor.device(),
              " but the first tensor is on ", device, "; put all tensors on one device");
  TORCH_CHECK(tensor.is_contiguous(), op, ": ", list, "[", i,
              "] is not contiguous; pass tensor.contiguous()");
}

// Checks the arguments (destination: null for the norm alone) and returns their device.
c10::Device CheckArguments(const std::vector<at::Tensor>& source,
                           const std::vector<at::Tensor>* destination, const char* op) {
  const char* sources = destination != nullptr ? "source" : "tensors";
  if (destination != nullptr) {
    TORCH_CHECK(source.size() == destination->size(), op, ": ", source.size(), " sources but ",
                destination->size(), " destinations; pass one destination per source");
  }
  if (source.empty()) return c10::Device(c10::kCPU);
  TORCH_CHECK(source[0].defined(), op, ": ", sources, "[0] is undefined");
  const c10::Device device = source[0].device();
  for (size_t i = 0; i < source.size(); ++i) {
    CheckTensor(source[i], op, sources, i, device);
    TORCH_CHECK(IsSourceType(source[i].scalar_type()), op, ": ", sources, "[", i, "] is ",
                source[i].scalar_type(), "; the op takes float32, float16 or bfloat16");
    if (destination == nullptr) continue;
    const at::Tensor& out = (*destination)[i];
    CheckTensor(out, op, "destination", i, device);
    TORCH_CHECK(out.scalar_type() == at::kFloat, op, ": destination[", i, "] is ",
                out.scalar_type(), "; destinations must be float32");
    TORCH_CHECK(out.numel() == source[i].numel(), op, ": destination[", i, "] has ", out.numel(),
                " elements but source[", i, "] has ", source[i].numel());
  }
  return device;
}

// The LibTorch reference: the same math per tensor with ATen ops in fp32.
UnscaleNormResult UnscaleNormReference(const std::vector<at::Tensor>& source,
                                       const std::vector<at::Tensor>* destination, double scale,
                                       const Work& work, const c10::Device& device) {
  const at::TensorOptions f32 = at::TensorOptions().device(device).dtype(at::kFloat);
  // The flag stays a tensor (no read back to the host), as on CUDA.
  at::Tensor found = at::zeros({1}, f32);
  at::Tensor sum = at::zeros({1}, f32);
  for (size_t i = 0; i < source.size(); ++i) {
    const at::Tensor& x = source[i];
    if (x.numel() == 0) continue;
    // Before the write: the destination may be the source.
    if (work.check)
      found = at::maximum(found, at::logical_not(at::isfinite(x)).any().to(at::kFloat));
    at::Tensor unscaled;
    if (work.write) {
      const at::Tensor& out = (*destination)[i];
      if (!out.is_same(x)) out.view({-1}).copy_(x.view({-1}));
      if (scale != 1.0) out.mul_(scale);  // Rounds scale to float32, as the kernel does.
      unscaled = out;
    } else {
      unscaled = x.to(at::kFloat);
    }
    if (work.norm) sum.add_(unscaled.square().sum());
  }
  UnscaleNormResult result;
  if (work.check) result.found_inf = found;
  if (work.norm) result.sum_of_squares = sum;
  return result;
}

#ifdef VARUNA_WITH_CUDA_KERNELS
UnscaleNormResult UnscaleNormCuda(const std::vector<at::Tensor>& source,
                                  const std::vector<at::Tensor>* destination, double scale,
                                  const Work& work, const c10::Device& device, const char* op) {
  const c10::cuda::CUDAGuard guard(device);
  std::vector<std::vector<at::Tensor>> operands;
  operands.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (work.write) {
      operands.push_back({source[i], (*destination)[i]});
    } else {
      operands.push_back({source[i]});
    }
  }
  const ChunkTable table(operands, {}, cuda::kMultiTensorChunkSize, op, /*pinned=*/true);
  const at::TensorOptions f32 = at::TensorOptions().device(device).dtype(at::kFloat);
  UnscaleNormResult result;
  if (work.check) result.found_inf = at::zeros({1}, f32);
  if (table.num_chunks() == 0) {
    if (work.norm) result.sum_of_squares = at::zeros({1}, f32);
    return result;
  }
  const cudaStream_t stream = CurrentCudaStream(source[0]);
  const at::Tensor on_device =
      table.host().to(at::TensorOptions().device(device), /*non_blocking=*/true);
  at::Tensor partials;
  if (work.norm) {
    partials = at::empty({table.num_chunks()}, f32);
    result.sum_of_squares = at::empty({1}, f32);
  }
  CheckCuda(cuda::LaunchMultiTensorUnscaleNorm(
                table.ViewOf(on_device), static_cast<float>(work.write ? scale : 1.0), work.write,
                work.check ? result.found_inf.data_ptr<float>() : nullptr,
                work.norm ? partials.data_ptr<float>() : nullptr, stream),
            op);
  if (work.norm) {
    CheckCuda(cuda::LaunchSumPartials(partials.data_ptr<float>(), table.num_chunks(),
                                      result.sum_of_squares.data_ptr<float>(), stream),
              op);
  }
  return result;
}
#endif

UnscaleNormResult UnscaleNorm(const std::vector<at::Tensor>& source,
                              const std::vector<at::Tensor>* destination, double scale,
                              const Work& work, const char* op) {
  const c10::Device device = CheckArguments(source, destination, op);
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (device.is_cuda()) return UnscaleNormCuda(source, destination, scale, work, device, op);
#endif
  return UnscaleNormReference(source, destination, scale, work, device);
}

}  // namespace

at::Tensor MultiTensorUnscale(const std::vector<at::Tensor>& source,
                              const std::vector<at::Tensor>& destination, double scale) {
  return UnscaleNorm(source, &destination, scale, Work{true, true, false}, "MultiTensorUnscale")
      .found_inf;
}

at::Tensor MultiTensorL2NormSquared(const std::vector<at::Tensor>& tensors) {
  return UnscaleNorm(tensors, nullptr, 1.0, Work{false, false, true}, "MultiTensorL2NormSquared")
      .sum_of_squares;
}

UnscaleNormResult MultiTensorUnscaleL2NormSquared(const std::vector<at::Tensor>& source,
                                                  const std::vector<at::Tensor>& destination,
                                                  double scale) {
  return UnscaleNorm(source, &destination, scale, Work{true, true, true},
                     "MultiTensorUnscaleL2NormSquared");
}

}  // namespace varuna::kernels
