#include "varuna/varuna.h"

#include <ATen/ATen.h>
#include <ATen/DeviceAccelerator.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/Event.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "varuna/comm/status_agreement.h"
#include "varuna/kernels/multi_tensor.h"
#include "varuna/optim/gradient_pairs.h"
#include "varuna/pipeline/partition.h"
#include "varuna/pipeline/phase_timers.h"
#include "varuna/pipeline/trace_range.h"

namespace varuna {
namespace {

bool IsFloatingModelDtype(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kHalf || dtype == c10::kBFloat16 ||
         dtype == c10::kDouble;
}

// `tensor` on `device`. A host tensor bound for CUDA goes through page-locked memory (the
// caching host allocator's, or its own if it already is), so that the copy is asynchronous: the
// host does not wait for the work already queued on the device.
at::Tensor OnDevice(const at::Tensor& tensor, const c10::Device& device) {
  if (tensor.device() == device) return tensor;
  if (tensor.is_cpu() && device.is_cuda()) {
    const at::Tensor pinned = tensor.is_pinned() ? tensor : tensor.pin_memory();
    return pinned.to(device, /*non_blocking=*/true);
  }
  return tensor.to(device);
}

// Host values as a float64 vector on `device`, without waiting for the device.
at::Tensor HostValuesOn(const std::vector<double>& values, const c10::Device& device) {
  return OnDevice(at::tensor(values, at::kDouble), device);
}

// The one device-to-host read of a step: the constructor queues an asynchronous copy of a small
// float64 vector into page-locked memory behind the work queued so far, and Wait() blocks until
// that copy (not the work queued after it) is done. On the CPU there is nothing to wait for.
class HostRead {
 public:
  explicit HostRead(const at::Tensor& values) : device_(values.device()) {
    if (values.is_cpu()) {
      host_ = values.contiguous();
      return;
    }
    host_ = at::empty({values.numel()}, at::TensorOptions().dtype(at::kDouble).pinned_memory(true));
    host_.copy_(values.reshape({-1}), /*non_blocking=*/true);
    done_.emplace(device_.type());
    done_->record(at::accelerator::getCurrentStream(device_.index()));
  }

  std::vector<double> Wait() {
    if (done_) done_->synchronize();
    const double* data = host_.data_ptr<double>();
    return std::vector<double>(data, data + host_.numel());
  }

