// Fused FP8 quantisation kernels (see fp8_quantize.h here and fp8_linear.h in varuna/kernels for
// the math and the contract).
//
// Without a transpose: elementwise over chunks of kVec elements (one 16-byte load where the
// pointers and the size allow), grid-stride over about one wave of blocks, kVec bytes stored at
// once. With a transpose: tiles, grid-stride over about one wave of blocks; a block reads a
// tile row-major (coalesced), writes the float8 bytes of the tile row-major and keeps them in
// shared memory, then writes them column-major into the transposed output (coalesced along its
// rows): 64 x 64 tiles moved in 4-element vectors where rows, columns and the pointers allow
// (every Fp8Linear operand), else 32 x 32 tiles of single elements. All kernels keep the per-thread
// max |x| in a register and fold the block's max into *amax once at the end, so the atomics number
// about one wave of blocks, not one per element. The vectorised cast-transpose can also sum the
// input's columns (the backward's bias gradient): each thread keeps the fp32 sums of its 4
// columns over its 4 rows of the tile, the block adds the 16 thread rows of each column in order
// in shared memory and writes the tile's partial row; SumPartialRowsKernel (common.cuh) adds the
// partial rows in order.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "varuna/kernels/cuda/common.cuh"
#include "varuna/kernels/cuda/fp8_quantize.h"

namespace varuna::kernels::cuda {
namespace {

constexpr int kBlockThreads = 256;
constexpr int kTile = 32;
constexpr int kTileRows = kBlockThreads / kTile;  // thread rows of a tile block

template <Fp8Encoding kEncoding>
struct Fp8Traits;
template <>
struct Fp8Traits<Fp8Encoding::kE4M3> {
  static constexpr float kMax = 448.0f;
  static constexpr __nv_fp8_interpretation_t kInterpretation = __NV_E4M3;
};
template <>
struct Fp8Traits<Fp8Encoding::kE5M2> {
  static constexpr float kMax = 57344.0f;
  static constexpr __nv_fp8_interpretation_t kInterpretation = __NV_E5M2;
};

// The float8 byte of the product v = fp32(x) * scale, as LibTorch's clamp and float8 cast make
// it: NaN -> 0x7F with v's sign bit (LibTorch's NaN byte for both encodings), otherwise clamp to
// +-fp8_max (so +-inf saturates) and round to nearest even; a zero result keeps v's sign.
template <Fp8Encoding kEncoding>
__device__ __forceinline__ uint8_t ToFp8(float v) {
  const uint8_t sign = static_cast<uint8_t>((__float_as_uint(v) >> 24) & 0x80u);
  if (isnan(v)) return static_cast<uint8_t>(0x7Fu | sign);
  constexpr float kMax = Fp8Traits<kEncoding>::kMax;
  const float clamped = fminf(fmaxf(v, -kMax), kMax);
  const uint8_t q = static_cast<uint8_t>(
      __nv_cvt_float_to_fp8(clamped, __NV_SATFINITE, Fp8Traits<kEncoding>::kInterpretation));
  return (q & 0x7Fu) == 0 ? sign : q;
}

// *address = fmaxf(*address, value), atomically: a compare-and-swap loop on the float's bits
// (fmaxf ignores a NaN on either side, as at::fmax does; a plain atomicMax on the bits would
// keep a NaN already there). Returns without an atomic when the value is not larger.
__device__ __forceinline__ void AtomicFmax(float* address, float value) {
  unsigned int* bits = reinterpret_cast<unsigned int*>(address);
  unsigned int old = *reinterpret_cast<volatile unsigned int*>(bits);
  while (true) {
    const unsigned int next = __float_as_uint(fmaxf(__uint_as_float(old), value));
    if (next == old) return;
    const unsigned int seen = atomicCAS(bits, old, next);
    if (seen == old) return;
    old = seen;
  }
}

// The first block's first thread copies the scale_inv this quantisation reads (when asked).
__device__ __forceinline__ void CopyScaleInv(const float* scale_inv, float* scale_inv_out) {
  if (scale_inv_out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    *scale_inv_out = *scale_inv;
  }
}

template <typename T, Fp8Encoding kEncoding, int kVec>
__global__ void __launch_bounds__(kBlockThreads)
    QuantizeKernel(const T* __restrict__ input, int64_t chunks, const float* __restrict__ scale,
                   float* amax, uint8_t* __restrict__ output, const float* scale_inv,
                   float* scale_inv_out) {
  __shared__ float scratch[kWarpSize];
  CopyScaleInv(scale_inv, scale_inv_out);
  const float s = *scale;
  float local = 0.0f;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < chunks; i += stride) {
    float v[kVec];
    LoadAsFloat<kVec>(input + i * kVec, v);
    AlignedVector<uint8_t, kVec> q;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      local = fmaxf(local, fabsf(v[k]));
      q.v[k] = ToFp8<kEncoding>(__fmul_rn(v[k], s));
    }
    *reinterpret_cast<AlignedVector<uint8_t, kVec>*>(output + i * kVec) = q;
  }
  const float block_max = BlockMax(local, scratch);
  if (threadIdx.x == 0) AtomicFmax(amax, block_max);
}

