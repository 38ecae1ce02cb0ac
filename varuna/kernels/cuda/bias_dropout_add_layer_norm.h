// CUDA launchers of the fused bias + dropout + residual add + LayerNorm (llm.c's fused residual
// forward, Apex's / FlashAttention's dropout_add_layer_norm). Plain C++: raw pointers, no
// LibTorch types; the LibTorch side is varuna/kernels/bias_dropout_add_layer_norm.h, which states
// the math.
//
// The data are `rows` contiguous rows of `hidden` elements of x_type; bias is `hidden` elements
// of x_type; the LayerNorm's weight and bias are `hidden` elements of weight_type (x_type or
// kFloat32); mean and rstd are `rows` fp32 values; the mask is one byte (0 or 1) per element.
// All arithmetic is fp32. The residual sum is rounded to x_type before the LayerNorm reads it, so
// the LayerNorm normalises exactly the values written out (as the unfused pair does).
//
// Randomness: the mask of cuda/bias_dropout_add.h, element for element: element e (row * hidden
// + column) keeps its value when component e % 4 of curand_uniform4 of a Philox4x32-10 state
// initialised with (seed, subsequence e / 4, offset) is below keep_probability; the caller
// advances the generator's offset by kBiasDropoutAddLayerNormOffsetIncrement (the same as the
// unfused op's), so from the same generator state the fused and unfused ops draw the same mask.
//
// Layout: a group of threads (a multiple of 32) owns one row at a time, several groups per
// block for short rows; a thread keeps its at most kBiasDropoutAddLayerNormMaxHidden / 1024
// elements of the row in registers, so each input is read once. The backward keeps per-thread
// fp32 column sums (the LayerNorm's weight and bias gradients and the dropout's bias gradient)
// over the rows of its block, adds the groups of a block in a fixed order, writes one
// partial-sum row per block into an fp32 workspace, and SumPartialRowsKernel (common.cuh) adds
// those rows in a fixed order: deterministic (no atomics); the partition, and so the last bits,
// depends on the GPU's SM count. Any pointer alignment (16-byte vector accesses where the
// pointers and `hidden` allow, else scalar ones).
//
// Each launcher enqueues on `stream` and returns cudaGetLastError() after its launches (it never
// synchronises); cudaSuccess without launching when rows == 0 (the backward then writes no
// column sums: the caller zero-fills them); cudaErrorInvalidValue without launching when rows <
// 0, hidden is outside [1, kBiasDropoutAddLayerNormMaxHidden], keep_probability is not in (0,
// 1], weight_type is neither x_type nor kFloat32, or the workspace does not match
// BiasDropoutAddLayerNormBackwardPartialRows.
#ifndef VARUNA_KERNELS_CUDA_BIAS_DROPOUT_ADD_LAYER_NORM_H_
#define VARUNA_KERNELS_CUDA_BIAS_DROPOUT_ADD_LAYER_NORM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "varuna/kernels/cuda/element_type.h"

namespace varuna::kernels::cuda {

// The longest row the kernels take (1024 threads x 8 elements in registers); the LibTorch side
// runs longer rows as the unfused pair of kernels.
constexpr int64_t kBiasDropoutAddLayerNormMaxHidden = 8192;

// The Philox offset (in 32-bit values per subsequence) one forward with dropout uses: the
// unfused bias_dropout_add's.
constexpr uint64_t kBiasDropoutAddLayerNormOffsetIncrement = 4;

struct BiasDropoutAddLayerNormForwardArgs {
  ElementType x_type;
  ElementType weight_type;
  const void* x;          // [rows, hidden] x_type
  const void* bias;       // [hidden] x_type
  const void* residual;   // [rows, hidden] x_type
  const void* ln_weight;  // [hidden] weight_type
  const void* ln_bias;    // [hidden] weight_type
  void* residual_out;     // [rows, hidden] x_type, must not overlap the inputs
  void* output;           // [rows, hidden] x_type, must not overlap the inputs
  // [rows, hidden] bytes written 0/1 (dropped/kept); nullptr: no dropout (and no random numbers).
  uint8_t* mask;
  float* mean;             // [rows]
  float* rstd;             // [rows]
  float keep_probability;  // 1 - p, in (0, 1]
  uint64_t seed;           // Philox key
  uint64_t offset;         // Philox offset
  int64_t rows;
  int64_t hidden;
  float epsilon;
};

// residual_out = residual + mask * (x + bias) / keep_probability (residual + x + bias when mask
// is null), rounded to x_type; output = LayerNorm(residual_out) with mean and rstd = 1 /
// sqrt(biased variance + epsilon) also written.
cudaError_t LaunchBiasDropoutAddLayerNormForward(const BiasDropoutAddLayerNormForwardArgs& args,
                                                 cudaStream_t stream);

struct BiasDropoutAddLayerNormBackwardArgs {
  ElementType x_type;
  ElementType weight_type;
  const void* grad_output;    // [rows, hidden] x_type: the gradient of `output`
  const void* grad_residual;  // [rows, hidden] x_type, that of `residual_out`; nullptr: zero
  const void* residual_out;   // [rows, hidden] x_type, from the forward
  const float* mean;          // [rows], from the forward
  const float* rstd;          // [rows], from the forward
  const void* ln_weight;      // [hidden] weight_type
  const uint8_t* mask;        // [rows, hidden] from the forward; nullptr: no dropout
  // [rows, hidden] x_type: the gradient of `residual` (grad_residual + the LayerNorm's input
  // gradient); must not overlap the inputs.
  void* grad_residual_in;
  // [rows, hidden] x_type: the gradient of x, grad_residual_in * mask / keep_probability; unused
  // (x's gradient is grad_residual_in) when mask is null.
  void* grad_input;
  void* grad_bias;         // [hidden] x_type: the sum over rows of x's gradient
  void* grad_ln_weight;    // [hidden] weight_type
  void* grad_ln_bias;      // [hidden] weight_type
  float keep_probability;  // as in the forward
  int64_t rows;
  int64_t hidden;
};

// The number of partial-sum rows the backward of `rows` x `hidden` writes: its workspace holds
// 3 * partial_rows * hidden floats. Depends only on the sizes and the current device; returns
// the CUDA error of the device queries (cudaErrorInvalidValue for sizes the kernels refuse).
cudaError_t BiasDropoutAddLayerNormBackwardPartialRows(int64_t rows, int64_t hidden,
                                                       int* partial_rows);

// All five gradients of BiasDropoutAddLayerNormBackwardArgs in one pass over the rows (then the
// fixed-order sums of the partial rows). `workspace` (fp32, 3 * partial_rows * hidden floats, as
// aligned as an allocation) is overwritten; `partial_rows` must be what
// BiasDropoutAddLayerNormBackwardPartialRows gave for these sizes on this device.
cudaError_t LaunchBiasDropoutAddLayerNormBackward(const BiasDropoutAddLayerNormBackwardArgs& args,
                                                  float* workspace, int partial_rows,
                                                  cudaStream_t stream);

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_BIAS_DROPOUT_ADD_LAYER_NORM_H_
