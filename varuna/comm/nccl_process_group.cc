#include "varuna/comm/nccl_process_group.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <nccl.h>

#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "varuna/comm/exception_status.h"
#include "varuna/comm/failure_latch.h"
#include "varuna/comm/tensor_checks.h"

namespace varuna::comm {
namespace {

c10::intrusive_ptr<c10d::ProcessGroupNCCL> MakeNcclGroup(c10::intrusive_ptr<c10d::Store> store,
                                                         int rank, int size, int device,
                                                         std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(std::move(store), rank, size, options);
  pg->setBoundDeviceId(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
  return pg;
}

// What a group and its in-flight transfers share. The last owner shuts the communicators
// down, or aborts them if the group broke (a graceful shutdown can wait forever on a dead
// peer).
//
// Point-to-point transfers do not run on `pg`: c10d gives each pair of ranks one communicator
// and one stream for both directions, so a receive posted early (a prefetching thread waiting
// for a gradient) would hold back every later send to that peer (the activation the gradient
// depends on) -- a deadlock -- and NCCL communicators must not be driven from two threads.
// Each direction src -> dst instead gets a two-rank group of its own (sender rank 0, receiver
// rank 1), used by one thread on each side, in which transfers match in issue order.
struct NcclState {
  NcclState(GroupSpec spec, int device, c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg)
      : spec(std::move(spec)), device(device), pg(std::move(pg)) {}

  ~NcclState() {
    const bool broken = !failure.Check(spec.name).ok();
    for (auto& [direction, channel] : channels) Close(*channel, broken);
    Close(*pg, broken);
  }

  static void Close(c10d::ProcessGroupNCCL& group, bool broken) {
    try {
      if (broken) {
        group.abort();
      } else {
        group.shutdown();
      }
    } catch (const std::exception&) {
      // Nothing more can be done for communicators that fail to close.
    }
  }

  // The group carrying transfers from group rank `src` to group rank `dst`, made on first use
  // by either side (its communicator is made by its first transfer). Throws as c10d does.
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> Channel(int src, int dst) {
    std::lock_guard<std::mutex> lock(channels_mu);
    c10::intrusive_ptr<c10d::ProcessGroupNCCL>& channel = channels[{src, dst}];
    if (!channel) {
      channel = MakeNcclGroup(
          c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("p2p/", src, "to", dst), spec.store),
          spec.rank == src ? 0 : 1, 2, device, spec.timeout);
    }
    return channel;
  }

  // Runs `op`, turning an exception into Unavailable and breaking the group.
  absl::Status Run(const std::string& what, const std::function<void()>& op) {
    if (absl::Status s = failure.Check(spec.name); !s.ok()) return s;
    try {
      op();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return Break(absl::UnavailableError(
          absl::StrCat(spec.name, ": ", what, " failed: ", OneLineMessage(e))));
    }
  }

  // Latches the group's first failure, reported to the job's records (FailureReport) and
  // explained by them, and returns `status` so explained.
  absl::Status Break(const absl::Status& status) {
    std::string explanation;
    if (spec.failure_report) {
      spec.failure_report->Record(status, /*lost_peer=*/-1);
      explanation = spec.failure_report->Explain(status, /*lost_peer=*/-1);
    }
    const absl::Status explained = WithExplanation(status, explanation);
    failure.Trip(explained);
    return explained;
  }

  const GroupSpec spec;
  const int device;
  const c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg;
  FailureLatch failure;
  std::mutex channels_mu;
  // (src, dst) -> the point-to-point group of that direction; guarded by channels_mu.
  std::map<std::pair<int, int>, c10::intrusive_ptr<c10d::ProcessGroupNCCL>> channels;
};

// A transfer in flight. Wait blocks the host until the GPU has finished it, polling its end
// event, instead of c10d's Work::wait, which makes the calling thread's current stream wait:
// for a receiving thread that is the default stream the compute runs on, so every kernel
// queued after it would wait for the transfer, including the ones producing what the peer
// needs before it sends (a deadlock). Once the transfer is complete, the received tensor may
// be used on any stream.
class NcclWork : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> state, c10::intrusive_ptr<c10d::Work> work, std::string what)
      : state_(std::move(state)), work_(std::move(work)), what_(std::move(what)) {}

