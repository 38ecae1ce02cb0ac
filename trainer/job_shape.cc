#include "trainer/job_shape.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/gpt2/config.h"
#include "varuna/pipeline/partition.h"
#include "varuna/pipeline/stage_map.h"

namespace trainer {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// --global-batch-size: the per-replica batch (see the header).
absl::Status ApplyGlobalBatch(TrainerArguments& a, int replicas) {
  const int global = a.global_batch_size;
  const int micro = a.chunk_size;  // 0: one micro-batch of the whole replica batch
  const int unit = std::max(micro, 1) * replicas;
  if (global % unit != 0) {
    const int lower = global / unit * unit;
    const std::string nearest =
        lower > 0 ? absl::StrCat(lower, " or ", lower + unit) : absl::StrCat(unit);
    return Invalid(absl::StrCat(
        "--global-batch-size=", global, " is not a multiple of ",
        micro > 0 ? absl::StrCat("--micro-batch-size=", micro, " x ") : std::string(),
        "D=", replicas, " data-parallel replicas (= ", unit,
        "): each replica runs global / (micro x D) micro-batches; use --global-batch-size=",
        nearest, micro > 0 ? ", or another --micro-batch-size" : ""));
  }
  const int per_replica = global / replicas;
  if (a.WasGiven("batch-size") && a.batch_size != per_replica) {
    return Invalid(absl::StrCat(
        "--batch-size=", a.batch_size,
        " (examples per replica) disagrees with --global-batch-size=", global, " over D=", replicas,
        " replicas (", global, " / ", replicas, " = ", per_replica,
        " per replica): give only --global-batch-size, or --batch-size=", per_replica));
  }
  a.batch_size = per_replica;
  return absl::OkStatus();
}

// --recompute-num-layers against the layers per stage (the granularity, method and schedule
// were checked by ParseArguments).
absl::Status CheckRecompute(const TrainerArguments& a, int stages) {
  if (a.recompute_granularity != "full") return absl::OkStatus();
  if (stages == 1) {
    return Invalid(
        "--recompute-granularity=full with one pipeline stage: the Varuna schedule recomputes "
        "nothing at P=1 (the last stage runs each micro-batch's backward right after its forward "
        "and keeps its activations until then), so there is nothing to map the recompute flags "
        "onto; drop them (memory is then one micro-batch's activations: lower "
        "--micro-batch-size if it does not fit), or run P >= 2 stages, whose first P-1 recompute");
  }
  absl::StatusOr<std::vector<int>> layers = LayersPerStage(a, stages);
  if (!layers.ok()) return layers.status();
  const int largest = *std::max_element(layers->begin(), layers->end());
  if (a.recompute_num_layers == largest) return absl::OkStatus();
  const std::string shape = absl::StrCat("layers per stage here: ", absl::StrJoin(*layers, ","),
                                         ", over P=", stages, " stages");
  if (a.recompute_num_layers == 0) {
    return Invalid(absl::StrCat(
        "--recompute-granularity=full needs --recompute-num-layers (Megatron's rule): the Varuna "
        "schedule recomputes a whole stage, so give --recompute-num-layers=",
        largest, " (", shape, ")"));
  }
  return Invalid(absl::StrCat(
      "--recompute-num-layers=", a.recompute_num_layers,
      " is not what the Varuna schedule recomputes: it re-runs a whole stage's forward (", shape,
      "), so give --recompute-num-layers=", largest,
      "; to recompute fewer layers at a time, use more pipeline stages; to recompute nothing, "
      "--schedule=1f1b and no recompute flags"));
}

}  // namespace

absl::StatusOr<JobShape> JobShapeOf(const TrainerArguments& a,
                                    const varuna::LaunchEnvironment& launch) {
  if (!a.stage_to_rank_map.empty()) {
    absl::StatusOr<varuna::StageMap> map = varuna::StageMap::Parse(a.stage_to_rank_map);
    if (!map.ok()) return map.status();
    return JobShape{map->num_stages(), map->num_replicas()};
  }
  return JobShape{1, std::max(1, launch.world_size.value_or(1))};
}

absl::StatusOr<std::vector<int>> LayersPerStage(const TrainerArguments& a, int stages) {
  if (!a.stage_segments.empty()) return a.stage_segments;
  int num_layers = a.num_layers;
  if (num_layers == 0) {
    absl::StatusOr<gpt2::Gpt2Config> preset = gpt2::PresetConfig(a.preset);
    if (!preset.ok()) return preset.status();
    num_layers = preset->num_layers;
  }
  absl::StatusOr<std::vector<varuna::SegmentRange>> ranges =
      varuna::PartitionSegments(num_layers, stages);
  if (!ranges.ok()) return ranges.status();
  std::vector<int> sizes;
  for (const varuna::SegmentRange& range : *ranges) sizes.push_back(range.size());
  return sizes;
}

absl::Status ApplyJobShape(TrainerArguments& a, const JobShape& shape) {
  if (a.global_batch_size > 0) {
    if (absl::Status s = ApplyGlobalBatch(a, shape.replicas); !s.ok()) return s;
  }
  a.global_batch_size = a.batch_size * shape.replicas;
  if (a.train_samples > 0) {
    a.train_iters = a.train_samples / a.global_batch_size;  // Megatron rounds down
    if (a.train_iters < 1) {
      return Invalid(absl::StrCat("--train-samples=", a.train_samples,
                                  " is less than one global batch of ", a.global_batch_size,
                                  " (--batch-size=", a.batch_size, " x D=", shape.replicas,
                                  "): give --train-samples of at least ", a.global_batch_size));
    }
  }
  return CheckRecompute(a, shape.stages);
}

}  // namespace trainer
