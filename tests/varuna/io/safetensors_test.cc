#include "varuna/io/safetensors.h"

#include <ATen/Parallel.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string TensorBytes(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

at::Tensor F32(std::initializer_list<float> values) {
  at::Tensor t = at::empty({static_cast<int64_t>(values.size())}, at::kFloat);
  std::memcpy(t.data_ptr(), values.begin(), values.size() * sizeof(float));
  return t;
}

at::Tensor I64(std::initializer_list<int64_t> values) {
  at::Tensor t = at::empty({static_cast<int64_t>(values.size())}, at::kLong);
  std::memcpy(t.data_ptr(), values.begin(), values.size() * sizeof(int64_t));
  return t;
}

// The golden file, written by hand: "a" = F32 [1.0, -2.5], "b" = I64 [7], metadata
// {"format": "pt"}. I64 sorts before F32 (descending dtype), so "b" comes first.
std::string GoldenBytes() {
  const std::string header = R"({"__metadata__":{"format":"pt"},)"
                             R"("b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})"
                             "     ";  // 139 bytes of JSON + 5 spaces = 144
  EXPECT_EQ(header.size(), 144u);
  return std::string("\x90\0\0\0\0\0\0\0", 8) + header +
         std::string("\x07\0\0\0\0\0\0\0", 8) +  // b[0] = 7
         std::string("\x00\x00\x80\x3f", 4) +    // a[0] = 1.0f
         std::string("\x00\x00\x20\xc0", 4);     // a[1] = -2.5f
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

TEST_F(SafetensorsTest, ReadsHandWrittenGoldenFile) {
  const std::string path = TempPath("golden.safetensors");
  WriteBytes(path, GoldenBytes());
  absl::StatusOr<SafetensorsFile> file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->tensors.size(), 2u);
  EXPECT_EQ(file->tensors[0].first, "b");
  EXPECT_EQ(file->tensors[1].first, "a");
  const at::Tensor& a = *file->Find("a");
  const at::Tensor& b = *file->Find("b");
  EXPECT_EQ(a.scalar_type(), at::kFloat);
  EXPECT_EQ(a.sizes(), at::IntArrayRef({2}));
  EXPECT_EQ(a.data_ptr<float>()[0], 1.0f);
  EXPECT_EQ(a.data_ptr<float>()[1], -2.5f);
  EXPECT_EQ(b.scalar_type(), at::kLong);
  EXPECT_EQ(b.data_ptr<int64_t>()[0], 7);
  EXPECT_EQ(file->Find("c"), nullptr);
  EXPECT_EQ(file->metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(file->checksum.size, GoldenBytes().size());
  EXPECT_EQ(file->checksum.crc32c, Crc32c(GoldenBytes().data(), GoldenBytes().size()));
}

TEST_F(SafetensorsTest, WriterProducesTheGoldenBytesInAnyInputOrder) {
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  absl::StatusOr<std::string> bytes =
      SerializeSafetensors({{"a", F32({1.0f, -2.5f})}, {"b", I64({7})}}, metadata);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, GoldenBytes());
  bytes = SerializeSafetensors({{"b", I64({7})}, {"a", F32({1.0f, -2.5f})}}, metadata);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, GoldenBytes());

  const std::string path = TempPath("written.safetensors");
  FileChecksum written;
  ASSERT_TRUE(
      WriteSafetensors(path, {{"a", F32({1.0f, -2.5f})}, {"b", I64({7})}}, metadata, &written)
          .ok());
  EXPECT_EQ(ReadBytes(path), GoldenBytes());
  EXPECT_EQ(written.size, GoldenBytes().size());
  EXPECT_EQ(written.crc32c, Crc32c(GoldenBytes().data(), GoldenBytes().size()));
}

TEST_F(SafetensorsTest, WriterWithoutMetadataMatchesHandWrittenBytes) {
  // F32 [1, 2, 3] = 0..5, no metadata: the 64-byte header needs no padding.
  const std::string expected =
      std::string("\x40\0\0\0\0\0\0\0", 8) +
      R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})" +
      std::string(
          "\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40"
          "\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40",
          24);
  absl::StatusOr<std::string> bytes = SerializeSafetensors(
      {{"attn.0", at::arange(6, at::kFloat).reshape({1, 2, 3})}}, /*metadata=*/{});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, expected);
  // An empty file: "{}" padded to 8.
  bytes = SerializeSafetensors({}, {});
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
}

