// SentencePiece behind std-only types, for toolchain_test.cc: Debian's
// sentencepiece_processor.h declares `namespace absl { using std::string_view; }`, which
// makes absl::string_view ambiguous in any file that also includes Abseil's headers. Only
// spm_train_and_encode.cc includes SentencePiece; it includes no Abseil header.
#ifndef VARUNA_TESTS_TOOLCHAIN_SPM_TRAIN_AND_ENCODE_H_
#define VARUNA_TESTS_TOOLCHAIN_SPM_TRAIN_AND_ENCODE_H_

#include <string>
#include <vector>

namespace varuna::testing {

// Trains a BPE model of `vocab_size` pieces on `corpus_file` into `model_prefix`.model, then
// encodes and decodes `text` with it. Returns "" on success, else SentencePiece's message.
std::string SpmTrainAndRoundTrip(const std::string& corpus_file, const std::string& model_prefix,
                                 int vocab_size, const std::string& text, std::vector<int>* ids,
                                 std::string* decoded);

}  // namespace varuna::testing

#endif  // VARUNA_TESTS_TOOLCHAIN_SPM_TRAIN_AND_ENCODE_H_