  absl::Status Wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!waited_) {
      waited_ = true;
      const auto deadline = std::chrono::steady_clock::now() + state_->spec.timeout;
      bool timed_out = false;
      result_ = state_->Run(what_, [&] {
        const c10::cuda::CUDAGuard guard(state_->device);
        while (!work_->isCompleted()) {  // also true once c10d recorded a failure
          if (std::chrono::steady_clock::now() > deadline) {
            timed_out = true;
            return;
          }
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        work_->wait();  // rethrows a failure; the event is complete, so no stream waits
      });
      if (timed_out) {
        result_ = absl::DeadlineExceededError(absl::StrCat(state_->spec.name, ": ", what_,
                                                           " did not complete within ",
                                                           state_->spec.timeout.count(), " ms"));
        result_ = state_->Break(result_);
      }
    }
    return result_;
  }

 private:
  std::shared_ptr<NcclState> state_;
  c10::intrusive_ptr<c10d::Work> work_;
  const std::string what_;
  std::mutex mu_;
  bool waited_ = false;  // guarded by mu_
  absl::Status result_;  // guarded by mu_
};

// An all-reduce queued on the group's stream (c10d's), behind the work on the issuing thread's
// current stream. Wait makes the waiting thread's current stream wait for it (c10d's
// Work::wait), without blocking the host; a failure seen then is reported and breaks the
// group, and one on the GPU later is the watchdog's (process_group.h).
class NcclCollectiveWork : public Work {
 public:
  NcclCollectiveWork(std::shared_ptr<NcclState> state, c10::intrusive_ptr<c10d::Work> work,
                     at::Tensor tensor)
      : state_(std::move(state)), work_(std::move(work)), tensor_(std::move(tensor)) {}

  absl::Status Wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!waited_) {
      waited_ = true;
      result_ = state_->Run("all-reduce", [&] {
        const c10::cuda::CUDAGuard guard(state_->device);
        work_->wait();
      });
      tensor_ = at::Tensor();
    }
    return result_;
  }

 private:
  std::shared_ptr<NcclState> state_;
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor tensor_;  // kept alive until waited for (c10d stashes it too)
  std::mutex mu_;
  bool waited_ = false;  // guarded by mu_
  absl::Status result_;  // guarded by mu_
};

class NcclProcessGroup : public ProcessGroup {
 public:
  explicit NcclProcessGroup(std::shared_ptr<NcclState> state) : state_(std::move(state)) {}

  int rank() const override { return state_->spec.rank; }
  int size() const override { return state_->spec.size; }
  Backend backend() const override { return Backend::kNccl; }
  const std::vector<int>& members() const override { return state_->spec.members; }
  const std::string& name() const override { return state_->spec.name; }

  std::unique_ptr<Work> Send(const at::Tensor& tensor, int dst, int tag) override {
    return Transfer(tensor, dst, tag, /*is_send=*/true);
  }

  std::unique_ptr<Work> Recv(at::Tensor& tensor, int src, int tag) override {
    return Transfer(tensor, src, tag, /*is_send=*/false);
  }

  absl::Status AllReduceSum(at::Tensor& tensor) override {
    const std::string what = "all-reduce";
    if (absl::Status s = CheckCudaTensor(tensor, what); !s.ok()) return s;
    if (absl::Status s = CheckSummable(tensor, absl::StrCat(name(), ": ", what)); !s.ok()) {
      return s;
    }
    return state_->Run(what, [&] {
      std::vector<at::Tensor> tensors = {tensor};
      c10d::AllreduceOptions opts;
      opts.reduceOp = c10d::ReduceOp::SUM;
      state_->pg->allreduce(tensors, opts)->wait();
    });
  }

