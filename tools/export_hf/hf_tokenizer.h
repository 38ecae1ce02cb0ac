// The Hugging Face tokenizer files of an export (docs/formats.md 2): a SentencePiece model
// converted to the `tokenizers` library's tokenizer.json, so that transformers'
// AutoTokenizer.from_pretrained(OUT) loads a PreTrainedTokenizerFast that gives the same ids
// as SentencePiece and decodes them to the same text, without protobuf or sentencepiece.
//
// The conversion (the same one transformers' convert_slow_tokenizer makes for a byte-fallback
// SentencePiece model such as Llama's, here for BPE and unigram alike):
//   normalizer     SentencePiece's: the precompiled charsmap (nmt_nfkc, ...) if the model has
//                  one; leading/trailing spaces removed and runs of spaces folded if
//                  remove_extra_whitespaces; "▁" prepended if add_dummy_prefix; " " -> "▁"
//   pre_tokenizer  none: SentencePiece segments the whole normalized text at once
//   model          BPE: the vocabulary and merges rebuilt from the pieces (every split of a
//                  piece into two pieces, ranked by the piece's score, highest first), or
//                  Unigram: the pieces with their scores; byte_fallback as the model's
//   decoder        "▁" -> " ", byte pieces -> bytes, fused, one leading space stripped if
//                  add_dummy_prefix
//   added_tokens   the control and unknown pieces (special) and user-defined ones
//   post_processor none: the trainer adds no BOS/EOS inside a document
// Checked against SentencePiece on the whole bundled corpus (tests/trainer:
// hf_tokenizer_parity_test): BPE gives the same ids; unigram too, except where two
// segmentations have exactly the same score (SentencePiece sums scores in float32,
// `tokenizers` in float64, so rounding may pick the other one). One difference by design, as
// in transformers' own conversions: text that spells a special piece ("</s>") encodes to that
// piece's id in `tokenizers`, to ordinary pieces in SentencePiece; the corpus has none.
//
// tokenizer_config.json names PreTrainedTokenizerFast (so transformers does not guess a GPT-2
// tokenizer from config.json's model_type), model_max_length, and the special tokens: eos is
// the end-of-document piece the data pipeline appends (the model's eos, "</s>"), bos is the
// same piece (as GPT-2's <|endoftext|>: the model starts a document after it and never saw
// SentencePiece's <s>), unk the model's, pad the model's pad piece or else eos.
//
// Thread safety: pure functions.
#ifndef VARUNA_TOOLS_EXPORT_HF_HF_TOKENIZER_H_
#define VARUNA_TOOLS_EXPORT_HF_HF_TOKENIZER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "data/sentencepiece_model.h"
#include "varuna/io/json.h"

namespace tools {

struct HfTokenizerFiles {
  varuna::json::Value tokenizer;           // tokenizer.json
  varuna::json::Value tokenizer_config;    // tokenizer_config.json
  varuna::json::Value special_tokens_map;  // special_tokens_map.json
  int64_t bos_id = 0;
  int64_t eos_id = 0;  // the end-of-document id
  int64_t pad_id = 0;  // the model's pad, else eos_id
};

// Converts `model` (parsed from `source`, named in messages) for a model with
// `model_max_length` positions. Errors: InvalidArgument naming `source` for what has no
// exact `tokenizers` equivalent (word or char models, treat_whitespace_as_suffix,
// escape_whitespaces off), a model without eos or unk piece, or duplicate pieces.
absl::StatusOr<HfTokenizerFiles> HuggingFaceTokenizer(const data::SentencePieceModel& model,
                                                      int64_t model_max_length,
                                                      const std::string& source);

}  // namespace tools

#endif  // VARUNA_TOOLS_EXPORT_HF_HF_TOKENIZER_H_
