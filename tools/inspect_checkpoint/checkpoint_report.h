// A readable report of a checkpoint, the library behind //tools/inspect_checkpoint:
//
//   bazel run //tools/inspect_checkpoint -- DIR [--iteration N] [--tensors]
//
// DIR is either a --save directory or one varuna_ckpt_<n> directory in it.
//  - For a save directory the report first lists every varuna_ckpt_<n> in it, newest first,
//    each "complete, intact" or the reason it is not (every file's size and CRC-32C, which
//    --load checks as it reads a checkpoint before it falls back to an older one), and which
//    one `--load DIR` would resume from (varuna::LatestCheckpointIteration without the damaged
//    ones, and its note). The
//    full report then follows for --iteration N, else for that one, else (when none is
//    loadable) for the newest.
//  - The full report verifies the checkpoint as varuna::ReadCheckpointManifest does with
//    CheckpointCheck::kChecksums (COMPLETE, metadata.json, every file's size and CRC-32C) and
//    prints its directory, iteration, status, layout, consumed samples, optimizer steps, loss
//    scale, model configuration, the ranks that wrote it (stage, replica), and a table of the
//    segment files (segment, file, writing rank, size, CRC check, tensors, tensor bytes; with
//    --tensors each tensor's name, dtype and shape), then the totals.
//  - For a checkpoint that is not complete and intact the report still says what could be
//    learned: if metadata.json is readable, everything above with the damaged files marked;
//    otherwise the files present on disk (segment files, rank markers).
//
// The full report reads every segment file once (its CRC-32C is computed while its tensors
// are read), so inspecting a large checkpoint takes as long as reading it from disk.
//
// Thread safety: the functions are reentrant; the checkpoint must not be written while it
// is inspected (the report would then describe a half-written checkpoint as incomplete).
#ifndef VARUNA_TOOLS_INSPECT_CHECKPOINT_CHECKPOINT_REPORT_H_
#define VARUNA_TOOLS_INSPECT_CHECKPOINT_CHECKPOINT_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tools {

// What to inspect. Paths are used as given (the program resolves relative ones).
struct InspectOptions {
  // --help was given: print kInspectUsage and `flags_help` (every flag with its default).
  bool help_requested = false;
  std::string flags_help;
  // DIR: a save directory or one varuna_ckpt_<n> directory.
  std::string path;
  // --iteration: the checkpoint of a save directory to report in full; -1: the one --load
  // would resume from. With a varuna_ckpt_<n> DIR it must be n (or -1).
  int64_t iteration = -1;
  // --tensors: list every tensor of every segment file.
  bool list_tensors = false;
};

// The usage text of inspect_checkpoint.
inline constexpr char kInspectUsage[] =
    "usage: inspect_checkpoint DIR [--iteration N] [--tensors]\n"
    "  DIR          a --save directory (lists its checkpoints, then reports the one --load\n"
    "               would resume from, or --iteration N) or one varuna_ckpt_<n> directory\n"
    "  --tensors    also list every tensor (name, dtype, shape) of every segment file\n"
    "exit status: 0 if the reported checkpoint is complete and intact, 1 if not, 2 on bad usage";

// Parses inspect_checkpoint's arguments (without the program name): one positional DIR,
// "--iteration N" or "--iteration=N", and "--tensors". Errors: InvalidArgument naming the
// argument (missing or extra DIR, unknown flag, missing or malformed value); the program
// prints kInspectUsage with it and exits 2.
absl::StatusOr<InspectOptions> ParseInspectArgs(const std::vector<std::string>& args);

// The outcome of an inspection.
struct CheckpointInspection {
  // The report for stdout: always filled, also when `status` is an error, with as much as
  // could be learned (empty only if DIR itself is unusable).
  std::string report;
  // OK if the reported checkpoint is complete and intact (every CRC-32C matches). Otherwise
  // the error naming the file and the problem (DataLoss from the checkpoint reader, e.g.
  // "<dir>/COMPLETE is missing ..." or "<file>: CRC-32C checksum mismatch ..."), NotFound
  // for a DIR that does not exist or holds no varuna_ckpt_<n>, or for an --iteration
  // that is not there, InvalidArgument for an --iteration contradicting a varuna_ckpt_<n> DIR.
  absl::Status status;
  // The iteration reported in full, -1 if none.
  int64_t iteration = -1;
};

// Inspects options.path as described at the top of this file.
CheckpointInspection InspectCheckpoint(const InspectOptions& options);

}  // namespace tools

#endif  // VARUNA_TOOLS_INSPECT_CHECKPOINT_CHECKPOINT_REPORT_H_
