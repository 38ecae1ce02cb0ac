// The batched delayed-scaling update (see fp8_scale_update.h here and fp8_linear.h in
// varuna/kernels for the math and the contract): one block per tensor role.
//
// A block reads the history's first entry (the step's amax), reduces the history (kMax) with
// NaN read as 0, rolls the history in place when the step recorded something, and thread 0
// writes the scale and scale_inv. The roll [h0, h1, ..., h_{n-1}] -> [0, h2, ..., h_{n-1}, h0]
// runs over chunks of blockDim.x entries in order: a chunk reads the entries one to its right
// (which no earlier chunk has written), synchronises, then writes its own.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "varuna/kernels/cuda/common.cuh"
#include "varuna/kernels/cuda/fp8_scale_update.h"

namespace varuna::kernels::cuda {
namespace {

constexpr int kBlockThreads = 256;

struct Batch {
  Fp8ScaleUpdateEntry entries[kFp8ScaleUpdateEntriesPerLaunch];
};

__global__ void __launch_bounds__(kBlockThreads)
    UpdateKernel(const Batch batch, int64_t history_len, bool use_max) {
  __shared__ float scratch[kWarpSize];
  const Fp8ScaleUpdateEntry entry = batch.entries[blockIdx.x];
  float* history = entry.amax_history;
  const float last = history[0];
  float amax = last;
  if (use_max) {
    float local = -INFINITY;
    for (int64_t i = threadIdx.x; i < history_len; i += blockDim.x) {
      const float h = history[i];
      local = fmaxf(local, isnan(h) ? 0.0f : h);
    }
    amax = BlockMax(local, scratch);
  }
  // NaN != 0: a NaN amax counts as recorded (and is not usable), as in the reference.
  const bool recorded = last != 0.0f;
  const bool usable = isfinite(amax) && amax > 0.0f && recorded;
  __syncthreads();  // every thread has read the history before the roll writes it
  if (recorded) {
    for (int64_t base = 0; base < history_len; base += blockDim.x) {
      const int64_t i = base + threadIdx.x;
      float next = 0.0f;
      if (i < history_len) next = i + 1 < history_len ? history[i + 1] : last;
      __syncthreads();
      if (i < history_len) history[i] = i == 0 ? 0.0f : next;
      __syncthreads();
    }
  }
  if (threadIdx.x == 0) {
    float scale = usable ? __fdiv_rn(entry.scaled_max, amax) : *entry.scale;
    if (isinf(scale)) scale = FLT_MAX;
    *entry.scale = scale;
    *entry.scale_inv = __fdiv_rn(1.0f, scale);
  }
}

}  // namespace

cudaError_t LaunchUpdateFp8Scales(const Fp8ScaleUpdateEntry* entries, int64_t count,
                                  int64_t history_len, bool use_max, cudaStream_t stream) {
  if (count < 0 || history_len < 1 || (count > 0 && entries == nullptr)) {
    return cudaErrorInvalidValue;
  }
  for (int64_t first = 0; first < count; first += kFp8ScaleUpdateEntriesPerLaunch) {
    const int64_t left = count - first;
    const int n = static_cast<int>(
        left < kFp8ScaleUpdateEntriesPerLaunch ? left : kFp8ScaleUpdateEntriesPerLaunch);
    Batch batch{};
    for (int i = 0; i < n; ++i) batch.entries[i] = entries[first + i];
    UpdateKernel<<<n, kBlockThreads, 0, stream>>>(batch, history_len, use_max);
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

}  // namespace varuna::kernels::cuda
