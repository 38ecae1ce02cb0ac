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

#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "varuna/comm/failure_latch.h"
#include "varuna/comm/gloo_backend.h"

namespace varuna::comm {
namespace {

// Gloo's rendezvous reads and writes keys through this adapter onto LibTorch's c10d store.
class C10dStoreForGloo : public gloo::rendezvous::Store {
 public:
  explicit C10dStoreForGloo(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::vector<uint8_t>(data.begin(), data.end()));
  }

  std::vector<char> get(const std::string& key) override {
    const std::vector<uint8_t> value = store_->get(key);
    return std::vector<char>(value.begin(), value.end());
  }

  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
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

// Gloo reports timeouts and broken connections as exceptions with these words.
absl::Status StatusFromGlooError(const std::string& what, const std::exception& e) {
  const std::string message = absl::StrCat(what, " failed: ", e.what());
  if (message.find("Timed out") != std::string::npos ||
      message.find("timed out") != std::string::npos ||
      message.find("Timeout") != std::string::npos) {
    return absl::DeadlineExceededError(message);
  }
  return absl::UnavailableError(message);
}

// What a group and its in-flight transfers share: the gloo context and the group's health.
class GroupState {
 public:
  GroupState(GroupSpec spec, std::shared_ptr<gloo::rendezvous::Context> context)
      : spec_(std::move(spec)), context_(std::move(context)) {}

  const GroupSpec& spec() const { return spec_; }
  const std::shared_ptr<gloo::rendezvous::Context>& context() const { return context_; }
  absl::Status CheckUsable() const { return failure_.Check(spec_.name); }

  // Runs `op` unless the group is broken; a gloo exception becomes a status and breaks it.
  absl::Status Run(const std::string& what, const std::function<void()>& op) {
    if (absl::Status usable = CheckUsable(); !usable.ok()) return usable;
    try {
      op();
      return absl::OkStatus();
    } catch (const std::exception& e) {
      absl::Status status = StatusFromGlooError(absl::StrCat(spec_.name, ": ", what), e);
      failure_.Trip(status);
      return status;
    }
  }

 private:
  const GroupSpec spec_;
  const std::shared_ptr<gloo::rendezvous::Context> context_;
  FailureLatch failure_;
};

absl::Status CheckTensor(const at::Tensor& tensor, const std::string& what) {
  if (!tensor.defined())
    return absl::InvalidArgumentError(absl::StrCat(what, ": undefined tensor"));
  if (!tensor.device().is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": Gloo moves CPU tensors, this one is on ", tensor.device().str(),
                     "; use an NCCL group for CUDA tensors"));
  }
  if (!tensor.is_contiguous() || tensor.is_sparse()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the tensor must be dense and contiguous; call .contiguous()"));
  }
  return absl::OkStatus();
}

absl::Status CheckPeer(const GroupSpec& spec, int peer, const std::string& what) {
  if (peer < 0 || peer >= spec.size || peer == spec.rank) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": peer rank ", peer,
                                                   " is not another member of ", spec.name,
                                                   " (ranks 0..", spec.size - 1, ")"));
  }
  return absl::OkStatus();
}

class TransferWork : public Work {
 public:
  TransferWork(std::shared_ptr<GroupState> state,
               std::unique_ptr<gloo::transport::UnboundBuffer> buffer, bool is_send,
               std::string what)
      : state_(std::move(state)),
        buffer_(std::move(buffer)),
        is_send_(is_send),
        what_(std::move(what)) {}

