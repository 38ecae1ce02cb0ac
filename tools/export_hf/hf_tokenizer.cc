#include "tools/export_hf/hf_tokenizer.h"

#include <algorithm>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tools {
namespace {

using data::PieceType;
using data::SentencePieceAlgorithm;
using data::SentencePieceModel;
using varuna::json::Value;

constexpr char kSpaceSymbol[] = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// {"type": "Replace", "pattern": {<kind>: pattern}, "content": content}, for normalizers and
// decoders alike; kind is "String" or "Regex".
Value Replace(const char* kind, const std::string& pattern, const std::string& content) {
  Value pattern_json = Value::object();
  pattern_json[kind] = pattern;
  Value out = Value::object();
  out["type"] = "Replace";
  out["pattern"] = std::move(pattern_json);
  out["content"] = content;
  return out;
}

Value Normalizer(const SentencePieceModel& model) {
  Value steps = Value::array();
  if (!model.precompiled_charsmap.empty()) {
    Value precompiled = Value::object();
    precompiled["type"] = "Precompiled";
    precompiled["precompiled_charsmap"] = absl::Base64Escape(model.precompiled_charsmap);
    steps.push_back(std::move(precompiled));
  }
  if (model.remove_extra_whitespaces) {  // SentencePiece's whitespace is " " only
    steps.push_back(Replace("Regex", "^ +| +$", ""));
    steps.push_back(Replace("Regex", " {2,}", " "));
  }
  if (model.add_dummy_prefix) {
    Value prepend = Value::object();
    prepend["type"] = "Prepend";
    prepend["prepend"] = kSpaceSymbol;
    steps.push_back(std::move(prepend));
  }
  steps.push_back(Replace("String", " ", kSpaceSymbol));
  Value out = Value::object();
  out["type"] = "Sequence";
  out["normalizers"] = std::move(steps);
  return out;
}

Value Decoder(const SentencePieceModel& model) {
  Value steps = Value::array();
  steps.push_back(Replace("String", kSpaceSymbol, " "));
  if (model.byte_fallback) steps.push_back(Value{{"type", "ByteFallback"}});
  steps.push_back(Value{{"type", "Fuse"}});
  if (model.add_dummy_prefix) {
    Value strip = Value::object();
    strip["type"] = "Strip";
    strip["content"] = " ";
    strip["start"] = 1;
    strip["stop"] = 0;
    steps.push_back(std::move(strip));
  }
  Value out = Value::object();
  out["type"] = "Sequence";
  out["decoders"] = std::move(steps);
  return out;
}

// Length in bytes of the UTF-8 character that starts with `lead`.
size_t Utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;  // not a lead byte: step one byte, as SentencePiece does for malformed text
}

// Number of UTF-8 characters of `text`.
size_t Utf8Characters(std::string_view text) {
  size_t n = 0;
  for (size_t i = 0; i < text.size(); i += Utf8Length(static_cast<unsigned char>(text[i]))) ++n;
  return n;
}

// Whether SentencePiece matches pieces of `type` in the text (the others have ids only).
bool MatchedInText(PieceType type) {
  return type == PieceType::kNormal || type == PieceType::kUserDefined;
}

// BPE merges as SentencePiece's encoder applies them: a pair of adjacent symbols may merge if
// their concatenation is a piece, the piece with the highest score first. Every split of a
// normal piece into two normal pieces is a merge; merges are ranked by the piece's score
// (descending; ties keep piece id order), the splits of one piece by the ids of their halves.
Value BpeMerges(const SentencePieceModel& model,
                const std::unordered_map<std::string_view, int>& ids) {
  struct Merge {
    float score;
    int piece, left, right;
  };
  std::vector<Merge> merges;
  for (int id = 0; id < static_cast<int>(model.pieces.size()); ++id) {
    const data::SentencePiece& piece = model.pieces[id];
    if (piece.type != PieceType::kNormal) continue;
    const std::string_view text = piece.piece;
    for (size_t cut = Utf8Length(text[0]); cut < text.size();
         cut += Utf8Length(static_cast<unsigned char>(text[cut]))) {
      auto left = ids.find(text.substr(0, cut));
      auto right = ids.find(text.substr(cut));
      if (left == ids.end() || right == ids.end()) continue;
      if (model.pieces[left->second].type != PieceType::kNormal ||
          model.pieces[right->second].type != PieceType::kNormal) {
        continue;
      }
      merges.push_back({piece.score, id, left->second, right->second});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    return std::tie(a.piece, a.left, a.right) < std::tie(b.piece, b.left, b.right);
  });
  Value out = Value::array();
  for (const Merge& merge : merges) {
    out.push_back(Value::array({model.pieces[merge.left].piece, model.pieces[merge.right].piece}));
  }
  return out;
}

