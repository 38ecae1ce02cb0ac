// Gloo process groups over TCP, for CPU tensors. Compiled only into libvaruna_gloo.so
// (see gloo_backend.h for why), with hidden visibility: the entry point is its only export.
//
// One GlooBackend per process owns the TCP device (a listening socket and an event-loop
// thread); each group is a gloo::rendezvous::Context with a full mesh of connections.

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "varuna/comm/collective_queue.h"
#include "varuna/comm/exception_status.h"
#include "varuna/comm/failure_latch.h"
#include "varuna/comm/gloo_backend.h"
#include "varuna/comm/store_wait.h"
#include "varuna/comm/tensor_checks.h"

namespace varuna::comm {
namespace {

// Gloo's rendezvous reads and writes keys through this adapter onto LibTorch's c10d store. Its
// waits poll the store, so that a stop request ends them.
class C10dStoreForGloo : public gloo::rendezvous::Store {
 public:
  C10dStoreForGloo(c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout,
                   std::function<bool()> stop_requested)
      : store_(std::move(store)), timeout_(timeout), stop_requested_(std::move(stop_requested)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::vector<uint8_t>(data.begin(), data.end()));
  }

  std::vector<char> get(const std::string& key) override {
    const std::vector<uint8_t> value = store_->get(key);
    return std::vector<char>(value.begin(), value.end());
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    switch (WaitForStoreKeys(*store_, keys, std::chrono::steady_clock::now() + timeout,
                             stop_requested_)) {
      case StoreWait::kReady:
        return;
      case StoreWait::kStopped:
        throw std::runtime_error("stop requested");
      case StoreWait::kTimedOut:
        throw std::runtime_error(
            absl::StrCat("timeout after ", timeout.count(), " ms waiting for the other members"));
    }
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  const std::chrono::milliseconds timeout_;
  const std::function<bool()> stop_requested_;
};

// c = a + b elementwise, the reduction gloo::allreduce applies.
template <typename T>
void SumInto(void* c, const void* a, const void* b, size_t n) {
  T* out = static_cast<T*>(c);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(x[i] + y[i]);
}

// Points an all-reduce at `tensor` as an array of T, summed.
template <typename T>
void SetSumOutput(gloo::AllreduceOptions& opts, const at::Tensor& tensor) {
  opts.setOutput(static_cast<T*>(tensor.data_ptr()), tensor.numel());
  opts.setReduceFunction(&SumInto<T>);
}
using SetSumOutputFn = void (*)(gloo::AllreduceOptions&, const at::Tensor&);

// The setter for each dtype Gloo can sum (those IsSummable lists); nullptr for the others.
SetSumOutputFn SumOutputFor(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return &SetSumOutput<float>;
    case at::kDouble:
      return &SetSumOutput<double>;
    case at::kHalf:
      return &SetSumOutput<c10::Half>;
    case at::kBFloat16:
      return &SetSumOutput<c10::BFloat16>;
    case at::kInt:
      return &SetSumOutput<int32_t>;
    case at::kLong:
      return &SetSumOutput<int64_t>;
    case at::kChar:
      return &SetSumOutput<int8_t>;
    case at::kByte:
      return &SetSumOutput<uint8_t>;
    default:
      return nullptr;
  }
}

// What a group and its in-flight transfers share: the gloo context and the group's health.
class GroupState {
 public:
  GroupState(GroupSpec spec, std::shared_ptr<gloo::rendezvous::Context> context)
      : spec_(std::move(spec)), context_(std::move(context)) {}

  const GroupSpec& spec() const { return spec_; }
  const std::shared_ptr<gloo::rendezvous::Context>& context() const { return context_; }

  // Makes every operation in flight fail, here and at the peers; called by Break and, through
  // the FailureReport, by another group of this rank that failed. Gloo does not fail a send
  // still queued for a closed connection (it would wait out the timeout), so the waits of the
  // transfers in flight are also ended here, after the connections are closed: a transfer
  // whose wait ends has nothing left that could touch its tensor.
  void CloseConnections() {
    try {
      context_->closeConnections();
    } catch (const std::exception&) {
      // Connections that are already broken cannot be closed cleanly; they are closed.
    }
    std::lock_guard<std::mutex> lock(transfers_mu_);
    connections_closed_ = true;
    for (gloo::transport::UnboundBuffer* buffer : transfers_) EndWait(*buffer);
  }

