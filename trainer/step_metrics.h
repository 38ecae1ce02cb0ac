// What the trainer's log says of its steps: the cost of one iteration (Megatron's FLOPs, the
// tokens, the job's peak), the steps since the last log line (LogInterval: mean loss of the
// applied ones, time of all), one step's own record for TensorBoard (OneStep), and the CUDA
// allocator's statistics (DeviceMemoryOf, CpuMemoryOf).
//
// Thread safety: values and pure functions; LogInterval is for one thread.
#ifndef VARUNA_TRAINER_STEP_METRICS_H_
#define VARUNA_TRAINER_STEP_METRICS_H_

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>

#include "models/gpt2/config.h"
#include "trainer/tensorboard_log.h"
#include "trainer/training_log.h"
#include "trainer/training_state.h"
#include "varuna/planning/cpu_allocation_counter.h"
#include "varuna/varuna.h"

namespace trainer {

// What one iteration costs, for the log's throughput and MFU.
struct IterationCost {
  int64_t global_batch = 0;  // sequences, all replicas
  int64_t world_size = 1;    // the job's processes, one device each (throughput per GPU)
  double flops = 0;          // Megatron's formula (models/gpt2/flops.h)
  double tokens = 0;
  // The peak of all the job's devices (--peak-tflops or the device table, times the world
  // size): the FLOP/s are the whole job's (global batch, all stages). Unset when unknown.
  std::optional<double> job_peak_tflops;
};

// The cost of an iteration of `config` with `batch_size` sequences per replica on the layout
// of `engine`, on devices named `device_name`; `peak_tflops` > 0 overrides the device table.
IterationCost CostOf(const gpt2::Gpt2Config& config, int64_t batch_size,
                     const varuna::VarunaOptions& engine, const std::string& device_name,
                     double peak_tflops);

// The steps since the last log line.
class LogInterval {
 public:
  // A step of `seconds` (the step alone: evaluations and checkpoints are left out). A step whose
  // loss is not finite counts as a NaN iteration, whether it was skipped or applied.
  void Add(const varuna::StepResult& result, double seconds);

  // The log line's record at `state` (of `train_iters`), with the engine's learning rate and
  // loss scale; starts a fresh interval. The loss is the mean of the applied steps (NaN when
  // every step was skipped); the global batch size and the GPUs (world size) are `cost`'s.
  StepRecord Take(const TrainingState& state, int64_t train_iters, varuna::Varuna& engine,
                  const IterationCost& cost);

  // The steps added since the last Take.
  int64_t steps() const { return steps_; }

 private:
  double loss_sum_ = 0;
  int64_t losses_ = 0;
  double grad_norm_ = 0;
  double seconds_ = 0;
  int64_t steps_ = 0;
  int64_t nan_iterations_ = 0;
};

// The scalars of one step, for TensorBoard: its own loss (NaN when it was skipped), not the
// interval's mean.
StepRecord OneStep(const varuna::StepResult& result, const TrainingState& state,
                   varuna::Varuna& engine);

// The CUDA caching allocator's statistics of `device` (Megatron's torch.cuda.memory_stats
// scalars); nullopt on the CPU, which has no such allocator.
std::optional<DeviceMemory> DeviceMemoryOf(const c10::Device& device);

// The same statistics of a CPU run, from `counter` (installed before the model was built):
// LibTorch's CPU allocations since then. There is no cache on the CPU, so reserved_bytes is
// allocated_bytes; allocated_count counts live allocations.
DeviceMemory CpuMemoryOf(const varuna::CpuAllocationCounter& counter);

}  // namespace trainer

#endif  // VARUNA_TRAINER_STEP_METRICS_H_
