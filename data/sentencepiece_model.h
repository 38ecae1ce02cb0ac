// The contents of a SentencePiece .model file (a serialized sentencepiece.ModelProto, proto2)
// as plain data: the pieces with their scores and types, the model type, the special ids and
// the normalizer spec. This is what a conversion to another tokenizer format needs (the
// Hugging Face export, tools/export_hf/hf_tokenizer.h) and what SentencePiece's public API does not
// expose; Debian ships no sentencepiece_model.pb.h, so the protobuf wire format is read here.
//
// Only the fields below are read; every other field is skipped, so models written by newer
// SentencePiece versions parse as long as these keep their field numbers
// (sentencepiece_model.proto: ModelProto.pieces = 1, trainer_spec = 2, normalizer_spec = 3).
//
// Thread safety: pure functions.
#ifndef DATA_SENTENCEPIECE_MODEL_H_
#define DATA_SENTENCEPIECE_MODEL_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace data {

// ModelProto.SentencePiece.Type.
enum class PieceType {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <s>, </s>, <pad>: never matched in text
  kUserDefined = 4,  // always one piece when it occurs in text
  kUnused = 5,
  kByte = 6,  // <0x00> ... <0xFF>, byte fallback
};

struct SentencePiece {
  std::string piece;  // UTF-8, spaces as U+2581
  float score = 0;
  PieceType type = PieceType::kNormal;
};

// TrainerSpec.ModelType.
enum class SentencePieceAlgorithm { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };

// The fields of a ModelProto a conversion needs, with proto2's defaults for absent ones.
struct SentencePieceModel {
  std::vector<SentencePiece> pieces;  // index = id
  // TrainerSpec
  SentencePieceAlgorithm algorithm = SentencePieceAlgorithm::kUnigram;
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  int unk_id = 0;
  int bos_id = 1;
  int eos_id = 2;
  int pad_id = -1;
  // NormalizerSpec
  std::string normalizer_name;       // "identity", "nmt_nfkc", ...
  std::string precompiled_charsmap;  // the compiled rule (bytes); empty for identity
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Parses the bytes of a .model file; `source` names it in messages. Errors: DataLoss naming
// `source` for bytes that are not a well-formed ModelProto (truncated, bad wire types) or a
// model without pieces.
absl::StatusOr<SentencePieceModel> ParseSentencePieceModel(std::string_view bytes,
                                                           const std::string& source);

}  // namespace data

#endif  // DATA_SENTENCEPIECE_MODEL_H_
