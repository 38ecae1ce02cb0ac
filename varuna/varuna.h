// Varuna: the training engine. It owns this rank's stage of the model, runs one optimizer step
// over a batch split into micro-batches, keeps shared (tied) weights equal, scales the loss in
// fp16, and saves and restores its state in checkpoints.
//
// Usage, on every rank (after Create):
//   auto engine = Varuna::Create(builder, num_segments, options);
//   engine->set_optimizer(std::make_unique<Adam>(engine->parameters(), adam), loss_scaling);
//   engine->load_checkpoint(load_dir, std::nullopt);  // resume (optional)
//   for each iteration:
//     engine->optimizer().set_lr(schedule(...));
//     StepResult r = engine->step(batch);      // forward, backward, update (unless skipped)
//   engine->evaluate(batch);                   // mean loss, no update
//   engine->checkpoint(checkpoint_options, iteration, trainer_state);  // CheckpointOptions
//   engine->finish_checkpoint();               // before exiting
//
// With a stage map of P stages x D replicas, every rank runs the same calls: the model's
// segments are partitioned into P contiguous stages (pipeline/partition.h, or
// options.stage_segments) and each rank builds only its own; a step runs the stage's schedule
// (pipeline/schedule.h, pipeline/stage_executor.h), sums the gradients of shared weights between
// the first and last stage of each replica, sums gradients over the replicas of each stage, and
// agrees on overflow, gradient norm and loss in one all-reduce over all ranks. Every replica gets
// its own options.batch_size examples; the micro-batch weights are normalised over the whole global
// batch, so the result equals one process running it all.
//
// step() returns what one process running the whole batch at once would compute: the loss is
// the mean of the micro-batch losses weighted by StageModule::LossWeight (their number of
// examples, or of unmasked tokens for GPT-2, so a short last micro-batch counts for what it
// holds), and the gradient is that mean's gradient.
//
// Thread safety: none; one thread drives an engine.
#ifndef VARUNA_VARUNA_H_
#define VARUNA_VARUNA_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "varuna/checkpoint/writer.h"
#include "varuna/comm/world.h"
#include "varuna/gradient_buckets.h"
#include "varuna/io/json.h"
#include "varuna/optim/adam.h"
#include "varuna/optim/loss_scaler.h"
#include "varuna/pipeline/phase_timers.h"
#include "varuna/pipeline/schedule.h"
#include "varuna/pipeline/stage_executor.h"
#include "varuna/pipeline/stage_groups.h"
#include "varuna/pipeline/stage_map.h"
#include "varuna/pipeline/stage_module.h"
#include "varuna/pipeline/tensor_map.h"

namespace varuna {

struct VarunaOptions {
  // Which ranks run which stage and replica (Varuna's --stage_to_rank_map). Default: one
  // stage, one replica.
  StageMap stage_map = StageMap::Uniform(1, 1);
  int rank = 0;  // This process's global rank.
  // Examples per replica per step (B_r; Megatron's --batch-size of the Varuna era).
  int batch_size = 1;
  // Examples per micro-batch (Varuna's --chunk_size); 0 means batch_size (one micro-batch).
  // Read it through micro_batch_size().
  int chunk_size = 0;
  c10::Device device = c10::kCPU;
  // Dtype of the model's weights and activations: kFloat, kHalf (with loss scaling) or
  // kBFloat16. The optimizer keeps fp32 master weights in every case.
  c10::ScalarType dtype = c10::kFloat;
  // Clip gradients to this global L2 norm before the update; 0 disables clipping.
  double clip_grad = 0;
  // The pipeline schedule (Varuna's by default).
  ScheduleKind schedule = ScheduleKind::kVaruna;
  // Segments per stage, in stage order (the trainer's --stage-segments, e.g. {1, 1, 2}): stage
  // s runs the next stage_segments[s] segments. Empty: the even partition (pipeline/partition.h).
  // When set it must have one entry per stage of stage_map, each >= 1, summing to the model's
  // segment count (planning/auto_config.h's uneven, profile-balanced cuts).
  std::vector<int> stage_segments;
  // The job's processes; required when the stage map has more than one rank, and then
  // world->rank() must equal `rank`. Not owned; must outlive the engine.
  comm::World* world = nullptr;
  // The library of the pipeline and tied-weight groups (p2p_backend) and of the data-parallel
  // groups (dp_backend). Unset: the device's own, Gloo on the CPU and NCCL on CUDA. NCCL needs
  // CUDA and one GPU per rank. Gloo on CUDA stages the tensors through pinned host memory
  // (comm/host_staged_process_group.h): Varuna's transport for commodity networks, and the one
  // that lets several ranks share a GPU.
  std::optional<comm::Backend> p2p_backend;
  std::optional<comm::Backend> dp_backend;
  // With replicas: start each gradient bucket's data-parallel all-reduce during the step's last
  // backward, as soon as the bucket's gradients are final, instead of after the pipeline
  // (Megatron's --overlap-grad-reduce; see gradient_buckets.h). Both give the same gradients
  // bit for bit. The trainer's --overlap-grad-reduce / --no-overlap-grad-reduce.
  bool overlap_grad_reduce = true;
  // Gradients are summed over replicas in buckets of at most this many fp32 elements (a
  // larger parameter gets a bucket of its own). Smaller buckets start earlier in the backward.
  int64_t grad_bucket_elements = 8 << 20;

