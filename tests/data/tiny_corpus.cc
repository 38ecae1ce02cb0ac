#include "tests/data/tiny_corpus.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "data/tokenizer.h"

namespace data::tiny_corpus {

std::vector<std::string> MakeSentences(int count, uint32_t seed) {
  static const char* const kWords[] = {
      "the",   "quick", "brown",   "fox",    "jumps", "over",  "lazy",   "dog",   "and",
      "a",     "cat",   "sleeps",  "under",  "warm",  "sun",   "while",  "birds", "sing",
      "in",    "green", "trees",   "people", "walk",  "along", "river",  "to",    "market",
      "where", "they",  "buy",     "bread",  "fish",  "fresh", "apples", "every", "morning",
      "of",    "is",    "running", "played", "happy", "old",   "house",  "night"};
  const int num_words = sizeof(kWords) / sizeof(kWords[0]);
  uint32_t state = seed;
  auto next = [&state](int n) {
    state = state * 1664525u + 1013904223u;
    return static_cast<int>((state >> 8) % n);
  };
  std::vector<std::string> sentences;
  for (int i = 0; i < count; ++i) {
    std::string sentence;
    const int length = 4 + next(9);
    for (int w = 0; w < length; ++w) {
      if (w > 0) sentence += ' ';
      std::string word = kWords[next(num_words)];
      if (w == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
      sentence += word;
    }
    sentence += next(4) == 0 ? "?" : ".";
    sentences.push_back(sentence);
  }
  return sentences;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string TrainTinyTokenizer(const std::string& name, int vocab_size) {
  const std::string corpus = TempPath(name + "_corpus.txt");
  {
    std::ofstream out(corpus);
    for (const std::string& sentence : MakeSentences(400)) out << sentence << "\n";
  }
  TokenizerTrainOptions options;
  options.input_files = {corpus};
  options.model_prefix = TempPath(name);
  options.vocab_size = vocab_size;
  options.num_threads = 1;
  const std::string error = TrainSentencePiece(options, nullptr);
  if (!error.empty()) {
    std::fprintf(stderr, "TrainTinyTokenizer: %s\n", error.c_str());
    return "";
  }
  return options.model_prefix + ".model";
}

}  // namespace data::tiny_corpus