  std::unique_ptr<Work> AllReduceSumAsync(at::Tensor& tensor) override {
    const std::string what = "all-reduce";
    absl::Status status = CheckCudaTensor(tensor, what);
    if (status.ok()) status = CheckSummable(tensor, absl::StrCat(name(), ": ", what));
    c10::intrusive_ptr<c10d::Work> work;
    if (status.ok()) {
      status = state_->Run(what, [&] {
        std::vector<at::Tensor> tensors = {tensor};
        c10d::AllreduceOptions opts;
        opts.reduceOp = c10d::ReduceOp::SUM;
        work = state_->pg->allreduce(tensors, opts);
      });
    }
    if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));
    return std::make_unique<NcclCollectiveWork>(state_, std::move(work), tensor);
  }

  absl::Status Broadcast(at::Tensor& tensor, int root) override {
    const std::string what = absl::StrCat("broadcast from rank ", root);
    if (absl::Status s = CheckCudaTensor(tensor, what); !s.ok()) return s;
    if (root < 0 || root >= size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": ", what, ": root must be in 0..", size() - 1));
    }
    return state_->Run(what, [&] {
      std::vector<at::Tensor> tensors = {tensor};
      c10d::BroadcastOptions opts;
      opts.rootRank = root;
      state_->pg->broadcast(tensors, opts)->wait();
    });
  }

  absl::Status Barrier() override {
    return state_->Run("barrier", [&] {
      c10d::BarrierOptions opts;
      opts.device_ids = {state_->device};
      state_->pg->barrier(opts)->wait();
    });
  }

 private:
  absl::Status CheckCudaTensor(const at::Tensor& tensor, const std::string& what) const {
    const std::string named = absl::StrCat(name(), ": ", what);
    if (absl::Status s = CheckDenseContiguous(tensor, named); !s.ok()) return s;
    if (!tensor.is_cuda() || tensor.get_device() != state_->device) {
      return absl::InvalidArgumentError(absl::StrCat(
          named, ": NCCL moves tensors on this rank's GPU (cuda:", state_->device,
          "); this one is on ", tensor.device().str(), ". Use a Gloo group for CPU tensors"));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Work> Transfer(const at::Tensor& tensor, int peer, int tag, bool is_send) {
    const std::string what =
        absl::StrCat(is_send ? "send to rank " : "recv from rank ", peer, " (tag ", tag, ")");
    absl::Status status = CheckCudaTensor(tensor, what);
    if (status.ok() && (peer < 0 || peer >= size() || peer == rank())) {
      status = absl::InvalidArgumentError(absl::StrCat(
          name(), ": ", what, ": the peer is not another member (ranks 0..", size() - 1, ")"));
    }
    c10::intrusive_ptr<c10d::Work> work;
    if (status.ok()) {
      status = state_->Run(what, [&] {
        std::vector<at::Tensor> tensors = {tensor};
        // In the direction's own group the sender is rank 0 and the receiver rank 1.
        work = is_send ? state_->Channel(rank(), peer)->send(tensors, 1, tag)
                       : state_->Channel(peer, rank())->recv(tensors, 0, tag);
      });
    }
    if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));
    return std::make_unique<NcclWork>(state_, std::move(work), what);
  }

  std::shared_ptr<NcclState> state_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessGroup>> NewNcclProcessGroup(const GroupSpec& spec,
                                                                  int device) {
  const int runtime = c10d::getNcclVersionNumber();
  if (runtime != NCCL_VERSION_CODE) {
    return absl::FailedPreconditionError(absl::StrCat(
        spec.name, ": the NCCL library loaded at run time is version code ", runtime,
        " but this program was compiled against ", NCCL_VERSION_CODE, " (NCCL ", NCCL_MAJOR, ".",
        NCCL_MINOR, ".", NCCL_PATCH, "); put the matching libnccl.so.2 first on LD_LIBRARY_PATH"));
  }
  const int devices = c10::cuda::device_count();
  if (device < 0 || device >= devices) {
    return absl::FailedPreconditionError(absl::StrCat(spec.name, ": CUDA device ", device,
                                                      " does not exist (", devices, " visible)"));
  }
  try {
    auto pg = MakeNcclGroup(spec.store, spec.rank, spec.size, device, spec.timeout);
    return std::make_unique<NcclProcessGroup>(
        std::make_shared<NcclState>(spec, device, std::move(pg)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(spec.name, ": cannot create: ", OneLineMessage(e)));
  }
}

}  // namespace varuna::comm
