// Point-to-point transfers of tensors whose shape the receiver does not know in advance.
//
// A transfer is two messages on the same (peer, tag) pair: a fixed-size header (dtype and
// shape, as int64) and then the data. The receiver allocates from the header. Pipeline stages
// use this for activations and gradients, so the engine needs no knowledge of the model's
// shapes.
//
// Thread safety: as the ProcessGroup's point-to-point calls.
#ifndef VARUNA_PIPELINE_P2P_H_
#define VARUNA_PIPELINE_P2P_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "varuna/comm/process_group.h"

namespace varuna {

// Sends in flight: each keeps its tensors alive until waited for.
class PendingSends {
 public:
  // Starts sending `tensor` (any dtype, at most 8 dimensions) to group rank `peer`, tags
  // `tag` and `tag + 1`.
  void Send(comm::ProcessGroup& group, const at::Tensor& tensor, int peer, int tag);

  // Waits for every send started so far; the first failure, if any.
  absl::Status WaitAll();

 private:
  struct Pending {
    at::Tensor header;
    at::Tensor data;
    std::unique_ptr<comm::Work> header_work;
    std::unique_ptr<comm::Work> data_work;
  };
  std::vector<Pending> pending_;
};

// Receives a tensor sent with PendingSends::Send(group, tensor, <this rank>, tag) from group
// rank `peer`, onto `device`. Errors: those of the group, or DataLoss for a malformed header.
absl::StatusOr<at::Tensor> ReceiveTensor(comm::ProcessGroup& group, int peer, int tag,
                                         const c10::Device& device);

}  // namespace varuna

#endif  // VARUNA_PIPELINE_P2P_H_