Value Model(const SentencePieceModel& model, const std::unordered_map<std::string_view, int>& ids) {
  Value out = Value::object();
  const int n = static_cast<int>(model.pieces.size());
  if (model.algorithm == SentencePieceAlgorithm::kBpe) {
    out["type"] = "BPE";
    out["dropout"] = nullptr;
    out["unk_token"] = model.pieces[model.unk_id].piece;
    out["continuing_subword_prefix"] = nullptr;
    out["end_of_word_suffix"] = nullptr;
    out["fuse_unk"] = true;  // SentencePiece reports a run of unknown characters as one <unk>
    out["byte_fallback"] = model.byte_fallback;
    out["ignore_merges"] = false;
    Value vocab = Value::object();
    // Pieces are unique (checked by the caller), so append without ordered_map's linear
    // duplicate search, which would make this quadratic in the vocabulary.
    auto& entries = static_cast<Value::object_t::Container&>(vocab.get_ref<Value::object_t&>());
    entries.reserve(n);
    for (int id = 0; id < n; ++id) entries.emplace_back(model.pieces[id].piece, id);
    out["vocab"] = std::move(vocab);
    out["merges"] = BpeMerges(model, ids);
  } else {
    out["type"] = "Unigram";
    out["unk_id"] = model.unk_id;
    // `tokenizers` matches every piece of a Unigram vocabulary in the text, SentencePiece only
    // normal and user-defined ones: control, unknown and byte pieces ("</s>", "<0x41>", score
    // 0, higher than any normal piece) would win wherever the text spells them. Their score
    // here is below any spelling of that text in normal pieces, so they are never chosen (the
    // ids stay: byte fallback finds "<0xNN>" by name, unknown text gets unk_id).
    float lowest = 0;
    size_t longest = 0;
    for (const data::SentencePiece& piece : model.pieces) {
      if (piece.type == PieceType::kNormal) lowest = std::min(lowest, piece.score);
      if (!MatchedInText(piece.type)) longest = std::max(longest, Utf8Characters(piece.piece));
    }
    const double unmatched = (static_cast<double>(lowest) - 10) * static_cast<double>(longest + 1);
    Value vocab = Value::array();
    for (const data::SentencePiece& piece : model.pieces) {
      vocab.push_back(Value::array(
          {piece.piece, MatchedInText(piece.type) ? static_cast<double>(piece.score) : unmatched}));
    }
    out["vocab"] = std::move(vocab);
    out["byte_fallback"] = model.byte_fallback;
  }
  return out;
}

// An entry of tokenizer.json's added_tokens (with `id`) or of tokenizer_config.json's
// added_tokens_decoder (keyed by id; `id` < 0).
Value AddedToken(const std::string& content, bool special, int id = -1) {
  Value token = Value::object();
  if (id >= 0) token["id"] = id;
  token["content"] = content;
  token["single_word"] = false;
  token["lstrip"] = false;
  token["rstrip"] = false;
  token["normalized"] = false;
  token["special"] = special;
  return token;
}

// The user-defined pieces, which SentencePiece matches in the text before segmenting it, as
// `tokenizers` does with added tokens. The special pieces are not added tokens: `tokenizers`
// would match them in the text too (it keeps no encode_special_tokens in tokenizer.json), and
// the training data never has their ids where the text spells them.
Value AddedTokens(const SentencePieceModel& model) {
  Value out = Value::array();
  for (int id = 0; id < static_cast<int>(model.pieces.size()); ++id) {
    const data::SentencePiece& piece = model.pieces[id];
    if (piece.type != PieceType::kUserDefined) continue;
    out.push_back(AddedToken(piece.piece, /*special=*/false, id));
  }
  return out;
}

