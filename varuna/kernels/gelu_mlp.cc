#include "varuna/kernels/gelu_mlp.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "varuna/kernels/argument_checks.h"
#include "varuna/kernels/bias_gelu.h"

#ifdef VARUNA_WITH_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublasLt.h>

#include "varuna/kernels/cuda_launch.h"
#endif

namespace varuna::kernels {
namespace {

// x [M, K] (2-D), weight [F, K], bias [F].
void CheckForward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  const char* op) {
  CheckDefined(x, op, "x");
  CheckFloatingType(x, op, "x");
  CheckSameDtypeAndDevice(weight, x, op, "weight", "x");
  CheckSameDtypeAndDevice(bias, x, op, "bias", "x");
  TORCH_CHECK(x.dim() == 2, op, ": x has shape ", x.sizes(), "; it must be [M, K]");
  TORCH_CHECK(weight.dim() == 2 && weight.size(1) == x.size(1), op, ": weight has shape ",
              weight.sizes(), " but x has shape ", x.sizes(), "; it must be [F, ", x.size(1), "]");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), op, ": bias has shape ",
              bias.sizes(), " but weight has shape ", weight.sizes(), "; it must be [",
              weight.size(0), "]");
}

// grad [M, H], weight [H, F], pre [M, F].
void CheckBackward(const at::Tensor& grad, const at::Tensor& weight, const at::Tensor& pre,
                   const char* op) {
  CheckDefined(pre, op, "pre_activation");
  CheckFloatingType(pre, op, "pre_activation");
  CheckSameDtypeAndDevice(grad, pre, op, "grad", "pre_activation");
  CheckSameDtypeAndDevice(weight, pre, op, "weight", "pre_activation");
  TORCH_CHECK(grad.dim() == 2 && pre.dim() == 2 && grad.size(0) == pre.size(0), op,
              ": grad has shape ", grad.sizes(), " and pre_activation ", pre.sizes(),
              "; they must be [M, H] and [M, F]");
  TORCH_CHECK(weight.dim() == 2 && weight.size(0) == grad.size(1) && weight.size(1) == pre.size(1),
              op, ": weight has shape ", weight.sizes(), "; it must be [", grad.size(1), ", ",
              pre.size(1), "] (the projection's)");
}

// The unfused composition's ops (see the header).
LinearBiasGeluOutputs ReferenceForward(const at::Tensor& x, const at::Tensor& weight,
                                       const at::Tensor& bias) {
  const at::Tensor product = at::mm(x, weight.t());
  const at::ScalarType compute = ComputeType(x.scalar_type());
  return {BiasGeluForward(product, bias),
          (product.to(compute) + bias.to(compute)).to(x.scalar_type())};
}

LinearDGeluBiasGradOutputs ReferenceBackward(const at::Tensor& grad, const at::Tensor& weight,
                                             const at::Tensor& pre) {
  // gelu'(pre + 0) is gelu'(pre) exactly: bias_gelu's backward with a zero bias.
  BiasGeluGrads grads =
      BiasGeluBackward(at::mm(grad, weight), pre, at::zeros({pre.size(1)}, pre.options()));
  return {std::move(grads.input), std::move(grads.bias)};
}

#ifdef VARUNA_WITH_CUDA_KERNELS
void CheckCublas(cublasStatus_t status, const char* op, const char* call) {
  TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, op, ": ", call,
              " failed: ", cublasLtGetStatusString(status));
}

