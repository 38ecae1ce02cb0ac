#include "models/gpt2/parameter_names.h"

#include <cctype>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace gpt2 {
namespace {

// The per-layer parameter suffixes, in registration order.
constexpr const char* kLayerSuffixes[] = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias",
};

enum class Kind { kWordEmbedding, kPositionEmbedding, kLayer, kFinalNorm, kLmHead };

struct ParsedName {
  Kind kind;
  int layer = -1;            // kLayer only
  absl::string_view suffix;  // kLayer: e.g. "mlp.c_fc.weight"
};

// Recognises the names of the table in the header, independent of any config.
std::optional<ParsedName> Parse(absl::string_view name) {
  if (name == kWordEmbeddingName) return ParsedName{Kind::kWordEmbedding, -1, {}};
  if (name == "wpe.weight") return ParsedName{Kind::kPositionEmbedding, -1, {}};
  if (name == "ln_f.weight" || name == "ln_f.bias") return ParsedName{Kind::kFinalNorm, -1, {}};
  if (name == kLmHeadName) return ParsedName{Kind::kLmHead, -1, {}};
  if (!absl::ConsumePrefix(&name, "h.")) return std::nullopt;
  const size_t dot = name.find('.');
  if (dot == absl::string_view::npos || dot == 0) return std::nullopt;
  const absl::string_view index = name.substr(0, dot);
  for (char c : index) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  if (index.size() > 1 && index[0] == '0') return std::nullopt;  // "h.05" is not a name
  int layer = 0;
  if (!absl::SimpleAtoi(index, &layer)) return std::nullopt;
  const absl::string_view suffix = name.substr(dot + 1);
  for (const char* known : kLayerSuffixes) {
    if (suffix == known) return ParsedName{Kind::kLayer, layer, suffix};
  }
  return std::nullopt;
}

}  // namespace

int64_t ParameterSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<ParameterSpec> SegmentParameters(const Gpt2Config& config, int segment) {
  std::vector<ParameterSpec> specs;
  if (segment < 0 || segment >= config.num_layers) return specs;
  const int64_t h = config.hidden_size;
  const int64_t vocab = config.padded_vocab_size();
  if (segment == 0) {
    specs.push_back({kWordEmbeddingName, {vocab, h}});
    specs.push_back({"wpe.weight", {config.max_position_embeddings, h}});
  }
  const std::string prefix = absl::StrCat("h.", segment, ".");
  const std::vector<std::vector<int64_t>> layer_shapes = {
      {h}, {h}, {3 * h, h}, {3 * h}, {h, h}, {h}, {h}, {h}, {4 * h, h}, {4 * h}, {h, 4 * h}, {h},
  };
  for (size_t i = 0; i < layer_shapes.size(); ++i) {
    specs.push_back({prefix + kLayerSuffixes[i], layer_shapes[i]});
  }
  if (segment == config.num_layers - 1) {
    specs.push_back({"ln_f.weight", {h}});
    specs.push_back({"ln_f.bias", {h}});
    specs.push_back({kLmHeadName, {vocab, h}});
  }
  return specs;
}

int SegmentOfParameter(const Gpt2Config& config, const std::string& name) {
  const std::optional<ParsedName> parsed = Parse(name);
  if (!parsed || config.num_layers <= 0) return -1;
  switch (parsed->kind) {
    case Kind::kWordEmbedding:
    case Kind::kPositionEmbedding:
      return 0;
    case Kind::kLayer:
      return parsed->layer < config.num_layers ? parsed->layer : -1;
    case Kind::kFinalNorm:
    case Kind::kLmHead:
      return config.num_layers - 1;
  }
  return -1;
}

bool DecaysWeight(const std::string& name) {
  if (absl::EndsWith(name, ".bias")) return false;
  const std::optional<ParsedName> parsed = Parse(name);
  if (!parsed) return true;
  if (parsed->kind == Kind::kFinalNorm) return false;
  if (parsed->kind == Kind::kLayer && absl::StartsWith(parsed->suffix, "ln_")) return false;
  return true;
}

std::string HuggingFaceName(const std::string& name) {
  const std::optional<ParsedName> parsed = Parse(name);
  if (!parsed) return "";
  if (parsed->kind == Kind::kLmHead) return "lm_head.weight";
  return absl::StrCat("transformer.", name);
}

bool TransposedInHuggingFace(const std::string& name) {
  const std::optional<ParsedName> parsed = Parse(name);
  if (!parsed || parsed->kind != Kind::kLayer) return false;
  return parsed->suffix == "attn.c_attn.weight" || parsed->suffix == "attn.c_proj.weight" ||
         parsed->suffix == "mlp.c_fc.weight" || parsed->suffix == "mlp.c_proj.weight";
}

}  // namespace gpt2
