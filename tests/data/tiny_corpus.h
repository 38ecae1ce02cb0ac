// Test inputs for data/: English-like sentences from a fixed word list and a fixed-seed
// generator (the same text on every run and machine), and a tiny tokenizer trained on them.
#ifndef TESTS_DATA_TINY_CORPUS_H_
#define TESTS_DATA_TINY_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace data::tiny_corpus {

// `count` sentences of 4 to 12 words, capitalized, ending in '.' or '?'.
std::vector<std::string> MakeSentences(int count, uint32_t seed = 12345);

// $TEST_TMPDIR/<name> (or /tmp/<name> outside Bazel).
std::string TempPath(const std::string& name);

// Trains a BPE model of `vocab_size` pieces on 400 sentences and returns the path of the
// .model file ($TEST_TMPDIR/<name>.model); returns "" and prints the error on failure.
std::string TrainTinyTokenizer(const std::string& name, int vocab_size);

}  // namespace data::tiny_corpus

#endif  // TESTS_DATA_TINY_CORPUS_H_
