// stage_overhead: the experiment that decides where the planner's per-segment profile
// over-charges a stage (docs/profiling.md, "The H100 over-prediction of 2026-11-26"). It
// profiles a model's segments one at a time, as `--profiling` does, and then the same segments
// as ONE stage (all of them back to back in one timed region per F, R, B and per step term),
// with the same profiler, options and inputs, and prints, per term, the sum of the single
// segments, the whole stage and their difference: what the simulator charges a one-stage
// pipeline beyond what the stage costs when run as training runs it.
//
//   bazel run -c opt //tests/benchmarks:stage_overhead -- --preset=gpt2-tiny --device=cpu
//   gpu_bundle/bin/stage_overhead --preset=gpt2-355m --device=cuda --dtype=bf16
//       --micro-batch=16 --attention=sdpa    (tests/gpu/session.sh planning)
//
// Exit status: 0 after printing the table, 1 when profiling fails, 2 for bad flags.
#include <ATen/ATen.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/kernels/causal_attention.h"
#include "varuna/pipeline/stage_module.h"
#include "varuna/planning/compute_profiler.h"
#include "varuna/planning/profile.h"

namespace {

struct Options {
  std::string preset = "gpt2-tiny";
  std::string device = "cpu";
  std::string dtype = "fp32";
  std::string attention = "fused-softmax";
  int micro_batch = 2;
  int vocab_size = 4096;
};

// Random tokens with positions, labels and a full loss mask, as `--profiling` makes them.
varuna::TensorMap Inputs(const gpt2::Gpt2Config& config, int b) {
  varuna::TensorMap map;
  map["input_ids"] = at::randint(config.vocab_size, {b, config.seq_length}, at::kLong);
  map["position_ids"] = at::arange(config.seq_length, at::kLong).unsqueeze(0).repeat({b, 1});
  map["labels"] = at::randint(config.vocab_size, {b, config.seq_length}, at::kLong);
  map["loss_mask"] = at::ones({b, config.seq_length}, at::kFloat);
  return map;
}

double Sum(const varuna::Profile& profile, int b, double varuna::SegmentMeasurement::*field) {
  double total = 0;
  for (const auto& sizes : profile.compute) total += sizes.at(b).*field;
  return total;
}

double SumStatic(const varuna::Profile& profile, double varuna::SegmentStatic::*field) {
  double total = 0;
  for (const varuna::SegmentStatic& s : profile.statics) total += s.*field;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  varuna::FlagParser parser("stage_overhead");
  parser.Add("preset", &options.preset, "model preset (models/gpt2/config.h)");
  parser.Add("device", &options.device, "cpu or cuda");
  parser.Add("dtype", &options.dtype, "fp32, fp16 or bf16");
  parser.Add("attention", &options.attention, "fused-softmax or sdpa");
  parser.Add("micro-batch", &options.micro_batch, "micro-batch size b", "16");
  parser.Add("vocab-size", &options.vocab_size, "vocabulary (the sample corpus's is 4096)", "4096");
  parser.SetMinimum("micro-batch", 1);
  parser.SetMinimum("vocab-size", 1);
  if (std::optional<int> exit = parser.ParseMain(
          "stage_overhead",
          "Sum of single-segment profiles against the same segments profiled as one stage.\n"
          "Example: stage_overhead --preset=gpt2-355m --device=cuda --dtype=bf16 --micro-batch=16",
          argc, argv)) {
    return *exit;
  }
  absl::StatusOr<gpt2::Gpt2Config> config = gpt2::PresetConfig(options.preset);
  if (!config.ok()) {
    std::cerr << "stage_overhead: error: --preset=" << options.preset << ": "
              << config.status().message() << "\n";
    return 2;
  }
  config->vocab_size = options.vocab_size;
  absl::StatusOr<varuna::kernels::AttentionBackend> attention =
      varuna::kernels::ParseAttentionBackend(options.attention);
  if (!attention.ok()) {
    std::cerr << "stage_overhead: error: --attention=" << options.attention << ": "
              << attention.status().message() << "\n";
    return 2;
  }
  varuna::ProfilerOptions profiler;
  profiler.micro_batch_sizes = {options.micro_batch};
  if (options.device != "cpu" && options.device != "cuda") {
    std::cerr << "stage_overhead: error: --device=" << options.device << ": give cpu or cuda\n";
    return 2;
  }
  // An indexed device, as the trainer gives the profiler: some of its CUDA calls (the stream,
  // the caching allocator) refuse index -1.
  profiler.device = options.device == "cpu" ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, 0);
  if (options.dtype == "fp32") {
    profiler.dtype = at::kFloat;
  } else if (options.dtype == "fp16") {
    profiler.dtype = at::kHalf;
  } else if (options.dtype == "bf16") {
    profiler.dtype = at::kBFloat16;
  } else {
    std::cerr << "stage_overhead: error: --dtype=" << options.dtype
              << ": give fp32, fp16 or bf16\n";
    return 2;
  }
  gpt2::Gpt2ExecutionOptions execution;
  execution.attention = *attention;
  const varuna::StageBuilder segments = gpt2::Gpt2StageBuilder(*config, 1234, execution);
  const int n = config->num_layers;
  const int b = options.micro_batch;
  auto inputs = [&](int size) { return Inputs(*config, size); };

  // One segment at a time, as --profiling measures them.
  absl::StatusOr<varuna::Profile> single =
      varuna::ProfileSegments(segments, n, inputs, profiler, nullptr);
  // All of them as one stage: a one-"segment" profile whose segment is the whole model (what
  // --profiling measures for the segment joins).
  absl::StatusOr<varuna::Profile> whole = varuna::ProfileWholeModel(segments, n, inputs, profiler);
  for (const auto* result : {&single, &whole}) {
    if (!result->ok()) {
      std::cerr << "stage_overhead: profiling failed: " << result->status().message() << "\n";
      return 1;
    }
  }
  std::printf("%s, %d segments, micro-batch %d, %s %s: sum of single segments against one stage\n",
              options.preset.c_str(), n, b, options.device.c_str(), options.dtype.c_str());
  std::printf("%-14s %12s %12s %12s %14s\n", "term", "segments_ms", "stage_ms", "diff_ms",
              "diff/segment");
  auto row = [&](const char* name, double segments_ms, double stage_ms) {
    std::printf("%-14s %12.3f %12.3f %12.3f %14.4f\n", name, segments_ms, stage_ms,
                segments_ms - stage_ms, (segments_ms - stage_ms) / n);
  };
  using M = varuna::SegmentMeasurement;
  using S = varuna::SegmentStatic;
  row("forward F", Sum(*single, b, &M::forward_ms), Sum(*whole, b, &M::forward_ms));
  row("recompute R", Sum(*single, b, &M::recompute_ms), Sum(*whole, b, &M::recompute_ms));
  row("backward B", Sum(*single, b, &M::backward_ms), Sum(*whole, b, &M::backward_ms));
  row("gradient pass", SumStatic(*single, &S::gradient_ms), SumStatic(*whole, &S::gradient_ms));
  row("Adam step", SumStatic(*single, &S::optimizer_ms), SumStatic(*whole, &S::optimizer_ms));
  const double segments_step = Sum(*single, b, &M::recompute_ms) + Sum(*single, b, &M::backward_ms);
  const double stage_step = Sum(*whole, b, &M::recompute_ms) + Sum(*whole, b, &M::backward_ms);
  std::printf("per micro-batch at P=1 (R + B): segments %.3f ms, stage %.3f ms (%+.1f%%)\n",
              segments_step, stage_step, 100 * (segments_step - stage_step) / stage_step);
  return 0;
}
