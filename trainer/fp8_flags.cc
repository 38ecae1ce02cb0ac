#include "trainer/fp8_flags.h"

#include "absl/strings/str_cat.h"

namespace trainer {

absl::StatusOr<std::optional<varuna::kernels::Fp8Recipe>> Fp8RecipeFromFlags(
    const std::string& format, int64_t amax_history_len, const std::string& amax_compute_algo,
    int margin, bool others_given) {
  if (format.empty()) {
    if (others_given) {
      return absl::InvalidArgumentError(
          "--fp8-amax-history-len, --fp8-amax-compute-algo and --fp8-margin tune FP8, which is "
          "off: add --fp8-format=hybrid (or e4m3), or drop them");
    }
    return std::optional<varuna::kernels::Fp8Recipe>();
  }
  varuna::kernels::Fp8Recipe recipe;
  absl::StatusOr<varuna::kernels::Fp8Format> parsed_format =
      varuna::kernels::ParseFp8Format(format);
  if (!parsed_format.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fp8-format: ", parsed_format.status().message()));
  }
  recipe.format = *parsed_format;
  absl::StatusOr<varuna::kernels::Fp8AmaxComputeAlgo> algo =
      varuna::kernels::ParseFp8AmaxComputeAlgo(amax_compute_algo);
  if (!algo.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fp8-amax-compute-algo: ", algo.status().message()));
  }
  recipe.amax_compute_algo = *algo;
  recipe.amax_history_len = amax_history_len;
  recipe.margin = margin;
  if (amax_history_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fp8-amax-history-len=", amax_history_len,
                     " must be at least 1 (the steps of amax the scale is computed from; "
                     "Megatron's default is 1)"));
  }
  if (margin < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fp8-margin=", margin, " must be at least 0 (scale = fp8_max / amax / 2^margin)"));
  }
  if (absl::Status status = varuna::kernels::ValidateFp8Recipe(recipe); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--fp8-*: ", status.message()));
  }
  return std::optional<varuna::kernels::Fp8Recipe>(recipe);
}

std::string DescribeFp8Recipe(const varuna::kernels::Fp8Recipe& recipe) {
  return absl::StrCat("> fp8: ", varuna::kernels::Fp8FormatName(recipe.format),
                      recipe.format == varuna::kernels::Fp8Format::kHybrid
                          ? " (E4M3 forward, E5M2 gradients)"
                          : " (E4M3 forward and gradients)",
                      ", delayed scaling: amax history ", recipe.amax_history_len, ", ",
                      varuna::kernels::Fp8AmaxComputeAlgoName(recipe.amax_compute_algo),
                      ", margin ", recipe.margin);
}

}  // namespace trainer
