// Tests of what varuna/io/json.h adds to nlohmann/json: the strict Parse, Serialize's forms,
// Find, AsInt64, TypeName and IsValidUtf8.
#include "varuna/io/json.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna::json {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Value MustParse(const std::string& text) {
  absl::StatusOr<Value> value = Parse(text);
  EXPECT_TRUE(value.ok()) << text << ": " << value.status();
  return value.ok() ? *value : Value();
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<Value> value = Parse(text);
  EXPECT_FALSE(value.ok()) << "parsed: " << text;
  if (value.ok()) return "";
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(value.status().message());
}

TEST(JsonParseTest, Int64ExtremesRoundTripExactly) {
  const Value max = MustParse("9223372036854775807");
  EXPECT_TRUE(max.is_number_integer());
  EXPECT_EQ(AsInt64(max), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(max.get<int64_t>(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Serialize(max), "9223372036854775807");
  const Value min = MustParse("-9223372036854775808");
  EXPECT_EQ(AsInt64(min), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Serialize(min), "-9223372036854775808");
  EXPECT_EQ(Serialize(Value(std::numeric_limits<int64_t>::min())), "-9223372036854775808");
  EXPECT_EQ(Serialize(Value(std::numeric_limits<int64_t>::max())), "9223372036854775807");
  // Every number with a fraction or an exponent is a double, even when it is whole.
  EXPECT_TRUE(MustParse("1.0").is_number_float());
  EXPECT_TRUE(MustParse("1e2").is_number_float());
  EXPECT_TRUE(MustParse("-0").is_number_integer());
  EXPECT_EQ(MustParse("\xEF\xBB\xBF{} "), Value::object());  // a byte-order mark is skipped
}

TEST(JsonParseTest, ObjectsKeepInsertionOrderAndReplacingKeepsThePosition) {
  EXPECT_EQ(Serialize(MustParse(R"({"z": 1, "a": 2, "m": {"y": 3, "b": 4}})")),
            R"({"z":1,"a":2,"m":{"y":3,"b":4}})");
  Value object = Value::object();
  object["b"] = 1;
  object["a"] = 2;
  object["c"] = 3;
  object["b"] = 4;
  EXPECT_EQ(Serialize(object), R"({"b":4,"a":2,"c":3})");
  object.erase("a");
  EXPECT_EQ(Serialize(object), R"({"b":4,"c":3})");
}

TEST(JsonParseTest, DuplicateKeysAreRejectedWithTheirLocation) {
  EXPECT_EQ(ParseError(R"({"k": 1, "k": 2})"), "duplicate object key \"k\" in the object at /");
  EXPECT_EQ(ParseError(R"({"files": {"x": {"size": 1, "crc": 2, "size": 3}}})"),
            "duplicate object key \"size\" in the object at /files/x");
  EXPECT_EQ(ParseError(R"({"a": [{}, [0, {"b": 1, "b": 2}]]})"),
            "duplicate object key \"b\" in the object at /a/1/1");
  EXPECT_EQ(ParseError(R"([{"a/b~": {"c": 1, "c": 1}}])"),
            "duplicate object key \"c\" in the object at /0/a~1b~0");
  // The same key in different objects is fine.
  EXPECT_TRUE(Parse(R"({"a": {"k": 1}, "b": {"k": 2}, "k": [{"k": 3}, {"k": 4}]})").ok());
}

TEST(JsonParseTest, RejectsInvalidUtf8AndUnpairedSurrogates) {
  for (const std::string& bad : {
           std::string("\"\xC3\""),              // truncated
           std::string("\"\xC0\xAF\""),          // overlong
           std::string("\"\xED\xA0\x80\""),      // an encoded surrogate
           std::string("\"\xF4\x90\x80\x80\""),  // above U+10FFFF
           std::string("\"\xFF\""),
           std::string("{\"k\xFF\": 1}"),  // in a key
       }) {
    EXPECT_THAT(ParseError(bad), AllOf(StartsWith("line 1, column "), HasSubstr("UTF-8"))) << bad;
  }
  EXPECT_THAT(ParseError(R"("\ud83d")"), HasSubstr("surrogate"));
  EXPECT_THAT(ParseError(R"("\ud83d\u0041")"), HasSubstr("surrogate"));
  EXPECT_THAT(ParseError(R"("\ude00")"), HasSubstr("surrogate"));
  // Escapes decode to UTF-8, a surrogate pair to one code point.
  EXPECT_EQ(MustParse(R"("\u0041\u00e9\u20AC\ud83d\ude00")").get<std::string>(),
            "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST(JsonParseTest, NumbersBeyondADoubleAreRejected) {
  EXPECT_THAT(ParseError("1e400"), HasSubstr("number overflow parsing '1e400'"));
  EXPECT_THAT(ParseError("[-12.5e999]"), HasSubstr("number overflow"));
  EXPECT_EQ(MustParse("1e-400").get<double>(), 0.0);  // underflow is zero
}

TEST(JsonParseTest, NestingDepthIsLimited) {
  const std::string ok = std::string(kMaxParseDepth, '[') + std::string(kMaxParseDepth, ']');
  EXPECT_TRUE(Parse(ok).ok());
  const std::string deep =
      std::string(kMaxParseDepth + 1, '[') + std::string(kMaxParseDepth + 1, ']');
  EXPECT_EQ(ParseError(deep), "nesting deeper than 512 levels");
  EXPECT_EQ(ParseError(std::string(100000, '[')), "nesting deeper than 512 levels");
  std::string objects;
  for (int i = 0; i <= kMaxParseDepth; ++i) objects += "{\"a\":";
  EXPECT_EQ(ParseError(objects), "nesting deeper than 512 levels");
}

TEST(JsonParseTest, SyntaxErrorsGiveLineAndColumn) {
  EXPECT_THAT(ParseError("{\n  \"a\": 1,\n  \"b\" 2\n}"), StartsWith("line 3, column 7: "));
  EXPECT_THAT(ParseError("[1, 2,]"), StartsWith("line 1, column 7: "));
  EXPECT_THAT(ParseError("{} x"), StartsWith("line 1, column 4: "));
  EXPECT_THAT(ParseError(""), StartsWith("line 1, column 1: "));
  EXPECT_THAT(ParseError("\n\n  tru"), StartsWith("line 3, column 6: "));  // the end of input
  for (const char* bad : {"{1:2}", "{\"a\":1", "[1", "01", "1.", "-", "1e+", "+1", "\x01", "NaN",
                          "\"a\nb\"", "\"abc", R"("\x")", R"("\u12G4")", "// comment\n1"}) {
    EXPECT_THAT(ParseError(bad), StartsWith("line ")) << bad;
  }
}

TEST(JsonSerializeTest, CompactAndPrettyForms) {
  Value v = Value::object();
  v["a"] = Value::array({1, 2});
  v["b"] = Value::object();
  v["b"]["c"] = nullptr;
  v["e"] = Value::array();
  v["s"] = "x";
  EXPECT_EQ(Serialize(v), R"({"a":[1,2],"b":{"c":null},"e":[],"s":"x"})");
  EXPECT_EQ(Serialize(v, /*pretty=*/true),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {\n    \"c\": null\n  },\n"
            "  \"e\": [],\n  \"s\": \"x\"\n}");
  EXPECT_EQ(MustParse(Serialize(v, true)), v);
}

TEST(JsonSerializeTest, EscapesAndReplacesInvalidUtf8) {
  EXPECT_EQ(Serialize(Value(std::string("q\"\\\n\t\x01\x1f/\xC3\xA9", 10))),
            "\"q\\\"\\\\\\n\\t\\u0001\\u001f/\xC3\xA9\"");
  EXPECT_EQ(Serialize(Value(std::string("\0", 1))), "\"\\u0000\"");
  EXPECT_EQ(Serialize(Value("a\xFF"
                            "b")),
            "\"a\xEF\xBF\xBD"
            "b\"");
  Value object = Value::object();
  object["k\xC3"] = "\xED\xA0\x80";
  const std::string text = Serialize(object);
  EXPECT_TRUE(IsValidUtf8(text)) << text;
  EXPECT_THAT(text, HasSubstr("\xEF\xBF\xBD"));
  EXPECT_TRUE(Parse(text).ok());
}

TEST(JsonSerializeTest, DoublesRoundTripExactly) {
  EXPECT_EQ(Serialize(Value(0.1)), "0.1");
  EXPECT_EQ(Serialize(Value(1.0)), "1.0");
  EXPECT_EQ(Serialize(Value(-0.0)), "-0.0");
  EXPECT_EQ(Serialize(Value(1e300)), "1e+300");
  EXPECT_EQ(Serialize(Value(1e-5)), "1e-05");
  EXPECT_EQ(Serialize(Value(std::nan(""))), "null");
  EXPECT_EQ(Serialize(Value(-std::numeric_limits<double>::infinity())), "null");
  EXPECT_TRUE(std::signbit(MustParse(Serialize(Value(-0.0))).get<double>()));
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    if (!std::isfinite(d)) continue;
    const Value back = MustParse(Serialize(Value(d)));
    ASSERT_TRUE(back.is_number_float()) << Serialize(Value(d));
    ASSERT_EQ(back.get<double>(), d) << Serialize(Value(d));
  }
  for (double d : {std::numeric_limits<double>::max(), std::numeric_limits<double>::min(),
                   std::numeric_limits<double>::denorm_min(), 123456789012345678.0}) {
    const Value back = MustParse(Serialize(Value(d)));
    EXPECT_TRUE(back.is_number_float());
    EXPECT_EQ(back.get<double>(), d);
  }
}

TEST(JsonRoundTripTest, ValueSurvivesSerializeAndParse) {
  Value v = Value::object();
  v["iteration"] = int64_t{1} << 40;
  v["negative"] = -7;
  v["lr"] = 6.0e-5;
  v["name"] = "\xE2\x82\xAC \xF0\x9F\x98\x80 \"quoted\" \\ / \b\f\n\r\t \x01";
  v["flags"] = Value::array({true, false, nullptr, -1, 0.5, "x"});
  v["nested"] = Value::object();
  v["nested"]["empty_object"] = Value::object();
  v["nested"]["empty_string"] = "";
  for (bool pretty : {false, true}) {
    const Value back = MustParse(Serialize(v, pretty));
    EXPECT_EQ(back, v) << Serialize(v, pretty);
    EXPECT_EQ(Serialize(back, pretty), Serialize(v, pretty));
  }
}

TEST(JsonUtf8Test, ValidatesUtf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \x7F"));
  EXPECT_TRUE(IsValidUtf8(std::string("\0", 1)));
  EXPECT_FALSE(IsValidUtf8("\xC3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\x80"));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xB0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("a\x80"));
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

TEST(JsonFindTest, FindsMembersOfObjectsOnly) {
  const Value v = MustParse(R"({"a": 1, "b": {"c": "x"}, "d": null})");
  ASSERT_NE(Find(v, "a"), nullptr);
  EXPECT_EQ(*Find(v, "a"), 1);
  EXPECT_EQ(Find(*Find(v, "b"), "c")->get<std::string>(), "x");
  ASSERT_NE(Find(v, "d"), nullptr);
  EXPECT_TRUE(Find(v, "d")->is_null());
  EXPECT_EQ(Find(v, "missing"), nullptr);
  EXPECT_EQ(Find(Value(3), "a"), nullptr);
  EXPECT_EQ(Find(Value::array({"a"}), "a"), nullptr);
  EXPECT_EQ(Find(Value(), "a"), nullptr);
}

TEST(JsonFindTest, AsInt64IsExact) {
  EXPECT_EQ(AsInt64(MustParse("-5")), -5);
  EXPECT_EQ(AsInt64(MustParse("5")), 5);
  EXPECT_EQ(AsInt64(Value(uint64_t{1} << 62)), int64_t{1} << 62);
  EXPECT_EQ(AsInt64(Value(uint64_t{1} << 63)), std::nullopt);
  EXPECT_EQ(AsInt64(MustParse("9223372036854775808")), std::nullopt);
  EXPECT_EQ(AsInt64(MustParse("1.5")), std::nullopt);
  EXPECT_EQ(AsInt64(MustParse("2.0")), std::nullopt);
  EXPECT_EQ(AsInt64(Value("5")), std::nullopt);
  EXPECT_EQ(AsInt64(Value(true)), std::nullopt);
  EXPECT_EQ(AsInt64(Value()), std::nullopt);
  const Value object = MustParse(R"({"n": 7, "s": "7"})");
  EXPECT_EQ(AsInt64(Find(object, "n")), 7);
  EXPECT_EQ(AsInt64(Find(object, "s")), std::nullopt);
  EXPECT_EQ(AsInt64(Find(object, "missing")), std::nullopt);
}

TEST(JsonFindTest, TypeNames) {
  EXPECT_STREQ(TypeName(Value()), "null");
  EXPECT_STREQ(TypeName(Value(false)), "bool");
  EXPECT_STREQ(TypeName(Value(-1)), "int");
  EXPECT_STREQ(TypeName(MustParse("1")), "int");  // parsed as unsigned
  EXPECT_STREQ(TypeName(Value(1.5)), "double");
  EXPECT_STREQ(TypeName(Value("s")), "string");
  EXPECT_STREQ(TypeName(Value::array()), "array");
  EXPECT_STREQ(TypeName(Value::object()), "object");
}

// Random mutations of valid JSON never crash the parser; every result either fails with a
// located error or re-serializes to text that parses to the same value.
TEST(JsonFuzzTest, MutatedDocumentsNeverCrash) {
  const std::string seeds[] = {
      R"({"a":[1,2.5,-3e-2,true,false,null],"s":"x\u00e9\ud83d\ude00\n","o":{"k":{}}})",
      R"([{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"\"\\",[[[]]]])",
      "{\"text\": \"\xC3\xA9\xE2\x82\xAC\", \"n\": 9223372036854775807, \"m\": 1e300}",
  };
  const std::string alphabet =
      "{}[]\",:\\u0123456789abcdefABCDEF.eE+-tnrfl \n\t\x80\xBF\xC3\xED\xF0";
  std::mt19937 rng(1234);
  int parsed = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    std::string text = seeds[iteration % 3];
    const int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations && !text.empty(); ++m) {
      const size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0:
          text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          text.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 2:
          text.erase(at, 1 + rng() % 3);
          break;
        case 3:
          text.resize(at);
          break;
      }
    }
    absl::StatusOr<Value> value = Parse(text);
    if (value.ok()) {
      ++parsed;
      ASSERT_EQ(MustParse(Serialize(*value)), *value) << text;
    } else {
      ASSERT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument) << text;
      ASSERT_THAT(std::string(value.status().message()),
                  AnyOf(StartsWith("line "), StartsWith("duplicate object key \""),
                        StartsWith("number overflow parsing")))
          << text;
    }
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace varuna::json
