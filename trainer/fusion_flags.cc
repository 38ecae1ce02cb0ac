#include "trainer/fusion_flags.h"

#include "absl/strings/str_cat.h"

namespace trainer {

absl::Status CheckBiasGeluGemmFusion(bool bias_dropout_fusion, bool deterministic,
                                     const std::string& fp8_format) {
  if (!bias_dropout_fusion) {
    return absl::InvalidArgumentError(
        "--bias-gelu-gemm-fusion needs --bias-dropout-fusion (the fused MLP leaves c_proj's bias "
        "to that op), but --no-bias-dropout-fusion was given: drop --no-bias-dropout-fusion, or "
        "drop --bias-gelu-gemm-fusion");
  }
  if (deterministic) {
    return absl::InvalidArgumentError(
        "--bias-gelu-gemm-fusion and --deterministic: cuBLASLt's bias-gradient epilogue has not "
        "been shown repeatable on a GPU yet (gelu_mlp_test_gpu checks it): drop "
        "--bias-gelu-gemm-fusion");
  }
  if (!fp8_format.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--bias-gelu-gemm-fusion and --fp8-format=", fp8_format,
        " exclude each other: FP8 runs the MLP's linears as FP8 GEMMs, which have no GeLU "
        "epilogue: drop one of them"));
  }
  return absl::OkStatus();
}

}  // namespace trainer