  // Registers a transfer in flight, whose wait CloseConnections ends (at once if it has run);
  // the transfer calls Untrack before its buffer goes.
  void Track(gloo::transport::UnboundBuffer* buffer) {
    std::lock_guard<std::mutex> lock(transfers_mu_);
    transfers_.insert(buffer);
    if (connections_closed_) EndWait(*buffer);
  }
  void Untrack(gloo::transport::UnboundBuffer* buffer) {
    std::lock_guard<std::mutex> lock(transfers_mu_);
    transfers_.erase(buffer);
  }

  // The failure of a transfer whose wait CloseConnections ended: the group is broken (if it
  // was not, another group of this rank failed and closed it). Its peer was not lost, so the
  // records are asked about the job's failure as a whole (lost peer -1).
  absl::Status Stopped(const std::string& what) {
    return Break(absl::UnavailableError(absl::StrCat(
                     spec_.name, ": ", what,
                     " stopped: this rank closed its connections after a communication failure")),
                 /*lost_peer=*/-1);
  }

  absl::Status CheckUsable() const { return failure_.Check(spec_.name); }

  // The world rank of the one peer a collective of this group talks to, or -1 when there are
  // several.
  int CollectivePeer() const { return spec_.size == 2 ? spec_.members[1 - spec_.rank] : -1; }

  // Runs `op` unless the group is broken; a gloo exception becomes a status and breaks it.
  // `lost_peer`: the world rank `op` talks to, or -1 for several (see FailureReport).
  absl::Status Run(const std::string& what, int lost_peer, const std::function<void()>& op) {
    if (absl::Status usable = CheckUsable(); !usable.ok()) return usable;
    try {
      op();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return Break(StatusFromException(absl::StrCat(spec_.name, ": ", what), e), lost_peer);
    }
  }

 private:
  // Records the failure, closes every connection, then latches the failure with what the job's
  // records say of it (FailureReport::Explain), and returns it so. Closing first means that
  // once any thread sees the group broken, no data can arrive into a buffer it is about to
  // free; and the peers see the closed connections at once instead of waiting out their
  // timeout. Recording before closing means a peer that sees the connection close finds the
  // record. A thread failing meanwhile waits here, and its failure gets the same explanation.
  absl::Status Break(const absl::Status& status, int lost_peer) {
    std::call_once(closed_, [&] {
      if (spec_.failure_report) spec_.failure_report->Record(status, lost_peer);
      CloseConnections();
      if (spec_.failure_report) {
        explanation_ = spec_.failure_report->Explain(status, lost_peer);
      }
      // Latched before any other thread leaves call_once.
      failure_.Trip(WithExplanation(status, explanation_));
    });
    const absl::Status explained = WithExplanation(status, explanation_);
    failure_.Trip(explained);  // does nothing: the first failure is latched
    return explained;
  }

  // A transfer's wait ends whichever way it waits; the other flag is never read.
  static void EndWait(gloo::transport::UnboundBuffer& buffer) {
    buffer.abortWaitSend();
    buffer.abortWaitRecv();
  }

  const GroupSpec spec_;
  const std::shared_ptr<gloo::rendezvous::Context> context_;
  std::mutex transfers_mu_;
  std::set<gloo::transport::UnboundBuffer*> transfers_;  // guarded by transfers_mu_
  bool connections_closed_ = false;                      // guarded by transfers_mu_
  std::once_flag closed_;
  std::string explanation_;  // written once, inside closed_'s call_once
  FailureLatch failure_;
};

absl::Status CheckCpuTensor(const at::Tensor& tensor, const std::string& what) {
  if (absl::Status s = CheckDenseContiguous(tensor, what); !s.ok()) return s;
  if (!tensor.device().is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": Gloo moves CPU tensors, this one is on ", tensor.device().str(),
                     "; use an NCCL group for CUDA tensors"));
  }
  return absl::OkStatus();
}

// A send or receive in flight. It keeps its tensor alive, and its destructor waits for it,
// so gloo never writes into or reads from freed memory.
class TransferWork final : public Work {
 public:
  TransferWork(std::shared_ptr<GroupState> state, at::Tensor tensor,
               std::unique_ptr<gloo::transport::UnboundBuffer> buffer, bool is_send, int world_peer,
               std::string what)
      : state_(std::move(state)),
        tensor_(std::move(tensor)),
        buffer_(std::move(buffer)),
        is_send_(is_send),
        world_peer_(world_peer),
        what_(std::move(what)) {
    state_->Track(buffer_.get());
  }