  // The backends in effect (the given ones, or the device's own).
  comm::Backend effective_p2p_backend() const { return p2p_backend.value_or(DeviceBackend()); }
  comm::Backend effective_dp_backend() const { return dp_backend.value_or(DeviceBackend()); }
  comm::Backend DeviceBackend() const {
    return device.is_cuda() ? comm::Backend::kNccl : comm::Backend::kGloo;
  }

  // Examples per micro-batch: chunk_size, or batch_size when chunk_size is 0.
  int micro_batch_size() const { return chunk_size > 0 ? chunk_size : batch_size; }
};

// Where and how Varuna::checkpoint writes.
struct CheckpointOptions {
  std::string save_dir;
  // Stage the files on this (fast, local) directory and move them into save_dir in the
  // background while training continues (Varuna's tempdir). Empty: write in place.
  std::string staging_dir;
  // The replicas of each stage split the writing (Varuna's --shard); otherwise replica 0 of
  // each stage writes it alone.
  bool shard = false;
  // After a checkpoint completes, keep it and the keep_last - 1 complete ones before it,
  // removing older ones (RemoveOldCheckpoints); 0 keeps all.
  int keep_last = 0;
};

// What one step did.
struct StepResult {
  double loss = 0;        // Mean loss over the batch (the same on every rank).
  bool overflow = false;  // Gradients held inf/NaN: the update was skipped.
  double grad_norm = 0;   // Global L2 norm of the gradients before clipping (tied pair once).
  double loss_scale = 1;  // The scale used for this step.
  bool stop = false;      // Some rank passed stop_requested (agreed by every rank).
  // A background checkpoint's files reached the save directory on every rank during this
  // step, and it was completed: its iteration (-1 if none).
  int64_t completed_checkpoint = -1;
};

class Varuna {
 public:
  // Builds this rank's stage with `builder`, moves it to options.device and options.dtype,
  // and creates the process groups (every rank of the job must call Create with the same map).
  // InvalidArgument for a bad option (naming it) or a map that does not fit the model.
  static absl::StatusOr<std::unique_ptr<Varuna>> Create(const StageBuilder& builder,
                                                        int num_segments,
                                                        const VarunaOptions& options);

  // The checks Create makes on `options` before building anything, for callers that want to
  // fail before touching files.
  static absl::Status ValidateOptions(const VarunaOptions& options, int num_segments);

  const VarunaOptions& options() const { return options_; }
  StageModule& model() { return *model_; }
  // This rank's stage and replica, and the segments its stage holds.
  int stage() const { return groups_.position.stage; }
  int replica() const { return groups_.position.replica; }
  SegmentRange segments() const { return model_->segments(); }

  // This stage's parameters, named as in the full model, with their weight-decay flags: what
  // the optimizer given to set_optimizer must hold.
  std::vector<NamedParameter> parameters() const;

  // Installs the optimizer and the loss scaling (used when options.dtype is kHalf; otherwise
  // the scale stays 1). The optimizer's parameters must be exactly parameters(), in order.
  absl::Status set_optimizer(std::unique_ptr<Adam> optimizer, const LossScalerOptions& scaling);
  Adam& optimizer() { return *optimizer_; }

