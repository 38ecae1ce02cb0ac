#include "tools/export_hf/hf_tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "data/sentencepiece_model.h"
#include "data/tokenizer_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "varuna/io/json.h"
#include "varuna/io/posix_file.h"

namespace tools {
namespace {

using data::PieceType;
using data::SentencePieceAlgorithm;
using data::SentencePieceModel;
using ::testing::HasSubstr;
using varuna::json::Value;

constexpr char kSpace[] = "\xE2\x96\x81";  // U+2581

Value ParseJson(const char* text) {
  absl::StatusOr<Value> value = varuna::json::Parse(text);
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : Value();
}

std::string Text(const Value& value) { return varuna::json::Serialize(value, /*pretty=*/true); }

// ---- A ModelProto writer for hand-made models (protobuf wire format).

std::string Varint(uint64_t value) {
  std::string out;
  do {
    uint8_t byte = value & 0x7f;
    value >>= 7;
    if (value != 0) byte |= 0x80;
    out.push_back(static_cast<char>(byte));
  } while (value != 0);
  return out;
}
std::string VarintField(int number, int64_t value) {
  return Varint(static_cast<uint64_t>(number) << 3) + Varint(static_cast<uint64_t>(value));
}
std::string BytesField(int number, const std::string& bytes) {
  return Varint((static_cast<uint64_t>(number) << 3) | 2) + Varint(bytes.size()) + bytes;
}
std::string FloatField(int number, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  std::string out = Varint((static_cast<uint64_t>(number) << 3) | 5);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  return out;
}
std::string Piece(const std::string& piece, float score, int type = 1) {
  std::string body = BytesField(1, piece) + FloatField(2, score);
  if (type != 1) body += VarintField(3, type);
  return BytesField(1, body);
}

// A unigram model, unk=0, no bos, eos=1, no pad, with nmt_nfkc-like normalizer settings: a
// precompiled charsmap, no dummy prefix, extra whitespace removed (proto2 defaults apart).
std::string HandMadeUnigram() {
  std::string proto = Piece("<unk>", 0, 2) + Piece("</s>", 0, 3) + Piece("<sep>", 0, 4) +
                      Piece(std::string(kSpace) + "a", -1.5f) + Piece("a", -2.25f) +
                      Piece("b", -3.0f);
  proto += BytesField(2, VarintField(3, 1) + VarintField(40, 0) + VarintField(41, -1) +
                             VarintField(42, 1) + VarintField(43, -1));
  proto += BytesField(3, BytesField(1, "nmt_nfkc") + BytesField(2, std::string("\x01\x00\xff", 3)) +
                             VarintField(3, 0));
  return proto;
}

TEST(SentencePieceModelTest, ParsesAHandMadeModel) {
  absl::StatusOr<SentencePieceModel> model = data::ParseSentencePieceModel(HandMadeUnigram(), "m");
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->pieces.size(), 6u);
  EXPECT_EQ(model->pieces[0].piece, "<unk>");
  EXPECT_EQ(model->pieces[0].type, PieceType::kUnknown);
  EXPECT_EQ(model->pieces[1].type, PieceType::kControl);
  EXPECT_EQ(model->pieces[2].type, PieceType::kUserDefined);
  EXPECT_EQ(model->pieces[3].piece, std::string(kSpace) + "a");
  EXPECT_EQ(model->pieces[3].type, PieceType::kNormal);
  EXPECT_FLOAT_EQ(model->pieces[4].score, -2.25f);
  EXPECT_EQ(model->algorithm, SentencePieceAlgorithm::kUnigram);
  EXPECT_FALSE(model->byte_fallback);
  EXPECT_EQ(model->unk_id, 0);
  EXPECT_EQ(model->bos_id, -1);  // a negative int32 is a 10-byte varint
  EXPECT_EQ(model->eos_id, 1);
  EXPECT_EQ(model->pad_id, -1);
  EXPECT_EQ(model->normalizer_name, "nmt_nfkc");
  EXPECT_EQ(model->precompiled_charsmap, std::string("\x01\x00\xff", 3));
  EXPECT_FALSE(model->add_dummy_prefix);
  EXPECT_TRUE(model->remove_extra_whitespaces);  // absent: proto2's default
  EXPECT_TRUE(model->escape_whitespaces);
}

TEST(SentencePieceModelTest, MalformedBytesAreDataLoss) {
  const std::string proto = HandMadeUnigram();
  for (const std::string& bytes :
       {proto.substr(0, proto.size() - 3), std::string("\x0a\x05<unk", 6), std::string(),
        BytesField(2, VarintField(3, 2))}) {
    absl::StatusOr<SentencePieceModel> model = data::ParseSentencePieceModel(bytes, "bad.model");
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(model.status().message(), HasSubstr("bad.model"));
  }
}

TEST(HfTokenizerTest, HandMadeUnigramWithNormalizerSettings) {
  absl::StatusOr<SentencePieceModel> model = data::ParseSentencePieceModel(HandMadeUnigram(), "m");
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<HfTokenizerFiles> files = HuggingFaceTokenizer(*model, 64, "m");
  ASSERT_TRUE(files.ok()) << files.status();
  const Value& json = files->tokenizer;
  EXPECT_EQ(Text(json["normalizer"]), Text(ParseJson(R"({"type": "Sequence", "normalizers": [
      {"type": "Precompiled", "precompiled_charsmap": "AQD/"},
      {"type": "Replace", "pattern": {"Regex": "^ +| +$"}, "content": ""},
      {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})")));
  EXPECT_EQ(Text(json["decoder"]), Text(ParseJson(R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
      {"type": "Fuse"}]})")));
  // The special pieces score below any spelling of their text in normal pieces ((longest
  // special piece, 5 characters, + 1) x (lowest normal score - 10)), so that text never
  // matches them, as in SentencePiece.
  EXPECT_EQ(Text(json["model"]), Text(ParseJson(R"({"type": "Unigram", "unk_id": 0, "vocab": [
      ["<unk>", -78.0], ["</s>", -78.0], ["<sep>", 0.0], ["\u2581a", -1.5], ["a", -2.25],
      ["b", -3.0]], "byte_fallback": false})")));
  // Only the user-defined piece is an added token: `tokenizers` would match the special ones in
  // the text.
  EXPECT_EQ(Text(json["added_tokens"]), Text(ParseJson(R"([
      {"id": 2, "content": "<sep>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": false}])")));
  EXPECT_EQ(files->tokenizer_config["split_special_tokens"], true);
  EXPECT_EQ(Text(files->tokenizer_config["added_tokens_decoder"]), Text(ParseJson(R"({
      "0": {"content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false,
            "normalized": false, "special": true},
      "1": {"content": "</s>", "single_word": false, "lstrip": false, "rstrip": false,
            "normalized": false, "special": true},
      "2": {"content": "<sep>", "single_word": false, "lstrip": false, "rstrip": false,
            "normalized": false, "special": false}})")));
  // No pad piece: pad is eos.
  EXPECT_EQ(files->pad_id, 1);
  EXPECT_EQ(Text(files->special_tokens_map), Text(ParseJson(R"({"bos_token": "</s>",
      "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "</s>"})")));
}

TEST(HfTokenizerTest, UnconvertibleModelsAreNamed) {
  absl::StatusOr<SentencePieceModel> model = data::ParseSentencePieceModel(HandMadeUnigram(), "m");
  ASSERT_TRUE(model.ok());
  SentencePieceModel word = *model;
  word.algorithm = SentencePieceAlgorithm::kWord;
  SentencePieceModel suffix = *model;
  suffix.treat_whitespace_as_suffix = true;
  SentencePieceModel duplicate = *model;
  duplicate.pieces[5].piece = "a";
  SentencePieceModel no_eos = *model;
  no_eos.eos_id = -1;
  for (const auto& [bad, message] :
       std::vector<std::pair<SentencePieceModel, std::string>>{{word, "word or char model"},
                                                               {suffix, "end of pieces"},
                                                               {duplicate, "has piece 'a' twice"},
                                                               {no_eos, "eos_id -1"}}) {
    absl::StatusOr<HfTokenizerFiles> files = HuggingFaceTokenizer(bad, 64, "odd.model");
    ASSERT_FALSE(files.ok()) << message;
    EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(files.status().message(), HasSubstr("odd.model"));
    EXPECT_THAT(files.status().message(), HasSubstr(message));
  }
}

// A model trained as //data:train_tokenizer trains it (byte-fallback BPE, identity).
class TrainedTokenizerTest : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr int kVocab = 300;  // 256 bytes, 4 specials, pieces of the tiny corpus

  SentencePieceModel Train() {
    const std::string dir = std::getenv("TEST_TMPDIR");
    {
      std::ofstream corpus(dir + "/corpus.txt");
      const char* words[] = {"the", "quick",  "brown", "fox",  "jumps", "over",  "lazy", "dog",
                             "cat", "sleeps", "under", "warm", "sun",   "birds", "sing", "trees"};
      for (int i = 0; i < 300; ++i) {
        for (int w = 0; w < 8; ++w) corpus << (w ? " " : "") << words[(i * 7 + w * 3) % 16];
        corpus << ".\n";
      }
    }
    data::TokenizerTrainOptions options;
    options.input_files = {dir + "/corpus.txt"};
    options.model_prefix = dir + "/" + GetParam();
    options.model_type = GetParam();
    options.vocab_size = kVocab;
    options.num_threads = 1;
    const absl::Status status = data::TrainTokenizer(options);
    EXPECT_TRUE(status.ok()) << status;
    absl::StatusOr<std::string> bytes = varuna::ReadFileToString(options.model_prefix + ".model");
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    absl::StatusOr<SentencePieceModel> model =
        data::ParseSentencePieceModel(bytes.ok() ? *bytes : "", "trained");
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *model : SentencePieceModel();
  }
};

TEST_P(TrainedTokenizerTest, ConvertsWithTheModelsOwnSettings) {
  const SentencePieceModel model = Train();
  ASSERT_EQ(model.pieces.size(), static_cast<size_t>(kVocab));
  EXPECT_EQ(model.algorithm,
            GetParam() == "bpe" ? SentencePieceAlgorithm::kBpe : SentencePieceAlgorithm::kUnigram);
  EXPECT_TRUE(model.byte_fallback);
  EXPECT_EQ(model.normalizer_name, "identity");
  EXPECT_TRUE(model.precompiled_charsmap.empty());
  EXPECT_TRUE(model.add_dummy_prefix);
  EXPECT_FALSE(model.remove_extra_whitespaces);
  EXPECT_EQ(model.unk_id, 0);
  EXPECT_EQ(model.bos_id, 1);
  EXPECT_EQ(model.eos_id, 2);
  EXPECT_EQ(model.pad_id, 3);
  EXPECT_EQ(model.pieces[2].piece, "</s>");
  EXPECT_EQ(model.pieces[4 + 0x0A].piece, "<0x0A>");
  EXPECT_EQ(model.pieces[4 + 0x0A].type, PieceType::kByte);
  // Cross-check with SentencePiece itself.
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer =
      data::LoadTokenizer(std::string(std::getenv("TEST_TMPDIR")) + "/" + GetParam() + ".model");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  for (int id = 0; id < kVocab; ++id)
    EXPECT_EQ(model.pieces[id].piece, (*tokenizer)->IdToPiece(id));

  absl::StatusOr<HfTokenizerFiles> files = HuggingFaceTokenizer(model, 1024, "trained");
  ASSERT_TRUE(files.ok()) << files.status();
  Value json = files->tokenizer;
  EXPECT_EQ(json["version"], "1.0");
  EXPECT_TRUE(json["pre_tokenizer"].is_null());
  EXPECT_TRUE(json["post_processor"].is_null());
  EXPECT_TRUE(json["truncation"].is_null());
  EXPECT_TRUE(json["padding"].is_null());
  EXPECT_EQ(Text(json["normalizer"]), Text(ParseJson(R"({"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "\u2581"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})")));
  EXPECT_EQ(Text(json["decoder"]), Text(ParseJson(R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})")));
  // The special pieces are no added tokens (`tokenizers` would match them in the text), but
  // transformers learns them from tokenizer_config.json.
  EXPECT_EQ(json["added_tokens"].size(), 0u);
  const Value& decoder = files->tokenizer_config["added_tokens_decoder"];
  ASSERT_EQ(decoder.size(), 4u);
  const char* specials[] = {"<unk>", "<s>", "</s>", "<pad>"};
  for (int id = 0; id < 4; ++id) {
    const Value& token = decoder[std::to_string(id)];
    EXPECT_EQ(token["content"], specials[id]);
    EXPECT_EQ(token["special"], true);
    EXPECT_EQ(token["normalized"], false);
  }
  const Value& m = json["model"];
  EXPECT_EQ(m["byte_fallback"], true);
  if (GetParam() == "bpe") {
    EXPECT_EQ(m["type"], "BPE");
    EXPECT_EQ(m["unk_token"], "<unk>");
    EXPECT_EQ(m["fuse_unk"], true);
    ASSERT_EQ(m["vocab"].size(), static_cast<size_t>(kVocab));
    int id = 0;
    for (const auto& [piece, value] : m["vocab"].items()) {  // in id order
      EXPECT_EQ(piece, model.pieces[id].piece);
      EXPECT_EQ(value, id++);
    }
    // Every merge makes a piece; ranks follow the merged pieces' scores, highest first.
    ASSERT_GT(m["merges"].size(), 10u);
    float last_score = 1e9f;
    for (const Value& merge : m["merges"]) {
      ASSERT_EQ(merge.size(), 2u);
      const std::string merged = merge[0].get<std::string>() + merge[1].get<std::string>();
      ASSERT_TRUE(m["vocab"].contains(merged)) << merged;
      const float score = model.pieces[m["vocab"][merged].get<int>()].score;
      EXPECT_LE(score, last_score) << merged;
      last_score = score;
    }
    // The first merge makes SentencePiece's first merged piece (the highest-scoring one).
    int first = 0;
    while (model.pieces[first].type != PieceType::kNormal) ++first;
    EXPECT_EQ(m["merges"][0][0].get<std::string>() + m["merges"][0][1].get<std::string>(),
              model.pieces[first].piece);
  } else {
    EXPECT_EQ(m["type"], "Unigram");
    EXPECT_EQ(m["unk_id"], 0);
    ASSERT_EQ(m["vocab"].size(), static_cast<size_t>(kVocab));
    float lowest = 0;
    for (const data::SentencePiece& piece : model.pieces) {
      if (piece.type == PieceType::kNormal) lowest = std::min(lowest, piece.score);
    }
    for (int id = 0; id < kVocab; ++id) {
      EXPECT_EQ(m["vocab"][id][0], model.pieces[id].piece);
      const PieceType type = model.pieces[id].type;
      if (type == PieceType::kNormal || type == PieceType::kUserDefined) {
        EXPECT_FLOAT_EQ(m["vocab"][id][1].get<float>(), model.pieces[id].score);
      } else {  // control, unknown and byte pieces ("<0x41>": 6 characters) are never matched
        EXPECT_FLOAT_EQ(m["vocab"][id][1].get<float>(), (lowest - 10) * 7) << id;
      }
    }
  }
  const std::string expected_config = std::string(R"({
      "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1024,
      "bos_token": "</s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
      "add_bos_token": false, "add_eos_token": false,
      "clean_up_tokenization_spaces": false, "split_special_tokens": true,
      "added_tokens_decoder": )") + Text(decoder) +
                                      "}";
  EXPECT_EQ(Text(files->tokenizer_config), Text(ParseJson(expected_config.c_str())));
  EXPECT_EQ(files->bos_id, 2);
  EXPECT_EQ(files->eos_id, 2);
  EXPECT_EQ(files->pad_id, 3);
}

INSTANTIATE_TEST_SUITE_P(BpeAndUnigram, TrainedTokenizerTest, ::testing::Values("bpe", "unigram"));

}  // namespace
}  // namespace tools
