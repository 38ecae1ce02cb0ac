// Partition: which contiguous range of a model's cut-point segments each pipeline stage runs.
//
// L segments (for GPT-2: one per transformer layer, see pipeline/cut_point.h) are split into P
// contiguous stages as evenly as possible: stage sizes differ by at most one, and the
// L mod P extra segments go to the FIRST stages, because the last stage also carries the final
// layer norm, the LM head and the loss and should not get an extra layer on top.
//   L=24, P=4 -> [0,5] [6,11] [12,17] [18,23]   (Varuna's own layout when P divides L)
//   L=10, P=4 -> [0,2] [3,5]  [6,7]   [8,9]
// Unlike Varuna, which requires P to divide L (its section 1.4), uneven splits are allowed.
//
// A pure function: thread-safe.
#ifndef VARUNA_PIPELINE_PARTITION_H_
#define VARUNA_PIPELINE_PARTITION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "varuna/pipeline/segment_range.h"

namespace varuna {

// The P = `num_stages` segment ranges of stages 0..P-1, in order, covering segments
// 0..num_segments-1 exactly once. InvalidArgument naming --nstages and the model's segment
// count when num_segments < 1, num_stages < 1 or num_stages > num_segments.
absl::StatusOr<std::vector<SegmentRange>> PartitionSegments(int num_segments, int num_stages);

}  // namespace varuna

#endif  // VARUNA_PIPELINE_PARTITION_H_
