#include "varuna/comm/host_staged_process_group.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "varuna/comm/collective_queue.h"
#include "varuna/comm/exception_status.h"
#include "varuna/comm/tensor_checks.h"

namespace varuna::comm {
namespace {

// Runs `op`, a LibTorch call on the device; a c10::Error becomes Internal naming `what`.
absl::Status RunOnDevice(const std::string& what, const std::function<void()>& op) {
  try {
    op();
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat(what, " failed: ", OneLineMessage(e)));
  }
}

// A defined, dense, contiguous tensor on the CPU or a CUDA device.
absl::Status CheckStageable(const at::Tensor& tensor, const std::string& what) {
  if (absl::Status status = CheckDenseContiguous(tensor, what); !status.ok()) return status;
  if (!tensor.is_cpu() && !tensor.is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": host-staged Gloo moves CPU and CUDA tensors, not ", tensor.device().str()));
  }
  return absl::OkStatus();
}

// Pinned host memory of `tensor`'s shape and dtype.
at::Tensor PinnedLike(const at::Tensor& tensor) {
  return at::empty(tensor.sizes(), tensor.options().device(c10::kCPU).pinned_memory(true));
}

}  // namespace

struct HostStagedProcessGroup::SideStreams {
  c10::Device device;
  c10::Stream to_host;
  c10::Stream to_device;
};

// A queued send: the host bytes, and the event that says they are there.
struct SendJob {
  at::Tensor source;                   // the caller's tensor, kept until the copy is done
  at::Tensor host;                     // what Gloo sends (the source itself for a CPU tensor)
  std::unique_ptr<c10::Event> copied;  // recorded after the copy; null for a CPU tensor
  int dst = 0;
  int tag = 0;

  std::mutex mu;
  std::condition_variable cv;
  bool issued = false;         // guarded by mu
  absl::Status failed;         // guarded by mu: why the send was never issued
  std::unique_ptr<Work> work;  // guarded by mu: Gloo's, once issued
};

class HostStagedProcessGroup::Sender {
 public:
  explicit Sender(ProcessGroup& gloo) : gloo_(gloo), thread_([this] { Loop(); }) {}

  ~Sender() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  void Enqueue(std::shared_ptr<SendJob> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  // Takes the jobs in order: waits for each one's copy, then hands it to Gloo (which returns
  // at once), so a send is never held up by a later one's copy.
  void Loop() {
    for (;;) {
      std::shared_ptr<SendJob> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      absl::Status copied;
      if (job->copied != nullptr) {
        copied = RunOnDevice(absl::StrCat(gloo_.name(), ": copying a send to rank ", job->dst,
                                          " (tag ", job->tag, ") to the host"),
                             [&] {
                               // On the tensor's device: a thread's first CUDA call would
                               // otherwise make a context on device 0.
                               const c10::DeviceGuard on_device(job->source.device());
                               job->copied->synchronize();
                             });
        job->source = at::Tensor();
      }
      std::unique_ptr<Work> work;
      if (copied.ok()) work = gloo_.Send(job->host, job->dst, job->tag);
      {
        std::lock_guard<std::mutex> lock(job->mu);
        job->issued = true;
        job->failed = copied;
        job->work = std::move(work);
      }
      job->cv.notify_all();
    }
  }

  ProcessGroup& gloo_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<SendJob>> queue_;  // guarded by mu_
  bool stopping_ = false;                       // guarded by mu_
  std::thread thread_;
};

namespace {

class SendWork final : public Work {
 public:
  explicit SendWork(std::shared_ptr<SendJob> job) : job_(std::move(job)) {}
  // As a Gloo send's: dropping an unwaited send waits for it.
  ~SendWork() override { Wait().IgnoreError(); }

  absl::Status Wait() override {
    std::unique_lock<std::mutex> lock(job_->mu);
    job_->cv.wait(lock, [this] { return job_->issued; });
    if (!job_->failed.ok()) return job_->failed;
    return job_->work->Wait();
  }

