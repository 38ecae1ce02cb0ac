// TensorMap: named input tensors of one batch or micro-batch (Varuna's input dict).
#ifndef VARUNA_PIPELINE_TENSOR_MAP_H_
#define VARUNA_PIPELINE_TENSOR_MAP_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace varuna {

// Keys are the model's input names; every tensor has the batch in dimension 0.
using TensorMap = std::map<std::string, at::Tensor>;

}  // namespace varuna

#endif  // VARUNA_PIPELINE_TENSOR_MAP_H_
