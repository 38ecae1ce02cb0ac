// CUDA launchers of the multi-tensor unscale / inf check / squared L2 norm kernels (see
// varuna/kernels/multi_tensor.h for the op). Raw device pointers, no LibTorch types.
//
// Each launcher enqueues its kernel on `stream` and returns cudaGetLastError() after the
// launch (cudaErrorInvalidValue for arguments it cannot launch with). Nothing synchronises
// with the host.
#ifndef VARUNA_KERNELS_CUDA_MULTI_TENSOR_H_
#define VARUNA_KERNELS_CUDA_MULTI_TENSOR_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "varuna/kernels/cuda/chunk_table.h"

namespace varuna::kernels::cuda {

// Elements per chunk (one block each) of the multi-tensor kernels.
constexpr int64_t kMultiTensorChunkSize = 65536;

// One block per chunk of `table`, whose tensors have operand 0, the source (float32, float16 or
// bfloat16), and, when `write_destination`, operand 1, a float32 destination that receives
// float32(source) * scale (it may be the source itself). With `found_inf`, stores 1.0f there if
// any source element is inf or NaN (and never stores 0: the caller zeroes it first). With
// `partials` (table.num_chunks floats), stores in partials[b] the sum of squares of chunk b's
// values float32(source) * scale. The three supported combinations: unscale (destination +
// found_inf), norm (partials only, scale 1), both.
cudaError_t LaunchMultiTensorUnscaleNorm(const ChunkTableView& table, float scale,
                                         bool write_destination, float* found_inf, float* partials,
                                         cudaStream_t stream);

// out[0] = the sum of partials[0, count) in a fixed order (one block, deterministic); 0 when
// count is 0.
cudaError_t LaunchSumPartials(const float* partials, int64_t count, float* out,
                              cudaStream_t stream);

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_MULTI_TENSOR_H_