// tokenizer_config.json's added_tokens_decoder: the special (control and unknown) and
// user-defined pieces by id, so that transformers knows which ones decode(...,
// skip_special_tokens=True) drops; "split_special_tokens": true keeps it from matching them
// in the text.
Value AddedTokensDecoder(const SentencePieceModel& model) {
  Value out = Value::object();
  for (int id = 0; id < static_cast<int>(model.pieces.size()); ++id) {
    const data::SentencePiece& piece = model.pieces[id];
    const bool special = piece.type == PieceType::kControl || piece.type == PieceType::kUnknown;
    if (!special && piece.type != PieceType::kUserDefined) continue;
    out[absl::StrCat(id)] = AddedToken(piece.piece, special);
  }
  return out;
}

absl::Status Unsupported(const std::string& source, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer model ", source, " ", what,
                   ", which has no exact Hugging Face tokenizers equivalent: export with a "
                   "model made by //data:train_tokenizer (bpe or unigram)"));
}

// A {"type": "ByteLevel", ...} pre-tokenizer, post-processor or decoder.
Value ByteLevel(bool add_prefix_space, bool trim_offsets) {
  Value out = Value::object();
  out["type"] = "ByteLevel";
  out["add_prefix_space"] = add_prefix_space;
  out["trim_offsets"] = trim_offsets;
  out["use_regex"] = true;
  return out;
}

// merges.txt's merges ("#version" line and empty lines skipped) as [left, right] pairs.
absl::StatusOr<Value> Gpt2Merges(std::string_view text, const std::string& source) {
  Value out = Value::array();
  int line_number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    if (line.empty() || (line_number == 1 && line.substr(0, 8) == "#version")) continue;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "merges file ", source, " line ", line_number,
          " is not two tokens separated by one space: pass GPT-2's merges.txt (--merge-file)"));
    }
    out.push_back(
        Value::array({std::string(line.substr(0, space)), std::string(line.substr(space + 1))}));
  }
  return out;
}

}  // namespace

absl::StatusOr<HfTokenizerFiles> HuggingFaceGpt2Tokenizer(const data::Tokenizer& tokenizer,
                                                          std::string_view merges,
                                                          int64_t model_max_length,
                                                          const std::string& source) {
  const int n = tokenizer.vocab_size();
  const int eod = tokenizer.eod_id();
  if (tokenizer.kind() != data::TokenizerKind::kGpt2Bpe || eod < 0 || eod >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer ", source, " is not a GPT-2 byte-level BPE with an end-of-document token"));
  }
  absl::StatusOr<Value> merge_pairs = Gpt2Merges(merges, source);
  if (!merge_pairs.ok()) return merge_pairs.status();
  HfTokenizerFiles files;
  files.eos_id = files.bos_id = files.pad_id = eod;
  const std::string eos = tokenizer.IdToPiece(eod);

  Value model = Value::object();
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = nullptr;  // every byte has a token
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  Value vocab = Value::object();
  // The pieces are unique (the tokenizer checked vocab.json): append without ordered_map's
  // linear duplicate search, which would make this quadratic in the vocabulary.
  auto& entries = static_cast<Value::object_t::Container&>(vocab.get_ref<Value::object_t&>());
  entries.reserve(n);
  for (int id = 0; id < n; ++id) entries.emplace_back(tokenizer.IdToPiece(id), id);
  model["vocab"] = std::move(vocab);
  model["merges"] = *std::move(merge_pairs);

  Value& json = files.tokenizer;
  json = Value::object();
  json["version"] = "1.0";
  json["truncation"] = nullptr;
  json["padding"] = nullptr;
  // "<|endoftext|>" is no added token: `tokenizers` would match it in the text (see the header).
  json["added_tokens"] = Value::array();
  json["normalizer"] = nullptr;
  json["pre_tokenizer"] = ByteLevel(/*add_prefix_space=*/false, /*trim_offsets=*/true);
  // As transformers' GPT2Converter: offsets only, no tokens added.
  json["post_processor"] = ByteLevel(/*add_prefix_space=*/true, /*trim_offsets=*/false);
  json["decoder"] = ByteLevel(/*add_prefix_space=*/true, /*trim_offsets=*/true);
  json["model"] = std::move(model);

  Value& config = files.tokenizer_config;
  config = Value::object();
  config["tokenizer_class"] = "GPT2Tokenizer";
  config["model_max_length"] = model_max_length;
  config["bos_token"] = eos;
  config["eos_token"] = eos;
  config["unk_token"] = eos;
  config["add_prefix_space"] = false;
  config["add_bos_token"] = false;
  config["clean_up_tokenization_spaces"] = false;
  config["errors"] = "replace";
  config["split_special_tokens"] = true;
  config["added_tokens_decoder"] = Value::object();
  config["added_tokens_decoder"][absl::StrCat(eod)] = AddedToken(eos, /*special=*/true);

  Value& map = files.special_tokens_map;
  map = Value::object();
  map["bos_token"] = eos;
  map["eos_token"] = eos;
  map["unk_token"] = eos;
  return files;
}