  // One training step over `inputs` (options.batch_size examples in dimension 0 of every
  // tensor): forward and backward of every micro-batch, tied-weight gradient sum, unscale,
  // the model's state update (StageModule::replica_max_state reduced with MAX over the stage's
  // replicas, then UpdateStateAfterBackward, on skipped steps too), inf/NaN check, clipping,
  // optimizer update. On overflow the weights, the optimizer state
  // and its step count are left untouched and the loss scale backs off.
  // Host synchronisation: the inputs are best given on the host (LossWeight reads them there;
  // on CUDA they are copied asynchronously through page-locked memory, no copy needed if they
  // already are). The host then waits for the device once, at the end: for one copy of the
  // agreed overflow flag, norm and loss, queued before the update, which the device skips and
  // scales itself (so the update may still run when step returns, and the next step's work
  // queues behind it). A Gloo world's all-reduce and, with replicas, the sum of the batch's
  // loss weights add a wait each.
  // InvalidArgument if the inputs are malformed (nothing changes then); FailedPrecondition
  // before set_optimizer.
  // `stop_requested` (e.g. whether a signal reached this process; may be null) is read once,
  // after the backward, and agreed in the step's all-reduce: result.stop is true on every rank
  // if it returned true on any. A stop asked for while the step computes thus ends the job
  // after this step, not the next. The same all-reduce completes a background checkpoint whose
  // files have reached the save directory on every rank.
  absl::StatusOr<StepResult> step(const TensorMap& inputs,
                                  const std::function<bool()>& stop_requested = nullptr);

  // Times the step's phases with `timers` (Megatron's --timing-log-level; level 1:
  // "forward-backward", "all-grads-sync", "optimizer"; level 2 also the executor's per
  // micro-batch phases, pipeline/stage_executor.h), or not (null, the default). Not owned; must
  // outlive the engine or be replaced first.
  void set_phase_timers(PhaseTimers* timers);

  // Collective (every rank, the same number of values): sums `values` over every rank in place
  // (nothing to do for one process), e.g. the trainer's timers gathered into a table.
  absl::Status SumOverRanks(std::vector<double>& values);

  // The mean loss over `inputs` (any number of examples), without gradients or dropout. The
  // model's named_state() is left as it was (an evaluation never changes training).
  absl::StatusOr<double> evaluate(const TensorMap& inputs);

  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }

  // The data-parallel gradient buckets of this rank (0 without replicas), and how many of them
  // started their all-reduce inside the last backward of the last step (0 unless
  // options.overlap_grad_reduce): for tests and logs.
  int grad_buckets() const { return buckets_ ? buckets_->size() : 0; }
  int grad_buckets_started_in_backward() const {
    return buckets_ ? buckets_->started_in_backward() : 0;
  }

  // Collective (every rank calls it with the same arguments). Writes the engine's state
  // (fp32 weights and optimizer state per segment, loss scaler, each rank's RNG) and
  // `trainer_state` (an object: anything the caller must restore, e.g. consumed samples and
  // the LR schedule) as options.save_dir/varuna_ckpt_<iteration> (checkpoint/files.h): rank
  // 0 prepares the directory, the writing ranks write their segments' files and every rank
  // its marker, then rank 0 writes the final marker and the tracker. With a staging_dir the
  // call returns once the files are staged; the checkpoint completes during a later step()
  // (see StepResult::completed_checkpoint), the next checkpoint() or finish_checkpoint().
  // A checkpoint still in flight is completed first. An error on any rank is returned on
  // every rank (naming the rank and the file).
  absl::Status checkpoint(const CheckpointOptions& options, int64_t iteration,
                          const json::Value& trainer_state);
  // Collective: waits for a background checkpoint and completes it (OK if none). Call before
  // exiting.
  absl::Status finish_checkpoint();

  // Collective. Restores the state written by checkpoint() for `iteration` (or, if nullopt,
  // the newest complete and intact checkpoint in load_dir: one refused for a missing marker,
  // size or checksum on any rank is skipped, and Loaded::note says so) and returns
  // {iteration, trainer_state}. Any stage/replica layout and chunk size may load any
  // checkpoint of the same model: each rank reads the files of its own segments. Refuses a
  // checkpoint of a different model (the message lists what differs) and leaves the engine
  // unchanged on any error, which every rank returns.
  struct Loaded {
    int64_t iteration = 0;
    json::Value trainer_state;
    // Set when "newest" skipped an incomplete or damaged checkpoint, or the layout changed.
    std::string note;
  };
  // `accept`, if given, sees the saved trainer_state first; an error from it is returned and
  // nothing is loaded (the caller's way to refuse, e.g., another model's checkpoint).
  using Acceptor = std::function<absl::Status(const json::Value& trainer_state)>;
  absl::StatusOr<Loaded> load_checkpoint(const std::string& load_dir,
                                         std::optional<int64_t> iteration,
                                         const Acceptor& accept = nullptr);

