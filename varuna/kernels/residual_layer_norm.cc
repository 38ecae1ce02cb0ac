#include "varuna/kernels/residual_layer_norm.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <utility>

#include "varuna/kernels/argument_checks.h"
#include "varuna/kernels/bias_dropout_add_layer_norm.h"
#include "varuna/kernels/layer_norm.h"

namespace varuna::kernels {
namespace {

struct ResidualLayerNormFunction : torch::autograd::Function<ResidualLayerNormFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& x, const at::Tensor& weight,
                                                const at::Tensor& bias, double epsilon) {
    LayerNormForwardResult norm = LayerNormForward(x, weight, bias, epsilon);
    ctx->save_for_backward({x, norm.mean, norm.rstd, weight});
    // An input returned unmodified: autograd hands out a view of it whose gradient comes here.
    return {x, norm.output};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    // An output nobody used comes as zeros (the context materialises undefined gradients).
    BiasDropoutAddLayerNormGrads grads =
        BiasDropoutAddLayerNormBackward(grad_outputs[1], grad_outputs[0], saved[0], /*mask=*/{},
                                        saved[1], saved[2], saved[3], /*p=*/0.0);
    return {grads.residual, grads.ln_weight, grads.ln_bias, at::Tensor()};
  }
};

}  // namespace

ResidualLayerNormOutputs ResidualLayerNorm(const at::Tensor& x, const at::Tensor& weight,
                                           const at::Tensor& bias, double epsilon) {
  // Autograd cannot take an undefined input; the other checks are LayerNormForward's.
  for (auto [t, name] : {std::pair{&x, "x"}, {&weight, "weight"}, {&bias, "bias"}}) {
    CheckDefined(*t, "ResidualLayerNorm", name);
  }
  torch::autograd::variable_list outputs =
      ResidualLayerNormFunction::apply(x, weight, bias, epsilon);
  return {outputs[0], outputs[1]};
}

}  // namespace varuna::kernels