TEST_F(SafetensorsTest, EveryDtypeRoundTripsIncludingScalarsAndEmptyTensors) {
  const at::ScalarType types[] = {at::kDouble, at::kFloat,       at::kHalf,         at::kBFloat16,
                                  at::kLong,   at::kInt,         at::kShort,        at::kChar,
                                  at::kByte,   at::kBool,        at::kUInt16,       at::kUInt32,
                                  at::kUInt64, at::kFloat8_e5m2, at::kFloat8_e4m3fn};
  std::mt19937 rng(7);
  NamedTensors tensors;
  for (at::ScalarType type : types) {
    const std::string name(c10::toString(type));
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{3, 5}, {}, {0}, {2, 0, 3}}) {
      at::Tensor t = at::empty(shape, type);
      auto* p = static_cast<unsigned char*>(t.data_ptr());
      for (int64_t i = 0; i < t.numel() * t.element_size(); ++i) {
        p[i] = static_cast<unsigned char>(type == at::kBool ? rng() % 2 : rng());
      }
      tensors.emplace_back(absl::StrCat(name, "/", shape.size(), "d", t.numel()), t);
    }
  }
  // A non-contiguous view is written in C order.
  at::Tensor base = at::arange(12, at::kFloat).reshape({3, 4});
  tensors.emplace_back("transposed", base.transpose(0, 1));

  const std::string path = TempPath("all_dtypes.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"k", "v \xE2\x82\xAC"}}).ok());
  absl::StatusOr<SafetensorsFile> file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->tensors.size(), tensors.size());
  EXPECT_EQ(file->metadata.at("k"), "v \xE2\x82\xAC");
  for (const auto& [name, original] : tensors) {
    const at::Tensor* read = file->Find(name);
    ASSERT_NE(read, nullptr) << name;
    EXPECT_EQ(read->scalar_type(), original.scalar_type()) << name;
    EXPECT_EQ(read->sizes(), original.sizes()) << name;
    EXPECT_TRUE(read->is_contiguous());
    EXPECT_EQ(TensorBytes(*read), TensorBytes(original)) << name;
  }
  EXPECT_EQ(file->Find("transposed")->data_ptr<float>()[1], 4.0f);
  // Tensors come back in data order: 8-byte types first.
  EXPECT_EQ(file->tensors.front().first.substr(0, 6), "UInt64");
}

TEST_F(SafetensorsTest, WriterRejectsWhatItCannotStore) {
  const auto error = [](const NamedTensors& tensors,
                        const std::map<std::string, std::string>& metadata = {}) {
    absl::Status status = WriteSafetensors(TempPath("bad.safetensors"), tensors, metadata);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("bad.safetensors"));
    return std::string(status.message());
  };
  EXPECT_THAT(error({{"x", at::Tensor()}}), HasSubstr("tensor \"x\" is undefined"));
  EXPECT_THAT(error({{"x", F32({1})}, {"x", F32({2})}}), HasSubstr("\"x\" appears twice"));
  EXPECT_THAT(error({{"__metadata__", F32({1})}}), HasSubstr("reserves"));
  EXPECT_THAT(error({{"bad\xFF", F32({1})}}), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(error({}, {{"k", "\xC3"}}), HasSubstr("metadata entry \"k\""));
  EXPECT_THAT(error({{"c", at::zeros({2}, at::kComplexFloat)}}),
              HasSubstr("dtype ComplexFloat, which safetensors cannot store; supported: BOOL"));
  EXPECT_FALSE(SafetensorsDtypeName(at::kComplexDouble).ok());
  EXPECT_EQ(*SafetensorsDtypeName(at::kBFloat16), "BF16");
}

// A file with the given header JSON (padded) and data section.
std::string MakeFile(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return bytes + header + data;
}

std::string ParseError(const std::string& bytes) {
  absl::StatusOr<SafetensorsFile> file = ParseSafetensors(bytes, "x.safetensors");
  EXPECT_FALSE(file.ok());
  if (file.ok()) return "";
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(file.status().message()), StartsWith("x.safetensors: "));
  return std::string(file.status().message());
}

