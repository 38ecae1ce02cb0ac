#include "varuna/comm/status_agreement.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"

namespace varuna::comm {

absl::Status AgreeOnStatus(c10d::Store& store, ProcessGroup& group, const std::string& key,
                           const absl::Status& local, const c10::Device& device) {
  const int rank = group.rank();
  if (!local.ok()) {
    // Every rank reaches the all-reduce below whatever happens here: the others wait in it.
    const std::string message(local.message());
    try {
      store.set(key + std::to_string(rank), std::vector<uint8_t>(message.begin(), message.end()));
    } catch (const std::exception&) {
      // The others then name only the failing rank; this rank returns its own message.
    }
  }
  at::Tensor codes = at::zeros({group.size()}, at::TensorOptions().dtype(at::kInt).device(device));
  codes[rank] = static_cast<int>(local.code());
  if (absl::Status status = group.AllReduceSum(codes); !status.ok()) {
    return local.ok() ? status : local;
  }
  codes = codes.cpu();
  for (int r = 0; r < group.size(); ++r) {
    const int code = codes[r].item<int>();
    if (code == 0) continue;
    if (r == rank) return local;
    std::string message = "(its message could not be read from the rendezvous store)";
    try {
      const std::string failed = key + std::to_string(r);
      if (store.check({failed})) {
        const std::vector<uint8_t> bytes = store.get(failed);
        message.assign(bytes.begin(), bytes.end());
      }
    } catch (const std::exception&) {
    }
    return absl::Status(static_cast<absl::StatusCode>(code),
                        absl::StrCat("rank ", r, ": ", message));
  }
  return absl::OkStatus();
}

}  // namespace varuna::comm
