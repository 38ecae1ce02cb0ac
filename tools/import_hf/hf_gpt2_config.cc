#include "tools/import_hf/hf_gpt2_config.h"

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tools {
namespace {

using varuna::json::Value;

// Collects the problems of one config.json.
class FieldReader {
 public:
  explicit FieldReader(const Value& json) : json_(json) {}

  // A positive integer field; `fallback` (if set) when absent.
  int PositiveInt(const char* key, std::optional<int> fallback = std::nullopt) {
    const Value* value = varuna::json::Find(json_, key);
    if (value == nullptr || value->is_null()) {
      if (fallback) return *fallback;
      problems_.push_back(absl::StrCat(key, " is missing"));
      return 0;
    }
    const std::optional<int64_t> n = varuna::json::AsInt64(value);
    if (!n || *n <= 0 || *n > (int64_t{1} << 30)) {
      problems_.push_back(
          absl::StrCat(key, " is ", varuna::json::Serialize(*value), ", not a positive integer"));
      return 0;
    }
    return static_cast<int>(*n);
  }

  // A number field in [0, below); `fallback` when absent.
  double Number(const char* key, double fallback, double below) {
    const Value* value = varuna::json::Find(json_, key);
    if (value == nullptr || value->is_null()) return fallback;
    if (!value->is_number() || value->get<double>() < 0 || value->get<double>() >= below) {
      problems_.push_back(absl::StrCat(key, " is ", varuna::json::Serialize(*value),
                                       ", not a number in [0, ", below, ")"));
      return fallback;
    }
    return value->get<double>();
  }

  // A boolean field that must be `required` (`fallback` when absent); `why` says what the model
  // does instead.
  void RequireBool(const char* key, bool fallback, bool required, const char* why) {
    const Value* value = varuna::json::Find(json_, key);
    bool actual = fallback;
    if (value != nullptr && !value->is_null()) {
      if (!value->is_boolean()) {
        problems_.push_back(
            absl::StrCat(key, " is ", varuna::json::Serialize(*value), ", not true or false"));
        return;
      }
      actual = value->get<bool>();
    }
    if (actual != required) {
      problems_.push_back(absl::StrCat(key, " is ", actual ? "true" : "false", ": ", why));
    }
  }

  // A string field; `fallback` when absent.
  std::string String(const char* key, const std::string& fallback) {
    const Value* value = varuna::json::Find(json_, key);
    if (value == nullptr || value->is_null()) return fallback;
    if (!value->is_string()) {
      problems_.push_back(
          absl::StrCat(key, " is ", varuna::json::Serialize(*value), ", not a string"));
      return fallback;
    }
    return value->get<std::string>();
  }

  void Add(std::string problem) { problems_.push_back(std::move(problem)); }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  const Value& json_;
  std::vector<std::string> problems_;
};

}  // namespace

absl::StatusOr<gpt2::Gpt2Config> Gpt2ConfigFromHuggingFace(const Value& config_json,
                                                           const std::string& source,
                                                           int divisible_by) {
  if (!config_json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     " is not a JSON object: pass the config.json transformers writes "
                     "with save_pretrained"));
  }
  FieldReader read(config_json);
  const std::string model_type = read.String("model_type", "gpt2");
  if (model_type != "gpt2") {
    read.Add(absl::StrCat("model_type is \"", model_type,
                          "\": only GPT-2 (\"gpt2\", GPT2LMHeadModel) can be imported"));
  }
  gpt2::Gpt2Config config;
  config.num_layers = read.PositiveInt("n_layer");
  config.hidden_size = read.PositiveInt("n_embd");
  config.num_attention_heads = read.PositiveInt("n_head");
  const Value* n_ctx = varuna::json::Find(config_json, "n_ctx");
  const std::optional<int64_t> ctx = varuna::json::AsInt64(n_ctx);
  config.max_position_embeddings = read.PositiveInt(
      "n_positions", ctx && *ctx > 0 ? std::optional<int>(static_cast<int>(*ctx)) : std::nullopt);
  config.seq_length = config.max_position_embeddings;
  config.vocab_size = read.PositiveInt("vocab_size");
  config.make_vocab_size_divisible_by = divisible_by;
  if (config.hidden_size > 0 && config.num_attention_heads > 0 &&
      config.hidden_size % config.num_attention_heads != 0) {
    read.Add(absl::StrCat("n_embd ", config.hidden_size, " is not divisible by n_head ",
                          config.num_attention_heads,
                          " (each head gets n_embd / n_head features)"));
  }
  const Value* n_inner = varuna::json::Find(config_json, "n_inner");
  if (n_inner != nullptr && !n_inner->is_null() &&
      varuna::json::AsInt64(n_inner) != int64_t{4} * config.hidden_size) {
    read.Add(absl::StrCat("n_inner is ", varuna::json::Serialize(*n_inner),
                          ": the MLP of models/gpt2 is 4 * n_embd = ", 4 * config.hidden_size,
                          " wide (n_inner null)"));
  }
  config.layernorm_epsilon = read.Number("layer_norm_epsilon", 1e-5, 1.0);
  if (config.layernorm_epsilon != 1e-5) {
    read.Add(absl::StrCat("layer_norm_epsilon is ", config.layernorm_epsilon,
                          ": the trainer's LayerNorms use GPT-2's 1e-5 and have no flag for "
                          "another epsilon"));
  }
  config.hidden_dropout = read.Number("resid_pdrop", 0.1, 1.0);
  config.attention_dropout = read.Number("attn_pdrop", 0.1, 1.0);
  const std::string activation = read.String("activation_function", "gelu_new");
  if (activation != "gelu_new" && activation != "gelu_pytorch_tanh") {
    read.Add(absl::StrCat(
        "activation_function is \"", activation,
        "\": the MLP of models/gpt2 computes GPT-2's tanh-approximated GELU (\"gelu_new\", also "
        "\"gelu_pytorch_tanh\"); another activation would give another model"));
  }
  read.RequireBool("tie_word_embeddings", true, true,
                   "the trainer's LM head is tied to the word embedding (one matrix), so an "
                   "untied lm_head.weight cannot be kept");
  read.RequireBool("scale_attn_weights", true, true,
                   "the trainer's attention always scales the scores by 1/sqrt(head size)");
  read.RequireBool("scale_attn_by_inverse_layer_idx", false, false,
                   "the trainer's attention has no per-layer 1/(layer index + 1) scaling "
                   "(Mistral's variant of GPT-2)");
  read.RequireBool("reorder_and_upcast_attn", false, false,
                   "the trainer's attention has no reordered, upcast variant");
  if (!read.problems().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source,
        " describes a model that cannot be imported: ", absl::StrJoin(read.problems(), "; "),
        ". Import a GPT-2 (GPT2LMHeadModel) folder whose config.json has these fields as "
        "transformers' GPT2Config writes them"));
  }
  if (absl::Status status = config.Validate(); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", status.message()));
  }
  return config;
}

}  // namespace tools
