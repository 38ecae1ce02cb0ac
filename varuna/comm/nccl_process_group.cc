#include "varuna/comm/nccl_process_group.h"

#include <c10/cuda/CUDAFunctions.h>
#include <nccl.h>

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "varuna/comm/failure_latch.h"
#include "varuna/comm/tensor_checks.h"

namespace varuna::comm {
namespace {

// What a group and its in-flight transfers share. The last owner shuts the communicators
// down, or aborts them if the group broke (a graceful shutdown can wait forever on a dead
// peer).
struct NcclState {
  NcclState(GroupSpec spec, int device, c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg)
      : spec(std::move(spec)), device(device), pg(std::move(pg)) {}

  ~NcclState() {
    try {
      if (failure.Check(spec.name).ok()) {
        pg->shutdown();
      } else {
        pg->abort();
      }
    } catch (const std::exception&) {
      // Nothing more can be done for communicators that fail to close.
    }
  }

  // Runs `op`, turning an exception into Unavailable and breaking the group.
  absl::Status Run(const std::string& what, const std::function<void()>& op) {
    if (absl::Status s = failure.Check(spec.name); !s.ok()) return s;
    try {
      op();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      absl::Status status =
          absl::UnavailableError(absl::StrCat(spec.name, ": ", what, " failed: ", e.what()));
      failure.Trip(status);
      return status;
    }
  }

  const GroupSpec spec;
  const int device;
  const c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg;
  FailureLatch failure;
};

// A transfer in flight; c10d's Work::wait makes the current CUDA stream wait for it.
class NcclWork : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> state, c10::intrusive_ptr<c10d::Work> work, std::string what)
      : state_(std::move(state)), work_(std::move(work)), what_(std::move(what)) {}

  absl::Status Wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!waited_) {
      waited_ = true;
      result_ = state_->Run(what_, [&] { work_->wait(); });
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
        work =
            is_send ? state_->pg->send(tensors, peer, tag) : state_->pg->recv(tensors, peer, tag);
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
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = spec.timeout;
    auto pg =
        c10::make_intrusive<c10d::ProcessGroupNCCL>(spec.store, spec.rank, spec.size, options);
    pg->setBoundDeviceId(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
    return std::make_unique<NcclProcessGroup>(
        std::make_shared<NcclState>(spec, device, std::move(pg)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(spec.name, ": cannot create: ", e.what()));
  }
}

}  // namespace varuna::comm
