// CUDA launcher of the fused multi-tensor Adam (AdamW) step (see varuna/kernels/fused_adam.h
// for the op). Raw device pointers, no LibTorch types.
#ifndef VARUNA_KERNELS_CUDA_FUSED_ADAM_H_
#define VARUNA_KERNELS_CUDA_FUSED_ADAM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "varuna/kernels/cuda/chunk_table.h"

namespace varuna::kernels::cuda {

// Elements per chunk (one block each) of the Adam kernel.
constexpr int64_t kFusedAdamChunkSize = 65536;

// The step's constants, computed on the host in double and rounded to float.
struct AdamKernelArgs {
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float rsqrt_bias_correction2;  // 1 / sqrt(1 - beta2^t)
  float eps;
  float decay_factor;   // 1 - lr * weight_decay, applied where the tensor's option is 1
  float neg_step_size;  // -lr / (1 - beta1^t)
  float grad_scale;     // multiplies every gradient first
};

// One block per chunk of `table`, whose tensor t has operands 0 master (float32, updated),
// 1 gradient (float32, read only), 2 exp_avg and 3 exp_avg_sq (float32, updated) and, when
// present, 4 a model copy (float32, float16 or bfloat16) that receives the updated master
// rounded to its type; all distinct and non-overlapping. Option 1 applies weight decay. When
// `skip` is non-null and *skip != 0 (read on the device), nothing is written. When `grad_scale`
// is non-null, *grad_scale (read on the device) replaces args.grad_scale. Enqueued on
// `stream`; returns cudaGetLastError() after the launch (cudaErrorInvalidValue for a table it
// cannot launch).
cudaError_t LaunchFusedAdam(const ChunkTableView& table, const AdamKernelArgs& args,
                            const float* skip, const float* grad_scale, cudaStream_t stream);

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_FUSED_ADAM_H_
