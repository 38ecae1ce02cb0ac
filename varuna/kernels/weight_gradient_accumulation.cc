#include "varuna/kernels/weight_gradient_accumulation.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include "varuna/kernels/argument_checks.h"

namespace varuna::kernels {
namespace {

constexpr const char* kOp = "AccumulateWeightGradient";

void CheckArguments(const at::Tensor& input, const at::Tensor& grad_output,
                    const at::Tensor& main_grad) {
  CheckDefined(input, kOp, "input");
  CheckDefined(grad_output, kOp, "grad_output");
  CheckDefined(main_grad, kOp, "main_grad");
  CheckFloatingType(input, kOp, "input");
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type(), kOp, ": grad_output is ",
              grad_output.scalar_type(), " but input is ", input.scalar_type(),
              "; pass both in the layer's dtype");
  TORCH_CHECK(main_grad.scalar_type() == ComputeType(input.scalar_type()), kOp, ": main_grad is ",
              main_grad.scalar_type(), " but ", input.scalar_type(), " inputs accumulate into ",
              ComputeType(input.scalar_type()), "; allocate main_grad in that dtype");
  CheckSameDevice(grad_output, input, kOp, "grad_output", "input");
  CheckSameDevice(main_grad, input, kOp, "main_grad", "input");
  TORCH_CHECK(input.dim() == 2 && grad_output.dim() == 2 && main_grad.dim() == 2, kOp,
              ": input [N, in], grad_output [N, out] and main_grad [out, in] must be 2-D, got ",
              input.sizes(), ", ", grad_output.sizes(), " and ", main_grad.sizes(),
              "; flatten the leading dimensions of input and grad_output");
  TORCH_CHECK(input.size(0) == grad_output.size(0), kOp, ": input has ", input.size(0),
              " rows but grad_output has ", grad_output.size(0), "; pass the same tokens");
  TORCH_CHECK(main_grad.size(0) == grad_output.size(1) && main_grad.size(1) == input.size(1), kOp,
              ": main_grad is ", main_grad.sizes(), " but grad_output^T input is [",
              grad_output.size(1), ", ", input.size(1), "]; pass the weight's main gradient");
  TORCH_CHECK(main_grad.is_contiguous(), kOp,
              ": main_grad must be contiguous (it is written in place)");
}

}  // namespace

at::Tensor& AccumulateWeightGradient(const at::Tensor& input, const at::Tensor& grad_output,
                                     at::Tensor& main_grad) {
  CheckArguments(input, grad_output, main_grad);
  at::NoGradGuard no_grad;
  const at::ScalarType dtype = input.scalar_type();
  const bool half = dtype == at::kHalf || dtype == at::kBFloat16;
  if (main_grad.is_cuda() && half) {
    // cuBLAS: half A and B, fp32 C, beta = 1 (C read and written in place).
    at::addmm_out(main_grad, main_grad, grad_output.t(), input, at::kFloat, /*beta=*/1,
                  /*alpha=*/1);
    return main_grad;
  }
  const at::ScalarType acc = main_grad.scalar_type();
  main_grad.addmm_(grad_output.t().to(acc), input.to(acc));
  return main_grad;
}

}  // namespace varuna::kernels
