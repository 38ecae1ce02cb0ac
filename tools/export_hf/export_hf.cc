// export_hf: writes a Hugging Face GPT-2 folder (model.safetensors, config.json, the tokenizer
// files) from a pretrain_gpt2 checkpoint, loadable with transformers'
// GPT2LMHeadModel.from_pretrained(OUT). See tools/export_hf/hf_export.h.
//
//   bazel run //tools/export_hf -- CKPT OUT [--tokenizer-model PATH | --vocab-file PATH
//                                   --merge-file PATH] [--tokenizer-type TYPE] [--iteration N]
//                                   [--vocab-size N]
//
// Relative paths resolve against the directory bazel run was started from. Exit status: 0 on
// success, 1 on an error (printed as "export_hf: error: ..."), 2 on a usage error.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/export_hf/hf_export.h"
#include "varuna/io/user_paths.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<tools::HfExportOptions> options = tools::ParseHfExportArgs(args);
  if (!options.ok()) {
    std::fprintf(stderr, "export_hf: error: %s\n%s\n",
                 std::string(options.status().message()).c_str(), tools::kHfExportUsage);
    return 2;
  }
  if (options->help_requested) {
    std::printf("%s\nflags:\n%s", tools::kHfExportUsage, options->flags_help.c_str());
    return 0;
  }
  options->checkpoint = varuna::ResolveUserPath(options->checkpoint);
  options->output_dir = varuna::ResolveUserPath(options->output_dir);
  options->tokenizer_model = varuna::ResolveUserPath(options->tokenizer_model);
  options->vocab_file = varuna::ResolveUserPath(options->vocab_file);
  options->merge_file = varuna::ResolveUserPath(options->merge_file);
  absl::StatusOr<tools::HfExportSummary> summary = tools::ExportHuggingFace(*options);
  if (!summary.ok()) {
    std::fprintf(stderr, "export_hf: error: %s\n", std::string(summary.status().message()).c_str());
    return 1;
  }
  for (const std::string& note : summary->notes) std::printf("%s\n", note.c_str());
  for (const std::string& warning : summary->warnings) {
    std::fprintf(stderr, "export_hf: warning: %s\n", warning.c_str());
  }
  std::printf("%s\n", summary->Line().c_str());
  return 0;
}