// The largest power of two up to 256 that divides the address: the alignment cuBLASLt may
// assume of a buffer (its preference defaults to 256 bytes, which a view need not have).
uint32_t AlignmentBytes(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// One cuBLASLt GEMM with an epilogue, in cuBLAS's column-major terms: D [m, n] (ld m) =
// epilogue(op(A) op(B)), A and B of `on`'s dtype, fp32 compute, on `on`'s stream. Returns false,
// having run nothing, where cuBLASLt supports no algorithm for it; any other failure throws.
struct EpilogueGemm {
  cublasOperation_t trans_a;
  cublasOperation_t trans_b;
  int64_t m, n, k;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* d;
  cublasLtEpilogue_t epilogue;
  void* bias;  // the bias (read) or the bias gradient (written), m elements
  void* aux;   // the GeLU's input [m, n], ld m: written by GELU_AUX_BIAS, read by DGELU_BGRAD
};

bool RunEpilogueGemm(const EpilogueGemm& g, const at::Tensor& on, const char* op) {
  const cudaDataType_t type = on.scalar_type() == at::kHalf ? CUDA_R_16F : CUDA_R_16BF;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr, b_layout = nullptr, d_layout = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  // Every descriptor is destroyed on the way out, also when a check throws.
  struct Cleanup {
    cublasLtMatmulDesc_t& desc;
    cublasLtMatrixLayout_t &a, &b, &d;
    cublasLtMatmulPreference_t& preference;
    ~Cleanup() {
      if (preference) cublasLtMatmulPreferenceDestroy(preference);
      if (d) cublasLtMatrixLayoutDestroy(d);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (desc) cublasLtMatmulDescDestroy(desc);
    }
  } cleanup{desc, a_layout, b_layout, d_layout, preference};

  CheckCublas(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), op,
              "cublasLtMatmulDescCreate");
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const void* value, size_t size) {
    CheckCublas(cublasLtMatmulDescSetAttribute(desc, attribute, value, size), op,
                "cublasLtMatmulDescSetAttribute");
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, &g.trans_a, sizeof(g.trans_a));
  set(CUBLASLT_MATMUL_DESC_TRANSB, &g.trans_b, sizeof(g.trans_b));
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof(g.epilogue));
  set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias));
  set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux, sizeof(g.aux));
  const int64_t aux_ld = g.m;
  set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld));

  const bool a_transposed = g.trans_a == CUBLAS_OP_T;
  const bool b_transposed = g.trans_b == CUBLAS_OP_T;
  CheckCublas(cublasLtMatrixLayoutCreate(&a_layout, type, a_transposed ? g.k : g.m,
                                         a_transposed ? g.m : g.k, g.lda),
              op, "cublasLtMatrixLayoutCreate");
  CheckCublas(cublasLtMatrixLayoutCreate(&b_layout, type, b_transposed ? g.n : g.k,
                                         b_transposed ? g.k : g.n, g.ldb),
              op, "cublasLtMatrixLayoutCreate");
  CheckCublas(cublasLtMatrixLayoutCreate(&d_layout, type, g.m, g.n, g.m), op,
              "cublasLtMatrixLayoutCreate");

  const size_t workspace_bytes = at::cuda::getCUDABlasLtWorkspaceSize();
  CheckCublas(cublasLtMatmulPreferenceCreate(&preference), op, "cublasLtMatmulPreferenceCreate");
  CheckCublas(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes, sizeof(workspace_bytes)),
      op, "cublasLtMatmulPreferenceSetAttribute");
  for (const auto& [attribute, pointer] :
       {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, g.a},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, g.b},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<const void*>(g.d)},
        std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<const void*>(g.d)}}) {
    const uint32_t alignment = AlignmentBytes(pointer);
    CheckCublas(
        cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment, sizeof(alignment)),
        op, "cublasLtMatmulPreferenceSetAttribute");
  }

  cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, desc, a_layout, b_layout, d_layout, d_layout, preference, 1, &heuristic, &found);
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) {
    CheckCublas(status, op, "cublasLtMatmulAlgoGetHeuristic");
  }
  if (status == CUBLAS_STATUS_SUCCESS && found > 0) {
    const float alpha = 1.0f;
    const float beta = 0.0f;
    CheckCublas(
        cublasLtMatmul(handle, desc, &alpha, g.a, a_layout, g.b, b_layout, &beta, g.d, d_layout,
                       g.d, d_layout, &heuristic.algo, at::cuda::getCUDABlasLtWorkspace(),
                       workspace_bytes, CurrentCudaStream(on)),
        op, "cublasLtMatmul");
    return true;
  }
  return false;
}