 private:
  std::shared_ptr<SendJob> job_;
};

// A receive into host memory, copied to the device tensor when waited for.
class RecvWork final : public Work {
 public:
  // `allocated` is recorded on the stream `target` was allocated on, after its allocation: the
  // copy into it waits for the work queued there before (the caching allocator may have handed
  // out memory that work still uses).
  RecvWork(std::unique_ptr<Work> received, at::Tensor host, at::Tensor target,
           c10::Stream to_device, std::unique_ptr<c10::Event> allocated, std::string what)
      : received_(std::move(received)),
        host_(std::move(host)),
        target_(std::move(target)),
        to_device_(to_device),
        allocated_(std::move(allocated)),
        what_(std::move(what)) {}
  ~RecvWork() override { Wait().IgnoreError(); }

  absl::Status Wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (waited_) return result_;
    waited_ = true;
    result_ = received_->Wait();
    if (result_.ok()) {
      result_ = RunOnDevice(what_, [&] {
        allocated_->block(to_device_);
        c10::StreamGuard guard(to_device_);
        target_.copy_(host_, /*non_blocking=*/true);
        c10::Event done(to_device_.device_type());
        done.record(to_device_);
        done.synchronize();
      });
    }
    host_ = at::Tensor();
    target_ = at::Tensor();
    return result_;
  }

 private:
  std::unique_ptr<Work> received_;
  at::Tensor host_;
  at::Tensor target_;
  c10::Stream to_device_;
  std::unique_ptr<c10::Event> allocated_;
  const std::string what_;
  std::mutex mu_;
  bool waited_ = false;  // guarded by mu_
  absl::Status result_;  // guarded by mu_
};

// What an asynchronous all-reduce of a CUDA tensor shares between the issuing thread, the
// collective worker and the waiting thread.
struct StagedAllReduce {
  at::Tensor tensor;                     // the caller's
  at::Tensor host;                       // pinned; what Gloo sums
  std::unique_ptr<c10::Event> copied;    // the device-to-host copy is done
  std::unique_ptr<c10::Event> returned;  // the host-to-device copy is done; set by the worker
  c10::Stream to_device;
};

// An asynchronous all-reduce: the queued job's result, and for a CUDA tensor the copy back,
// which Wait makes the waiting thread's current stream wait for.
class AllReduceWork final : public Work {
 public:
  AllReduceWork(std::shared_ptr<QueuedResult> result, std::shared_ptr<StagedAllReduce> staged,
                std::string what)
      : result_(std::move(result)), staged_(std::move(staged)), what_(std::move(what)) {}
  // As a Gloo all-reduce's: dropping it unwaited waits for the job (not for the GPU).
  ~AllReduceWork() override { result_->Wait().IgnoreError(); }

  absl::Status Wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (waited_) return result_status_;
    waited_ = true;
    result_status_ = result_->Wait();
    if (result_status_.ok() && staged_ != nullptr) {
      result_status_ = RunOnDevice(what_, [&] {
        const c10::Device device = staged_->tensor.device();
        c10::impl::VirtualGuardImpl impl(device.type());
        staged_->returned->block(impl.getStream(device));
      });
    }
    staged_.reset();
    return result_status_;
  }

 private:
  std::shared_ptr<QueuedResult> result_;
  std::shared_ptr<StagedAllReduce> staged_;  // null for a CPU tensor
  const std::string what_;
  std::mutex mu_;
  bool waited_ = false;         // guarded by mu_
  absl::Status result_status_;  // guarded by mu_
};

}  // namespace

HostStagedProcessGroup::HostStagedProcessGroup(std::unique_ptr<ProcessGroup> gloo)
    : gloo_(std::move(gloo)) {
  TORCH_CHECK(gloo_ != nullptr && gloo_->backend() == Backend::kGloo,
              "HostStagedProcessGroup wraps a Gloo group");
  name_ = absl::StrCat(gloo_->name(), " (host-staged)");
  sender_ = std::make_unique<Sender>(*gloo_);
  collectives_ = std::make_unique<CollectiveQueue>();
}

