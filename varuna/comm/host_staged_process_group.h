// HostStagedProcessGroup: a Gloo group that also moves CUDA tensors, by staging them through
// pinned host memory. This is the transport of the original Varuna, built for commodity
// networks: activations, gradients and the tied weights cross between stages as host tensors
// over TCP. Because no GPU talks to another directly, several ranks may share one GPU.
//
// How a CUDA tensor travels (CPU tensors go to the Gloo group unchanged, through the same
// queues):
// - Send: the device-to-host copy is queued on a side stream behind the work already queued on
//   the caller's current stream, so neither the compute stream nor the calling thread waits.
//   A sender thread waits for each copy in turn and hands the host buffer to Gloo.
// - Recv: Gloo receives into a host buffer at once; Work::Wait, on the waiting thread, waits for
//   the bytes, copies them to the device on a second side stream and waits for that copy. A
//   waiting receive thread therefore holds up no stream.
// - Collectives (AllReduceSum, Broadcast): the calling thread copies the tensor to pinned host
//   memory (waiting for its current stream), runs the Gloo collective, and queues the copy back
//   on its current stream, which later work on that stream sees; the host does not wait for it.
// - AllReduceSumAsync: the device-to-host copy is queued on the side stream behind the caller's
//   current stream; a collective thread (one per group, running the asynchronous all-reduces
//   in issue order) waits for the copy, runs the Gloo all-reduce and queues the copy back on
//   the host-to-device side stream. Work::Wait blocks the host until the Gloo all-reduce is
//   done (the network, not the GPU) and makes the waiting thread's current stream wait for the
//   copy back. Synchronous collectives first wait for the asynchronous ones in flight.
//
// The ProcessGroup contract holds unchanged (process_group.h): a point-to-point Wait returns
// once the tensor may be used on any stream; a failed transfer breaks the Gloo group.
//
// Thread safety: as ProcessGroup. Send and Recv may be called from any thread.
#ifndef VARUNA_COMM_HOST_STAGED_PROCESS_GROUP_H_
#define VARUNA_COMM_HOST_STAGED_PROCESS_GROUP_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "varuna/comm/process_group.h"

namespace varuna::comm {

class CollectiveQueue;

class HostStagedProcessGroup final : public ProcessGroup {
 public:
  // Wraps `gloo`, which must be a Gloo group (TORCH_CHECKed: NCCL groups need no staging).
  explicit HostStagedProcessGroup(std::unique_ptr<ProcessGroup> gloo);
  // Issues the sends still queued, then stops the sender thread. Their Work objects stay valid.
  ~HostStagedProcessGroup() override;

  int rank() const override { return gloo_->rank(); }
  int size() const override { return gloo_->size(); }
  Backend backend() const override { return Backend::kGloo; }
  const std::vector<int>& members() const override { return gloo_->members(); }
  // The Gloo group's name with " (host-staged)".
  const std::string& name() const override { return name_; }

  std::unique_ptr<Work> Send(const at::Tensor& tensor, int dst, int tag) override;
  std::unique_ptr<Work> Recv(at::Tensor& tensor, int src, int tag) override;
  absl::Status AllReduceSum(at::Tensor& tensor) override;
  std::unique_ptr<Work> AllReduceSumAsync(at::Tensor& tensor) override;
  absl::Status Broadcast(at::Tensor& tensor, int root) override;
  absl::Status Barrier() override;

  // The sender thread and its queue (host_staged_process_group.cc).
  class Sender;
  // A device's two side streams (device-to-host, host-to-device).
  struct SideStreams;

 private:
  // The side streams of `device`, taken from LibTorch's stream pool on first use.
  const SideStreams& StreamsFor(const c10::Device& device);

  std::unique_ptr<ProcessGroup> gloo_;
  std::string name_;
  std::unique_ptr<Sender> sender_;
  // Runs the asynchronous all-reduces in issue order (comm/collective_queue.h).
  std::unique_ptr<CollectiveQueue> collectives_;
  std::mutex streams_mu_;
  std::vector<std::unique_ptr<SideStreams>> streams_;  // guarded by streams_mu_
};

}  // namespace varuna::comm

#endif  // VARUNA_COMM_HOST_STAGED_PROCESS_GROUP_H_
