#include "varuna/planning/comm_profiler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "varuna/planning/device_timer.h"
#include "varuna/planning/timing_summary.h"

namespace varuna {
namespace {

using Clock = std::chrono::steady_clock;

// Tags of the bounced message on the way out and back (Gloo routes by peer and tag).
constexpr int kPingTag = 0x636f6d;
constexpr int kPongTag = kPingTag + 1;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

absl::Status WithContext(const absl::Status& status, const std::string& what) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

// Checks the options (the same on every rank, so every rank fails alike) and returns the
// device the messages live on, with its index filled in for CUDA.
absl::StatusOr<c10::Device> CheckOptions(const comm::World& world,
                                         const CommProfileOptions& options) {
  if (options.message_bytes.empty()) {
    return absl::InvalidArgumentError(
        "communication profile: message_bytes is empty; give at least one message size in "
        "bytes");
  }
  for (int64_t bytes : options.message_bytes) {
    if (bytes < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("communication profile: message size ", bytes, " bytes must be at least 1"));
    }
  }
  if (options.warmup < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("communication profile: warmup ", options.warmup, " must be >= 0"));
  }
  if (options.repeats < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("communication profile: repeats ", options.repeats, " must be >= 1"));
  }
  if (options.gpus_per_node < 1) {
    return absl::InvalidArgumentError(absl::StrCat("communication profile: gpus_per_node ",
                                                   options.gpus_per_node, " must be >= 1"));
  }
  const c10::Device& device = options.device;
  if (device.is_cpu()) return c10::Device(c10::kCPU);
  const int cuda_device = world.options().cuda_device;
  if (device.is_cuda() && (!device.has_index() || device.index() == cuda_device)) {
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(cuda_device));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("communication profile: device ", device.str(),
                   " is neither the CPU nor this rank's CUDA device cuda:", cuda_device,
                   "; profile on \"cpu\" or on the world's cuda_device"));
}

// Blocks until the work queued on `device` is done (CUDA collectives return when queued).
// One round of the bounce between group ranks `sender` and `sender + 1`; the caller is one
// of the two.
absl::Status Bounce(comm::ProcessGroup& group, at::Tensor& message, int sender) {
  if (group.rank() == sender) {
    std::unique_ptr<comm::Work> back = group.Recv(message, sender + 1, kPongTag);
    std::unique_ptr<comm::Work> out = group.Send(message, sender + 1, kPingTag);
    if (absl::Status s = out->Wait(); !s.ok()) return s;
    return back->Wait();
  }
  if (absl::Status s = group.Recv(message, sender, kPingTag)->Wait(); !s.ok()) return s;
  return group.Send(message, sender, kPongTag)->Wait();
}

// The mean one-way milliseconds of a `bytes` message from group rank `sender` to `sender + 1`
// as the sender sees it; 0 on the receiver.
absl::StatusOr<double> TimeTransfer(comm::ProcessGroup& group, int sender, int64_t bytes,
                                    const CommProfileOptions& options, const c10::Device& device) {
  at::Tensor message = at::zeros({bytes}, at::TensorOptions().dtype(at::kByte).device(device));
  for (int i = 0; i < options.warmup; ++i) {
    if (absl::Status s = Bounce(group, message, sender); !s.ok()) return s;
  }
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < options.repeats; ++i) {
    if (absl::Status s = Bounce(group, message, sender); !s.ok()) return s;
  }
  const double round_trip = MillisecondsSince(start) / options.repeats;
  return group.rank() == sender ? round_trip / 2 : 0.0;
}

// This member's mean milliseconds for an all-reduce of `bytes` (rounded up to whole floats).
absl::StatusOr<double> TimeAllReduce(comm::ProcessGroup& ring, int64_t bytes,
                                     const CommProfileOptions& options, const c10::Device& device) {
  at::Tensor tensor =
      at::ones({(bytes + 3) / 4}, at::TensorOptions().dtype(at::kFloat).device(device));
  for (int i = 0; i < options.warmup; ++i) {
    if (absl::Status s = ring.AllReduceSum(tensor); !s.ok()) return s;
  }
  DeviceTimer(device).Synchronize();
  if (absl::Status s = ring.Barrier(); !s.ok()) return s;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < options.repeats; ++i) {
    if (absl::Status s = ring.AllReduceSum(tensor); !s.ok()) return s;
  }
  DeviceTimer(device).Synchronize();
  return MillisecondsSince(start) / options.repeats;
}

}  // namespace

