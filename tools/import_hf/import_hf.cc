// import_hf: a Hugging Face GPT-2 folder (config.json, model.safetensors) as a weights-only
// pretrain_gpt2 checkpoint, OUT/varuna_ckpt_0, that any pipeline x data-parallel layout loads with
// --finetune (or --no-load-optim). See tools/import_hf/hf_import.h.
//
//   bazel run //tools/import_hf -- IN OUT [--make-vocab-size-divisible-by N]
//
// Relative paths resolve against the directory bazel run was started from. Exit status: 0 on
// success, 1 on an error (printed as "import_hf: error: ..."), 2 on a usage error.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/import_hf/hf_import.h"
#include "varuna/io/user_paths.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<tools::HfImportOptions> options = tools::ParseHfImportArgs(args);
  if (!options.ok()) {
    std::fprintf(stderr, "import_hf: error: %s\n%s\n",
                 std::string(options.status().message()).c_str(), tools::kHfImportUsage);
    return 2;
  }
  if (options->help_requested) {
    std::printf("%s\nflags:\n%s", tools::kHfImportUsage, options->flags_help.c_str());
    return 0;
  }
  const std::string output_dir = options->output_dir;
  options->input_dir = varuna::ResolveUserPath(options->input_dir);
  options->output_dir = varuna::ResolveUserPath(options->output_dir);
  absl::StatusOr<tools::HfImportSummary> summary = tools::ImportHuggingFace(*options);
  if (!summary.ok()) {
    std::fprintf(stderr, "import_hf: error: %s\n", std::string(summary.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", summary->Report(output_dir).c_str());
  return 0;
}
