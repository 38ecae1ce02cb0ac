// FP8 linear layer with delayed scaling (Transformer Engine's DelayedScaling recipe, as Megatron
// runs it with --fp8-format, --fp8-amax-history-len, --fp8-amax-compute-algo).
//
// y = x W^T + b with x and W quantised to FP8 E4M3 by per-tensor scales, the product by
// at::_scaled_mm; the backward quantises the output gradient (E5M2 in the hybrid format, E4M3
// in the e4m3 format) and computes dgrad = dY W and wgrad = dY^T X by _scaled_mm too.
//
// The math. For a tensor t of one role (input, weight or grad_output) with state Fp8Meta:
//   quantise:    q = fp8(clamp(fp32(t) * scale, -fp8_max, fp8_max))   (round to nearest even,
//                saturating: NaN stays NaN, +-inf becomes +-fp8_max; fp8_max = 448 for E4M3,
//                57344 for E5M2)
//   record:      amax_history[0] = max(amax_history[0], max |t|)      (NaN ignored, inf kept)
//   dequantise:  t ~ fp32(q) * scale_inv,  scale_inv = 1 / scale
//   forward:     y = (fp32(xq) x_scale_inv) (fp32(wq) w_scale_inv)^T + b   accumulated in fp32,
//                rounded once to x's dtype
//   backward:    dx = (dYq dY_scale_inv) (wq w_scale_inv)       -> x's dtype
//                dW = (dYq dY_scale_inv)^T (xq x_scale_inv)     -> W's dtype
//                db = sum over rows of dY in fp32 (the unquantised gradient) -> b's dtype
// The scales are "delayed": a step quantises with the scale computed from earlier steps' amaxes;
// UpdateFp8Scale (after the step) turns the history into the next scale, as TE's
// amax_and_scale_update does:
//   amax   = max over the whole history (kMax, NaN ignored) or amax_history[0] (kMostRecent)
//   scale  = fp8_max / 2^margin / amax   if amax is finite and > 0, else the old scale;
//            FLT_MAX where that overflows (amax tiny); scale_inv = 1 / scale
//   history rolled: [h0, h1, ..., h_{n-1}] -> [0, h2, ..., h_{n-1}, h0] (h1, the oldest, drops)
//   A step that recorded nothing (amax_history[0] == 0: the layer did not run, or its tensor was
//   all zero) changes nothing: no roll, the old scale (TE's bulk update does the same).
// Fresh state has a zero history and scale 1 (TE's initial state), so the first step quantises
// with scale 1 and values beyond fp8_max saturate.
//
// Facts of LibTorch 2.11's at::_scaled_mm this file relies on (checked with a probe program and
// asserted by tests/varuna/kernels/fp8_linear_test.cc):
//   - it runs on the CPU (an emulation: both operands converted to fp32, multiplied by their
//     scales, matmul in fp32, bias added in fp32, one rounding to out_dtype); any layout, any
//     dims; mat1 and mat2 must be float8 (E4M3 x E4M3, E4M3 x E5M2, E5M2 x E4M3 all run);
//   - scale_a and scale_b are the dequantisation factors (TE's scale_inv), float32, one element;
//   - on CUDA (cuBLASLt, sm_89 or newer only) mat1 must be row-major and mat2 column-major
//     (mat2 = B^T of a row-major B), K and N multiples of 16, E5M2 x E5M2 is refused, and a bias
//     must be bf16/fp16 matching out_dtype (none with fp32 output);
//   - the dtype casts to float8 do NOT saturate: float32 -> E4M3 gives NaN beyond 464 (448 plus
//     half a step), float32 -> E5M2 gives inf beyond 61440; hence the clamp before the cast.
// This file gives both devices the same layouts (the fp8 transposes the backward needs are
// copies, as TE's cast-transpose makes them), so the CPU tests run the GPU's operand layouts.
// The forward GEMM uses cuBLASLt's fast accumulation and the backward GEMMs do not (TE's
// choice); the CPU ignores the flag.
//
// Shapes: x [..., K] with M = numel / K rows, W [N, K], b [N] or undefined. M, K and N must all
// be multiples of 16 (cuBLASLt's FP8 constraint, through the backward's transposed GEMMs); other
// shapes are refused on every device, so a configuration that would fail on the GPU fails in the
// CPU tests too.
//
// Devices: CPU (emulated _scaled_mm; for tests) and CUDA devices of compute capability 8.9 or
// newer; older GPUs are refused with CheckFp8Device's message.
//
// What runs where. On the CPU (and on CUDA in a build without --config=cuda, where no CUDA
// tensor exists) QuantizeFp8, QuantizeFp8WithTranspose and the scale updates are the LibTorch
// reference ops written out in fp8_linear.cc. Under --config=cuda, CUDA tensors take fused
// kernels (varuna/kernels/cuda/fp8_quantize.cu, fp8_scale_update.cu): the quantise is one pass
// that reads t once, writes the fp8 bytes (and, for QuantizeFp8WithTranspose, their transposed
// copy: Transformer Engine's cast-transpose) and folds max |t| into amax_history[0] by an atomic
// on the device; UpdateFp8ScaleBatch updates up to 96 roles per kernel launch, one block each.
// Both read the scales from device memory (no host synchronisation) and give the reference's
// results bit for bit (fp8 bytes, amax, scales, scale_inv, rolled histories), NaN bytes up to
// their sign bit (which the CPU reference's vectorised clamp does not fix either). The
// quantise kernel also copies the scale_inv it read (QuantizeFp8's `scale_inv_used`), and the
// vectorised cast-transpose sums t's columns (`column_sums`, the backward's bias gradient) in
// 64-row tiles added in a fixed order: deterministic, but not bitwise the CPU's
// t.to(float32).sum(0), whose order differs.
//
// Misuse throws c10::Error naming Fp8Linear and the argument: undefined x or weight, a dtype
// other than float32/float16/bfloat16, weight or bias not matching x (shape, dtype, device),
// dims not multiples of 16, meta tensors of the wrong shape, dtype or device.
//
// Thread safety: the functions hold no state of their own; an Fp8LinearMeta is mutated by every
// forward and backward through it, so one layer's meta is used by one thread at a time.
#ifndef VARUNA_KERNELS_FP8_LINEAR_H_
#define VARUNA_KERNELS_FP8_LINEAR_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace varuna::kernels {

