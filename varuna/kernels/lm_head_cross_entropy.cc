#include "varuna/kernels/lm_head_cross_entropy.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>

#include "varuna/kernels/argument_checks.h"
#include "varuna/kernels/weight_gradient_accumulation.h"

#ifdef VARUNA_WITH_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>

#include "varuna/kernels/cuda/softmax_cross_entropy.h"
#include "varuna/kernels/cuda_launch.h"
#endif

namespace varuna::kernels {
namespace {

constexpr char kOp[] = "LmHeadCrossEntropy";
constexpr int64_t kLogitsPerChunk = int64_t{1} << 25;
// Chunks of more than this many tokens are a whole number of them, so that every chunk's GEMMs
// (M = its tokens in two, K in the third) fill their tiles.
constexpr int64_t kChunkTokenMultiple = 128;

void CheckInputs(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                 const at::Tensor& loss_mask) {
  CheckDefined(hidden, kOp, "hidden");
  CheckDefined(weight, kOp, "weight");
  CheckDefined(labels, kOp, "labels");
  CheckDefined(loss_mask, kOp, "loss_mask");
  CheckFloatingType(hidden, kOp, "hidden");
  TORCH_CHECK(hidden.dim() == 2, kOp, ": hidden must be [tokens, hidden], got ", hidden.sizes(),
              "; flatten the batch and sequence dims");
  TORCH_CHECK(weight.dim() == 2 && weight.size(1) == hidden.size(1), kOp,
              ": weight must be [vocab, ", hidden.size(1), "], got ", weight.sizes());
  TORCH_CHECK(weight.scalar_type() == hidden.scalar_type(), kOp, ": weight is ",
              weight.scalar_type(), " but hidden is ", hidden.scalar_type(),
              "; give both in the model's dtype");
  TORCH_CHECK(
      labels.dim() == 1 && labels.size(0) == hidden.size(0) && labels.scalar_type() == at::kLong,
      kOp, ": labels must be int64 [", hidden.size(0), "], got ", labels.scalar_type(), " ",
      labels.sizes());
  TORCH_CHECK(loss_mask.dim() == 1 && loss_mask.size(0) == hidden.size(0) &&
                  at::isFloatingType(loss_mask.scalar_type()),
              kOp, ": loss_mask must be floating-point [", hidden.size(0), "], got ",
              loss_mask.scalar_type(), " ", loss_mask.sizes());
  CheckSameDevice(weight, hidden, kOp, "weight", "hidden");
  CheckSameDevice(labels, hidden, kOp, "labels", "hidden");
  CheckSameDevice(loss_mask, hidden, kOp, "loss_mask", "hidden");
}

struct ChunkResult {
  at::Tensor loss;         // 0-dim, compute type: sum over the chunk's rows of m_n / M * l_n
  at::Tensor grad_logits;  // [rows, V] in the model's dtype: dz; undefined without grad
};

// One chunk with ATen ops: z = x W^T in the model's dtype (as at::linear), the softmax in the
// compute type. `scale` holds m_n / M for the chunk's rows (the loss's weights), `grad_scale`
// the weights of the gradient's rows (see Compute).
ChunkResult ReferenceChunk(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& labels,
                           const at::Tensor& scale, const at::Tensor& grad_scale, bool with_grad) {
  const at::ScalarType acc = ComputeType(x.scalar_type());
  const at::Tensor y = labels.unsqueeze(1);
  const at::Tensor logits = at::matmul(x, weight.t()).to(acc);
  const at::Tensor lse = at::logsumexp(logits, /*dim=*/1);
  const at::Tensor picked = logits.gather(1, y).squeeze(1);
  ChunkResult result{((lse - picked) * scale).sum(), at::Tensor()};
  if (!with_grad) return result;
  // dz = (softmax(z) - onehot(y)) m / M, in place of the logits.
  at::Tensor dz = logits;
  dz.sub_(lse.unsqueeze(1)).exp_();
  // One label per row: a plain scatter of p_y - 1 (no accumulation, so deterministic).
  dz.scatter_(1, y, dz.gather(1, y).sub_(1));
  dz.mul_(grad_scale.unsqueeze(1));
  result.grad_logits = dz.to(x.scalar_type());
  return result;
}

#ifdef VARUNA_WITH_CUDA_KERNELS
// One chunk on the GPU: the logits GEMM, then one kernel for the loss per row and, in place of
// the logits, their gradient (cuda/softmax_cross_entropy.h).
ChunkResult KernelChunk(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& labels,
                        const at::Tensor& scale, const at::Tensor& grad_scale, bool with_grad) {
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor logits = at::matmul(x, weight.t()).contiguous();
  const at::Tensor y = labels.contiguous();
  const at::Tensor w = grad_scale.to(at::kFloat).contiguous();
  at::Tensor row_losses = at::empty({x.size(0)}, x.options().dtype(at::kFloat));
  CheckCuda(cuda::LaunchSoftmaxCrossEntropy(
                logits.data_ptr(), y.data_ptr<int64_t>(), w.data_ptr<float>(),
                row_losses.data_ptr<float>(), x.size(0), weight.size(0), with_grad,
                CudaElementType(x.scalar_type(), kOp), CurrentCudaStream(x)),
            kOp);
  ChunkResult result{(row_losses * scale.to(at::kFloat)).sum(), at::Tensor()};
  if (with_grad) result.grad_logits = logits;
  return result;
}
#endif  // VARUNA_WITH_CUDA_KERNELS

ChunkResult ComputeChunk(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& labels,
                         const at::Tensor& scale, const at::Tensor& grad_scale, bool with_grad) {
#ifdef VARUNA_WITH_CUDA_KERNELS
  if (TakesCudaKernels(x)) return KernelChunk(x, weight, labels, scale, grad_scale, with_grad);
#endif
  return ReferenceChunk(x, weight, labels, scale, grad_scale, with_grad);
}

struct Outputs {
  at::Tensor loss;  // 0-dim, compute type
  // [N, h] in hidden's dtype, times grad_hidden_scale when that is defined; undefined without
  // grad.
  at::Tensor grad_hidden;
  at::Tensor grad_weight;  // [V, h] in weight's dtype; undefined without grad
  // Half precision only: 1 / M (0-dim fp32), the factor grad_hidden still lacks.
  at::Tensor grad_hidden_scale;
};

bool IsHalf(at::ScalarType dtype) { return dtype == at::kHalf || dtype == at::kBFloat16; }

}  // namespace

int64_t DefaultChunkTokens(int64_t vocab) {
  const int64_t tokens = std::max<int64_t>(1, kLogitsPerChunk / std::max<int64_t>(1, vocab));
  return tokens < kChunkTokenMultiple ? tokens : tokens / kChunkTokenMultiple * kChunkTokenMultiple;
}

namespace {

// The loss, and with `with_grad` the gradients for an upstream gradient of 1, chunk by chunk;
// dW summed by GEMMs into the fp32 sum with `fusion`, else each chunk's added.
Outputs Compute(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                const at::Tensor& loss_mask, int64_t chunk_tokens, bool with_grad,
                bool fusion = true) {
  const at::ScalarType acc = ComputeType(hidden.scalar_type());
  const int64_t n = hidden.size(0);
  const int64_t vocab = weight.size(0);
  if (chunk_tokens <= 0) chunk_tokens = DefaultChunkTokens(vocab);
  const at::Tensor mask = loss_mask.to(acc);
  // Each token's weight in the mean: m_n / M (no host read of M: the step stays asynchronous).
  const at::Tensor total = mask.sum();
  const at::Tensor scale = mask / total;
  // In half precision the logits' gradient and dx are carried without the 1 / M (weights m_n,
  // so |dz| <= m_n): divided by M they would underflow fp16 at a few thousand tokens, where the
  // unfused path's gradient carries the loss scale instead. The backward applies 1 / M and the
  // upstream gradient (the loss scale) together in fp32. dW is summed in fp32 and divided there.
  const bool half = IsHalf(hidden.scalar_type());
  const at::Tensor grad_scale = half ? mask : scale;
  Outputs out;
  at::Tensor loss = at::zeros({}, hidden.options().dtype(acc));
  at::Tensor grad_weight_acc;
  if (with_grad) {
    out.grad_hidden = at::empty_like(hidden, at::MemoryFormat::Contiguous);
    grad_weight_acc = at::zeros(weight.sizes(), weight.options().dtype(acc));
  }
  for (int64_t start = 0; start < n; start += chunk_tokens) {
    const int64_t rows = std::min(chunk_tokens, n - start);
    const at::Tensor x = hidden.narrow(0, start, rows);
    const ChunkResult chunk =
        ComputeChunk(x, weight, labels.narrow(0, start, rows), scale.narrow(0, start, rows),
                     grad_scale.narrow(0, start, rows), with_grad);
    loss.add_(chunk.loss);
    if (!with_grad) continue;
    out.grad_hidden.narrow(0, start, rows).copy_(at::matmul(chunk.grad_logits, weight));
    if (fusion) {
      // dW += dz^T x by one GEMM into the fp32 accumulator (beta = 1): no half-precision [V, h]
      // product and no add pass per chunk (weight_gradient_accumulation.h).
      AccumulateWeightGradient(x, chunk.grad_logits, grad_weight_acc);
    } else {
      grad_weight_acc.add_(at::matmul(chunk.grad_logits.t(), x));
    }
  }
  out.loss = loss;
  if (!with_grad) return out;
  if (half) {
    out.grad_hidden_scale = total.reciprocal().to(at::kFloat);
    grad_weight_acc.mul_(out.grad_hidden_scale);
  }
  out.grad_weight = grad_weight_acc.to(weight.scalar_type());
  return out;
}

struct LmHeadCrossEntropyFunction : torch::autograd::Function<LmHeadCrossEntropyFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden,
                            const at::Tensor& weight, const at::Tensor& labels,
                            const at::Tensor& loss_mask, int64_t chunk_tokens, bool fusion) {
    Outputs out =
        Compute(hidden, weight, labels, loss_mask, chunk_tokens, /*with_grad=*/true, fusion);
    ctx->save_for_backward({out.grad_hidden, out.grad_weight, out.grad_hidden_scale});
    return out.loss;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor& upstream = grad_outputs[0];
    if (saved[2].defined()) {
      // Half precision: the upstream gradient (a loss scale, possibly beyond fp16's range) and
      // 1 / M applied in fp32, rounded once.
      const at::Tensor factor = upstream.to(at::kFloat);
      return {(saved[0].to(at::kFloat) * (factor * saved[2])).to(saved[0].scalar_type()),
              (saved[1].to(at::kFloat) * factor).to(saved[1].scalar_type()),
              at::Tensor(),
              at::Tensor(),
              at::Tensor(),
              at::Tensor()};
    }
    // The upstream gradient of a scalar, in the dtype of each gradient.
    at::Tensor grad_hidden = saved[0] * upstream.to(saved[0].scalar_type());
    at::Tensor grad_weight = saved[1] * upstream.to(saved[1].scalar_type());
    return {grad_hidden, grad_weight, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor LmHeadCrossEntropy(const at::Tensor& hidden, const at::Tensor& weight,
                              const at::Tensor& labels, const at::Tensor& loss_mask,
                              int64_t chunk_tokens, bool gradient_accumulation_fusion) {
  CheckInputs(hidden, weight, labels, loss_mask);
  const bool with_grad =
      at::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  if (!with_grad) {
    return Compute(hidden, weight, labels, loss_mask, chunk_tokens, /*with_grad=*/false).loss;
  }
  return LmHeadCrossEntropyFunction::apply(hidden, weight, labels, loss_mask, chunk_tokens,
                                           gradient_accumulation_fusion);
}

}  // namespace varuna::kernels
