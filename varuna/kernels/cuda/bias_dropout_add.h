// CUDA launchers of the fused bias + dropout + residual add (Megatron's bias_dropout_add). Plain
// C++: raw pointers, no LibTorch types; the LibTorch side is varuna/kernels/bias_dropout_add.h,
// which states the math.
//
// The data are `rows` contiguous rows of `columns` elements of `type`; bias is `columns`
// elements of `type`; the mask is one byte (0 or 1) per element. All arithmetic is fp32.
//
// Randomness: element e (its flat index, row * columns + column) keeps its value when
// u_e < keep_probability, where u_e is component e % 4 of curand_uniform4 of a Philox4x32-10
// state initialised with (seed, subsequence e / 4, offset). So the mask depends only on
// (seed, offset, e), not on the grid, the device or the vector width, and each subsequence
// uses 4 values from `offset` (the caller advances the generator's offset by
// kBiasDropoutAddOffsetIncrement).
//
// The backward fuses grad_input with the bias gradient: each block keeps fp32 column sums of the
// grad_input it computes over its rows and writes them as one partial-sum row of an fp32
// workspace, which a second kernel reduces in a fixed order. Deterministic (no atomics). Any
// pointer alignment (16-byte vector accesses where the pointers and `columns` allow, else scalar
// ones).
//
// Each launcher enqueues on `stream` and returns cudaGetLastError() after its launches (it
// never synchronises); cudaSuccess without launching when rows == 0 or columns == 0 (the
// backward then writes no bias gradient: the caller zero-fills it); cudaErrorInvalidValue
// without launching when rows or columns is negative, keep_probability is not in (0, 1], or the
// workspace does not match BiasDropoutAddBackwardPartialRows.
#ifndef VARUNA_KERNELS_CUDA_BIAS_DROPOUT_ADD_H_
#define VARUNA_KERNELS_CUDA_BIAS_DROPOUT_ADD_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "varuna/kernels/cuda/element_type.h"

namespace varuna::kernels::cuda {

// The Philox offset (in 32-bit values per subsequence) one forward with dropout uses.
constexpr uint64_t kBiasDropoutAddOffsetIncrement = 4;

struct BiasDropoutAddForwardArgs {
  ElementType type;
  const void* x;         // [rows, columns]
  const void* bias;      // [columns]
  const void* residual;  // [rows, columns]
  void* output;          // [rows, columns], must not overlap the inputs
  // [rows, columns] bytes written 0/1 (dropped/kept); nullptr: no dropout (and no random
  // numbers): output = residual + x + bias.
  uint8_t* mask;
  float keep_probability;  // 1 - p, in (0, 1]; kept values are scaled by 1 / keep_probability
  uint64_t seed;           // Philox key
  uint64_t offset;         // Philox offset
  int64_t rows;
  int64_t columns;
};

// output = residual + mask * (x + bias) / keep_probability, the mask drawn as above (or
// output = residual + x + bias when args.mask is null).
cudaError_t LaunchBiasDropoutAddForward(const BiasDropoutAddForwardArgs& args, cudaStream_t stream);

struct BiasDropoutAddBackwardArgs {
  ElementType type;
  const void* grad_output;  // [rows, columns]
  // [rows, columns] bytes of the forward's mask; nullptr: no dropout (grad_input is then
  // grad_output itself, and only the bias gradient is computed).
  const uint8_t* mask;
  void* grad_input;  // [rows, columns], must not overlap the inputs; unused when mask is null
  void* grad_bias;   // [columns]
  float keep_probability;
  int64_t rows;
  int64_t columns;
};

// The number of partial-sum rows the backward writes for `args`: its workspace holds
// partial_rows * columns floats. Depends on the sizes, the pointers' alignment and the current
// device; returns the CUDA error of the device queries.
cudaError_t BiasDropoutAddBackwardPartialRows(const BiasDropoutAddBackwardArgs& args,
                                              int* partial_rows);

// grad_input = grad_output * mask / keep_probability (when mask is not null) and grad_bias = the
// sum over rows of grad_input (of grad_output when mask is null). `workspace` (fp32,
// partial_rows * columns floats) is overwritten; `partial_rows` must be what
// BiasDropoutAddBackwardPartialRows gave for the same args on this device.
cudaError_t LaunchBiasDropoutAddBackward(const BiasDropoutAddBackwardArgs& args, float* workspace,
                                         int partial_rows, cudaStream_t stream);

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_BIAS_DROPOUT_ADD_H_