// Which FP8 encodings a layer uses (Megatron's --fp8-format).
enum class Fp8Format {
  kE4M3,    // "e4m3": every tensor E4M3 (max 448, 3 mantissa bits)
  kHybrid,  // "hybrid": input and weight E4M3, gradients E5M2 (max 57344, 2 mantissa bits)
};

// How the scale is computed from the amax history (Megatron's --fp8-amax-compute-algo).
enum class Fp8AmaxComputeAlgo {
  kMax,         // "max": the largest amax in the history
  kMostRecent,  // "most_recent": the amax of the last step
};

// The delayed-scaling recipe (TE's DelayedScaling; defaults are TE's). Megatron's flags default
// to --fp8-amax-history-len=1 --fp8-amax-compute-algo=most_recent --fp8-margin=0.
struct Fp8Recipe {
  Fp8Format format = Fp8Format::kHybrid;
  // scale = fp8_max / amax / 2^margin; >= 0.
  int margin = 0;
  // Steps of amax kept, >= 1. TE's default is 1024; Megatron's --fp8-amax-history-len default 1.
  int64_t amax_history_len = 1024;
  Fp8AmaxComputeAlgo amax_compute_algo = Fp8AmaxComputeAlgo::kMax;
};

// OK, or InvalidArgument naming the field, its value and the allowed range.
absl::Status ValidateFp8Recipe(const Fp8Recipe& recipe);

// "hybrid" or "e4m3"; InvalidArgument naming `name` and the choices otherwise.
absl::StatusOr<Fp8Format> ParseFp8Format(std::string_view name);
const char* Fp8FormatName(Fp8Format format);

// "max" or "most_recent"; InvalidArgument naming `name` and the choices otherwise.
absl::StatusOr<Fp8AmaxComputeAlgo> ParseFp8AmaxComputeAlgo(std::string_view name);
const char* Fp8AmaxComputeAlgoName(Fp8AmaxComputeAlgo algo);

// The roles of the tensors an FP8 linear quantises.
enum class Fp8TensorRole { kInput, kWeight, kGradOutput };

// Float8_e4m3fn, or Float8_e5m2 for kGradOutput in the hybrid format.
at::ScalarType Fp8DtypeFor(Fp8Format format, Fp8TensorRole role);

// The largest finite value of a float8 dtype: 448 (Float8_e4m3fn), 57344 (Float8_e5m2); throws
// c10::Error for other dtypes.
double Fp8Max(at::ScalarType fp8_dtype);

// The delayed-scaling state of one tensor role of one layer. The tensors are float32 on the
// layer's device and are updated in place (their identity never changes, so a module may
// register them as buffers and a checkpoint may save and load them in place).
struct Fp8Meta {
  at::ScalarType dtype = at::kFloat8_e4m3fn;  // the role's float8 dtype
  at::Tensor amax_history;                    // [amax_history_len]; [0] is this step's amax
  at::Tensor scale;                           // [1]: q = fp8(t * scale)
  at::Tensor scale_inv;                       // [1]: 1 / scale, the factor _scaled_mm takes
};

// Fresh state: a zero history of `amax_history_len` (>= 1) entries, scale and scale_inv 1, on
// `device`. Throws c10::Error for a length < 1 or a `dtype` that is not float8.
Fp8Meta MakeFp8Meta(at::ScalarType dtype, int64_t amax_history_len, const c10::Device& device);

