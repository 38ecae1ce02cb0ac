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

}  // namespace

absl::StatusOr<SampleCorpus> SampleCorpusPaths(const std::string& out_dir) {
  SampleCorpus out;
  out.tokenizer_model = out_dir + "/fortunes_spm.model";
  out.data_prefix = data::DatasetPrefix(out_dir + "/fortunes", "text");
  return out;
}

absl::StatusOr<SampleCorpus> PrepareSampleCorpus(
    const std::string& corpus_jsonl, const std::string& out_dir, int vocab_size,
    const std::function<void(const std::string&)>& info) {
  if (::mkdir(out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create the sample run's folder ",
                                                    out_dir, ": ", std::strerror(errno)));
  }
  SampleCorpus out = *SampleCorpusPaths(out_dir);
  const std::string model_prefix = out_dir + "/fortunes_spm";
  const std::string output_prefix = out_dir + "/fortunes";
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  if (!Exists(out.tokenizer_model)) {
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
    if (absl::Status status = data::TrainTokenizer(options, &sentences); !status.ok()) {
      return status;
    }
  }
  if (!Exists(out.data_prefix + ".bin") || !Exists(out.data_prefix + ".idx")) {
    info(
        absl::StrFormat("> preprocessing %s into %s.{bin,idx} ...", corpus_jsonl, out.data_prefix));
    data::PreprocessOptions options;
    options.input_files = {corpus_jsonl};
    options.output_prefix = output_prefix;
    options.tokenizer_model = out.tokenizer_model;
    options.workers = threads;
    absl::StatusOr<data::PreprocessStats> stats = data::Preprocess(options);
    if (!stats.ok()) return stats.status();
    info(absl::StrFormat("> %d documents, %d tokens in %.1f s", stats->documents, stats->tokens,
                         stats->seconds));
  }
  return out;
}

}  // namespace trainer
