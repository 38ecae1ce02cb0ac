// inspect_checkpoint: prints what a pretrain_gpt2 checkpoint holds and whether it is complete
// and intact. See tools/inspect_checkpoint/checkpoint_report.h.
//
//   bazel run //tools/inspect_checkpoint -- DIR [--iteration N] [--tensors]
//
// Relative paths resolve against the directory bazel run was started from. Exit status: 0 if
// the reported checkpoint is complete and intact, 1 if not (printed as
// "inspect_checkpoint: error: ..."), 2 on a usage error.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/inspect_checkpoint/checkpoint_report.h"
#include "varuna/io/user_paths.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<tools::InspectOptions> options = tools::ParseInspectArgs(args);
  if (!options.ok()) {
    std::fprintf(stderr, "inspect_checkpoint: error: %s\n%s\n",
                 std::string(options.status().message()).c_str(), tools::kInspectUsage);
    return 2;
  }
  if (options->help_requested) {
    std::printf("%s\nflags:\n%s", tools::kInspectUsage, options->flags_help.c_str());
    return 0;
  }
  options->path = varuna::ResolveUserPath(options->path);
  const tools::CheckpointInspection inspection = tools::InspectCheckpoint(*options);
  std::fputs(inspection.report.c_str(), stdout);
  std::fflush(stdout);
  if (!inspection.status.ok()) {
    std::fprintf(stderr, "inspect_checkpoint: error: %s\n",
                 std::string(inspection.status.message()).c_str());
    return 1;
  }
  return 0;
}
