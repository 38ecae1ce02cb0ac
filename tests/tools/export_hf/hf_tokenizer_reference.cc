// hf_tokenizer_reference: SentencePiece's own ids for every document of a corpus, the
// reference that hf_tokenizer_check.py holds a Hugging Face tokenizer.json to.
//
//   hf_tokenizer_reference CORPUS.jsonl OUT_DIR TYPE VOCAB_SIZE
//       TYPE bpe or unigram: trains a SentencePiece model on CORPUS (as
//       //data:train_tokenizer does; TYPE bpe-nfkc or unigram-nfkc: with SentencePiece's
//       defaults instead, nmt_nfkc and extra whitespace removed) into
//       OUT_DIR/sp.model and writes its Hugging Face files (tools::HuggingFaceTokenizer)
//       into OUT_DIR, then the reference below
//   hf_tokenizer_reference CORPUS.jsonl OUT_DIR --model MODEL
//       the same for an existing model (e.g. an export's tokenizer.model): its Hugging Face
//       files into OUT_DIR, then the reference
//
// The reference is OUT_DIR/expected.jsonl, one line per document in corpus order:
// {"text": <document>, "ids": <SentencePiece's ids>, "decoded": <SentencePiece's decoding of
// the ids>}. Exit status 0 on success, 1 on an error (printed), 2 on a bad command line.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "data/document_reader.h"
#include "data/sentencepiece_model.h"
#include "data/tokenizer_status.h"
#include "tools/export_hf/hf_tokenizer.h"
#include "varuna/io/json.h"
#include "varuna/io/posix_file.h"

namespace {

absl::Status WriteJson(const std::string& path, const varuna::json::Value& json) {
  return varuna::WriteFileAtomically(path, path + ".tmp-",
                                     {varuna::json::Serialize(json, /*pretty=*/true) + "\n"});
}

// Writes the Hugging Face files of `model_file` into `out_dir`.
absl::Status Convert(const std::string& model_file, const std::string& out_dir) {
  absl::StatusOr<std::string> bytes = varuna::ReadFileToString(model_file);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<data::SentencePieceModel> model =
      data::ParseSentencePieceModel(*bytes, model_file);
  if (!model.ok()) return model.status();
  absl::StatusOr<tools::HfTokenizerFiles> files =
      tools::HuggingFaceTokenizer(*model, /*model_max_length=*/1024, model_file);
  if (!files.ok()) return files.status();
  for (const auto& [name, json] :
       {std::make_pair("tokenizer.json", &files->tokenizer),
        std::make_pair("tokenizer_config.json", &files->tokenizer_config),
        std::make_pair("special_tokens_map.json", &files->special_tokens_map)}) {
    if (absl::Status s = WriteJson(out_dir + "/" + name, *json); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Trains a model on `corpus` into `out_dir`/sp.model.
absl::StatusOr<std::string> Train(const std::string& corpus, const std::string& out_dir,
                                  const std::string& model_type, int vocab_size) {
  data::TokenizerTrainOptions options;
  options.input_files = {corpus};
  options.model_prefix = out_dir + "/sp";
  options.vocab_size = vocab_size;
  absl::string_view type = model_type;
  const bool nfkc = absl::ConsumeSuffix(&type, "-nfkc");
  options.model_type = std::string(type);
  options.num_threads = 2;
  if (nfkc) {
    options.normalization_rule_name = "nmt_nfkc";
    options.remove_extra_whitespaces = true;
  }
  data::DocumentSentences sentences(options.input_files, "text");
  if (absl::Status s = data::TrainTokenizer(options, &sentences); !s.ok()) return s;
  return out_dir + "/sp.model";
}

absl::Status WriteReference(const std::string& corpus, const std::string& model_file,
                            const std::string& out_dir) {
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer = data::LoadTokenizer(model_file);
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::unique_ptr<data::DocumentReader>> reader =
      data::DocumentReader::Open(corpus, "text");
  if (!reader.ok()) return reader.status();
  std::string lines, text;
  int64_t documents = 0, tokens = 0;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&text);
    if (!more.ok()) return more.status();
    if (!*more) break;
    const std::vector<int> ids = (*tokenizer)->Encode(text);
    varuna::json::Value line = varuna::json::Value::object();
    line["text"] = text;
    line["ids"] = ids;
    line["decoded"] = (*tokenizer)->Decode(ids);
    lines += varuna::json::Serialize(line) + "\n";
    ++documents;
    tokens += static_cast<int64_t>(ids.size());
  }
  if (absl::Status s = varuna::WriteFileAtomically(out_dir + "/expected.jsonl",
                                                   out_dir + "/expected.jsonl.tmp-", {lines});
      !s.ok()) {
    return s;
  }
  std::printf("hf_tokenizer_reference: %lld documents, %lld tokens of %s -> %s/expected.jsonl\n",
              static_cast<long long>(documents), static_cast<long long>(tokens), model_file.c_str(),
              out_dir.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  int vocab_size = 0;
  const bool existing = args.size() == 4 && args[2] == "--model";
  if (args.size() != 4 || (!existing && !absl::SimpleAtoi(args[3], &vocab_size))) {
    std::fprintf(
        stderr,
        "usage: hf_tokenizer_reference CORPUS.jsonl OUT_DIR ((bpe|unigram)[-nfkc] VOCAB_SIZE | "
        "--model MODEL)\n");
    return 2;
  }
  std::string model_file = args[3];
  if (!existing) {
    absl::StatusOr<std::string> trained = Train(args[0], args[1], args[2], vocab_size);
    if (!trained.ok()) {
      std::fprintf(stderr, "hf_tokenizer_reference: %s\n", trained.status().ToString().c_str());
      return 1;
    }
    model_file = *trained;
  }
  absl::Status s = Convert(model_file, args[1]);
  if (s.ok()) s = WriteReference(args[0], model_file, args[1]);
  if (!s.ok()) {
    std::fprintf(stderr, "hf_tokenizer_reference: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
