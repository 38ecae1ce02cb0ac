#include "trainer/flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace trainer {
namespace {

using ::testing::HasSubstr;

struct Values {
  int64_t layers = 2;
  int chunk = 0;
  double lr = 0.5;
  std::string path;
  bool fp16 = false;
};

FlagParser Make(Values& v) {
  FlagParser p;
  p.Add("num-layers", &v.layers, "layers");
  p.Add("chunk_size", &v.chunk, "micro-batch");
  p.Add("lr", &v.lr, "lr");
  p.Add("data-path", &v.path, "data");
  p.Add("fp16", &v.fp16, "fp16");
  return p;
}

TEST(FlagParserTest, AcceptsBothSpellingsAndBothValueForms) {
  Values v;
  FlagParser p = Make(v);
  ASSERT_TRUE(p.Parse({"--num_layers=12", "--chunk-size", "4", "--lr", "-1e-3", "--fp16",
                       "--data-path=/x/y"})
                  .ok());
  EXPECT_EQ(v.layers, 12);
  EXPECT_EQ(v.chunk, 4);
  EXPECT_DOUBLE_EQ(v.lr, -1e-3);
  EXPECT_TRUE(v.fp16);
  EXPECT_EQ(v.path, "/x/y");
  EXPECT_TRUE(p.WasSet("num-layers"));
  EXPECT_TRUE(p.WasSet("chunk_size"));
}

TEST(FlagParserTest, DefaultsStayWhenNotGiven) {
  Values v;
  FlagParser p = Make(v);
  ASSERT_TRUE(p.Parse({}).ok());
  EXPECT_EQ(v.layers, 2);
  EXPECT_FALSE(p.WasSet("num-layers"));
  EXPECT_THAT(p.Help(), HasSubstr("--num-layers"));
  EXPECT_THAT(p.Help(), HasSubstr("(default 2)"));
}

TEST(FlagParserTest, ErrorsNameTheFlag) {
  Values v;
  EXPECT_THAT(std::string(Make(v).Parse({"--num-layer=3"}).message()),
              HasSubstr("unknown flag --num-layer (did you mean --num-layers?)"));
  EXPECT_THAT(std::string(Make(v).Parse({"--num-layers=three"}).message()),
              HasSubstr("--num-layers=three is not an integer"));
  EXPECT_THAT(std::string(Make(v).Parse({"--lr=nan"}).message()),
              HasSubstr("--lr=nan is not a number"));
  EXPECT_THAT(std::string(Make(v).Parse({"--fp16=maybe"}).message()),
              HasSubstr("--fp16=maybe is not true or false"));
  EXPECT_THAT(std::string(Make(v).Parse({"--data-path"}).message()),
              HasSubstr("--data-path needs a value"));
  EXPECT_THAT(std::string(Make(v).Parse({"stray"}).message()),
              HasSubstr("unexpected argument \"stray\""));
  EXPECT_THAT(std::string(Make(v).Parse({"--zzzzzzzz=1"}).message()),
              ::testing::Not(HasSubstr("did you mean")));
}

TEST(FlagParserTest, HelpStopsParsing) {
  Values v;
  FlagParser p = Make(v);
  ASSERT_TRUE(p.Parse({"--help", "--bogus"}).ok());
  EXPECT_TRUE(p.help_requested());
}

}  // namespace
}  // namespace trainer
