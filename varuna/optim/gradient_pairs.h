// The model's gradients paired with the fp32 master gradients they are unscaled into, as the
// two lists one multi-tensor unscale (varuna/kernels/multi_tensor.h) takes.
#ifndef VARUNA_OPTIM_GRADIENT_PAIRS_H_
#define VARUNA_OPTIM_GRADIENT_PAIRS_H_

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <vector>

#include "varuna/optim/adam.h"

namespace varuna {

struct GradientPairs {
  std::vector<at::Tensor> model;   // each parameter's .grad(), contiguous
  std::vector<at::Tensor> master;  // master_grads[k] of the same parameter
};

// For the parameters `indices` of `params`: each defined gradient with its master gradient
// (master_grads[k], same order). The master gradient of a parameter without a gradient (one
// the step did not reach) is zeroed instead of paired.
GradientPairs PairGradients(const std::vector<NamedParameter>& params,
                            std::vector<at::Tensor>& master_grads,
                            const std::vector<size_t>& indices);

// The same for every parameter.
GradientPairs PairGradients(const std::vector<NamedParameter>& params,
                            std::vector<at::Tensor>& master_grads);

}  // namespace varuna

#endif  // VARUNA_OPTIM_GRADIENT_PAIRS_H_