HostStagedProcessGroup::~HostStagedProcessGroup() {
  collectives_.reset();
  sender_.reset();
}

const HostStagedProcessGroup::SideStreams& HostStagedProcessGroup::StreamsFor(
    const c10::Device& device) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  for (const auto& streams : streams_) {
    if (streams->device == device) return *streams;
  }
  c10::impl::VirtualGuardImpl impl(device.type());
  streams_.push_back(std::make_unique<SideStreams>(SideStreams{
      device, impl.getStreamFromGlobalPool(device), impl.getStreamFromGlobalPool(device)}));
  return *streams_.back();
}

std::unique_ptr<Work> HostStagedProcessGroup::Send(const at::Tensor& tensor, int dst, int tag) {
  const std::string what = absl::StrCat(name_, ": send to rank ", dst, " (tag ", tag, ")");
  if (absl::Status status = CheckStageable(tensor, what); !status.ok()) {
    return std::make_unique<CompletedWork>(std::move(status));
  }
  auto job = std::make_shared<SendJob>();
  job->dst = dst;
  job->tag = tag;
  if (tensor.is_cpu()) {
    job->host = tensor;
  } else {
    absl::Status status = RunOnDevice(absl::StrCat(what, ": copying to the host"), [&] {
      const c10::Device device = tensor.device();
      const SideStreams& streams = StreamsFor(device);
      c10::impl::VirtualGuardImpl impl(device.type());
      // The copy waits for the work that produces the tensor, on the side stream only.
      c10::Event produced(device.type());
      produced.record(impl.getStream(device));
      produced.block(streams.to_host);
      job->source = tensor;
      job->host = PinnedLike(tensor);
      {
        c10::StreamGuard guard(streams.to_host);
        job->host.copy_(tensor, /*non_blocking=*/true);
      }
      job->copied = std::make_unique<c10::Event>(device.type());
      job->copied->record(streams.to_host);
    });
    if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));
  }
  sender_->Enqueue(job);
  return std::make_unique<SendWork>(std::move(job));
}

std::unique_ptr<Work> HostStagedProcessGroup::Recv(at::Tensor& tensor, int src, int tag) {
  const std::string what = absl::StrCat(name_, ": recv from rank ", src, " (tag ", tag, ")");
  if (absl::Status status = CheckStageable(tensor, what); !status.ok()) {
    return std::make_unique<CompletedWork>(std::move(status));
  }
  if (tensor.is_cpu()) return gloo_->Recv(tensor, src, tag);
  at::Tensor host;
  std::optional<c10::Stream> to_device;
  std::unique_ptr<c10::Event> allocated;
  absl::Status status = RunOnDevice(what, [&] {
    host = PinnedLike(tensor);
    const c10::Device device = tensor.device();
    to_device = StreamsFor(device).to_device;
    // The caller's current stream: where the tensor was allocated and may have been in use.
    c10::impl::VirtualGuardImpl impl(device.type());
    allocated = std::make_unique<c10::Event>(device.type());
    allocated->record(impl.getStream(device));
  });
  if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));
  std::unique_ptr<Work> received = gloo_->Recv(host, src, tag);
  return std::make_unique<RecvWork>(std::move(received), std::move(host), tensor, *to_device,
                                    std::move(allocated),
                                    absl::StrCat(what, ": copying to ", tensor.device().str()));
}

absl::Status HostStagedProcessGroup::AllReduceSum(at::Tensor& tensor) {
  const std::string what = absl::StrCat(name_, ": all-reduce");
  if (absl::Status status = CheckStageable(tensor, what); !status.ok()) return status;
  collectives_->Drain();
  if (tensor.is_cpu()) return gloo_->AllReduceSum(tensor);
  if (absl::Status status = CheckSummable(tensor, what); !status.ok()) return status;
  at::Tensor host;
  absl::Status status = RunOnDevice(absl::StrCat(what, ": copying to the host"), [&] {
    host = PinnedLike(tensor);
    host.copy_(tensor);  // waits for the current stream's work on the tensor
  });
  if (status.ok()) status = gloo_->AllReduceSum(host);
  if (!status.ok()) return status;
  return RunOnDevice(absl::StrCat(what, ": copying to ", tensor.device().str()),
                     [&] { tensor.copy_(host, /*non_blocking=*/true); });
}