absl::StatusOr<CommProfile> MeasureCommunication(comm::World& world,
                                                 const CommProfileOptions& options) {
  absl::StatusOr<c10::Device> device_or = CheckOptions(world, options);
  if (!device_or.ok()) return device_or.status();
  const c10::Device device = *device_or;
  CommProfile profile;
  const int n = world.size();
  if (n == 1) return profile;
  const int rank = world.rank();

  std::vector<int64_t> sizes = options.message_bytes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  const int num_sizes = static_cast<int>(sizes.size());

  // Groups, made in the same order on every rank: all ranks with the device's backend, then
  // rings 2..n-1 (the ring of n is the group of all ranks).
  const comm::Backend backend = device.is_cuda() ? comm::Backend::kNccl : comm::Backend::kGloo;
  std::unique_ptr<comm::ProcessGroup> own_all;
  comm::ProcessGroup* all = &world.group();
  std::vector<int> ranks(n);
  for (int r = 0; r < n; ++r) ranks[r] = r;
  if (all->backend() != backend) {
    absl::StatusOr<std::unique_ptr<comm::ProcessGroup>> group = world.NewGroup(ranks, backend);
    if (!group.ok()) {
      return WithContext(group.status(), "communication profile: creating the group of all ranks");
    }
    own_all = *std::move(group);
    all = own_all.get();
  }
  std::map<int, std::unique_ptr<comm::ProcessGroup>> rings;  // this rank's, by ring size
  for (int ring = 2; ring < n; ++ring) {
    absl::StatusOr<std::unique_ptr<comm::ProcessGroup>> group =
        world.NewGroup(std::vector<int>(ranks.begin(), ranks.begin() + ring), backend);
    if (!group.ok()) {
      return WithContext(group.status(),
                         absl::StrCat("communication profile: creating the ring of ", ring));
    }
    if (*group != nullptr) rings[ring] = *std::move(group);
  }

  // Every value is written by exactly one rank, so the sum over ranks is exact everywhere:
  // transfers[s][r] by the sender r of pair (r, r+1); allreduce[k-2][s][r] by member r.
  const int num_pairs = n - 1;
  const int64_t allreduce_offset = static_cast<int64_t>(num_sizes) * num_pairs;
  at::Tensor results =
      at::zeros({allreduce_offset + static_cast<int64_t>(n - 1) * num_sizes * n}, at::kDouble);
  double* values = results.data_ptr<double>();

  for (int s = 0; s < num_sizes; ++s) {
    for (int parity = 0; parity < 2; ++parity) {
      const int sender = rank % 2 == parity ? rank : rank - 1;
      if (sender >= 0 && sender + 1 < n) {
        absl::StatusOr<double> ms = TimeTransfer(*all, sender, sizes[s], options, device);
        if (!ms.ok()) {
          return WithContext(ms.status(),
                             absl::StrCat("communication profile: sending ", sizes[s],
                                          " bytes from rank ", sender, " to rank ", sender + 1));
        }
        if (rank == sender) values[s * num_pairs + sender] = *ms;
      }
      if (absl::Status st = all->Barrier(); !st.ok()) {
        return WithContext(st, "communication profile: barrier after transfers");
      }
    }
  }

  for (int ring = 2; ring <= n; ++ring) {
    comm::ProcessGroup* group = ring == n ? all : nullptr;
    if (auto it = rings.find(ring); it != rings.end()) group = it->second.get();
    if (group == nullptr) continue;  // not a member
    for (int s = 0; s < num_sizes; ++s) {
      absl::StatusOr<double> ms = TimeAllReduce(*group, sizes[s], options, device);
      if (!ms.ok()) {
        return WithContext(ms.status(), absl::StrCat("communication profile: all-reduce of ",
                                                     sizes[s], " bytes among ranks 0..", ring - 1));
      }
      values[allreduce_offset + (static_cast<int64_t>(ring - 2) * num_sizes + s) * n + rank] = *ms;
    }
  }

  const bool on_cpu = all->backend() == comm::Backend::kGloo;
  at::Tensor agreed = on_cpu ? results : results.to(device);
  if (absl::Status st = all->AllReduceSum(agreed); !st.ok()) {
    return WithContext(st, "communication profile: gathering the measurements");
  }
  if (!on_cpu) results = agreed.cpu();
  values = results.data_ptr<double>();

  for (int s = 0; s < num_sizes; ++s) {
    std::vector<double> within, across;
    for (int r = 0; r < num_pairs; ++r) {
      const bool same_node = r / options.gpus_per_node == (r + 1) / options.gpus_per_node;
      (same_node ? within : across).push_back(values[s * num_pairs + r]);
    }
    if (!within.empty())
      profile.send_within_node.points.emplace_back(sizes[s], Summarize(within).median_ms);
    if (!across.empty())
      profile.send_across_nodes.points.emplace_back(sizes[s], Summarize(across).median_ms);
  }
  for (int ring = 2; ring <= n; ++ring) {
    CostCurve& curve = profile.allreduce[ring];
    for (int s = 0; s < num_sizes; ++s) {
      const double* member =
          values + allreduce_offset + (static_cast<int64_t>(ring - 2) * num_sizes + s) * n;
      curve.points.emplace_back(sizes[s], *std::max_element(member, member + ring));
    }
  }
  return profile;
}

void MergeIntoProfile(const CommProfile& comm, Profile& profile) {
  profile.send_within_node = comm.send_within_node;
  profile.send_across_nodes = comm.send_across_nodes;
  profile.allreduce = comm.allreduce;
}

}  // namespace varuna
