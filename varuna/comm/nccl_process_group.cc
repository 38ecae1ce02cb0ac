#include "varuna/comm/nccl_process_group.h"

#include <c10/cuda/CUDAFunctions.h>
#include <nccl.h>

#include <exception>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "varuna/comm/failure_latch.h"

namespace varuna::comm {
namespace {

// A transfer in flight; c10d's Work::wait makes the current CUDA stream wait for it.
class NcclWork : public Work {
 public:
  NcclWork(c10::intrusive_ptr<c10d::Work> work, FailureLatch* failure, std::string what)
      : work_(std::move(work)), failure_(failure), what_(std::move(what)) {}

  absl::Status Wait() override {
    if (waited_) return result_;
    waited_ = true;
    try {
      work_->wait();
    } catch (const std::exception& e) {
      result_ = absl::UnavailableError(absl::StrCat(what_, " failed: ", e.what()));
      failure_->Trip(result_);
    }
    return result_;
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  FailureLatch* failure_;  // owned by the group, which outlives its transfers
  const std::string what_;
  bool waited_ = false;
  absl::Status result_;
};

class NcclProcessGroup : public ProcessGroup {
 public:
  NcclProcessGroup(GroupSpec spec, int device, c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg)
      : spec_(std::move(spec)), device_(device), pg_(std::move(pg)) {}

  ~NcclProcessGroup() override {
    try {
      pg_->shutdown();
    } catch (const std::exception&) {
      // A broken group cannot shut down cleanly; its communicators are aborted instead.
    }
  }

  int rank() const override { return spec_.rank; }
  int size() const override { return spec_.size; }
  Backend backend() const override { return Backend::kNccl; }
  const std::vector<int>& members() const override { return spec_.members; }
  const std::string& name() const override { return spec_.name; }

  std::unique_ptr<Work> Send(const at::Tensor& tensor, int dst, int tag) override {
    return Transfer(tensor, dst, tag, /*is_send=*/true);
  }

  std::unique_ptr<Work> Recv(at::Tensor& tensor, int src, int tag) override {
    return Transfer(tensor, src, tag, /*is_send=*/false);
  }

  absl::Status AllReduceSum(at::Tensor& tensor) override {
    return Collective("all-reduce", tensor, [&](std::vector<at::Tensor>& v) {
      c10d::AllreduceOptions opts;
      opts.reduceOp = c10d::ReduceOp::SUM;
      return pg_->allreduce(v, opts);
    });
  }

  absl::Status Broadcast(at::Tensor& tensor, int root) override {
    if (root < 0 || root >= size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": broadcast root ", root, " must be in 0..", size() - 1));
    }
    return Collective(absl::StrCat("broadcast from rank ", root), tensor,
                      [&](std::vector<at::Tensor>& v) {
                        c10d::BroadcastOptions opts;
                        opts.rootRank = root;
                        return pg_->broadcast(v, opts);
                      });
  }

  absl::Status Barrier() override {
    if (absl::Status s = failure_.Check(name()); !s.ok()) return s;
    try {
      c10d::BarrierOptions opts;
      opts.device_ids = {device_};
      pg_->barrier(opts)->wait();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      absl::Status status =
          absl::UnavailableError(absl::StrCat(name(), ": barrier failed: ", e.what()));
      failure_.Trip(status);
      return status;
    }
  }

 private:
  absl::Status CheckTensor(const at::Tensor& tensor, const std::string& what) const {
    if (!tensor.defined() || !tensor.is_cuda() || tensor.get_device() != device_) {
      return absl::InvalidArgumentError(absl::StrCat(
          name(), ": ", what, ": NCCL moves tensors on this rank's GPU (cuda:", device_,
          "); this one is ", tensor.defined() ? tensor.device().str() : "undefined",
          ". Use a Gloo group for CPU tensors"));
    }
    if (!tensor.is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": ", what, ": the tensor must be contiguous"));
    }
    return absl::OkStatus();
  }

  template <typename Op>
  absl::Status Collective(const std::string& what, at::Tensor& tensor, Op op) {
    if (absl::Status s = CheckTensor(tensor, what); !s.ok()) return s;
    if (absl::Status s = failure_.Check(name()); !s.ok()) return s;
    try {
      std::vector<at::Tensor> tensors = {tensor};
      op(tensors)->wait();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      absl::Status status =
          absl::UnavailableError(absl::StrCat(name(), ": ", what, " failed: ", e.what()));
      failure_.Trip(status);
      return status;
    }
  }

  std::unique_ptr<Work> Transfer(const at::Tensor& tensor, int peer, int tag, bool is_send) {
    const std::string what = absl::StrCat(
        name(), ": ", is_send ? "send to rank " : "recv from rank ", peer, " (tag ", tag, ")");
    absl::Status status = CheckTensor(tensor, what);
    if (status.ok() && (peer < 0 || peer >= size() || peer == rank())) {
      status = absl::InvalidArgumentError(
          absl::StrCat(what, ": peer is not another member (ranks 0..", size() - 1, ")"));
    }
    if (status.ok()) status = failure_.Check(name());
    if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));
    try {
      std::vector<at::Tensor> tensors = {tensor};
      c10::intrusive_ptr<c10d::Work> work =
          is_send ? pg_->send(tensors, peer, tag) : pg_->recv(tensors, peer, tag);
      return std::make_unique<NcclWork>(std::move(work), &failure_, what);
    } catch (const std::exception& e) {
      status = absl::UnavailableError(absl::StrCat(what, " failed: ", e.what()));
      failure_.Trip(status);
      return std::make_unique<CompletedWork>(std::move(status));
    }
  }

  const GroupSpec spec_;
  const int device_;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> pg_;
  FailureLatch failure_;
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
    return std::make_unique<NcclProcessGroup>(spec, device, std::move(pg));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(spec.name, ": cannot create: ", e.what()));
  }
}

}  // namespace varuna::comm