// Records max |t| into meta->amax_history[0] (the max with what is there; NaN ignored) and
// returns t quantised with meta->scale, saturating (see the math above), contiguous, in
// meta->dtype. `t` is float32, float16 or bfloat16 on meta's device; throws c10::Error otherwise.
// `scale_inv_used`, when not null, is set to a new [1] tensor holding meta->scale_inv as this
// quantisation read it (on CUDA the quantise kernel writes it: no launch of its own), so that
// later scale updates do not change how the result is read.
at::Tensor QuantizeFp8(const at::Tensor& t, Fp8Meta* meta, at::Tensor* scale_inv_used = nullptr);

// QuantizeFp8 of a 2-D `t` [rows, columns] plus the transposed copy of the result, [columns,
// rows] contiguous (what the backward's GEMMs read): {q, q^T}, the amax recorded once. On CUDA
// one fused pass; elsewhere QuantizeFp8 then q.t().contiguous(). Throws c10::Error as
// QuantizeFp8 does, and for a `t` that is not 2-D. `scale_inv_used` as for QuantizeFp8.
// `column_sums`, when not null, is set to the sums of t's columns, [columns] in t's dtype,
// accumulated in fp32 (the backward's bias gradient of dY): on CUDA summed in the same pass
// where the vectorised cast-transpose applies (every Fp8Linear operand in practice; partial
// sums per 64-row tile, added in a fixed order: deterministic), else by at::sum; on the CPU
// t.to(float32).sum(0), rounded to t's dtype.
std::pair<at::Tensor, at::Tensor> QuantizeFp8WithTranspose(const at::Tensor& t, Fp8Meta* meta,
                                                           at::Tensor* scale_inv_used = nullptr,
                                                           at::Tensor* column_sums = nullptr);

// TE's amax_and_scale_update for one role (see the math above), in place, on the device (no
// host synchronisation). Call once per optimizer step, after the backward, and (with data
// parallelism) after a MAX all-reduce of amax_history[0] over the replicas, so that every
// replica holds the same scales. `recipe` must be valid and match the history's length.
void UpdateFp8Scale(const Fp8Recipe& recipe, Fp8Meta* meta);

// The state of one FP8 linear layer: one Fp8Meta per role.
struct Fp8LinearMeta {
  Fp8Meta input;
  Fp8Meta weight;
  Fp8Meta grad_output;
};

// Fresh state for `recipe` (must be valid) on `device`.
Fp8LinearMeta MakeFp8LinearMeta(const Fp8Recipe& recipe, const c10::Device& device);

// UpdateFp8Scale on the three roles (UpdateFp8ScaleBatch of the three).
void UpdateFp8Scales(const Fp8Recipe& recipe, Fp8LinearMeta* meta);

// UpdateFp8Scale on every meta of `metas`, with the same results bit for bit. On CUDA (all
// metas on the first one's device, contiguous histories of recipe.amax_history_len) one kernel
// launch per 96 metas; elsewhere UpdateFp8Scale one by one. Throws c10::Error naming the meta's
// index for a null pointer or a meta UpdateFp8Scale would refuse. Empty: does nothing.
void UpdateFp8ScaleBatch(const Fp8Recipe& recipe, const std::vector<Fp8Meta*>& metas);

// UpdateFp8ScaleBatch of the three roles of every layer of `metas` (one batch): the per-step
// update of a model's FP8 layers that share `recipe`.
void UpdateAllFp8Scales(const Fp8Recipe& recipe, const std::vector<Fp8LinearMeta*>& metas);

// Whether two recipes are equal field by field (layers with equal recipes may share a batch).
bool SameFp8Recipe(const Fp8Recipe& a, const Fp8Recipe& b);

// The nine state tensors by name, for a checkpoint: "input.amax_history", "input.scale",
// "input.scale_inv", then the same for "weight." and "grad_output.". The tensors are the
// state's own (loading into them in place restores the state).
std::vector<std::pair<std::string, at::Tensor>> Fp8LinearMetaTensors(const Fp8LinearMeta& meta);

// OK when FP8 GEMMs can run on a device of compute capability major.minor (8.9 or newer);
// otherwise FailedPrecondition "FP8 needs compute capability 8.9 or newer (Ada, Hopper); this
// GPU is <device_name> (sm_<major><minor>): drop --fp8-format".
absl::Status CheckFp8Capability(int major, int minor, std::string_view device_name);

// OK for the CPU (the emulated _scaled_mm) and for CUDA devices that pass CheckFp8Capability;
// otherwise that status (or FailedPrecondition for CUDA in a build without CUDA, or another
// device type).
absl::Status CheckFp8Device(const c10::Device& device);

// y = x W^T + b in FP8 as above, an autograd op differentiable in x, weight and bias (an
// undefined bias means none). Each forward records the amaxes of x and W into meta's input and
// weight histories; each backward records the amax of dY into grad_output's. The scales used
// are the ones in `meta` at the time of the call (the backward uses grad_output's scale at the
// time of the backward, and the forward's own scale_inv of x and W). Returns [..., N] in x's
// dtype.
at::Tensor Fp8Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     const Fp8LinearMeta& meta);

}  // namespace varuna::kernels

#endif  // VARUNA_KERNELS_FP8_LINEAR_H_
