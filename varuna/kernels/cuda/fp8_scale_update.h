// CUDA launcher of the batched delayed-scaling update (Transformer Engine's
// amax_and_scale_update over many tensors at once; varuna/kernels/fp8_linear.h states the math
// and the LibTorch side). Plain C++: raw pointers, no LibTorch types.
//
// Every entry is one tensor role's state: a float32 amax history of `history_len` entries (
// contiguous), its scale and its scale_inv (one float each), all in device memory, and the
// role's target maximum scaled_max = fp8_max * 2^-margin (computed by the caller in float32).
// One block per entry; the entries travel as kernel arguments, kFp8ScaleUpdateEntriesPerLaunch
// per launch (so the 288 roles of gpt2-355m take 3 launches, no host-to-device copy).
//
// Enqueues on `stream` and returns cudaGetLastError() after the launches (never synchronises);
// cudaSuccess without launching when count == 0; cudaErrorInvalidValue without launching for a
// negative count, history_len < 1 or a null entry pointer.
#ifndef VARUNA_KERNELS_CUDA_FP8_SCALE_UPDATE_H_
#define VARUNA_KERNELS_CUDA_FP8_SCALE_UPDATE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace varuna::kernels::cuda {

struct Fp8ScaleUpdateEntry {
  float* amax_history;  // [history_len]; [0] is the amax of the step just ended
  float* scale;         // [1]
  float* scale_inv;     // [1]
  float scaled_max;     // fp8_max * 2^-margin
};

// Entries per launch: their kernel-argument bytes stay under the 4 KiB parameter limit.
constexpr int kFp8ScaleUpdateEntriesPerLaunch = 96;

// use_max: the kMax algorithm (max over the history, NaN ignored), else kMostRecent.
cudaError_t LaunchUpdateFp8Scales(const Fp8ScaleUpdateEntry* entries, int64_t count,
                                  int64_t history_len, bool use_max, cudaStream_t stream);

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_FP8_SCALE_UPDATE_H_
