#include "tests/toolchain/spm_train_and_encode.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

namespace varuna::testing {

std::string SpmTrainAndRoundTrip(const std::string& corpus_file, const std::string& model_prefix,
                                 int vocab_size, const std::string& text, std::vector<int>* ids,
                                 std::string* decoded) {
  const auto trained = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + corpus_file + " --model_prefix=" + model_prefix +
      " --model_type=bpe --vocab_size=" + std::to_string(vocab_size) +
      " --minloglevel=2 --num_threads=1");
  if (!trained.ok()) return trained.ToString();
  sentencepiece::SentencePieceProcessor processor;
  if (const auto s = processor.Load(model_prefix + ".model"); !s.ok()) return s.ToString();
  if (const auto s = processor.Encode(text, ids); !s.ok()) return s.ToString();
  if (const auto s = processor.Decode(*ids, decoded); !s.ok()) return s.ToString();
  return "";
}

}  // namespace varuna::testing
