#include "data/sentencepiece_model.h"

#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace data {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

// One field of a message: its number, wire type and value (the varint, or the bytes of a
// length-delimited or fixed-size field).
struct Field {
  int number = 0;
  int wire_type = 0;
  uint64_t varint = 0;
  std::string_view bytes;
};

// Reads the fields of one message in order.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}

  // Sets *field to the next field; false at the end or on malformed input (then ok() is false).
  bool Next(Field* field) {
    if (pos_ >= data_.size() || !ok_) return false;
    uint64_t key = 0;
    if (!ReadVarint(&key)) return Fail();
    field->number = static_cast<int>(key >> 3);
    field->wire_type = static_cast<int>(key & 7);
    field->bytes = {};
    field->varint = 0;
    switch (field->wire_type) {
      case kVarint:
        if (!ReadVarint(&field->varint)) return Fail();
        return true;
      case kFixed64:
        return ReadBytes(8, field);
      case kLengthDelimited: {
        uint64_t size = 0;
        if (!ReadVarint(&size)) return Fail();
        return ReadBytes(size, field);
      }
      case kFixed32:
        return ReadBytes(4, field);
      default:  // groups (3, 4) are not used by sentencepiece_model.proto
        return Fail();
    }
  }

  bool ok() const { return ok_; }

 private:
  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      const uint8_t byte = static_cast<uint8_t>(data_[pos_++]);
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }
  bool ReadBytes(uint64_t size, Field* field) {
    if (size > data_.size() - pos_) return Fail();
    field->bytes = data_.substr(pos_, size);
    pos_ += size;
    return true;
  }
  bool Fail() {
    ok_ = false;
    return false;
  }

  std::string_view data_;
  size_t pos_ = 0;
  bool ok_ = true;
};

absl::Status Malformed(const std::string& source, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("tokenizer model ", source,
                                          " is not a well-formed SentencePiece model (", what,
                                          "): pass the .model file written by train_tokenizer"));
}

// An int32 field: negative values are sign-extended 64-bit varints.
int AsInt32(const Field& field) { return static_cast<int>(static_cast<int64_t>(field.varint)); }

float AsFloat(std::string_view bytes) {
  uint32_t bits = 0;
  for (int i = 3; i >= 0; --i) bits = (bits << 8) | static_cast<uint8_t>(bytes[i]);  // LE
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

absl::Status ParsePiece(std::string_view bytes, const std::string& source, SentencePiece* piece) {
  WireReader reader(bytes);
  Field field;
  while (reader.Next(&field)) {
    if (field.number == 1 && field.wire_type == kLengthDelimited) {
      piece->piece = std::string(field.bytes);
    } else if (field.number == 2 && field.wire_type == kFixed32) {
      piece->score = AsFloat(field.bytes);
    } else if (field.number == 3 && field.wire_type == kVarint) {
      if (field.varint < 1 || field.varint > 6) return Malformed(source, "unknown piece type");
      piece->type = static_cast<PieceType>(field.varint);
    }
  }
  if (!reader.ok()) return Malformed(source, "a truncated piece");
  if (piece->piece.empty()) return Malformed(source, "an empty piece");
  return absl::OkStatus();
}

absl::Status ParseTrainerSpec(std::string_view bytes, const std::string& source,
                              SentencePieceModel* model) {
  WireReader reader(bytes);
  Field field;
  while (reader.Next(&field)) {
    if (field.wire_type != kVarint) continue;
    switch (field.number) {
      case 3:
        if (field.varint < 1 || field.varint > 4) return Malformed(source, "unknown model type");
        model->algorithm = static_cast<SentencePieceAlgorithm>(field.varint);
        break;
      case 24:
        model->treat_whitespace_as_suffix = field.varint != 0;
        break;
      case 35:
        model->byte_fallback = field.varint != 0;
        break;
      case 40:
        model->unk_id = AsInt32(field);
        break;
      case 41:
        model->bos_id = AsInt32(field);
        break;
      case 42:
        model->eos_id = AsInt32(field);
        break;
      case 43:
        model->pad_id = AsInt32(field);
        break;
      default:
        break;
    }
  }
  return reader.ok() ? absl::OkStatus() : Malformed(source, "a truncated trainer_spec");
}

absl::Status ParseNormalizerSpec(std::string_view bytes, const std::string& source,
                                 SentencePieceModel* model) {
  WireReader reader(bytes);
  Field field;
  while (reader.Next(&field)) {
    if (field.number == 1 && field.wire_type == kLengthDelimited) {
      model->normalizer_name = std::string(field.bytes);
    } else if (field.number == 2 && field.wire_type == kLengthDelimited) {
      model->precompiled_charsmap = std::string(field.bytes);
    } else if (field.wire_type == kVarint && field.number >= 3 && field.number <= 5) {
      bool* flags[] = {&model->add_dummy_prefix, &model->remove_extra_whitespaces,
                       &model->escape_whitespaces};
      *flags[field.number - 3] = field.varint != 0;
    }
  }
  return reader.ok() ? absl::OkStatus() : Malformed(source, "a truncated normalizer_spec");
}

}  // namespace

absl::StatusOr<SentencePieceModel> ParseSentencePieceModel(std::string_view bytes,
                                                           const std::string& source) {
  SentencePieceModel model;
  WireReader reader(bytes);
  Field field;
  while (reader.Next(&field)) {
    if (field.wire_type != kLengthDelimited) continue;
    absl::Status status;
    if (field.number == 1) {
      status = ParsePiece(field.bytes, source, &model.pieces.emplace_back());
    } else if (field.number == 2) {
      status = ParseTrainerSpec(field.bytes, source, &model);
    } else if (field.number == 3) {
      status = ParseNormalizerSpec(field.bytes, source, &model);
    }
    if (!status.ok()) return status;
  }
  if (!reader.ok()) return Malformed(source, "truncated or not a protobuf");
  if (model.pieces.empty()) return Malformed(source, "it has no pieces");
  return model;
}

}  // namespace data
