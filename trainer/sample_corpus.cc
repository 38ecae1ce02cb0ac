#include "trainer/sample_corpus.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/document_reader.h"
#include "data/preprocess.h"
#include "data/tokenizer_status.h"

namespace trainer {
namespace {

bool Exists(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

constexpr char kStopped[] = "stopped on request";

// The sentences of a source until a stop is requested; SentencePiece's training then ends
// with an error, and writes no model.
class StoppableSentences : public data::SentenceSource {
 public:
  StoppableSentences(data::SentenceSource& source, const std::function<bool()>& stop_requested)
      : source_(source), stop_requested_(stop_requested) {}

  bool Next(std::string* sentence) override {
    if (stop_requested_()) {
      stopped_ = true;
      return false;
    }
    return source_.Next(sentence);
  }
  std::string error() const override { return stopped_ ? kStopped : source_.error(); }
  bool stopped() const { return stopped_; }

 private:
  data::SentenceSource& source_;
  const std::function<bool()>& stop_requested_;
  bool stopped_ = false;
};

}  // namespace

SampleCorpus SampleCorpusPaths(const std::string& out_dir, const data::TokenizerSpec& gpt2) {
  SampleCorpus out;
  if (gpt2.vocab_file.empty()) {
    out.tokenizer.model_file = out_dir + "/fortunes_spm.model";
    out.data_prefix = data::DatasetPrefix(out_dir + "/fortunes", "text");
  } else {
    out.tokenizer = gpt2;
    out.data_prefix = data::DatasetPrefix(out_dir + "/fortunes_gpt2", "text");
  }
  return out;
}

absl::StatusOr<SampleCorpus> PrepareSampleCorpus(
    const std::string& corpus_jsonl, const std::string& out_dir, int vocab_size,
    const data::TokenizerSpec& gpt2, const std::function<void(const std::string&)>& info,
    const std::function<bool()>& stop_requested) {
  if (::mkdir(out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create the sample run's folder ",
                                                    out_dir, ": ", std::strerror(errno)));
  }
  SampleCorpus out = SampleCorpusPaths(out_dir, gpt2);
  const std::string model_prefix = out_dir + "/fortunes_spm";
  const std::string output_prefix =
      out_dir + (gpt2.vocab_file.empty() ? "/fortunes" : "/fortunes_gpt2");
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  if (gpt2.vocab_file.empty() && !Exists(out.tokenizer.model_file)) {
    // A dataset without the tokenizer that made it cannot be trusted.
    std::remove((out.data_prefix + ".bin").c_str());
    std::remove((out.data_prefix + ".idx").c_str());
    info(absl::StrFormat("> training a %d-piece SentencePiece tokenizer on %s ...", vocab_size,
                         corpus_jsonl));
    data::TokenizerTrainOptions options;
    options.input_files = {corpus_jsonl};
    options.model_prefix = model_prefix;
    options.vocab_size = vocab_size;
    options.num_threads = threads;
    data::DocumentSentences sentences(options.input_files, "text");
    StoppableSentences stoppable(sentences, stop_requested);
    if (absl::Status status = data::TrainTokenizer(options, &stoppable); !status.ok()) {
      if (stoppable.stopped()) {
        return absl::CancelledError(absl::StrCat("training the sample run's tokenizer ", kStopped));
      }
      return status;
    }
  }
  if (!Exists(out.data_prefix + ".bin") || !Exists(out.data_prefix + ".idx")) {
    info(
        absl::StrFormat("> preprocessing %s into %s.{bin,idx} ...", corpus_jsonl, out.data_prefix));
    data::PreprocessOptions options;
    options.input_files = {corpus_jsonl};
    options.output_prefix = output_prefix;
    options.tokenizer = out.tokenizer;
    options.workers = threads;
    options.stop_requested = stop_requested;
    absl::StatusOr<data::PreprocessStats> stats = data::Preprocess(options);
    if (!stats.ok()) return stats.status();
    info(absl::StrFormat("> %d documents, %d tokens in %.1f s", stats->documents, stats->tokens,
                         stats->seconds));
  }
  return out;
}

}  // namespace trainer
