// ProcessGroup: a set of ranks that exchange tensors, and the only way the engine
// communicates. Two implementations exist: Gloo for CPU tensors (gloo_process_group.cc) and
// NCCL for CUDA tensors (nccl_process_group.cc); World creates both.
//
// Contract, for every implementation:
// - Collectives (AllReduceSum, AllReduceSumAsync, Broadcast, Barrier) must be called by every
//   member, in the same order, from one thread at a time; an asynchronous all-reduce counts
//   where it is issued, and the ones still in flight run before any later collective (they
//   complete in issue order). Point-to-point calls (Send, Recv) may be issued from any
//   thread, concurrently with collectives, including asynchronous ones in flight.
// - Matching of point-to-point transfers. Gloo routes by (peer, tag): transfers with
//   different tags may be issued in any order, but two with the same peer and tag must not
//   be in flight at once. NCCL ignores the tag and matches the transfers from one rank to
//   another in the order each side issues them, each direction on its own: issue them in
//   the same order on both sides, from one thread per direction on each side.
// - Completion: when a call (or Work::Wait) returns OK, the result is visible to the
//   caller's next work on the tensor's device. For CPU tensors the bytes are in memory. For
//   CUDA tensors, after a collective, work queued on the current CUDA stream afterwards sees
//   them (the host does not wait for the GPU); a point-to-point Wait returns once the
//   transfer has finished on the GPU, so the tensor may then be used on any stream and a
//   waiting thread holds up no stream. An asynchronous all-reduce of a CUDA tensor reads it
//   after the work queued on the caller's current stream when it was issued; its Wait makes
//   the waiting thread's current stream wait for the result (NCCL: without blocking the
//   host; host-staged Gloo: the host waits for the network, not for the GPU).
// - Failure. Gloo: an operation that exceeds the group's timeout returns DeadlineExceeded;
//   one whose peer fails (a killed process, a closed connection) returns Unavailable,
//   usually at once. The message names the operation, the group and the peer. After a
//   failure the group is broken: it closes its connections (so its peers fail at once too)
//   and every later call returns FailedPrecondition, since members may disagree on which
//   operations completed. NCCL: failures happen on the GPU after the call has returned;
//   LibTorch's NCCL watchdog detects a failed or timed-out operation and ends the process
//   (non-zero exit). Either way no rank waits forever. An asynchronous all-reduce fails as
//   the synchronous one would, reported by its Wait, and breaks the group the same way.
// - Bad arguments (wrong device, undefined, sparse or non-contiguous tensor, peer or root
//   out of range, unsupported dtype) return InvalidArgument and do not break the group.
// - Work objects may outlive their group. Destroying an unwaited Gloo Work waits for it.
#ifndef VARUNA_COMM_PROCESS_GROUP_H_
#define VARUNA_COMM_PROCESS_GROUP_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace varuna::comm {

// The library that moves a group's bytes.
enum class Backend {
  kGloo,  // CPU tensors, over TCP.
  kNccl,  // CUDA tensors, one GPU per rank.
};

inline const char* BackendName(Backend backend) {
  return backend == Backend::kGloo ? "gloo" : "nccl";
}

// A point-to-point transfer or an asynchronous all-reduce in flight.
class Work {
 public:
  virtual ~Work() = default;

  // Blocks until the operation is complete (see "Completion" above) and returns OK, or
  // returns why it failed. Returns the same result if called again.
  virtual absl::Status Wait() = 0;
};

// A transfer whose outcome was known when it was started (an argument error, say).
class CompletedWork final : public Work {
 public:
  explicit CompletedWork(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait() override { return status_; }

 private:
  absl::Status status_;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  // This process's rank within the group, in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Backend backend() const = 0;
  // World rank of each member, indexed by group rank.
  virtual const std::vector<int>& members() const = 0;
  // "gloo group 2 [0,2,4] rank 1", for messages.
  virtual const std::string& name() const = 0;

  // Starts sending `tensor` to group rank `dst`. The receiver's Recv with the same tag
  // must name a tensor of the same byte size. `tensor` must stay alive and unmodified until
  // Wait() returns. Argument errors are reported by Wait().
  virtual std::unique_ptr<Work> Send(const at::Tensor& tensor, int dst, int tag) = 0;

  // Starts receiving into `tensor` from group rank `src`; see Send.
  virtual std::unique_ptr<Work> Recv(at::Tensor& tensor, int src, int tag) = 0;

  // Replaces `tensor` on every member by the elementwise sum over all members.
  virtual absl::Status AllReduceSum(at::Tensor& tensor) = 0;

  // Starts AllReduceSum(tensor) and returns at once (on the CPU the caller continues while a
  // worker thread of the group sums; on CUDA the sum is queued on the group's stream). The
  // result is the one AllReduceSum gives, bit for bit. `tensor` must stay alive and must not
  // be read or written until Wait() returns; the Work keeps a reference to it. Argument
  // errors are reported by Wait() and do not break the group.
  virtual std::unique_ptr<Work> AllReduceSumAsync(at::Tensor& tensor) = 0;

  // Replaces `tensor` on every member by its value on group rank `root`.
  virtual absl::Status Broadcast(at::Tensor& tensor, int root) = 0;

  // Returns once every member has entered Barrier.
  virtual absl::Status Barrier() = 0;
};

}  // namespace varuna::comm

#endif  // VARUNA_COMM_PROCESS_GROUP_H_