template <typename T, Fp8Encoding kEncoding>
__global__ void __launch_bounds__(kBlockThreads)
    QuantizeTransposeKernel(const T* __restrict__ input, int64_t rows, int64_t columns,
                            int64_t tile_columns, int64_t tiles, const float* __restrict__ scale,
                            float* amax, uint8_t* __restrict__ output,
                            uint8_t* __restrict__ output_t, const float* scale_inv,
                            float* scale_inv_out) {
  __shared__ uint8_t tile[kTile][kTile + 4];
  __shared__ float scratch[kWarpSize];
  CopyScaleInv(scale_inv, scale_inv_out);
  const float s = *scale;
  float local = 0.0f;
  const int tx = threadIdx.x % kTile;
  const int ty = threadIdx.x / kTile;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t row0 = t / tile_columns * kTile;
    const int64_t column0 = t % tile_columns * kTile;
    const int64_t column = column0 + tx;
    for (int y = ty; y < kTile; y += kTileRows) {
      const int64_t row = row0 + y;
      if (row < rows && column < columns) {
        const float v = ToFloat(input[row * columns + column]);
        local = fmaxf(local, fabsf(v));
        const uint8_t q = ToFp8<kEncoding>(__fmul_rn(v, s));
        output[row * columns + column] = q;
        tile[y][tx] = q;
      }
    }
    __syncthreads();
    // Transposed: thread tx walks the tile's rows (the output's columns), y its columns.
    const int64_t row_t = row0 + tx;
    for (int y = ty; y < kTile; y += kTileRows) {
      const int64_t column_t = column0 + y;
      if (row_t < rows && column_t < columns) output_t[column_t * rows + row_t] = tile[tx][y];
    }
    __syncthreads();  // the tile is rewritten by the next iteration
  }
  const float block_max = BlockMax(local, scratch);
  if (threadIdx.x == 0) AtomicFmax(amax, block_max);
}

// The cast-transpose of 64 x 64 tiles in 4-element vectors, for rows and columns multiples of 4
// and aligned pointers (every Fp8Linear operand): a thread reads 4 consecutive elements of a
// row and stores their 4 bytes at once, then reads 4 consecutive rows of one column from the
// shared tile and stores those 4 bytes at once into the transposed output.
constexpr int kVecTile = 64;
constexpr int kVecWidth = 4;
constexpr int kLanesPerTileRow = kVecTile / kVecWidth;              // 16
constexpr int kTileRowsPerPass = kBlockThreads / kLanesPerTileRow;  // 16

