// What the model tests ask of an autograd graph: whether a given op is in it (so that a test can
// tell which path a switch took even where both paths compute the same bits).
#ifndef TESTS_MODELS_GPT2_AUTOGRAD_GRAPH_H_
#define TESTS_MODELS_GPT2_AUTOGRAD_GRAPH_H_

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/function.h>

#include <set>
#include <string>
#include <vector>

namespace gpt2::testing {

// A node of the graph behind `root` (its grad_fn and everything it reaches) whose name contains
// `name` (a custom op's node is named after its Function type, e.g. GeluMlpFunction), or null.
// Call it before the backward, which frees the graph's saved tensors but not its nodes.
inline torch::autograd::Node* FindNode(const at::Tensor& root, const std::string& name) {
  std::vector<torch::autograd::Node*> pending = {root.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!pending.empty()) {
    torch::autograd::Node* node = pending.back();
    pending.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    if (node->name().find(name) != std::string::npos) return node;
    for (const torch::autograd::Edge& edge : node->next_edges()) {
      pending.push_back(edge.function.get());
    }
  }
  return nullptr;
}

// Whether FindNode finds one.
inline bool GraphHasNode(const at::Tensor& root, const std::string& name) {
  return FindNode(root, name) != nullptr;
}

}  // namespace gpt2::testing

#endif  // TESTS_MODELS_GPT2_AUTOGRAD_GRAPH_H_
