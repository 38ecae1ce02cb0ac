#include "data/gpt_dataset.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace data {

absl::StatusOr<std::unique_ptr<GptDataset>> GptDataset::Build(
    std::shared_ptr<const IndexedDataset> data, DocumentRange documents,
    const GptIndexOptions& options) {
  if (data == nullptr) return absl::InvalidArgumentError("GptDataset::Build: no data");
  std::vector<int32_t> sizes(static_cast<size_t>(data->num_sequences()));
  for (int64_t i = 0; i < data->num_sequences(); ++i) sizes[i] = data->sequence_length(i);
  absl::StatusOr<GptIndex> index = GptIndex::BuildOrLoad(data->prefix(), sizes, documents, options);
  if (!index.ok()) return index.status();
  return std::unique_ptr<GptDataset>(new GptDataset(std::move(data), *std::move(index)));
}

void GptDataset::Sample(int64_t j, int32_t* out) const {
  index_.ForEachSpan(j, [&](int64_t document, int64_t offset, int64_t count) {
    data_->Read(document, offset, count, out);
    out += count;
  });
}

}  // namespace data
