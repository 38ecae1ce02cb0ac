#include "varuna/pipeline/partition.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace varuna {

absl::StatusOr<std::vector<SegmentRange>> PartitionSegments(int num_segments, int num_stages) {
  if (num_segments < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", num_segments,
                     " segments (layers) to partition: it needs at least 1 (check --num-layers)"));
  }
  if (num_stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nstages=", num_stages, " must be at least 1 (1 = no pipeline)"));
  }
  if (num_stages > num_segments) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nstages=", num_stages, " is more than the ", num_segments,
                     " segments (layers) of the model: use at most ", num_segments));
  }
  const int base = num_segments / num_stages;
  const int extra = num_segments % num_stages;  // one more segment for stages 0..extra-1
  std::vector<SegmentRange> ranges;
  ranges.reserve(num_stages);
  int first = 0;
  for (int stage = 0; stage < num_stages; ++stage) {
    const int size = base + (stage < extra ? 1 : 0);
    ranges.push_back({first, first + size - 1});
    first += size;
  }
  return ranges;
}

}  // namespace varuna