 private:
  c10::Device device_;
  at::Tensor host_;
  std::optional<c10::Event> done_;
};

// The stage ranges: options.stage_segments laid end to end, or the even partition. The sizes
// were checked by ValidateOptions.
absl::StatusOr<std::vector<SegmentRange>> StageRanges(const VarunaOptions& options,
                                                      int num_segments) {
  if (options.stage_segments.empty()) {
    return PartitionSegments(num_segments, options.stage_map.num_stages());
  }
  std::vector<SegmentRange> ranges;
  int first = 0;
  for (int size : options.stage_segments) {
    ranges.push_back(SegmentRange{first, first + size - 1});
    first += size;
  }
  return ranges;
}

// "1,1,2" for {1, 1, 2}.
std::string SegmentsFlag(const std::vector<int>& sizes) {
  return absl::StrCat("--stage-segments=", absl::StrJoin(sizes, ","));
}

}  // namespace

absl::Status Varuna::ValidateOptions(const VarunaOptions& options, int num_segments) {
  const StageMap& map = options.stage_map;
  if (num_segments < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", num_segments, " segments; it needs at least 1"));
  }
  if (map.num_stages() > num_segments) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stage_to_rank_map=\"", map.ToString(), "\" has ", map.num_stages(),
                     " pipeline stages but the model has only ", num_segments,
                     " segments (layers): use at most ", num_segments, " stages"));
  }
  if (!options.stage_segments.empty()) {
    const std::vector<int>& sizes = options.stage_segments;
    if (static_cast<int>(sizes.size()) != map.num_stages()) {
      return absl::InvalidArgumentError(absl::StrCat(
          SegmentsFlag(sizes), " gives ", sizes.size(), " stage sizes but --stage_to_rank_map=\"",
          map.ToString(), "\" has ", map.num_stages(),
          " stages: give one size per stage, or drop --stage-segments for an even split"));
    }
    int sum = 0;
    for (int size : sizes) {
      if (size < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(SegmentsFlag(sizes), " has a stage of ", size,
                         " segments: every stage needs at least 1 segment (layer)"));
      }
      sum += size;
    }
    if (sum != num_segments) {
      return absl::InvalidArgumentError(
          absl::StrCat(SegmentsFlag(sizes), " covers ", sum, " segments but the model has ",
                       num_segments, " (layers): give stage sizes that sum to ", num_segments));
    }
  }
  if (options.rank < 0 || options.rank >= map.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("--rank=", options.rank,
                                                   " is not in the stage map \"", map.ToString(),
                                                   "\" (ranks 0..", map.world_size() - 1, ")"));
  }
  if (options.world != nullptr && options.world->rank() != options.rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rank=", options.rank, " differs from the process world's rank ", options.world->rank()));
  }
  if (options.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch-size=", options.batch_size, " must be at least 1"));
  }
  if (options.chunk_size < 0 || options.chunk_size > options.batch_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--chunk_size=", options.chunk_size, " must be between 1 and --batch-size=",
                     options.batch_size, " (or 0 for one micro-batch per step)"));
  }
  if (!options.device.is_cuda()) {
    for (const auto& [flag, backend] : {std::pair{"--p2p-backend", options.p2p_backend},
                                        std::pair{"--dp-backend", options.dp_backend}}) {
      if (backend == comm::Backend::kNccl) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, "=nccl needs CUDA tensors but the device is ", options.device.str(),
                         ": use gloo on the CPU (or leave it out)"));
      }
    }
  }
  if (options.grad_bucket_elements < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grad_bucket_elements=", options.grad_bucket_elements,
        " must be at least 1 (the default is ", VarunaOptions().grad_bucket_elements, ")"));
  }
  if (!IsFloatingModelDtype(options.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model dtype ", c10::toString(options.dtype),
                     " is not supported: use float32, float16 or bfloat16"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Varuna>> Varuna::Create(const StageBuilder& builder,
                                                       int num_segments,
                                                       const VarunaOptions& options) {
  if (absl::Status status = ValidateOptions(options, num_segments); !status.ok()) return status;
  const StageMap& map = options.stage_map;
  if (map.world_size() > 1 && options.world == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stage_to_rank_map=\"", map.ToString(), "\" has ", map.world_size(),
        " ranks: the engine needs the job's process world (start it with //varuna:launch, "
        "or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)"));
  }

  StageGroups groups;
  groups.position = map.Position(options.rank);
  if (options.world != nullptr && map.world_size() > 1) {
    absl::StatusOr<StageGroups> created = CreateStageGroups(
        *options.world, map,
        StageBackends{options.effective_p2p_backend(), options.effective_dp_backend()},
        options.device);
    if (!created.ok()) return created.status();
    groups = std::move(*created);
  }
  absl::StatusOr<std::vector<SegmentRange>> stages = StageRanges(options, num_segments);
  if (!stages.ok()) return stages.status();
  std::shared_ptr<StageModule> model = builder((*stages)[groups.position.stage]);
  model->to(options.device, options.dtype);
  return std::unique_ptr<Varuna>(new Varuna(options, std::move(model), std::move(groups)));
}

Varuna::Varuna(const VarunaOptions& options, std::shared_ptr<StageModule> model, StageGroups groups)
    : options_(options), model_(std::move(model)), groups_(std::move(groups)) {
  executor_ = std::make_unique<StageExecutor>(*model_, groups_.pipeline.get(), stage(),
                                              options_.stage_map.num_stages(), options_.device,
                                              options_.schedule);
}

std::vector<NamedParameter> Varuna::parameters() const {
  std::vector<NamedParameter> out;
  for (const auto& item : model_->named_parameters(/*recurse=*/true)) {
    out.push_back({item.key(), item.value(), model_->DecaysWeight(item.key())});
  }
  return out;
}

