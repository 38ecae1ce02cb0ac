// CUDA launchers of the fused bias + GeLU (tanh approximation; Megatron's bias_gelu). Plain C++:
// raw pointers, no LibTorch types; the LibTorch side is varuna/kernels/bias_gelu.h, which states
// the math.
//
// The data are `rows` contiguous rows of `columns` elements of `type`; bias is `columns`
// elements of `type`. All arithmetic is fp32. The backward fuses grad_input with the bias
// gradient: each block keeps fp32 column sums of the grad_input it writes over its rows and
// writes them as one partial-sum row of an fp32 workspace, which a second kernel reduces in a
// fixed order. Deterministic (no atomics). Any pointer alignment (16-byte vector accesses where
// the pointers and `columns` allow, else scalar ones).
//
// Each launcher enqueues on `stream` and returns cudaGetLastError() after its launches (it
// never synchronises); cudaSuccess without launching when rows == 0 or columns == 0 (the
// backward then writes no bias gradient: the caller zero-fills it); cudaErrorInvalidValue
// without launching when rows or columns is negative or the workspace does not match
// BiasGeluBackwardPartialRows.
#ifndef VARUNA_KERNELS_CUDA_BIAS_GELU_H_
#define VARUNA_KERNELS_CUDA_BIAS_GELU_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "varuna/kernels/cuda/element_type.h"

namespace varuna::kernels::cuda {

// output = gelu(x + bias) per element (bias broadcast over rows); x, output: [rows, columns];
// output must not overlap the inputs.
cudaError_t LaunchBiasGeluForward(ElementType type, const void* x, const void* bias, void* output,
                                  int64_t rows, int64_t columns, cudaStream_t stream);

struct BiasGeluBackwardArgs {
  ElementType type;
  const void* grad_output;  // [rows, columns]
  const void* x;            // [rows, columns]
  const void* bias;         // [columns]
  void* grad_input;         // [rows, columns], must not overlap the inputs
  void* grad_bias;          // [columns]
  int64_t rows;
  int64_t columns;
};

// The number of partial-sum rows the backward writes for `args`: its workspace holds
// partial_rows * columns floats. Depends on the sizes, the pointers' alignment and the current
// device; returns the CUDA error of the device queries.
cudaError_t BiasGeluBackwardPartialRows(const BiasGeluBackwardArgs& args, int* partial_rows);

// grad_input = grad_output * gelu'(x + bias) and grad_bias = its sum over rows. `workspace`
// (fp32, partial_rows * columns floats) is overwritten; `partial_rows` must be what
// BiasGeluBackwardPartialRows gave for the same args on this device.
cudaError_t LaunchBiasGeluBackward(const BiasGeluBackwardArgs& args, float* workspace,
                                   int partial_rows, cudaStream_t stream);

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_BIAS_GELU_H_