template <typename T, Fp8Encoding kEncoding, bool kColumnSums>
__global__ void __launch_bounds__(kBlockThreads)
    QuantizeTransposeVectorKernel(const T* __restrict__ input, int64_t rows, int64_t columns,
                                  int64_t tile_columns, int64_t tiles,
                                  const float* __restrict__ scale, float* amax,
                                  uint8_t* __restrict__ output, uint8_t* __restrict__ output_t,
                                  const float* scale_inv, float* scale_inv_out,
                                  float* __restrict__ column_partials) {
  // Rows of 64 bytes plus 4, so a row stays 4-byte aligned and the column reads spread banks.
  __shared__ __align__(4) uint8_t tile[kVecTile][kVecTile + kVecWidth];
  __shared__ float scratch[kWarpSize];
  // With kColumnSums: each thread row's sums of the tile's 64 columns, 4 columns (one thread's)
  // per float4.
  __shared__ float4
      tile_sums[kColumnSums ? kTileRowsPerPass : 1][kColumnSums ? kLanesPerTileRow : 1];
  CopyScaleInv(scale_inv, scale_inv_out);
  const float s = *scale;
  float local = 0.0f;
  const int lane = threadIdx.x % kLanesPerTileRow;
  const int first_row = threadIdx.x / kLanesPerTileRow;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t row0 = t / tile_columns * kVecTile;
    const int64_t column0 = t % tile_columns * kVecTile;
    const int64_t column = column0 + lane * kVecWidth;
    float sums[kVecWidth] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int y = first_row; y < kVecTile; y += kTileRowsPerPass) {
      const int64_t row = row0 + y;
      if (row < rows && column < columns) {
        float v[kVecWidth];
        LoadAsFloat<kVecWidth>(input + row * columns + column, v);
        uint32_t packed = 0;
#pragma unroll
        for (int k = 0; k < kVecWidth; ++k) {
          local = fmaxf(local, fabsf(v[k]));
          if constexpr (kColumnSums) sums[k] += v[k];
          packed |= static_cast<uint32_t>(ToFp8<kEncoding>(__fmul_rn(v[k], s))) << (8 * k);
        }
        *reinterpret_cast<uint32_t*>(output + row * columns + column) = packed;
        *reinterpret_cast<uint32_t*>(&tile[y][lane * kVecWidth]) = packed;
      }
    }
    if constexpr (kColumnSums) {
      // One 16-byte store per thread, so that the thread rows do not share banks.
      tile_sums[first_row][lane] = make_float4(sums[0], sums[1], sums[2], sums[3]);
    }
    __syncthreads();
    if constexpr (kColumnSums) {
      // The tile's partial row: thread c adds column c's 16 thread-row sums in order.
      const int64_t summed_column = column0 + threadIdx.x;
      if (threadIdx.x < kVecTile && summed_column < columns) {
        float total = 0.0f;
        for (int y = 0; y < kTileRowsPerPass; ++y) {
          total += reinterpret_cast<const float*>(tile_sums[y])[threadIdx.x];
        }
        column_partials[row0 / kVecTile * columns + summed_column] = total;
      }
    }
    // Transposed: output row column0 + y holds the tile's column y; this thread writes its rows
    // row0 + 4 lane .. row0 + 4 lane + 3.
    const int64_t row_t = row0 + lane * kVecWidth;
    for (int y = first_row; y < kVecTile; y += kTileRowsPerPass) {
      const int64_t column_t = column0 + y;
      if (row_t < rows && column_t < columns) {
        uint32_t packed = 0;
#pragma unroll
        for (int k = 0; k < kVecWidth; ++k) {
          packed |= static_cast<uint32_t>(tile[lane * kVecWidth + k][y]) << (8 * k);
        }
        *reinterpret_cast<uint32_t*>(output_t + column_t * rows + row_t) = packed;
      }
    }
    __syncthreads();  // the tile is rewritten by the next iteration
  }
  const float block_max = BlockMax(local, scratch);
  if (threadIdx.x == 0) AtomicFmax(amax, block_max);
}

// Where the vectorised cast-transpose applies (the only kernel that sums columns).
bool TakesVectorTranspose(const Fp8QuantizeArgs& args, size_t element_bytes) {
  return args.output_t != nullptr && args.rows % kVecWidth == 0 && args.columns % kVecWidth == 0 &&
         IsAligned(args.input, kVecWidth * element_bytes) && IsAligned(args.output, kVecWidth) &&
         IsAligned(args.output_t, kVecWidth);
}

size_t ElementBytes(ElementType type) { return type == ElementType::kFloat32 ? 4 : 2; }

