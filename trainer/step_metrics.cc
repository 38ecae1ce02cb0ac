#include "trainer/step_metrics.h"

#include <ATen/DeviceAccelerator.h>

#include <cmath>
#include <ctime>
#include <limits>

#include "models/gpt2/flops.h"
#include "trainer/throughput.h"

namespace trainer {

IterationCost CostOf(const gpt2::Gpt2Config& config, int64_t batch_size,
                     const varuna::VarunaOptions& engine, const std::string& device_name,
                     double peak_tflops) {
  IterationCost cost;
  cost.global_batch = batch_size * engine.stage_map.num_replicas();
  cost.world_size = engine.stage_map.world_size();
  cost.flops = gpt2::TrainingFlopsPerIteration(config, cost.global_batch);
  cost.tokens = static_cast<double>(cost.global_batch) * static_cast<double>(config.seq_length);
  const std::optional<double> peak =
      peak_tflops > 0 ? std::optional<double>(peak_tflops) : PeakTflops(device_name);
  if (peak) cost.job_peak_tflops = *peak * engine.stage_map.world_size();
  return cost;
}

void LogInterval::Add(const varuna::StepResult& result, double seconds) {
  seconds_ += seconds;
  ++steps_;
  if (!std::isfinite(result.loss)) ++nan_iterations_;
  if (result.overflow) return;
  loss_sum_ += result.loss;
  ++losses_;
  grad_norm_ = result.grad_norm;
}

StepRecord LogInterval::Take(const TrainingState& state, int64_t train_iters,
                             varuna::Varuna& engine, const IterationCost& cost) {
  const double seconds = seconds_ / static_cast<double>(steps_);
  const Throughput throughput =
      MeasureThroughput(cost.flops, cost.tokens, seconds, cost.job_peak_tflops);
  StepRecord record;
  record.time = std::time(nullptr);
  record.iteration = state.iteration;
  record.train_iters = train_iters;
  record.consumed_samples = state.consumed_samples;
  record.ms_per_iteration = seconds * 1e3;
  record.lr = engine.optimizer().options().lr;
  record.loss = losses_ > 0 ? loss_sum_ / static_cast<double>(losses_)
                            : std::numeric_limits<double>::quiet_NaN();
  record.loss_scale = engine.loss_scale();
  record.grad_norm = grad_norm_;
  record.skipped = state.skipped;
  record.nan_iterations = nan_iterations_;
  record.global_batch_size = cost.global_batch;
  record.num_gpus = cost.world_size;
  record.tokens_per_sec = throughput.tokens_per_second;
  record.tflops = throughput.tflops;
  record.mfu = throughput.mfu;
  *this = LogInterval();
  return record;
}

StepRecord OneStep(const varuna::StepResult& result, const TrainingState& state,
                   varuna::Varuna& engine) {
  StepRecord record;
  record.iteration = state.iteration;
  record.consumed_samples = state.consumed_samples;
  record.lr = engine.optimizer().options().lr;
  record.loss = result.overflow ? std::numeric_limits<double>::quiet_NaN() : result.loss;
  record.loss_scale = result.loss_scale;
  record.grad_norm = result.grad_norm;
  record.skipped = state.skipped;
  return record;
}

std::optional<DeviceMemory> DeviceMemoryOf(const c10::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  const c10::CachingDeviceAllocator::DeviceStats stats =
      at::accelerator::getDeviceStats(device.index());
  constexpr size_t kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  DeviceMemory memory;
  memory.reserved_bytes = stats.reserved_bytes[kAll].current;
  memory.allocated_bytes = stats.allocated_bytes[kAll].current;
  memory.max_allocated_bytes = stats.allocated_bytes[kAll].peak;
  memory.allocated_count = stats.allocation[kAll].current;
  return memory;
}

DeviceMemory CpuMemoryOf(const varuna::CpuAllocationCounter& counter) {
  DeviceMemory memory;
  memory.allocated_bytes = counter.current_bytes();
  memory.reserved_bytes = memory.allocated_bytes;
  memory.max_allocated_bytes = counter.peak_bytes();
  memory.allocated_count = counter.live_allocations();
  return memory;
}

}  // namespace trainer