TEST_F(SafetensorsTest, EachCorruptionHasItsOwnError) {
  const std::string f32x2 = R"("dtype":"F32","shape":[2],"data_offsets":)";
  const std::string data8(8, '\0');
  EXPECT_TRUE(ParseSafetensors(MakeFile(R"({"t":{)" + f32x2 + "[0,8]}}", data8), "x").ok());

  EXPECT_THAT(ParseError("abc"), HasSubstr("file is 3 bytes, too short"));
  EXPECT_THAT(ParseError(std::string("\x00\xe2\xf5\x05\0\0\0\0", 8) + "{}"),
              HasSubstr("header length 100000256 exceeds the limit of 100000000"));
  EXPECT_THAT(ParseError(std::string("\x20\0\0\0\0\0\0\0", 8) + "{}"),
              HasSubstr("header length 32 runs past the end of the 10-byte file"));
  EXPECT_THAT(ParseError(MakeFile(" {}", "")), HasSubstr("does not start with '{'"));
  EXPECT_THAT(ParseError(MakeFile("{\"t\":", "")),
              HasSubstr("header is not valid JSON: line 1, column"));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{)" + f32x2 + R"([0,8]},"t":{)" + f32x2 + "[8,16]}}",
                                  data8 + data8)),
              HasSubstr("duplicate object key \"t\""));
  EXPECT_THAT(
      ParseError(MakeFile(R"({"t":{"dtype":"F128","shape":[2],"data_offsets":[0,8]}})", data8)),
      HasSubstr("tensor \"t\" has unsupported dtype \"F128\""));
  EXPECT_THAT(
      ParseError(MakeFile(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8)),
      HasSubstr("each shape entry must be a non-negative integer, found -2"));
  EXPECT_THAT(
      ParseError(MakeFile(R"({"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", data8)),
      HasSubstr("non-negative integer, found 2.0"));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", data8)),
              HasSubstr("no array field \"shape\""));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", data8)),
              HasSubstr("no string field \"dtype\""));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{)" + f32x2 + "[0]}}", data8)),
              HasSubstr("of the form [begin, end]"));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{)" + f32x2 + "[0,8],\"x\":1}}", data8)),
              HasSubstr("unknown field \"x\""));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":[]})", "")), HasSubstr("must map to an object"));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{)" + f32x2 + "[0,4]}}", data8.substr(4))),
              HasSubstr("data_offsets [0, 4] hold 4 bytes but F32 [2] needs 8"));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{)" + f32x2 + "[8,0]}}", "")),
              HasSubstr("end before they begin"));
  EXPECT_THAT(
      ParseError(MakeFile(
          R"({"t":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,8]}})", data8)),
      HasSubstr("needs more than 2^64"));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{)" + f32x2 + R"([0,8]},"u":{)" + f32x2 + "[12,20]}}",
                                  data8 + data8 + "1234")),
              HasSubstr("tensor \"u\" starts at data offset 12 but the previous tensor ends at 8; "
                        "tensors must tile the data section without gaps"));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{)" + f32x2 + R"([0,8]},"u":{)" + f32x2 + "[4,12]}}",
                                  data8 + "1234")),
              HasSubstr("without overlaps"));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{)" + f32x2 + "[4,12]}}", data8 + "1234")),
              HasSubstr("without gaps"));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{)" + f32x2 + "[0,8]}}", data8 + "xyz")),
              HasSubstr("file has 3 bytes after the end of the tensor data"));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{)" + f32x2 + "[0,8]}}", "12345")),
              HasSubstr("file ends 3 bytes before the end of the tensor data (truncated?)"));
  EXPECT_THAT(ParseError(MakeFile(R"({"__metadata__":{"k":1}})", "")),
              HasSubstr("\"__metadata__\" entry \"k\" must be a string, found int"));
  EXPECT_THAT(ParseError(MakeFile(R"({"__metadata__":[]})", "")),
              HasSubstr("\"__metadata__\" must be an object"));
  EXPECT_THAT(ParseError(MakeFile(R"({"t":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
                                  std::string("\x01\x00\x02", 3))),
              HasSubstr("BOOL tensor \"t\" holds byte value 2 at element 2"));
}

TEST_F(SafetensorsTest, ReadErrorsNameTheFile) {
  const std::string path = TempPath("truncated.safetensors");
  const std::string golden = GoldenBytes();
  WriteBytes(path, golden.substr(0, golden.size() - 1));
  absl::StatusOr<SafetensorsFile> file = ReadSafetensors(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(file.status().message()),
              AllOf(StartsWith(path + ": "), HasSubstr("truncated")));

  file = ReadSafetensors(TempPath("missing.safetensors"));
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("missing.safetensors"));
}

// Random byte flips, insertions and truncations of a valid file never crash the reader:
// each result is a located error or a file that serializes back to a parseable file.
TEST_F(SafetensorsTest, CorruptedFilesNeverCrash) {
  absl::StatusOr<std::string> valid =
      SerializeSafetensors({{"w", at::arange(6, at::kFloat).reshape({2, 3})},
                            {"n", I64({1, 2})},
                            {"m", at::zeros({3}, at::kBool)},
                            {"e", at::empty({0, 2}, at::kHalf)}},
                           {{"format", "pt"}});
  ASSERT_TRUE(valid.ok());
  std::mt19937 rng(99);
  int ok = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::string bytes = *valid;
    const int mutations = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < mutations; ++m) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;
        case 1:
          bytes[at] ^= static_cast<char>(1 << (rng() % 8));
          break;
        case 2:
          bytes.insert(at, 1, "0123456789,[]{}\" -"[rng() % 18]);
          break;
        case 3:
          bytes.resize(std::max<size_t>(at, 1));
          break;
      }
    }
    absl::StatusOr<SafetensorsFile> file = ParseSafetensors(bytes, "fuzz");
    if (file.ok()) {
      ++ok;
      ASSERT_TRUE(SerializeSafetensors(file->tensors, file->metadata).ok());
    } else {
      ASSERT_THAT(std::string(file.status().message()), StartsWith("fuzz: "));
    }
  }
  EXPECT_GT(ok, 0);  // flips inside tensor data are undetectable by the format itself
}

}  // namespace
}  // namespace varuna
