// gpt2_bpe_reference: data::Gpt2BpeTokenizer's ids for every document of some files, what
// gpt2_bpe_check.py holds Hugging Face's `tokenizers` and OpenAI's tiktoken to.
//
//   gpt2_bpe_reference VOCAB.json MERGES.txt OUT.jsonl INPUT.jsonl...
//
// Loads the tokenizer from GPT-2's two files, reads the documents of each INPUT (JSON lines
// with a "text" field, as data::DocumentReader reads them) and writes OUT.jsonl, one line per
// document in input order:
//   {"source": <INPUT's file name>, "document": <1-based number in INPUT>, "text": <document>,
//    "ids": <Encode(text)>, "decoded": <Decode(ids)>}
// and, on stdout, the number of documents and tokens. Exit status 0 on success, 1 on an error
// (printed), 2 on a bad command line.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/document_reader.h"
#include "data/gpt2_bpe.h"
#include "varuna/io/json.h"
#include "varuna/io/posix_file.h"

namespace {

struct Counts {
  int64_t documents = 0;
  int64_t tokens = 0;
};

// Appends one JSON line per document of `input` to `lines`.
absl::Status EncodeFile(const data::Gpt2BpeTokenizer& tokenizer, const std::string& input,
                        std::string* lines, Counts* counts) {
  absl::StatusOr<std::unique_ptr<data::DocumentReader>> reader =
      data::DocumentReader::Open(input, "text");
  if (!reader.ok()) return reader.status();
  const std::string source = input.substr(input.find_last_of('/') + 1);
  std::string text;
  for (int64_t number = 1;; ++number) {
    absl::StatusOr<bool> more = (*reader)->Next(&text);
    if (!more.ok()) return more.status();
    if (!*more) break;
    const std::vector<int> ids = tokenizer.Encode(text);
    varuna::json::Value line = varuna::json::Value::object();
    line["source"] = source;
    line["document"] = number;
    line["text"] = text;
    line["ids"] = ids;
    line["decoded"] = tokenizer.Decode(ids);
    *lines += varuna::json::Serialize(line) + "\n";
    ++counts->documents;
    counts->tokens += static_cast<int64_t>(ids.size());
  }
  return absl::OkStatus();
}

absl::Status Run(const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<data::Gpt2BpeTokenizer>> tokenizer =
      data::Gpt2BpeTokenizer::Load(args[0], args[1]);
  if (!tokenizer.ok()) return tokenizer.status();
  const std::string& out = args[2];
  std::string lines;
  Counts counts;
  for (size_t i = 3; i < args.size(); ++i) {
    if (absl::Status s = EncodeFile(**tokenizer, args[i], &lines, &counts); !s.ok()) return s;
  }
  if (absl::Status s = varuna::WriteFileAtomically(out, out + ".tmp-", {lines}); !s.ok()) {
    return s;
  }
  std::printf("gpt2_bpe_reference: %lld documents, %lld tokens -> %s\n",
              static_cast<long long>(counts.documents), static_cast<long long>(counts.tokens),
              out.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 4) {
    std::fprintf(stderr,
                 "usage: gpt2_bpe_reference VOCAB.json MERGES.txt OUT.jsonl INPUT.jsonl...\n");
    return 2;
  }
  if (absl::Status s = Run(args); !s.ok()) {
    std::fprintf(stderr, "gpt2_bpe_reference: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