absl::Status HostStagedProcessGroup::Barrier() {
  collectives_->Drain();
  return gloo_->Barrier();
}

std::unique_ptr<Work> HostStagedProcessGroup::AllReduceSumAsync(at::Tensor& tensor) {
  const std::string what = absl::StrCat(name_, ": all-reduce");
  absl::Status status = CheckStageable(tensor, what);
  if (status.ok()) status = CheckSummable(tensor, what);
  if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));
  ProcessGroup& gloo = *gloo_;
  if (tensor.is_cpu()) {
    // Through the same queue as the CUDA ones, so Gloo sees them in issue order.
    return std::make_unique<AllReduceWork>(
        collectives_->Enqueue([&gloo, tensor]() mutable { return gloo.AllReduceSum(tensor); }),
        nullptr, what);
  }
  auto staged = std::shared_ptr<StagedAllReduce>();
  status = RunOnDevice(absl::StrCat(what, ": copying to the host"), [&] {
    const c10::Device device = tensor.device();
    const SideStreams& streams = StreamsFor(device);
    c10::impl::VirtualGuardImpl impl(device.type());
    staged = std::make_shared<StagedAllReduce>(
        StagedAllReduce{tensor, PinnedLike(tensor), std::make_unique<c10::Event>(device.type()),
                        std::make_unique<c10::Event>(device.type()), streams.to_device});
    // The copy waits for the work that produces the tensor, on the side stream only.
    c10::Event produced(device.type());
    produced.record(impl.getStream(device));
    produced.block(streams.to_host);
    c10::StreamGuard guard(streams.to_host);
    staged->host.copy_(tensor, /*non_blocking=*/true);
    staged->copied->record(streams.to_host);
  });
  if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));
  const std::string copy_back = absl::StrCat(what, ": copying to ", tensor.device().str());
  std::shared_ptr<QueuedResult> result =
      collectives_->Enqueue([&gloo, staged, what, copy_back]() -> absl::Status {
        const c10::DeviceGuard on_device(staged->tensor.device());
        absl::Status status = RunOnDevice(absl::StrCat(what, ": copying to the host"),
                                          [&] { staged->copied->synchronize(); });
        if (status.ok()) status = gloo.AllReduceSum(staged->host);
        if (!status.ok()) return status;
        return RunOnDevice(copy_back, [&] {
          c10::StreamGuard guard(staged->to_device);
          staged->tensor.copy_(staged->host, /*non_blocking=*/true);
          staged->returned->record(staged->to_device);
        });
      });
  return std::make_unique<AllReduceWork>(std::move(result), std::move(staged), copy_back);
}

absl::Status HostStagedProcessGroup::Broadcast(at::Tensor& tensor, int root) {
  const std::string what = absl::StrCat(name_, ": broadcast from rank ", root);
  if (absl::Status status = CheckStageable(tensor, what); !status.ok()) return status;
  collectives_->Drain();
  if (tensor.is_cpu()) return gloo_->Broadcast(tensor, root);
  at::Tensor host;
  absl::Status status = RunOnDevice(absl::StrCat(what, ": copying to the host"), [&] {
    host = PinnedLike(tensor);
    if (rank() == root) host.copy_(tensor);
  });
  if (status.ok()) status = gloo_->Broadcast(host, root);
  if (!status.ok() || rank() == root) return status;
  return RunOnDevice(absl::StrCat(what, ": copying to ", tensor.device().str()),
                     [&] { tensor.copy_(host, /*non_blocking=*/true); });
}

}  // namespace varuna::comm