  // Waiting here is what makes dropping an unwaited transfer safe; its result has no reader.
  ~TransferWork() override {
    Finish().IgnoreError();
    state_->Untrack(buffer_.get());
  }

  absl::Status Wait() override { return Finish(); }

 private:
  absl::Status Finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (waited_) return result_;
    waited_ = true;
    const auto timeout = state_->spec().timeout;
    bool completed = false;
    // A broken group has closed its connections, so nothing is in flight any more.
    result_ = state_->Run(what_, world_peer_, [&] {
      completed = is_send_ ? buffer_->waitSend(timeout) : buffer_->waitRecv(timeout);
    });
    if (result_.ok() && !completed) result_ = state_->Stopped(what_);
    return result_;
  }

  std::shared_ptr<GroupState> state_;
  at::Tensor tensor_;
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
  const bool is_send_;
  const int world_peer_;
  const std::string what_;
  std::mutex mu_;
  bool waited_ = false;  // guarded by mu_
  absl::Status result_;  // guarded by mu_
};

class GlooProcessGroup : public ProcessGroup {
 public:
  explicit GlooProcessGroup(std::shared_ptr<GroupState> state) : state_(std::move(state)) {}

  int rank() const override { return spec().rank; }
  int size() const override { return spec().size; }
  Backend backend() const override { return Backend::kGloo; }
  const std::vector<int>& members() const override { return spec().members; }
  const std::string& name() const override { return spec().name; }

  std::unique_ptr<Work> Send(const at::Tensor& tensor, int dst, int tag) override {
    return StartTransfer(tensor, dst, tag, /*is_send=*/true);
  }

  std::unique_ptr<Work> Recv(at::Tensor& tensor, int src, int tag) override {
    return StartTransfer(tensor, src, tag, /*is_send=*/false);
  }

  absl::Status AllReduceSum(at::Tensor& tensor) override {
    const std::string what = absl::StrCat(name(), ": all-reduce");
    if (absl::Status s = CheckCpuTensor(tensor, what); !s.ok()) return s;
    const SetSumOutputFn set_output = SumOutputFor(tensor.scalar_type());
    if (set_output == nullptr) return UnsummableError(tensor, what);
    async_.Drain();
    return RunAllReduce(*state_, tensor, set_output, next_tag_++);
  }

