// hf_tokenizer_reference: a C++ tokenizer's own ids for every document of a corpus, the
// reference that hf_tokenizer_check.py holds a Hugging Face tokenizer.json to.
//
//   hf_tokenizer_reference CORPUS.jsonl[,MORE.jsonl...] OUT_DIR TYPE VOCAB_SIZE
//       TYPE bpe or unigram: trains a SentencePiece model on the first CORPUS (as
//       //data:train_tokenizer does; TYPE bpe-nfkc or unigram-nfkc: with SentencePiece's
//       defaults instead, nmt_nfkc and extra whitespace removed) into
//       OUT_DIR/sp.model and writes its Hugging Face files (tools::HuggingFaceTokenizer)
//       into OUT_DIR, then the reference below
//   hf_tokenizer_reference CORPUS.jsonl[,...] OUT_DIR --model MODEL
//       the same for an existing model (e.g. an export's tokenizer.model): its Hugging Face
//       files into OUT_DIR, then the reference
//   hf_tokenizer_reference CORPUS.jsonl[,...] OUT_DIR --gpt2 VOCAB_JSON MERGES_TXT
//       the same for GPT-2's byte-level BPE (data::Gpt2BpeTokenizer,
//       tools::HuggingFaceGpt2Tokenizer)
//
// The reference is OUT_DIR/expected.jsonl, one line per document in corpus order, then one per
// text of kSpecialTexts (text that spells special and byte pieces, which the tokenizer must
// treat as text): {"text": <document>, "ids": <the tokenizer's ids>, "decoded": <its decoding
// of the ids>}. Exit status 0 on success, 1 on an error (printed), 2 on a bad command line.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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

// Texts that spell the special pieces of either kind and SentencePiece's byte pieces: text in
// the training data, never their ids.
constexpr const char* kSpecialTexts[] = {
    "HTML <s>struck</s> text",
    "</s>",
    "<s>",
    "<unk>",
    "<pad>",
    "a <unk> b <pad> c",
    "<|endoftext|>",
    "end.<|endoftext|>Start",
    " <|endoftext|> <|endoftext|>",
    "literal <0x41> byte",
    "<0x41>",
    "<0x0A><0xE2><0x96><0x81>",
    "x<0x41>y</s><s>",
    // Where GPT-2's pre-tokenizer is subtle: contractions, whitespace runs, numbers, scripts.
    "I'm sure they'll've said: DON'T  \t\n\n  stop'S",
    "x  \r\n\r\n y\u00a0z \u3000w",
    "12345 \u0661\u0662\u0663 \u2167 3.14",
    "na\u00efve caf\u00e9 \u65e5\u672c\u8a9e \U0001F600\U0001F44D\U0001F3FD "
    "\u05e9\u05dc\u05d5\u05dd",
};

// Writes the Hugging Face files of `tokenizer` into `out_dir`.
absl::Status Convert(const data::Tokenizer& tokenizer, const std::string& out_dir) {
  const std::vector<std::string> paths = tokenizer.files();
  absl::StatusOr<std::string> bytes = varuna::ReadFileToString(paths.back());
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<tools::HfTokenizerFiles> files;
  if (tokenizer.kind() == data::TokenizerKind::kGpt2Bpe) {
    files =
        tools::HuggingFaceGpt2Tokenizer(tokenizer, *bytes, /*model_max_length=*/1024, paths.back());
  } else {
    absl::StatusOr<data::SentencePieceModel> model =
        data::ParseSentencePieceModel(*bytes, paths.back());
    if (!model.ok()) return model.status();
    files = tools::HuggingFaceTokenizer(*model, /*model_max_length=*/1024, paths.back());
  }
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

absl::Status WriteReference(const std::vector<std::string>& corpora,
                            const data::Tokenizer& tokenizer, const std::string& out_dir) {
  std::string lines;
  int64_t documents = 0, tokens = 0;
  auto add = [&](const std::string& text) {
    const std::vector<int> ids = tokenizer.Encode(text);
    varuna::json::Value line = varuna::json::Value::object();
    line["text"] = text;
    line["ids"] = ids;
    line["decoded"] = tokenizer.Decode(ids);
    lines += varuna::json::Serialize(line) + "\n";
    ++documents;
    tokens += static_cast<int64_t>(ids.size());
  };
  for (const std::string& corpus : corpora) {
    absl::StatusOr<std::unique_ptr<data::DocumentReader>> reader =
        data::DocumentReader::Open(corpus, "text");
    if (!reader.ok()) return reader.status();
    std::string text;
    while (true) {
      absl::StatusOr<bool> more = (*reader)->Next(&text);
      if (!more.ok()) return more.status();
      if (!*more) break;
      add(text);
    }
  }
  for (const char* text : kSpecialTexts) add(text);
  if (absl::Status s = varuna::WriteFileAtomically(out_dir + "/expected.jsonl",
                                                   out_dir + "/expected.jsonl.tmp-", {lines});
      !s.ok()) {
    return s;
  }
  std::printf("hf_tokenizer_reference: %lld documents, %lld tokens of %s -> %s/expected.jsonl\n",
              static_cast<long long>(documents), static_cast<long long>(tokens),
              absl::StrJoin(tokenizer.files(), ", ").c_str(), out_dir.c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  int vocab_size = 0;
  const bool existing = args.size() == 4 && args[2] == "--model";
  const bool gpt2 = args.size() == 5 && args[2] == "--gpt2";
  if (!gpt2 && (args.size() != 4 || (!existing && !absl::SimpleAtoi(args[3], &vocab_size)))) {
    std::fprintf(stderr,
                 "usage: hf_tokenizer_reference CORPUS.jsonl[,MORE.jsonl] OUT_DIR "
                 "((bpe|unigram)[-nfkc] VOCAB_SIZE | --model MODEL | --gpt2 VOCAB MERGES)\n");
    return 2;
  }
  const std::vector<std::string> corpora = absl::StrSplit(args[0], ',');
  auto fail = [](const absl::Status& status) {
    std::fprintf(stderr, "hf_tokenizer_reference: %s\n", status.ToString().c_str());
    return 1;
  };
  data::TokenizerSpec spec;
  if (gpt2) {
    spec.vocab_file = args[3];
    spec.merge_file = args[4];
  } else if (existing) {
    spec.model_file = args[3];
  } else {
    absl::StatusOr<std::string> trained = Train(corpora[0], args[1], args[2], vocab_size);
    if (!trained.ok()) return fail(trained.status());
    spec.model_file = *trained;
  }
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer = data::LoadTokenizer(spec);
  if (!tokenizer.ok()) return fail(tokenizer.status());
  absl::Status s = Convert(**tokenizer, args[1]);
  if (s.ok()) s = WriteReference(corpora, **tokenizer, args[1]);
  if (!s.ok()) return fail(s);
  return 0;
}