// Half-precision CUDA tensors whose [M, F] aux buffer cuBLASLt can take (ld F, a multiple of 8),
// with the epilogue's input from the caller (the bias in the forward, the pre-activation in the
// backward) 16-byte aligned: cuBLASLt takes no alignment preference for the epilogue's vectors,
// so an unaligned one would fail rather than pick another algorithm. (Its outputs are new
// allocations, aligned.)
bool TakesEpilogueGemm(const at::Tensor& x, int64_t features, const void* epilogue_input) {
  return x.is_cuda() && (x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16) &&
         features > 0 && features % 8 == 0 && reinterpret_cast<uintptr_t>(epilogue_input) % 16 == 0;
}
#endif  // VARUNA_WITH_CUDA_KERNELS

// The autograd op (see the header): saves x, W1, W2, pre and h.
struct GeluMlpFunction : torch::autograd::Function<GeluMlpFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& fc_weight, const at::Tensor& fc_bias,
                            const at::Tensor& proj_weight) {
    const at::Tensor rows = x.reshape({-1, x.size(-1)});
    LinearBiasGeluOutputs inner = LinearBiasGelu(rows, fc_weight, fc_bias);
    ctx->save_for_backward({rows, fc_weight, proj_weight, inner.pre_activation, inner.output});
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = proj_weight.size(0);
    // Written into a tensor of its own (not returned as a view of the product), so that the
    // caller may modify it in place, as it may at::linear's result.
    at::Tensor y = at::empty(sizes, inner.output.options());
    at::Tensor y_rows = y.view({-1, proj_weight.size(0)});
    at::mm_out(y_rows, inner.output, proj_weight.t());
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "GeluMlp: its backward is not differentiable (a double backward, create_graph, "
                "is not supported); run the MLP unfused (--no-bias-gelu-gemm-fusion)");
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor& rows = saved[0];
    const at::Tensor& fc_weight = saved[1];
    const at::Tensor& proj_weight = saved[2];
    const at::Tensor& pre = saved[3];
    const at::Tensor& inner = saved[4];
    const at::Tensor grad = grad_outputs[0].reshape({-1, proj_weight.size(0)});
    at::Tensor d_proj_weight;
    if (ctx->needs_input_grad(3)) d_proj_weight = grad.t().mm(inner);
    at::Tensor dx, d_fc_weight, d_fc_bias;
    if (ctx->needs_input_grad(0) || ctx->needs_input_grad(1) || ctx->needs_input_grad(2)) {
      LinearDGeluBiasGradOutputs d = LinearDGeluBiasGrad(grad, proj_weight, pre);
      if (ctx->needs_input_grad(1)) d_fc_weight = d.pre_activation.t().mm(rows);
      if (ctx->needs_input_grad(0)) {
        dx = d.pre_activation.mm(fc_weight).view(ctx->saved_data["x_sizes"].toIntVector());
      }
      if (ctx->needs_input_grad(2)) d_fc_bias = std::move(d.bias);
    }
    return {dx, d_fc_weight, d_fc_bias, d_proj_weight};
  }
};

}  // namespace