absl::Status Varuna::set_optimizer(std::unique_ptr<Adam> optimizer,
                                   const LossScalerOptions& scaling) {
  const std::vector<NamedParameter> expected = parameters();
  const std::vector<NamedParameter>& given = optimizer->parameters();
  if (given.size() != expected.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the optimizer holds ", given.size(), " parameters but this stage has ",
                     expected.size(), ": build it from Varuna::parameters()"));
  }
  for (size_t i = 0; i < given.size(); ++i) {
    if (given[i].name != expected[i].name || !given[i].tensor.is_same(expected[i].tensor)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer parameter ", i, " is \"", given[i].name, "\" but the stage's is \"",
          expected[i].name, "\" (or another tensor): build it from Varuna::parameters()"));
    }
  }
  tied_pairs_.clear();
  remote_tied_.clear();
  for (const SharedWeight& shared : model_->shared_weights()) {
    std::optional<size_t> first, second;
    for (size_t i = 0; i < given.size(); ++i) {
      if (given[i].name == shared.first) first = i;
      if (given[i].name == shared.second) second = i;
    }
    if (first && second) {
      tied_pairs_.emplace_back(*first, *second);
    } else if (first || second) {
      // The other copy lives on the other end of the pipeline; the second copy is the one
      // left out of the norm.
      remote_tied_.emplace_back(first ? *first : *second, second.has_value());
    }
  }
  if (!remote_tied_.empty() && groups_.tied == nullptr) {
    return absl::FailedPreconditionError(
        "this stage holds one copy of a shared weight but there is no group to the stage "
        "holding the other: the first and last stage must hold the two copies");
  }
  buckets_.reset();  // its hooks and views belong to the optimizer being replaced
  optimizer_ = std::move(optimizer);
  if (groups_.data_parallel != nullptr) {
    buckets_ = std::make_unique<GradientBuckets>(
        optimizer_->parameters(), optimizer_->MasterGrads(), options_.grad_bucket_elements,
        groups_.data_parallel.get(), options_.overlap_grad_reduce);
  }
  LossScalerOptions effective = scaling;
  if (options_.dtype != c10::kHalf) {
    effective.dynamic = false;
    effective.initial_scale = 1.0;
  }
  scaler_ = std::make_unique<LossScaler>(effective);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorMap>> Varuna::SplitBatch(const TensorMap& inputs, int64_t examples,
                                                          int64_t chunk, const char* what) const {
  if (inputs.empty()) return absl::InvalidArgumentError("the batch has no input tensors");
  for (const auto& [name, tensor] : inputs) {
    if (!tensor.defined() || tensor.dim() == 0 || tensor.size(0) != examples) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input \"", name, "\" has ", tensor.defined() && tensor.dim() > 0 ? tensor.size(0) : 0,
          " examples in dimension 0; expected ", examples, what));
    }
  }
  std::vector<TensorMap> micro_batches;
  for (int64_t start = 0; start < examples; start += chunk) {
    const int64_t length = std::min(chunk, examples - start);
    TensorMap micro;
    for (const auto& [name, tensor] : inputs) {
      micro[name] = tensor.narrow(0, start, length);
    }
    micro_batches.push_back(std::move(micro));
  }
  return micro_batches;
}

absl::StatusOr<Varuna::Plan> Varuna::MakePlan(const TensorMap& inputs, int64_t examples,
                                              const char* what) {
  const int64_t chunk = options_.micro_batch_size();
  absl::StatusOr<std::vector<TensorMap>> micro_batches = SplitBatch(inputs, examples, chunk, what);
  if (!micro_batches.ok()) return micro_batches.status();
  Plan plan;
  plan.micro_batches = std::move(*micro_batches);
  double total = 0;
  // Weights from the inputs where the caller keeps them (the CPU, usually: no device sync),
  // then the micro-batches move to the device.
  for (TensorMap& micro : plan.micro_batches) {
    plan.weights.push_back(model_->LossWeight(micro));
    total += plan.weights.back();
    for (auto& [name, tensor] : micro) tensor = OnDevice(tensor, options_.device);
  }
  // Every stage of a replica sees the same inputs, so summing over the replicas of any stage
  // gives the global batch's total on every rank. Over a host (Gloo) world group the same sum
  // needs no device: every stage of every replica adds its replica's total, so the world's sum
  // is num_stages times the global one (exactly, for the integer counts of a loss mask).
  if (groups_.data_parallel != nullptr && groups_.world != nullptr &&
      groups_.world->backend() == comm::Backend::kGloo) {
    at::Tensor sum = at::full({1}, total, at::kDouble);
    if (absl::Status status = groups_.world->AllReduceSum(sum); !status.ok()) return status;
    total = sum.item<double>() / options_.stage_map.num_stages();
  } else if (groups_.data_parallel != nullptr) {
    at::Tensor sum = at::full({1}, total, at::kDouble);
    if (groups_.data_parallel->backend() == comm::Backend::kNccl) sum = sum.to(options_.device);
    if (absl::Status status = groups_.data_parallel->AllReduceSum(sum); !status.ok()) {
      return status;
    }
    total = sum.to(at::kCPU).item<double>();
  }
  if (!(total > 0)) {
    return absl::InvalidArgumentError(
        "nothing in the batch counts towards the loss (its loss weight, e.g. the sum of the "
        "loss mask, is 0)");
  }
  for (double& weight : plan.weights) weight /= total;
  return plan;
}