 private:
  Varuna(const VarunaOptions& options, std::shared_ptr<StageModule> model, StageGroups groups);

  // Splits every input into micro-batches of `chunk` examples along dimension 0 (views, on the
  // inputs' device); every input must hold `examples` ("expected N" + `what` otherwise).
  absl::StatusOr<std::vector<TensorMap>> SplitBatch(const TensorMap& inputs, int64_t examples,
                                                    int64_t chunk, const char* what) const;
  // Splits, weighs (normalised over the global batch), checks a batch and moves its
  // micro-batches to the device.
  struct Plan {
    std::vector<TensorMap> micro_batches;
    std::vector<double> weights;
  };
  absl::StatusOr<Plan> MakePlan(const TensorMap& inputs, int64_t examples, const char* what);
  // Copies the model's gradients into the optimizer's fp32 master gradients, divided by
  // `scale`, sums them over the replicas (buckets_, started during the backward when
  // overlapped), then sums shared weights' gradients (locally and between the first and last
  // stage). Returns this rank's squared norm, shared copies counted once: a float32 [1]
  // tensor on the device, not read back (the host does not wait).
  absl::StatusOr<at::Tensor> ReduceMasterGrads(double scale);
  // Sums `values` (float64, on the device) over every rank in place (no-op for one process);
  // waits for the device only when the world's backend sums host tensors (Gloo).
  absl::Status AllRanksSum(at::Tensor& values);
  // The same for host values (reads the sum back: for the rare agreements outside a step).
  absl::Status AllRanksSum(std::vector<double>& values);
  // Collective: OK if `local` is OK on every rank; otherwise, on every rank, the error of the
  // lowest failing rank (its message through the rendezvous store, prefixed "rank r: ").
  absl::Status AgreeOnStatus(const absl::Status& local);
  // Collective: rank 0 runs `action`; every rank returns its status.
  absl::Status OnRankZero(const std::function<absl::Status()>& action);
  // This rank's share of a checkpoint (varuna_checkpoint.cc).
  RankCheckpoint RankShare(const CheckpointOptions& options, int64_t iteration) const;
  // Reads and checks (without applying) this rank's part of a checkpoint.
  struct LoadedState;
  absl::StatusOr<LoadedState> ReadState(const std::string& load_dir, int64_t iteration,
                                        const Acceptor& accept) const;
  absl::Status ApplyState(const LoadedState& state);
  void ZeroModelGrads();
  // The model's per-step state update (StageModule::replica_max_state and
  // UpdateStateAfterBackward): the maximum over the stage's replicas, then the model's update.
  absl::Status UpdateModelState();

  VarunaOptions options_;
  std::shared_ptr<StageModule> model_;
  std::unique_ptr<Adam> optimizer_;
  std::unique_ptr<LossScaler> scaler_;
  StageGroups groups_;
  // The checkpoint being written in the background, if any (the same on every rank).
  struct PendingCheckpoint {
    CheckpointOptions options;
    int64_t iteration = -1;
    json::Value layout;
    json::Value metadata;
  };
  std::optional<PendingCheckpoint> pending_checkpoint_;
  std::unique_ptr<CheckpointWriter> checkpoint_writer_;
  int64_t agreements_ = 0;  // names AgreeOnStatus's store keys
  std::unique_ptr<StageExecutor> executor_;
  PhaseTimers* timers_ = nullptr;  // not owned; null: the phases are not timed
  // Pairs of optimizer indices (first, second) of the shared weights this rank holds both of.
  std::vector<std::pair<size_t, size_t>> tied_pairs_;
  // Optimizer indices of shared weights whose other copy is on the other end of the pipeline,
  // and whether this rank's copy is the one left out of the norm.
  std::vector<std::pair<size_t, bool>> remote_tied_;
  // The data-parallel sum of the master gradients (null without replicas); made by
  // set_optimizer over the optimizer's master gradients, so declared after optimizer_.
  std::unique_ptr<GradientBuckets> buckets_;
};

}  // namespace varuna

#endif  // VARUNA_VARUNA_H_