LinearBiasGeluOutputs LinearBiasGelu(const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias, bool* used_gemm_epilogue) {
  const char* op = "LinearBiasGelu";
  if (used_gemm_epilogue != nullptr) *used_gemm_epilogue = false;
  CheckForward(x, weight, bias, op);
#ifdef VARUNA_WITH_CUDA_KERNELS
  const int64_t m = x.size(0);
  const int64_t k = x.size(1);
  const int64_t f = weight.size(0);
  const at::Tensor b = bias.contiguous();
  if (TakesEpilogueGemm(x, f, b.data_ptr()) && m > 0 && k > 0) {
    const c10::cuda::CUDAGuard guard(x.device());
    const at::Tensor input = x.contiguous();
    const at::Tensor w = weight.contiguous();
    LinearBiasGeluOutputs out{at::empty({m, f}, x.options()), at::empty({m, f}, x.options())};
    // Column-major: D^T [F, M] = W [F, K] (row-major [F, K] read transposed) x^T [K, M].
    const EpilogueGemm gemm{CUBLAS_OP_T,
                            CUBLAS_OP_N,
                            f,
                            m,
                            k,
                            w.data_ptr(),
                            k,
                            input.data_ptr(),
                            k,
                            out.output.data_ptr(),
                            CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
                            b.data_ptr(),
                            out.pre_activation.data_ptr()};
    if (RunEpilogueGemm(gemm, x, op)) {
      if (used_gemm_epilogue != nullptr) *used_gemm_epilogue = true;
      return out;
    }
  }
#endif
  return ReferenceForward(x, weight, bias);
}

LinearDGeluBiasGradOutputs LinearDGeluBiasGrad(const at::Tensor& grad, const at::Tensor& weight,
                                               const at::Tensor& pre_activation,
                                               bool* used_gemm_epilogue) {
  const char* op = "LinearDGeluBiasGrad";
  if (used_gemm_epilogue != nullptr) *used_gemm_epilogue = false;
  CheckBackward(grad, weight, pre_activation, op);
#ifdef VARUNA_WITH_CUDA_KERNELS
  const int64_t m = pre_activation.size(0);
  const int64_t f = pre_activation.size(1);
  const int64_t h = weight.size(0);
  const at::Tensor pre = pre_activation.contiguous();
  if (TakesEpilogueGemm(pre, f, pre.data_ptr()) && m > 0 && h > 0) {
    const c10::cuda::CUDAGuard guard(grad.device());
    const at::Tensor g = grad.contiguous();
    const at::Tensor w = weight.contiguous();
    LinearDGeluBiasGradOutputs out{at::empty({m, f}, pre.options()), at::empty({f}, pre.options())};
    // Column-major: dpre^T [F, M] = W2^T [F, H] (row-major [H, F] as is) grad^T [H, M].
    const EpilogueGemm gemm{CUBLAS_OP_N,
                            CUBLAS_OP_N,
                            f,
                            m,
                            h,
                            w.data_ptr(),
                            f,
                            g.data_ptr(),
                            h,
                            out.pre_activation.data_ptr(),
                            CUBLASLT_EPILOGUE_DGELU_BGRAD,
                            out.bias.data_ptr(),
                            const_cast<void*>(pre.data_ptr())};
    if (RunEpilogueGemm(gemm, pre, op)) {
      if (used_gemm_epilogue != nullptr) *used_gemm_epilogue = true;
      return out;
    }
  }
#endif
  return ReferenceBackward(grad, weight, pre_activation);
}

at::Tensor GeluMlp(const at::Tensor& x, const at::Tensor& fc_weight, const at::Tensor& fc_bias,
                   const at::Tensor& proj_weight) {
  const char* op = "GeluMlp";
  CheckDefined(x, op, "x");
  TORCH_CHECK(x.dim() >= 1, op, ": x must have shape [..., K], got a 0-dim tensor");
  CheckSameDtypeAndDevice(proj_weight, x, op, "proj_weight", "x");
  TORCH_CHECK(proj_weight.dim() == 2 && fc_weight.defined() && fc_weight.dim() == 2 &&
                  proj_weight.size(1) == fc_weight.size(0),
              op, ": proj_weight has shape ", proj_weight.sizes(), " and fc_weight ",
              fc_weight.defined() ? fc_weight.sizes() : at::IntArrayRef{},
              "; proj_weight must be [H, F] for fc_weight [F, K]");
  return GeluMlpFunction::apply(x, fc_weight, fc_bias, proj_weight);
}

}  // namespace varuna::kernels