  std::unique_ptr<Work> AllReduceSumAsync(at::Tensor& tensor) override {
    const std::string what = absl::StrCat(name(), ": all-reduce");
    absl::Status status = CheckCpuTensor(tensor, what);
    const SetSumOutputFn set_output = SumOutputFor(tensor.scalar_type());
    if (status.ok() && set_output == nullptr) status = UnsummableError(tensor, what);
    if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));
    // The tag is taken now, in issue order; the job holds the group state and the tensor.
    const uint32_t tag = next_tag_++;
    return std::make_unique<QueuedWork>(
        async_.Enqueue([state = state_, tensor, set_output, tag]() mutable {
          return RunAllReduce(*state, tensor, set_output, tag);
        }));
  }

  absl::Status Broadcast(at::Tensor& tensor, int root) override {
    const std::string what = absl::StrCat("broadcast from rank ", root);
    if (absl::Status s = CheckCpuTensor(tensor, absl::StrCat(name(), ": ", what)); !s.ok()) {
      return s;
    }
    if (root < 0 || root >= size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": ", what, ": root must be in 0..", size() - 1));
    }
    async_.Drain();
    const uint32_t tag = next_tag_++;
    return state_->Run(what, state_->CollectivePeer(), [&] {
      gloo::BroadcastOptions opts(state_->context());
      opts.setOutput(static_cast<uint8_t*>(tensor.data_ptr()), tensor.nbytes());
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(spec().timeout);
      gloo::broadcast(opts);
    });
  }

  absl::Status Barrier() override {
    async_.Drain();
    const uint32_t tag = next_tag_++;
    return state_->Run("barrier", state_->CollectivePeer(), [&] {
      gloo::BarrierOptions opts(state_->context());
      opts.setTag(tag);
      opts.setTimeout(spec().timeout);
      gloo::barrier(opts);
    });
  }

 private:
  const GroupSpec& spec() const { return state_->spec(); }

  static absl::Status RunAllReduce(GroupState& state, const at::Tensor& tensor,
                                   SetSumOutputFn set_output, uint32_t tag) {
    return state.Run("all-reduce", state.CollectivePeer(), [&] {
      gloo::AllreduceOptions opts(state.context());
      set_output(opts, tensor);
      opts.setTag(tag);
      opts.setTimeout(state.spec().timeout);
      gloo::allreduce(opts);
    });
  }

  std::unique_ptr<Work> StartTransfer(const at::Tensor& tensor, int peer, int tag, bool is_send) {
    const bool member = peer >= 0 && peer < size() && peer != rank();
    const int world_peer = member ? spec().members[peer] : -1;
    const std::string what =
        absl::StrCat(is_send ? "send to" : "recv from", " rank ", peer, " (",
                     member ? absl::StrCat("world rank ", world_peer, ", ") : "", "tag ", tag, ")");
    const std::string named = absl::StrCat(name(), ": ", what);
    absl::Status status = CheckCpuTensor(tensor, named);
    if (status.ok() && !member) {
      status = absl::InvalidArgumentError(
          absl::StrCat(named, ": the peer is not another member (ranks 0..", size() - 1, ")"));
    }
    if (status.ok() && tag < 0) {
      status = absl::InvalidArgumentError(absl::StrCat(named, ": tags must be >= 0"));
    }
    if (status.ok()) status = state_->CheckUsable();
    if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));

    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    // Collectives use slots whose top byte names the collective (1..8); point-to-point
    // transfers use the tag itself, whose top byte is 0, so the two never meet.
    const uint64_t slot = static_cast<uint32_t>(tag);
    status = state_->Run(what, world_peer, [&] {
      buffer = state_->context()->createUnboundBuffer(tensor.data_ptr(), tensor.nbytes());
      if (is_send) {
        buffer->send(peer, slot);
      } else {
        buffer->recv(peer, slot);
      }
    });
    if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));
    return std::make_unique<TransferWork>(state_, tensor, std::move(buffer), is_send, world_peer,
                                          what);
  }

  std::shared_ptr<GroupState> state_;
  uint32_t next_tag_ = 0;  // collectives only, which are issued from one thread at a time
  // Runs the asynchronous all-reduces in issue order; declared last, so destroyed first: the
  // jobs still queued run before the group goes.
  CollectiveQueue async_;
};

class GlooBackendImpl : public GlooBackend {
 public:
  explicit GlooBackendImpl(std::shared_ptr<gloo::transport::Device> device)
      : device_(std::move(device)) {}

  absl::StatusOr<std::unique_ptr<ProcessGroup>> NewGroup(const GroupSpec& spec) override {
    auto context = std::make_shared<gloo::rendezvous::Context>(spec.rank, spec.size);
    context->setTimeout(spec.timeout);
    try {
      C10dStoreForGloo store(spec.store, spec.timeout, spec.stop_requested);
      context->connectFullMesh(store, device_);
    } catch (const std::exception& e) {
      const std::string what = absl::StrCat(spec.name, ": connecting to the other ", spec.size - 1,
                                            " members (within ", spec.timeout.count(), " ms)");
      if (spec.stop_requested && spec.stop_requested()) {
        return absl::CancelledError(absl::StrCat(what, ": stop requested"));
      }
      return StatusFromException(what, e);
    }
    auto state = std::make_shared<GroupState>(spec, context);
    if (spec.failure_report) {
      spec.failure_report->AddGroup([weak = std::weak_ptr<GroupState>(state)] {
        if (std::shared_ptr<GroupState> group = weak.lock()) group->CloseConnections();
      });
    }
    return std::make_unique<GlooProcessGroup>(std::move(state));
  }

 private:
  std::shared_ptr<gloo::transport::Device> device_;
};

}  // namespace
}  // namespace varuna::comm

extern "C" __attribute__((visibility("default"))) varuna::comm::GlooBackend* VarunaNewGlooBackend(
    const std::string& address, std::string* error) {
  try {
    gloo::transport::tcp::attr attr(address.c_str());
    return new varuna::comm::GlooBackendImpl(gloo::transport::tcp::CreateDevice(attr));
  } catch (const std::exception& e) {
    *error = absl::StrCat("cannot listen for Gloo connections on '", address,
                          "': ", varuna::comm::OneLineMessage(e));
    return nullptr;
  }
}
