// The sample run's data: a tokenizer and a Megatron dataset made from the bundled corpus
// (data/corpus/fortunes.jsonl), built on first use and cached in the run's output folder. The
// tokenizer is a SentencePiece model trained on the corpus, or GPT-2's own byte-level BPE
// (--tokenizer-type=GPT2BPETokenizer), which needs no training.
#ifndef VARUNA_TRAINER_SAMPLE_CORPUS_H_
#define VARUNA_TRAINER_SAMPLE_CORPUS_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "data/tokenizer_status.h"

namespace trainer {

struct SampleCorpus {
  data::TokenizerSpec tokenizer;  // <out_dir>/fortunes_spm.model, or GPT-2's files
  std::string data_prefix;        // <out_dir>/fortunes_text_document (fortunes_gpt2_... for GPT-2)
};

// With `gpt2` naming GPT-2's vocab.json and merges.txt, preprocesses `corpus_jsonl` with them;
// otherwise (`gpt2` empty) trains a SentencePiece tokenizer (`vocab_size` pieces) and
// preprocesses with it; either unless it is there already. `info` receives progress lines. A
// trained tokenizer is written first and the dataset only after it, so a dataset never outlives
// its tokenizer.
// `stop_requested` is polled as the work goes on (a stop signal); once it returns true the
// preparation ends with Cancelled within a fraction of a second, leaving no partial file.
absl::StatusOr<SampleCorpus> PrepareSampleCorpus(
    const std::string& corpus_jsonl, const std::string& out_dir, int vocab_size,
    const data::TokenizerSpec& gpt2, const std::function<void(const std::string&)>& info,
    const std::function<bool()>& stop_requested);

// The paths PrepareSampleCorpus(..., out_dir, ..., gpt2, ...) uses, without building anything
// (for the ranks that wait while rank 0 prepares them).
SampleCorpus SampleCorpusPaths(const std::string& out_dir, const data::TokenizerSpec& gpt2);

}  // namespace trainer

#endif  // VARUNA_TRAINER_SAMPLE_CORPUS_H_
