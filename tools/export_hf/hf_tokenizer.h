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
//   added_tokens   the user-defined pieces (SentencePiece matches them in the text first)
//   post_processor none: the trainer adds no BOS/EOS inside a document
// Checked against SentencePiece on the whole bundled corpus (tests/tools/export_hf:
// hf_tokenizer_parity_test): BPE gives the same ids; unigram too, except where two
// segmentations have exactly the same score (SentencePiece sums scores in float32,
// `tokenizers` in float64, so rounding may pick the other one).
//
// Text that spells a special piece ("</s>", "<s>", "<unk>", "<pad>", "<0x41>") is text, as in
// the training data: SentencePiece never gives a control, unknown or byte id for it. So the
// special pieces are not tokenizer.json added tokens (`tokenizers` matches every added token
// in the text, special or not; Tokenizer.encode_special_tokens, which would stop that, is not
// saved in tokenizer.json), and in a Unigram model the control, unknown and byte pieces get a
// score below any spelling of their text (`tokenizers` matches every vocabulary piece in the
// text, SentencePiece only normal and user-defined ones). transformers adds the special
// tokens of tokenizer_config.json to its tokenizer itself; "split_special_tokens": true there
// (transformers 4.45 and later honour it for fast tokenizers) keeps them from being matched.
//
// tokenizer_config.json names PreTrainedTokenizerFast (so transformers does not guess a GPT-2
// tokenizer from config.json's model_type), model_max_length, and the special tokens: eos is
// the end-of-document piece the data pipeline appends (the model's eos, "</s>"), bos is the
// same piece (as GPT-2's <|endoftext|>: the model starts a document after it and never saw
// SentencePiece's <s>), unk the model's, pad the model's pad piece or else eos;
// added_tokens_decoder lists the special and user-defined pieces by id.
//
// GPT-2's byte-level BPE (HuggingFaceGpt2Tokenizer) becomes what transformers' GPT2Converter
// makes: model BPE from vocab.json and merges.txt without unk, pre-tokenizer ByteLevel
// (add_prefix_space false, GPT-2's regex), ByteLevel decoder and post-processor (offsets only),
// no added tokens ("<|endoftext|>" never comes from text, see above); tokenizer_config.json
// names GPT2Tokenizer with bos = eos = unk = "<|endoftext|>" and no pad.
//
// Thread safety: pure functions.
#ifndef VARUNA_TOOLS_EXPORT_HF_HF_TOKENIZER_H_
#define VARUNA_TOOLS_EXPORT_HF_HF_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "data/sentencepiece_model.h"
#include "data/tokenizer.h"
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

// Converts a GPT-2 byte-level BPE `tokenizer` (data::Gpt2BpeTokenizer, named `source` in
// messages) whose merges.txt holds `merges` for a model with `model_max_length` positions;
// bos_id = eos_id = pad_id = its end-of-document id. Errors: InvalidArgument naming `source`
// for a tokenizer of another kind or a merges line that is not two tokens.
absl::StatusOr<HfTokenizerFiles> HuggingFaceGpt2Tokenizer(const data::Tokenizer& tokenizer,
                                                          std::string_view merges,
                                                          int64_t model_max_length,
                                                          const std::string& source);

}  // namespace tools

#endif  // VARUNA_TOOLS_EXPORT_HF_HF_TOKENIZER_H_
