// CUDA launcher of the fused FP8 quantisation (varuna/kernels/fp8_linear.h states the math and
// the LibTorch side). Plain C++: raw pointers, no LibTorch types.
//
// One pass over a contiguous [rows, columns] input of `type`: every element is converted to fp32,
// multiplied by *scale (read from device memory, so no host synchronisation), clamped to
// +-fp8_max and rounded to nearest even into the float8 `encoding` (bytes equal to LibTorch's
// float8 casts: NaN stays NaN, with the sign of the product; +-0 keeps its sign). The same pass
// reduces max |x| (NaN ignored, inf kept) per block and folds it into *amax as fmaxf(*amax,
// block max) by a compare-and-swap loop (so a NaN already in *amax is replaced, as at::fmax
// does). Optionally (output_t not null) it also writes the transposed [columns, rows] copy of
// the result (Transformer Engine's cast-transpose) from a shared-memory tile; with it, and where
// QuantizeFp8FusesColumnSums says so, the same pass sums each column of the input in fp32
// (column_sums not null: Transformer Engine's cast-transpose-dbias, the bias gradient of the
// backward's dY): one fp32 partial sum per 64-row tile and column into column_partials, then a
// second kernel adds the tiles' rows in order and writes the sums in the input's type, so the
// result depends only on the shape (no atomics). Optionally (scale_inv_out not null) the first
// block copies *scale_inv into *scale_inv_out: the dequantisation factor this quantisation used,
// kept for the backward without a separate copy.
//
// Enqueues on `stream` and returns cudaGetLastError() after the launch (never synchronises);
// cudaSuccess without launching when rows * columns == 0; cudaErrorInvalidValue without
// launching for negative sizes or null pointers.
#ifndef VARUNA_KERNELS_CUDA_FP8_QUANTIZE_H_
#define VARUNA_KERNELS_CUDA_FP8_QUANTIZE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "varuna/kernels/cuda/element_type.h"

namespace varuna::kernels::cuda {

// The float8 encodings: E4M3 (fn: no inf, max 448) and E5M2 (max 57344).
enum class Fp8Encoding { kE4M3, kE5M2 };

struct Fp8QuantizeArgs {
  ElementType type;
  Fp8Encoding encoding;
  const void* input;  // [rows, columns], contiguous
  int64_t rows;
  int64_t columns;
  const float* scale;                // one float on the device
  float* amax;                       // one float on the device: becomes fmaxf(*amax, max |input|)
  uint8_t* output;                   // [rows, columns] float8 bytes; must not overlap the input
  uint8_t* output_t;                 // [columns, rows] float8 bytes, or null for no transposed copy
  const float* scale_inv = nullptr;  // one float on the device, read when scale_inv_out is set
  float* scale_inv_out = nullptr;    // one float on the device, or null
  void* column_sums = nullptr;       // [columns] of `type`, or null for no column sums
  float* column_partials = nullptr;  // [ColumnSumTiles(rows), columns] fp32 workspace
};

// The rows of the column_partials workspace: one per 64-row tile.
int64_t ColumnSumTiles(int64_t rows);

// Whether LaunchQuantizeFp8 can sum the columns in its pass for these arguments (a transposed
// copy, rows and columns multiples of 4, the input aligned to 4 elements and both outputs to 4
// bytes: every Fp8Linear operand in practice); where not, a caller computes the sums otherwise
// and passes column_sums = null.
bool QuantizeFp8FusesColumnSums(const Fp8QuantizeArgs& args);

// cudaErrorInvalidValue without launching when column_sums is set but
// QuantizeFp8FusesColumnSums is false or column_partials is null, or scale_inv_out is set
// without scale_inv. An empty input launches nothing: scale_inv_out and column_sums are then
// not written (the caller fills them).
cudaError_t LaunchQuantizeFp8(const Fp8QuantizeArgs& args, cudaStream_t stream);

}  // namespace varuna::kernels::cuda

#endif  // VARUNA_KERNELS_CUDA_FP8_QUANTIZE_H_