absl::StatusOr<at::Tensor> Varuna::ReduceMasterGrads(double scale) {
  at::NoGradGuard no_grad;
  const std::vector<NamedParameter>& params = optimizer_->parameters();
  std::vector<at::Tensor>& grads = optimizer_->MasterGrads();
  if (buckets_ != nullptr) {
    // The model's gradients into the fp32 master gradients (views into the buckets' flat
    // buffers), divided by the loss scale: the buckets already started during the backward
    // (overlapped), all others now.
    buckets_->FinishBackward(1.0 / scale);
  } else {
    // A tied pair's entries share one tensor after the previous step (below); give the second
    // its own again before anything is written (normally done already by ReleaseMasterGrads).
    for (const auto& [first, second] : tied_pairs_) {
      if (grads[second].is_same(grads[first])) grads[second] = at::empty_like(grads[first]);
    }
    // The same in one multi-tensor pass. Without ties nothing changes the master gradients
    // afterwards, and the same pass also sums their squares.
    const GradientPairs pairs = PairGradients(params, grads);
    if (tied_pairs_.empty() && remote_tied_.empty()) {
      return kernels::MultiTensorUnscaleL2NormSquared(pairs.model, pairs.master, 1.0 / scale)
          .sum_of_squares;
    }
    kernels::MultiTensorUnscale(pairs.model, pairs.master, 1.0 / scale);
  }
  // Sum over the replicas (gradient_buckets.h), then the shared weights' copies: both are
  // sums, so their order does not matter (up to rounding), and the data-parallel sum may then
  // overlap the backward for every parameter, shared ones included.
  if (buckets_ != nullptr) {
    if (absl::Status status = buckets_->Reduce(); !status.ok()) return status;
  }
  std::vector<bool> duplicate(params.size(), false);
  for (const auto& [first, second] : tied_pairs_) {
    grads[first].add_(grads[second]);
    if (buckets_ != nullptr) {
      grads[second].copy_(grads[first]);  // the entry must stay its bucket's view
    } else {
      // Both copies step with the sum: the second's entry becomes the first's tensor rather
      // than a copy of it ([vocab, hidden] fp32 not written twice).
      grads[second] = grads[first];
    }
    duplicate[second] = true;
  }
  for (const auto& [index, is_second] : remote_tied_) {
    if (absl::Status status = groups_.tied->AllReduceSum(grads[index]); !status.ok()) {
      return status;
    }
    duplicate[index] = is_second;
  }
  std::vector<at::Tensor> counted;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!duplicate[i]) counted.push_back(grads[i]);
  }
  return kernels::MultiTensorL2NormSquared(counted);
}

absl::Status Varuna::AllRanksSum(at::Tensor& values) {
  if (groups_.world == nullptr) return absl::OkStatus();
  if (groups_.world->backend() == comm::Backend::kNccl) {
    return groups_.world->AllReduceSum(values);
  }
  // Gloo sums host tensors: this read waits for the device (the CPU needs no copy).
  at::Tensor host = values.to(at::kCPU);
  if (absl::Status status = groups_.world->AllReduceSum(host); !status.ok()) return status;
  values = OnDevice(host, options_.device);
  return absl::OkStatus();
}

absl::Status Varuna::AllRanksSum(std::vector<double>& values) {
  if (groups_.world == nullptr) return absl::OkStatus();
  at::Tensor tensor = HostValuesOn(values, options_.device);
  if (absl::Status status = AllRanksSum(tensor); !status.ok()) return status;
  values = HostRead(tensor).Wait();
  return absl::OkStatus();
}

