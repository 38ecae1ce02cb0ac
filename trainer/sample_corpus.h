// The sample run's data: a SentencePiece tokenizer and a Megatron dataset made from the
// bundled corpus (data/corpus/fortunes.jsonl), built on first use and cached in the run's
// output folder.
#ifndef VARUNA_TRAINER_SAMPLE_CORPUS_H_
#define VARUNA_TRAINER_SAMPLE_CORPUS_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace trainer {

struct SampleCorpus {
  std::string tokenizer_model;  // <out_dir>/fortunes_spm.model
  std::string data_prefix;      // <out_dir>/fortunes_text_document
};

// Trains the tokenizer (`vocab_size` pieces) and preprocesses `corpus_jsonl` into `out_dir`
// unless both are there already; `info` receives progress lines. The tokenizer is written
// first and the dataset only after it, so a dataset never outlives its tokenizer.
// `stop_requested` is polled as the work goes on (a stop signal); once it returns true the
// preparation ends with Cancelled within a fraction of a second, leaving no partial file.
absl::StatusOr<SampleCorpus> PrepareSampleCorpus(
    const std::string& corpus_jsonl, const std::string& out_dir, int vocab_size,
    const std::function<void(const std::string&)>& info,
    const std::function<bool()>& stop_requested);

// The paths PrepareSampleCorpus(..., out_dir, ...) uses, without building anything (for the
// ranks that wait while rank 0 prepares them).
absl::StatusOr<SampleCorpus> SampleCorpusPaths(const std::string& out_dir);

}  // namespace trainer

#endif  // VARUNA_TRAINER_SAMPLE_CORPUS_H_