template <typename T, Fp8Encoding kEncoding>
cudaError_t Launch(const Fp8QuantizeArgs& args, cudaStream_t stream) {
  const T* input = static_cast<const T*>(args.input);
  const int64_t numel = args.rows * args.columns;
  const bool vector_transpose = TakesVectorTranspose(args, sizeof(T));
  if (vector_transpose && args.column_sums != nullptr) {
    const int64_t tile_columns = CeilDiv(args.columns, kVecTile);
    const int64_t tiles = CeilDiv(args.rows, kVecTile) * tile_columns;
    // Its registers allow fewer blocks per SM than its threads do: one wave of what fits.
    const auto kernel = QuantizeTransposeVectorKernel<T, kEncoding, true>;
    int fit = 0;
    cudaError_t error = ResidentBlocksOf(kernel, kBlockThreads, &fit);
    if (error != cudaSuccess) return error;
    const int blocks = static_cast<int>(tiles < fit ? tiles : fit);
    kernel<<<blocks, kBlockThreads, 0, stream>>>(
        input, args.rows, args.columns, tile_columns, tiles, args.scale, args.amax, args.output,
        args.output_t, args.scale_inv, args.scale_inv_out, args.column_partials);
    error = cudaGetLastError();
    if (error != cudaSuccess) return error;
    return LaunchSumPartialRows<T>(args.column_partials, ColumnSumTiles(args.rows), args.columns,
                                   static_cast<T*>(args.column_sums), nullptr, stream);
  }
  int resident = 0;
  const cudaError_t error = ResidentBlocks(kBlockThreads, &resident);
  if (error != cudaSuccess) return error;
  if (vector_transpose) {
    const int64_t tile_columns = CeilDiv(args.columns, kVecTile);
    const int64_t tiles = CeilDiv(args.rows, kVecTile) * tile_columns;
    const int blocks = static_cast<int>(tiles < resident ? tiles : resident);
    QuantizeTransposeVectorKernel<T, kEncoding, false><<<blocks, kBlockThreads, 0, stream>>>(
        input, args.rows, args.columns, tile_columns, tiles, args.scale, args.amax, args.output,
        args.output_t, args.scale_inv, args.scale_inv_out, nullptr);
    return cudaGetLastError();
  }
  if (args.output_t != nullptr) {
    const int64_t tile_columns = CeilDiv(args.columns, kTile);
    const int64_t tiles = CeilDiv(args.rows, kTile) * tile_columns;
    const int blocks = static_cast<int>(tiles < resident ? tiles : resident);
    QuantizeTransposeKernel<T, kEncoding><<<blocks, kBlockThreads, 0, stream>>>(
        input, args.rows, args.columns, tile_columns, tiles, args.scale, args.amax, args.output,
        args.output_t, args.scale_inv, args.scale_inv_out);
    return cudaGetLastError();
  }
  constexpr int kVec = 16 / sizeof(T);
  const bool vector = numel % kVec == 0 && IsAligned(input, 16) && IsAligned(args.output, kVec);
  const int64_t chunks = vector ? numel / kVec : numel;
  const int64_t needed = CeilDiv(chunks, kBlockThreads);
  const int blocks = static_cast<int>(needed < resident ? needed : resident);
  if (vector) {
    QuantizeKernel<T, kEncoding, kVec><<<blocks, kBlockThreads, 0, stream>>>(
        input, chunks, args.scale, args.amax, args.output, args.scale_inv, args.scale_inv_out);
  } else {
    QuantizeKernel<T, kEncoding, 1><<<blocks, kBlockThreads, 0, stream>>>(
        input, chunks, args.scale, args.amax, args.output, args.scale_inv, args.scale_inv_out);
  }
  return cudaGetLastError();
}

}  // namespace

int64_t ColumnSumTiles(int64_t rows) { return CeilDiv(rows, int64_t{kVecTile}); }

bool QuantizeFp8FusesColumnSums(const Fp8QuantizeArgs& args) {
  return TakesVectorTranspose(args, ElementBytes(args.type));
}

cudaError_t LaunchQuantizeFp8(const Fp8QuantizeArgs& args, cudaStream_t stream) {
  if (args.rows < 0 || args.columns < 0) return cudaErrorInvalidValue;
  if (args.column_sums != nullptr &&
      (!QuantizeFp8FusesColumnSums(args) || args.column_partials == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (args.scale_inv_out != nullptr && args.scale_inv == nullptr) return cudaErrorInvalidValue;
  if (args.rows == 0 || args.columns == 0) return cudaSuccess;
  if (args.input == nullptr || args.scale == nullptr || args.amax == nullptr ||
      args.output == nullptr) {
    return cudaErrorInvalidValue;
  }
  return DispatchElementType(args.type, [&](auto element) {
    using T = decltype(element);
    return args.encoding == Fp8Encoding::kE4M3 ? Launch<T, Fp8Encoding::kE4M3>(args, stream)
                                               : Launch<T, Fp8Encoding::kE5M2>(args, stream);
  });
}

}  // namespace varuna::kernels::cuda