void Varuna::ZeroModelGrads() {
  for (auto& param : model_->parameters()) {
    if (param.grad().defined()) param.mutable_grad().reset();
  }
}

absl::Status Varuna::AgreeOnStatus(const absl::Status& local) {
  if (groups_.world == nullptr) return local;
  const c10::Device device =
      groups_.world->backend() == comm::Backend::kNccl ? options_.device : c10::Device(c10::kCPU);
  return comm::AgreeOnStatus(options_.world->store(), *groups_.world,
                             absl::StrCat("varuna/status/", agreements_++, "/"), local, device);
}

absl::Status Varuna::OnRankZero(const std::function<absl::Status()>& action) {
  return AgreeOnStatus(options_.rank == 0 ? action() : absl::OkStatus());
}

absl::Status Varuna::UpdateModelState() {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> state = model_->replica_max_state();
  if (groups_.data_parallel != nullptr && !state.empty()) {
    // The maximum through the group's sum: each replica writes its values into its own row of
    // a zero [replicas, n] table, and the sum of the tables holds every replica's row exactly
    // (x + 0 == x), whose column maxima are the result.
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : state) flat.push_back(t.reshape({-1}).to(at::kFloat));
    const at::Tensor values = at::cat(flat);
    at::Tensor table = at::zeros({groups_.data_parallel->size(), values.numel()}, values.options());
    table.select(0, groups_.data_parallel->rank()).copy_(values);
    if (absl::Status status = groups_.data_parallel->AllReduceSum(table); !status.ok()) {
      return status;
    }
    const at::Tensor maxima = std::get<0>(table.max(/*dim=*/0));
    int64_t offset = 0;
    for (at::Tensor& t : state) {
      t.copy_(maxima.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
  model_->UpdateStateAfterBackward();
  return absl::OkStatus();
}

void Varuna::set_phase_timers(PhaseTimers* timers) {
  timers_ = timers;
  executor_->set_phase_timers(timers);
}

absl::Status Varuna::SumOverRanks(std::vector<double>& values) { return AllRanksSum(values); }

absl::StatusOr<StepResult> Varuna::step(const TensorMap& inputs,
                                        const std::function<bool()>& stop_requested) {
  if (!optimizer_) {
    return absl::FailedPreconditionError("Varuna::step called before set_optimizer");
  }
  // The step's phases, as named ranges in a profiler's trace (pipeline/trace_range.h).
  TraceRange step_range("varuna::step");
  TraceRange plan_range("varuna::plan");
  absl::StatusOr<Plan> plan = MakePlan(inputs, options_.batch_size, " (--batch-size)");
  plan_range.End();
  if (!plan.ok()) return plan.status();

  StepResult result;
  result.loss_scale = scaler_->scale();
  model_->train();
  ZeroModelGrads();
  // The master gradients are rewritten whole by ReduceMasterGrads: until then their memory
  // serves the activations (at the peak of the step; they stay readable between steps). With
  // replicas they are views into the buckets' flat buffers, which stay.
  if (buckets_ == nullptr) optimizer_->ReleaseMasterGrads();
  Phase micro_batches_range("varuna::micro_batches", timers_, 1, "forward-backward");
  absl::StatusOr<at::Tensor> loss =
      executor_->Train(plan->micro_batches, plan->weights, result.loss_scale, [&] {
        if (buckets_ != nullptr) buckets_->ArmForLastBackward(1.0 / result.loss_scale);
      });
  if (loss.ok()) micro_batches_range.End();
  if (!loss.ok()) {
    if (buckets_ != nullptr) buckets_->Abandon();
    return loss.status();
  }
  Phase gradients_range("varuna::gradients", timers_, 1, "all-grads-sync");
  absl::StatusOr<at::Tensor> sum_of_squares = ReduceMasterGrads(result.loss_scale);
  if (!sum_of_squares.ok()) return sum_of_squares.status();
  gradients_range.End();
  ZeroModelGrads();
  // Megatron's "optimizer" timer: everything from here to the update's end (the state update,
  // the inf/NaN and norm agreement, the update, the host's wait for the agreed values).
  Phase update_range("varuna::update", timers_, 1, "optimizer");
  TraceRange model_state_range("varuna::model_state");
  if (absl::Status status = UpdateModelState(); !status.ok()) return status;
  model_state_range.End();

  // Everything below stays on the device until the step's one read: the host queues the update
  // right behind the backward and never waits in between (on CUDA).
  // One all-reduce over every rank: overflow anywhere, the squared norm of every stage (once:
  // replica 0's), the loss (the last stages hold it, normalised over the global batch), stop
  // requests, and the ranks still moving a background checkpoint's files.
  TraceRange agree_range("varuna::agree");
  const bool moving = pending_checkpoint_ && !checkpoint_writer_->Idle();
  const bool stop = stop_requested && stop_requested();
  const at::Tensor nonfinite = at::logical_not(at::isfinite(*sum_of_squares)).to(options_.device);
  const at::Tensor squares = sum_of_squares->to(options_.device, at::kDouble);
  at::Tensor agreed =
      at::cat({nonfinite.to(at::kDouble),
               replica() == 0 ? squares.masked_fill(nonfinite, 0.0) : at::zeros_like(squares),
               loss->to(at::kDouble).reshape({1}),
               HostValuesOn({stop ? 1.0 : 0.0, moving ? 1.0 : 0.0}, options_.device)});
  if (absl::Status status = AllRanksSum(agreed); !status.ok()) return status;
  // The update's inputs, on the device: skipped when any rank overflowed; the gradients scaled
  // by the clipping coefficient min(1, clip / (norm + 1e-6)), in float64 as the host would.
  const at::Tensor skip = agreed.narrow(0, 0, 1).gt(0).to(at::kFloat);
  at::Tensor grad_scale;
  if (options_.clip_grad > 0) {
    const at::Tensor norm = agreed.narrow(0, 1, 1).sqrt();
    grad_scale =
        at::clamp_max(at::full_like(norm, options_.clip_grad) / (norm + 1e-6), 1.0).to(at::kFloat);
  }
  HostRead read(agreed);
  agree_range.End();
  TraceRange optimizer_range("varuna::optimizer");
  optimizer_->StepOnDevice(grad_scale, skip);
  optimizer_range.End();
  TraceRange wait_range("varuna::wait");
  const std::vector<double> values = read.Wait();
  wait_range.End();
  update_range.End();

  result.overflow = values[0] > 0;
  result.grad_norm =
      result.overflow ? std::numeric_limits<double>::infinity() : std::sqrt(values[1]);
  result.loss = values[2];
  result.stop = values[3] > 0;
  scaler_->Update(result.overflow);
  if (!result.overflow) optimizer_->CountStep();
  if (pending_checkpoint_ && values[4] == 0) {
    result.completed_checkpoint = pending_checkpoint_->iteration;
    if (absl::Status status = finish_checkpoint(); !status.ok()) return status;
  }
  return result;
}

absl::StatusOr<double> Varuna::evaluate(const TensorMap& inputs) {
  if (inputs.empty()) return absl::InvalidArgumentError("the batch has no input tensors");
  const at::Tensor& first = inputs.begin()->second;
  const int64_t examples = first.defined() && first.dim() > 0 ? first.size(0) : 0;
  if (examples == 0) return absl::InvalidArgumentError("the evaluation batch is empty");
  absl::StatusOr<Plan> plan = MakePlan(inputs, examples, ", as the batch's first input");
  if (!plan.ok()) return plan.status();
  // The model's state (e.g. FP8 amaxes) as it was: an evaluation must not change training.
  std::vector<std::pair<at::Tensor, at::Tensor>> saved_state;
  for (const auto& [name, tensor] : model_->named_state()) {
    saved_state.emplace_back(tensor, tensor.clone());
  }
  model_->eval();
  absl::StatusOr<at::Tensor> loss = executor_->Evaluate(plan->micro_batches, plan->weights);
  model_->train();
  {
    at::NoGradGuard no_grad;
    for (auto& [tensor, saved] : saved_state) tensor.copy_(saved);
  }
  if (!loss.ok()) return loss.status();
  at::Tensor agreed = loss->reshape({1});
  if (absl::Status status = AllRanksSum(agreed); !status.ok()) return status;
  return HostRead(agreed).Wait()[0];
}

}  // namespace varuna
