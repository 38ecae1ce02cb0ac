#include "models/gpt2/config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpt2 {
namespace {

struct Preset {
  const char* name;
  int num_layers;
  int hidden_size;
  int num_attention_heads;
  int seq_length;
};

// Sizes of Megatron-LM's GPT-2 family as Varuna trained it.
constexpr Preset kPresets[] = {
    {"gpt2-tiny", 4, 128, 4, 128},     {"gpt2-355m", 24, 1024, 16, 1024},
    {"gpt2-1.5b", 48, 1600, 16, 1024}, {"gpt2-2.5b", 54, 1920, 20, 1024},
    {"gpt2-8.3b", 72, 3072, 32, 1024},
};

absl::Status Positive(const char* flag, int value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, "=", value, " must be positive: pass a value >= 1"));
}

absl::Status Probability(const char* flag, double value) {
  if (value >= 0.0 && value < 1.0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      flag, "=", value, " is not a dropout probability in [0, 1): pass e.g. 0.1, or 0 to disable"));
}

// The divisors of n, for the message about heads.
std::string Divisors(int n) {
  std::vector<int> divisors;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) divisors.push_back(d);
  }
  return absl::StrJoin(divisors, ",");
}

}  // namespace

int64_t Gpt2Config::padded_vocab_size() const {
  const int64_t multiple = make_vocab_size_divisible_by > 0 ? make_vocab_size_divisible_by : 1;
  return (static_cast<int64_t>(vocab_size) + multiple - 1) / multiple * multiple;
}

absl::Status Gpt2Config::Validate() const {
  for (absl::Status status :
       {Positive("--num-layers", num_layers), Positive("--hidden-size", hidden_size),
        Positive("--num-attention-heads", num_attention_heads),
        Positive("--seq-length", seq_length),
        Positive("--max-position-embeddings", max_position_embeddings),
        Positive("--make-vocab-size-divisible-by", make_vocab_size_divisible_by)}) {
    if (!status.ok()) return status;
  }
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocab_size=", vocab_size,
        " must be positive: set it to the tokenizer's vocabulary size before building the model"));
  }
  if (hidden_size % num_attention_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--hidden-size=", hidden_size,
        " is not divisible by --num-attention-heads=", num_attention_heads,
        ": choose a head count that divides the hidden size (", Divisors(hidden_size), ")"));
  }
  if (seq_length > max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--seq-length=", seq_length, " exceeds --max-position-embeddings=", max_position_embeddings,
        ": raise --max-position-embeddings or shorten --seq-length"));
  }
  if (absl::Status s = Probability("--hidden-dropout", hidden_dropout); !s.ok()) return s;
  if (absl::Status s = Probability("--attention-dropout", attention_dropout); !s.ok()) return s;
  if (!(init_method_std > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--init-method-std=", init_method_std, " must be positive: pass e.g. 0.02"));
  }
  if (!(layernorm_epsilon > 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat("--layernorm-epsilon=", layernorm_epsilon,
                                                   " must be positive: pass e.g. 1e-5"));
  }
  return absl::OkStatus();
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const Preset& preset : kPresets) names.push_back(preset.name);
  return names;
}

absl::StatusOr<Gpt2Config> PresetConfig(const std::string& name) {
  for (const Preset& preset : kPresets) {
    if (name != preset.name) continue;
    Gpt2Config config;
    config.num_layers = preset.num_layers;
    config.hidden_size = preset.hidden_size;
    config.num_attention_heads = preset.num_attention_heads;
    config.seq_length = preset.seq_length;
    config.max_position_embeddings = preset.seq_length;
    config.vocab_size = 0;
    return config;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--preset=", name, " is not a known model: use one of ", absl::StrJoin(PresetNames(), ", ")));
}

}  // namespace gpt2