  absl::Status Wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (waited_) return result_;
    waited_ = true;
    const auto timeout = state_->spec().timeout;
    bool completed = false;
    result_ = state_->Run(what_, [&] {
      completed = is_send_ ? buffer_->waitSend(timeout) : buffer_->waitRecv(timeout);
    });
    if (result_.ok() && !completed) {
      result_ = absl::UnavailableError(absl::StrCat(state_->spec().name, ": ", what_, " aborted"));
    }
    return result_;
  }

 private:
  std::shared_ptr<GroupState> state_;
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
  const bool is_send_;
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
    const std::string what = "all-reduce";
    if (absl::Status s = CheckTensor(tensor, what); !s.ok()) return s;
    SetSumOutputFn set_output = nullptr;
    switch (tensor.scalar_type()) {
      case at::kFloat:
        set_output = &SetSumOutput<float>;
        break;
      case at::kDouble:
        set_output = &SetSumOutput<double>;
        break;
      case at::kHalf:
        set_output = &SetSumOutput<c10::Half>;
        break;
      case at::kBFloat16:
        set_output = &SetSumOutput<c10::BFloat16>;
        break;
      case at::kInt:
        set_output = &SetSumOutput<int32_t>;
        break;
      case at::kLong:
        set_output = &SetSumOutput<int64_t>;
        break;
      case at::kChar:
        set_output = &SetSumOutput<int8_t>;
        break;
      case at::kByte:
        set_output = &SetSumOutput<uint8_t>;
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            name(), ": ", what, " does not support dtype ", c10::toString(tensor.scalar_type())));
    }
    const uint32_t tag = next_tag_++;
    return state_->Run(what, [&] {
      gloo::AllreduceOptions opts(state_->context());
      set_output(opts, tensor);
      opts.setTag(tag);
      opts.setTimeout(spec().timeout);
      gloo::allreduce(opts);
    });
  }

  absl::Status Broadcast(at::Tensor& tensor, int root) override {
    const std::string what = absl::StrCat("broadcast from rank ", root);
    if (absl::Status s = CheckTensor(tensor, what); !s.ok()) return s;
    if (root < 0 || root >= size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": ", what, ": root must be in 0..", size() - 1));
    }
    const uint32_t tag = next_tag_++;
    return state_->Run(what, [&] {
      gloo::BroadcastOptions opts(state_->context());
      opts.setOutput(static_cast<uint8_t*>(tensor.data_ptr()), tensor.nbytes());
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(spec().timeout);
      gloo::broadcast(opts);
    });
  }

  absl::Status Barrier() override {
    const uint32_t tag = next_tag_++;
    return state_->Run("barrier", [&] {
      gloo::BarrierOptions opts(state_->context());
      opts.setTag(tag);
      opts.setTimeout(spec().timeout);
      gloo::barrier(opts);
    });
  }

 private:
  const GroupSpec& spec() const { return state_->spec(); }
  std::unique_ptr<Work> StartTransfer(const at::Tensor& tensor, int peer, int tag, bool is_send) {
    const std::string what =
        absl::StrCat(is_send ? "send to rank " : "recv from rank ", peer, " (tag ", tag, ")");
    absl::Status status = CheckTensor(tensor, what);
    if (status.ok()) status = CheckPeer(spec(), peer, what);
    if (status.ok() && tag < 0) {
      status = absl::InvalidArgumentError(absl::StrCat(what, ": tags must be >= 0"));
    }
    if (status.ok()) status = state_->CheckUsable();
    if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));

    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    // Collectives use slots whose top byte names the collective (1..8); point-to-point
    // transfers use the tag itself, whose top byte is 0, so the two never meet.
    const uint64_t slot = static_cast<uint32_t>(tag);
    status = state_->Run(what, [&] {
      buffer = state_->context()->createUnboundBuffer(tensor.data_ptr(), tensor.nbytes());
      if (is_send) {
        buffer->send(peer, slot);
      } else {
        buffer->recv(peer, slot);
      }
    });
    if (!status.ok()) return std::make_unique<CompletedWork>(std::move(status));
    return std::make_unique<TransferWork>(state_, std::move(buffer), is_send, what);
  }

  std::shared_ptr<GroupState> state_;
  uint32_t next_tag_ = 0;  // collectives only, which run on one thread at a time
};

class GlooBackendImpl : public GlooBackend {
 public:
  explicit GlooBackendImpl(std::shared_ptr<gloo::transport::Device> device)
      : device_(std::move(device)) {}

  absl::StatusOr<std::unique_ptr<ProcessGroup>> NewGroup(const GroupSpec& spec) override {
    auto context = std::make_shared<gloo::rendezvous::Context>(spec.rank, spec.size);
    context->setTimeout(spec.timeout);
    try {
      C10dStoreForGloo store(spec.store);
      context->connectFullMesh(store, device_);
    } catch (const std::exception& e) {
      return StatusFromGlooError(
          absl::StrCat(spec.name, ": connecting to the other ", spec.size - 1, " members (within ",
                       spec.timeout.count(), " ms)"),
          e);
    }
    return std::make_unique<GlooProcessGroup>(std::make_shared<GroupState>(spec, context));
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
    *error = absl::StrCat("cannot listen for Gloo connections on '", address, "': ", e.what());
    return nullptr;
  }
}
