#include "varuna/io/json.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna::json {
namespace {

using ::testing::HasSubstr;

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

TEST(JsonValueTest, BuildsAndReadsEveryType) {
  Value object = Value::MakeObject();
  object.Set("null", Value());
  object.Set("bool", true);
  object.Set("int", int64_t{-7});
  object.Set("size", size_t{12});
  object.Set("double", 2.5);
  object.Set("string", "text");
  Value& array = object.Set("array", Value::MakeArray());
  array.Append(1);
  array.Append("two");

  EXPECT_TRUE(object.is_object());
  EXPECT_EQ(object.size(), 7u);
  EXPECT_TRUE(object.Find("null")->is_null());
  EXPECT_TRUE(object.Find("bool")->as_bool());
  EXPECT_EQ(object.Find("int")->as_int(), -7);
  EXPECT_EQ(object.Find("size")->as_int(), 12);
  EXPECT_DOUBLE_EQ(object.Find("double")->as_double(), 2.5);
  EXPECT_DOUBLE_EQ(object.Find("int")->as_double(), -7.0);
  EXPECT_TRUE(object.Find("string")->is_string());
  EXPECT_EQ(object.Find("string")->as_string(), "text");
  ASSERT_EQ(object.Find("array")->size(), 2u);
  EXPECT_EQ((*object.Find("array"))[0].as_int(), 1);
  EXPECT_EQ((*object.Find("array"))[1].as_string(), "two");
  EXPECT_EQ(object.Find("missing"), nullptr);
  EXPECT_EQ(Value(3).Find("x"), nullptr);
  EXPECT_EQ(Value(uint64_t{1} << 63).type(), Value::Type::kDouble);
}

TEST(JsonValueTest, SetReplacesInPlaceAndKeepsInsertionOrder) {
  Value object = Value::MakeObject();
  object.Set("b", 1);
  object.Set("a", 2);
  object.Set("c", 3);
  object.Set("b", 4);
  EXPECT_EQ(Serialize(object), R"({"b":4,"a":2,"c":3})");
  EXPECT_TRUE(object.Erase("a"));
  EXPECT_FALSE(object.Erase("a"));
  EXPECT_EQ(Serialize(object), R"({"b":4,"c":3})");
}

TEST(JsonValueTest, WrongTypeAccessAbortsNamingTheTypes) {
  EXPECT_DEATH(Value("x").as_int(), "as_int called on a string value \\(needs int\\)");
  EXPECT_DEATH(Value(1).Append(2), "Append called on a int value \\(needs array\\)");
}

TEST(JsonParseTest, ParsesEveryKind) {
  const Value v = MustParse(
      " {\"a\": [1, -2.5e1, true, false, null, \"s\", {}, []], \"b\": {\"c\": 0.125}} \n");
  ASSERT_TRUE(v.is_object());
  const Value& a = *v.Find("a");
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(a[0].as_int(), 1);
  EXPECT_DOUBLE_EQ(a[1].as_double(), -25.0);
  EXPECT_TRUE(a[1].is_double());
  EXPECT_TRUE(a[2].as_bool());
  EXPECT_FALSE(a[3].as_bool());
  EXPECT_TRUE(a[4].is_null());
  EXPECT_EQ(a[5].as_string(), "s");
  EXPECT_TRUE(a[6].is_object());
  EXPECT_EQ(a[6].size(), 0u);
  EXPECT_TRUE(a[7].is_array());
  EXPECT_DOUBLE_EQ(v.Find("b")->Find("c")->as_double(), 0.125);
}

TEST(JsonParseTest, Int64ExtremesStayExactAndLargerBecomeDouble) {
  EXPECT_EQ(MustParse("9223372036854775807").as_int(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(MustParse("-9223372036854775808").as_int(), std::numeric_limits<int64_t>::min());
  const Value big = MustParse("9223372036854775808");
  ASSERT_TRUE(big.is_double());
  EXPECT_EQ(big.as_double(), 9223372036854775808.0);
  EXPECT_TRUE(MustParse("-9223372036854775809").is_double());
  EXPECT_TRUE(MustParse("1.0").is_double());
  EXPECT_TRUE(MustParse("1e2").is_double());
  EXPECT_TRUE(MustParse("-0").is_int());
  EXPECT_EQ(Serialize(Value(std::numeric_limits<int64_t>::min())), "-9223372036854775808");
}

TEST(JsonParseTest, DoubleRangeOverflowIsAnErrorUnderflowIsZero) {
  EXPECT_THAT(ParseError("1e400"), HasSubstr("out of the range of a double"));
  EXPECT_THAT(ParseError("[-12.5e999]"), HasSubstr("line 1, column 2"));
  EXPECT_EQ(MustParse("1e-400").as_double(), 0.0);
  EXPECT_TRUE(std::signbit(MustParse("-1e-400").as_double()));
  EXPECT_EQ(MustParse("0e99999").as_double(), 0.0);
}

TEST(JsonParseTest, DecodesEveryEscape) {
  EXPECT_EQ(MustParse(R"("\"\\\/\b\f\n\r\t")").as_string(), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(MustParse(R"("\u0041\u00e9\u20AC")").as_string(), "A\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(MustParse(R"("\u0000")").as_string(), std::string(1, '\0'));
  // U+1F600 as a surrogate pair and as raw UTF-8.
  EXPECT_EQ(MustParse(R"("\ud83d\ude00")").as_string(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(MustParse("\"\xF0\x9F\x98\x80\"").as_string(), "\xF0\x9F\x98\x80");
}

TEST(JsonParseTest, RejectsBadStrings) {
  EXPECT_THAT(ParseError(R"("\ud83d")"), HasSubstr("high surrogate not followed"));
  EXPECT_THAT(ParseError(R"("\ud83d\u0041")"), HasSubstr("high surrogate not followed"));
  EXPECT_THAT(ParseError(R"("\ude00")"), HasSubstr("unpaired low surrogate"));
  EXPECT_THAT(ParseError(R"("\u12G4")"), HasSubstr("invalid \\u escape"));
  EXPECT_THAT(ParseError(R"("\u12")"), HasSubstr("4 hex digits"));
  EXPECT_THAT(ParseError(R"("\x")"), HasSubstr("invalid escape \\'x'"));
  EXPECT_THAT(ParseError("\"a\nb\""), HasSubstr("raw control character"));
  EXPECT_THAT(ParseError("\"abc"), HasSubstr("unterminated string"));
  EXPECT_THAT(ParseError("\"\xC3\""), HasSubstr("invalid UTF-8"));              // truncated
  EXPECT_THAT(ParseError("\"\xC0\xAF\""), HasSubstr("invalid UTF-8"));          // overlong
  EXPECT_THAT(ParseError("\"\xED\xA0\x80\""), HasSubstr("invalid UTF-8"));      // surrogate
  EXPECT_THAT(ParseError("\"\xF4\x90\x80\x80\""), HasSubstr("invalid UTF-8"));  // > U+10FFFF
  EXPECT_THAT(ParseError("\"\xFF\""), HasSubstr("invalid UTF-8"));
}

TEST(JsonParseTest, ErrorsGiveLineAndColumn) {
  EXPECT_EQ(ParseError("{\n  \"a\": 1,\n  \"b\" 2\n}"),
            "line 3, column 7: expected ':' after an object key");
  EXPECT_EQ(ParseError("[1, 2,]"), "line 1, column 7: unexpected ']', expected a value");
  EXPECT_EQ(ParseError("[1 2]"),
            "line 1, column 4: unexpected '2' in an array, expected ',' or ']'");
  EXPECT_EQ(ParseError("{} x"), "line 1, column 4: unexpected text after the JSON value");
  EXPECT_EQ(ParseError(""), "line 1, column 1: unexpected end of input, expected a value");
  EXPECT_EQ(ParseError("\n\n  tru"), "line 3, column 3: invalid literal, expected 'true'");
  EXPECT_EQ(ParseError("{\"k\":1,\"k\":2}"), "line 1, column 8: duplicate object key \"k\"");
  EXPECT_THAT(ParseError("{1:2}"), HasSubstr("expected a string key"));
  EXPECT_THAT(ParseError("{\"a\":1"), HasSubstr("expected ',' or '}'"));
  EXPECT_THAT(ParseError("[1"), HasSubstr("expected ',' or ']'"));
  EXPECT_THAT(ParseError("01"), HasSubstr("leading zeros"));
  EXPECT_THAT(ParseError("1."), HasSubstr("digit after '.'"));
  EXPECT_THAT(ParseError("-"), HasSubstr("expected a digit"));
  EXPECT_THAT(ParseError("1e+"), HasSubstr("digit in the exponent"));
  EXPECT_THAT(ParseError("+1"), HasSubstr("unexpected '+'"));
  EXPECT_THAT(ParseError("\x01"), HasSubstr("unexpected byte 0x01"));
  EXPECT_THAT(ParseError("NaN"), HasSubstr("expected a value"));
}

TEST(JsonParseTest, NestingDepthIsLimited) {
  const std::string ok = std::string(kMaxParseDepth, '[') + std::string(kMaxParseDepth, ']');
  EXPECT_TRUE(Parse(ok).ok());
  const std::string deep =
      std::string(kMaxParseDepth + 1, '[') + std::string(kMaxParseDepth + 1, ']');
  EXPECT_THAT(ParseError(deep), HasSubstr("nesting deeper than 512 levels"));
  EXPECT_THAT(ParseError(std::string(100000, '[')), HasSubstr("nesting deeper"));
}

TEST(JsonSerializeTest, CompactAndPrettyForms) {
  Value v = Value::MakeObject();
  v.Set("a", Value::Array{1, 2});
  v.Set("b", Value::MakeObject()).Set("c", nullptr);
  v.Set("e", Value::MakeArray());
  EXPECT_EQ(Serialize(v), R"({"a":[1,2],"b":{"c":null},"e":[]})");
  EXPECT_EQ(Serialize(v, /*pretty=*/true),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {\n    \"c\": null\n  },\n"
            "  \"e\": []\n}");
  EXPECT_EQ(MustParse(Serialize(v, true)), v);
}

TEST(JsonSerializeTest, EscapesAndReplacesInvalidUtf8) {
  EXPECT_EQ(Serialize(Value(std::string("q\"\\\n\t\x01\x1f\x7f/\xC3\xA9", 11))),
            "\"q\\\"\\\\\\n\\t\\u0001\\u001f\x7f/\xC3\xA9\"");
  EXPECT_EQ(Serialize(Value("a\xFF"
                            "b")),
            "\"a\xEF\xBF\xBD"
            "b\"");
  EXPECT_EQ(Serialize(Value(std::string("\0", 1))), "\"\\u0000\"");
}

TEST(JsonUtf8Test, ValidatesUtf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xC3"));
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\x80"));  // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xB0\x80"));  // surrogate
  EXPECT_FALSE(IsValidUtf8("a\x80"));
}

TEST(JsonSerializeTest, DoublesRoundTripExactly) {
  EXPECT_EQ(Serialize(Value(0.1)), "0.1");
  EXPECT_EQ(Serialize(Value(1.0)), "1.0");
  EXPECT_EQ(Serialize(Value(-0.0)), "-0.0");
  EXPECT_EQ(Serialize(Value(1e300)), "1e+300");
  EXPECT_EQ(Serialize(Value(std::nan(""))), "null");
  EXPECT_EQ(Serialize(Value(-std::numeric_limits<double>::infinity())), "null");
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    if (!std::isfinite(d)) continue;
    const Value back = MustParse(Serialize(Value(d)));
    ASSERT_TRUE(back.is_double()) << Serialize(Value(d));
    ASSERT_EQ(back.as_double(), d) << Serialize(Value(d));
  }
  for (double d : {std::numeric_limits<double>::max(), std::numeric_limits<double>::min(),
                   std::numeric_limits<double>::denorm_min(), 123456789012345678.0}) {
    EXPECT_EQ(MustParse(Serialize(Value(d))).as_double(), d);
  }
}

TEST(JsonRoundTripTest, ValueSurvivesSerializeAndParse) {
  Value v = Value::MakeObject();
  v.Set("iteration", int64_t{1} << 40);
  v.Set("lr", 6.0e-5);
  v.Set("name", "\xE2\x82\xAC \xF0\x9F\x98\x80 \"quoted\" \\ / \b\f\n\r\t \x01");
  v.Set("flags", Value::Array{true, false, nullptr, -1, 0.5});
  Value& nested = v.Set("nested", Value::MakeObject());
  nested.Set("empty_object", Value::MakeObject());
  nested.Set("empty_string", "");
  for (bool pretty : {false, true}) {
    EXPECT_EQ(MustParse(Serialize(v, pretty)), v) << Serialize(v, pretty);
  }
}

// Random mutations of valid JSON never crash the parser; every result either fails with a
// located error or re-serializes to text that parses to the same value.
TEST(JsonFuzzTest, MutatedDocumentsNeverCrash) {
  const std::string seeds[] = {
      R"({"a":[1,2.5,-3e-2,true,false,null],"s":"x\u00e9\ud83d\ude00\n","o":{"k":{}}})",
      R"([{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"\"\\",[[[]]]])",
      "{\"text\": \"\xC3\xA9\xE2\x82\xAC\", \"n\": 9223372036854775807}",
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
      ASSERT_THAT(std::string(value.status().message()), HasSubstr("line ")) << text;
    }
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace varuna::json
