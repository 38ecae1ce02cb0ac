#include "trainer/deterministic_mode.h"

#include <ATen/Context.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace trainer {

absl::StatusOr<std::string> DeterministicCublasWorkspace(const char* current) {
  if (current == nullptr || *current == '\0') return std::string(kDeterministicCublasWorkspace);
  const std::string value = current;
  if (value == ":4096:8" || value == ":16:8") return value;
  return absl::InvalidArgumentError(absl::StrCat(
      "--deterministic: the environment variable ", kCublasWorkspaceVariable, "=\"", value,
      "\" lets cuBLAS pick non-deterministic GEMM reductions: unset it (the mode then sets ",
      kDeterministicCublasWorkspace, ") or set it to :4096:8 or :16:8"));
}

absl::StatusOr<std::vector<std::string>> EnterDeterministicMode() {
  const char* current = std::getenv(kCublasWorkspaceVariable);
  const bool given = current != nullptr && *current != '\0';
  absl::StatusOr<std::string> workspace = DeterministicCublasWorkspace(current);
  if (!workspace.ok()) return workspace.status();
  // Before cuBLAS initializes (it reads the variable once, at its first handle).
  setenv(kCublasWorkspaceVariable, workspace->c_str(), /*overwrite=*/1);
  at::Context& context = at::globalContext();
  context.setDeterministicAlgorithms(true, /*warn_only=*/false);
  context.setDeterministicCuDNN(true);
  context.setBenchmarkCuDNN(false);
  context.setSDPUseCuDNN(false);
  return std::vector<std::string>{
      "> deterministic: LibTorch's deterministic algorithms on (warn_only=false: an op without "
      "a deterministic implementation stops the run, naming the op; at::empty's memory is "
      "filled, LibTorch's default under the switch)",
      absl::StrCat("> deterministic: ", kCublasWorkspaceVariable, "=", *workspace,
                   given ? " (from the environment)" : " (set by --deterministic)"),
      "> deterministic: cuDNN deterministic, cuDNN benchmark off",
      "> deterministic: SDPA limited to flash, memory-efficient and math (cuDNN attention has "
      "no deterministic kernel)",
      "> deterministic: varuna's CUDA kernels (layer_norm, bias_gelu, causal_softmax, "
      "multi_tensor, fused_adam, softmax_cross_entropy) reduce in a fixed order: no switch needed"};
}

std::optional<std::string> NondeterministicOperation(std::string_view message) {
  constexpr std::string_view kAlert = " does not have a deterministic implementation";
  const size_t end = message.find(kAlert);
  if (end == std::string_view::npos) return std::nullopt;
  // The op is the last word before the alert (LibTorch may prefix its own context).
  size_t begin = message.find_last_of(" \n\t", end == 0 ? 0 : end - 1);
  begin = begin == std::string_view::npos ? 0 : begin + 1;
  if (begin >= end) return std::nullopt;
  return std::string(message.substr(begin, end - begin));
}

std::string NondeterministicOperationError(const std::string& op) {
  return absl::StrCat(
      "--deterministic: the op ", op,
      " has no deterministic implementation in LibTorch on this device, so this run cannot be "
      "bitwise repeatable. Avoid the op (for attention: --attention-backend=fused-softmax; see "
      "README, \"Determinism\"), or run without --deterministic");
}

}  // namespace trainer
