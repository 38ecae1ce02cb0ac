// CUDA launchers of the fused LayerNorm over the last dimension (Apex's FusedLayerNorm /
// MixedFusedLayerNorm). Plain C++: raw pointers, no LibTorch types; the LibTorch side is
// varuna/kernels/layer_norm.h, which states the math.
//
// The data are `rows` contiguous rows of `hidden` elements of x_type; weight and bias are
// `hidden` elements of weight_type, which is x_type or kFloat32. mean and rstd are `rows` fp32
// values. All arithmetic is fp32. The kernels are deterministic (no atomics; the weight and
// bias gradients are per-block partial column sums in an fp32 workspace reduced by a second
// kernel in a fixed order) and take any pointer alignment (16-byte vector accesses where the
// pointers and `hidden` allow, else scalar ones).
//
// Each launcher enqueues on `stream` and returns cudaGetLastError() after its launches (it
// never synchronises); cudaSuccess without launching when rows == 0 (the backward then writes
// no gradient: the caller zero-fills grad_weight and grad_bias); cudaErrorInvalidValue without
// launching when rows < 0, hidden is outside [1, INT_MAX], weight_type is neither x_type nor
// kFloat32, or the workspace does not match LayerNormBackwardPartialRows.
#ifndef VARUNA_KERNELS_CUDA_LAYER_NORM_H_
#define VARUNA_KERNELS_CUDA_LAYER_NORM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "varuna/kernels/cuda/element_type.h"

namespace varuna::kernels::cuda {

// Rows up to this many elements stay in registers in the forward (x is read once); longer rows
// are read three times (the second and third reads mostly hit L2).
constexpr int64_t kLayerNormForwardRegisterHidden = 16384;
// Rows up to this many elements stay in registers in the backward (dy and x are read once and
// each block keeps its weight/bias partial sums in registers); longer rows are read twice and
// their partial sums are accumulated in the workspace in global memory.
constexpr int64_t kLayerNormBackwardRegisterHidden = 8192;

struct LayerNormForwardArgs {
  ElementType x_type;
  ElementType weight_type;
  const void* x;       // [rows, hidden] x_type
  const void* weight;  // [hidden] weight_type
  const void* bias;    // [hidden] weight_type
  void* output;        // [rows, hidden] x_type, must not overlap the inputs
  float* mean;         // [rows]
  float* rstd;         // [rows]
  int64_t rows;
  int64_t hidden;
  float epsilon;
};

// output = (x - mean) * rstd * weight + bias per row, with mean and rstd = 1 / sqrt(biased
// variance + epsilon) also written.
cudaError_t LaunchLayerNormForward(const LayerNormForwardArgs& args, cudaStream_t stream);

struct LayerNormBackwardArgs {
  ElementType x_type;
  ElementType weight_type;
  const void* grad_output;  // [rows, hidden] x_type
  const void* x;            // [rows, hidden] x_type
  const float* mean;        // [rows], from the forward
  const float* rstd;        // [rows], from the forward
  const void* weight;       // [hidden] weight_type
  void* grad_input;         // [rows, hidden] x_type, must not overlap the inputs
  void* grad_weight;        // [hidden] weight_type
  void* grad_bias;          // [hidden] weight_type
  int64_t rows;
  int64_t hidden;
};

// The number of partial-sum rows the backward of `rows` x `hidden` writes: its workspace holds
// 2 * partial_rows * hidden floats (weight partials, then bias partials). Depends only on the
// sizes and the current device; returns the CUDA error of the device queries.
cudaError_t LayerNormBackwardPartialRows(int64_t rows, int64_t hidden, int* partial_rows);

// grad_input, grad_weight and grad_bias (see layer_norm.h). `workspace` (fp32, 2 *
// partial_rows * hidden floats; as aligned as an allocation, for the vector path) is overwritten;
// `partial_rows` must be the value LayerNormBackwardPartialRows gave for these sizes on this
// device.
cudaError_t LaunchLayerNormBackward(const LayerNormBackwardArgs& args, float* workspace,
                                    int partial_rows, cudaStream_t stream);

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_LAYER_NORM_H_
