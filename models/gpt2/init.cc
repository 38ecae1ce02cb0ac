#include "models/gpt2/init.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <cmath>

#include "models/gpt2/parameter_names.h"

namespace gpt2 {
namespace {

constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

uint64_t ParameterSeed(uint64_t seed, const std::string& name) {
  uint64_t hash = kFnvOffsetBasis;
  for (int byte = 0; byte < 8; ++byte) {
    hash ^= (seed >> (8 * byte)) & 0xff;
    hash *= kFnvPrime;
  }
  for (unsigned char c : name) {
    hash ^= c;
    hash *= kFnvPrime;
  }
  return hash;
}

void InitializeParameter(const Gpt2Config& config, uint64_t seed, const std::string& name,
                         at::Tensor& parameter) {
  TORCH_CHECK(SegmentOfParameter(config, name) >= 0, "cannot initialise '", name,
              "': not a parameter of this GPT-2 model (see models/gpt2/parameter_names.h)");
  TORCH_CHECK(parameter.device().is_cpu(), "cannot initialise '", name, "' on ", parameter.device(),
              ": initialise on the CPU, then move the model");
  c10::AutoGradMode no_grad(false);
  if (EndsWith(name, ".bias")) {
    parameter.zero_();
    return;
  }
  if (!DecaysWeight(name)) {  // LayerNorm weight
    parameter.fill_(1.0);
    return;
  }
  double std = config.init_method_std;
  if (EndsWith(name, "attn.c_proj.weight") || EndsWith(name, "mlp.c_proj.weight")) {
    std /= std::sqrt(2.0 * config.num_layers);
  }
  const std::string& seed_name = name == kLmHeadName ? std::string(kWordEmbeddingName) : name;
  at::Generator generator =
      at::make_generator<at::CPUGeneratorImpl>(ParameterSeed(seed, seed_name));
  parameter.normal_(0.0, std, generator);
}

}  // namespace gpt2