absl::StatusOr<HfTokenizerFiles> HuggingFaceTokenizer(const SentencePieceModel& model,
                                                      int64_t model_max_length,
                                                      const std::string& source) {
  if (model.algorithm != SentencePieceAlgorithm::kBpe &&
      model.algorithm != SentencePieceAlgorithm::kUnigram) {
    return Unsupported(source, "is a word or char model");
  }
  if (model.treat_whitespace_as_suffix) {
    return Unsupported(source, "puts the space symbol at the end of pieces");
  }
  if (!model.escape_whitespaces) return Unsupported(source, "does not escape spaces");
  const int n = static_cast<int>(model.pieces.size());
  auto valid = [n](int id) { return id >= 0 && id < n; };
  if (!valid(model.eos_id) || !valid(model.unk_id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer model ", source, " has eos_id ", model.eos_id, " and unk_id ", model.unk_id,
        " but ", n, " pieces: both are needed (the end-of-document and unknown pieces)"));
  }
  std::unordered_map<std::string_view, int> ids;
  ids.reserve(n);
  for (int id = 0; id < n; ++id) {
    if (!ids.emplace(model.pieces[id].piece, id).second) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer model ", source, " has piece '",
                                                     model.pieces[id].piece,
                                                     "' twice: the model is damaged"));
    }
  }

  HfTokenizerFiles files;
  files.eos_id = model.eos_id;
  files.bos_id = model.eos_id;
  files.pad_id = valid(model.pad_id) ? model.pad_id : model.eos_id;
  const std::string& eos = model.pieces[files.eos_id].piece;
  const std::string& unk = model.pieces[model.unk_id].piece;
  const std::string& pad = model.pieces[files.pad_id].piece;

  Value& tokenizer = files.tokenizer;
  tokenizer = Value::object();
  tokenizer["version"] = "1.0";
  tokenizer["truncation"] = nullptr;
  tokenizer["padding"] = nullptr;
  tokenizer["added_tokens"] = AddedTokens(model);
  tokenizer["normalizer"] = Normalizer(model);
  tokenizer["pre_tokenizer"] = nullptr;
  tokenizer["post_processor"] = nullptr;
  tokenizer["decoder"] = Decoder(model);
  tokenizer["model"] = Model(model, ids);

  Value& config = files.tokenizer_config;
  config = Value::object();
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  config["model_max_length"] = model_max_length;
  config["bos_token"] = eos;
  config["eos_token"] = eos;
  config["unk_token"] = unk;
  config["pad_token"] = pad;
  config["add_bos_token"] = false;
  config["add_eos_token"] = false;
  // transformers' default (True in older versions) would rewrite " ," and " 's" on decode.
  config["clean_up_tokenization_spaces"] = false;
  // Text that spells a special token is text, as in the training data.
  config["split_special_tokens"] = true;
  config["added_tokens_decoder"] = AddedTokensDecoder(model);

  Value& map = files.special_tokens_map;
  map = Value::object();
  map["bos_token"] = eos;
  map["eos_token"] = eos;
  map["unk_token"] = unk;
  map["pad_token"] = pad;
  return files;
}

}  // namespace tools
