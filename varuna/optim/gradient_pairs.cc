#include "varuna/optim/gradient_pairs.h"

#include <numeric>

namespace varuna {

GradientPairs PairGradients(const std::vector<NamedParameter>& params,
                            std::vector<at::Tensor>& master_grads,
                            const std::vector<size_t>& indices) {
  GradientPairs pairs;
  for (size_t k : indices) {
    const at::Tensor& grad = params[k].tensor.grad();
    if (grad.defined()) {
      pairs.model.push_back(grad.is_contiguous() ? grad : grad.contiguous());
      pairs.master.push_back(master_grads[k]);
    } else {
      master_grads[k].zero_();
    }
  }
  return pairs;
}

GradientPairs PairGradients(const std::vector<NamedParameter>& params,
                            std::vector<at::Tensor>& master_grads) {
  std::vector<size_t> all(params.size());
  std::iota(all.begin(), all.end(), size_t{0});
  return PairGradients(params, master_grads, all);
}

}  // namespace varuna
