#include "varuna/pipeline/p2p.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace varuna {
namespace {

constexpr int64_t kMaxDims = 8;
constexpr int64_t kHeaderSize = 2 + kMaxDims;  // dtype, ndim, sizes

// Where the header travels: with the data on NCCL, which moves device memory only; on the
// host with Gloo, which would otherwise stage it there and back.
c10::Device HeaderDevice(const comm::ProcessGroup& group, const c10::Device& data_device) {
  return group.backend() == comm::Backend::kNccl ? data_device : c10::Device(c10::kCPU);
}

}  // namespace

void PendingSends::Send(comm::ProcessGroup& group, const at::Tensor& tensor, int peer, int tag) {
  Pending p;
  p.data = tensor.detach().contiguous();
  // Filled on the host; for a CUDA header from pinned memory, so that the copy to the device
  // does not make the host wait for the stage's queued compute at every send.
  const c10::Device header_device = HeaderDevice(group, p.data.device());
  at::Tensor header = at::zeros(
      {kHeaderSize}, at::TensorOptions().dtype(at::kLong).pinned_memory(header_device.is_cuda()));
  int64_t* h = header.data_ptr<int64_t>();
  h[0] = static_cast<int64_t>(p.data.scalar_type());
  h[1] = p.data.dim();
  for (int64_t d = 0; d < p.data.dim() && d < kMaxDims; ++d) h[2 + d] = p.data.size(d);
  p.header = header.to(header_device, /*non_blocking=*/true);
  p.header_work = group.Send(p.header, peer, tag);
  p.data_work = group.Send(p.data, peer, tag + 1);
  pending_.push_back(std::move(p));
}

absl::Status PendingSends::WaitAll() {
  absl::Status first;
  for (Pending& p : pending_) {
    for (comm::Work* work : {p.header_work.get(), p.data_work.get()}) {
      absl::Status status = work->Wait();
      if (first.ok() && !status.ok()) first = status;
    }
  }
  pending_.clear();
  return first;
}

absl::StatusOr<at::Tensor> ReceiveTensor(comm::ProcessGroup& group, int peer, int tag,
                                         const c10::Device& device) {
  at::Tensor header = at::zeros(
      {kHeaderSize}, at::TensorOptions().dtype(at::kLong).device(HeaderDevice(group, device)));
  if (absl::Status status = group.Recv(header, peer, tag)->Wait(); !status.ok()) return status;
  const at::Tensor host = header.to(at::kCPU);
  const int64_t* h = host.data_ptr<int64_t>();
  const int64_t ndim = h[1];
  if (ndim < 0 || ndim > kMaxDims || h[0] < 0 ||
      h[0] >= static_cast<int64_t>(c10::ScalarType::NumOptions)) {
    return absl::DataLossError(absl::StrCat("malformed tensor header from rank ", peer, " of ",
                                            group.name(), " (tag ", tag, ")"));
  }
  std::vector<int64_t> sizes(h + 2, h + 2 + ndim);
  at::Tensor data = at::empty(
      sizes, at::TensorOptions().dtype(static_cast<c10::ScalarType>(h[0])).device(device));
  if (absl::Status status = group.Recv(data, peer, tag + 1)->Wait(); !status.ok()) return status;
  return data;
}

}  // namespace varuna
