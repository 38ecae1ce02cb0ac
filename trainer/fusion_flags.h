// The rules of the fusion flags that need other flags, shared by pretrain_gpt2 (ValidateArguments)
// and the throughput benchmark, so that both refuse the same combinations in the same words.
//
// Thread safety: pure functions.
#ifndef VARUNA_TRAINER_FUSION_FLAGS_H_
#define VARUNA_TRAINER_FUSION_FLAGS_H_

#include <string>

#include "absl/status/status.h"

namespace trainer {

// --bias-gelu-gemm-fusion, given with the other flags' values: InvalidArgument naming the
// conflict and the fix where it is refused: without --bias-dropout-fusion (the fused MLP leaves
// c_proj's bias to it), with --deterministic (cuBLASLt's bias-gradient epilogue is not shown
// repeatable), with --fp8-format (`fp8_format` not empty: FP8 GEMMs have no GeLU epilogue). OK
// otherwise.
absl::Status CheckBiasGeluGemmFusion(bool bias_dropout_fusion, bool deterministic,
                                     const std::string& fp8_format);

}  // namespace trainer

#endif  // VARUNA_TRAINER_FUSION_FLAGS_H_
