// The repository's layers hold: every source and BUILD file of every package in layers.txt
// uses only the packages its line allows. The checker itself is tested on planted violations.
#include "tests/layering/layering.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kRules[] = R"(
# a comment
varuna/io:
varuna/comm:
varuna/pipeline: varuna/comm   # trailing comment
varuna: varuna/pipeline varuna/io
)";

LayerRules Rules() {
  absl::StatusOr<LayerRules> rules = ParseLayerRules(kRules);
  EXPECT_TRUE(rules.ok()) << rules.status();
  return *rules;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::filesystem::path Runfiles() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::filesystem::path(srcdir ? srcdir : ".") / (workspace ? workspace : "varuna");
}

TEST(LayerRulesTest, ParsesPackagesAndTheirUses) {
  const LayerRules rules = Rules();
  EXPECT_THAT(rules.allowed.at("varuna"), ElementsAre("varuna/io", "varuna/pipeline"));
  EXPECT_THAT(rules.allowed.at("varuna/io"), IsEmpty());
  EXPECT_EQ(rules.PackageOf("varuna/pipeline/stage_map.h"), "varuna/pipeline");
  EXPECT_EQ(rules.PackageOf("varuna/varuna.h"), "varuna");
  EXPECT_EQ(rules.PackageOf("varuna/newpkg/x.h"), "varuna");
  EXPECT_EQ(rules.PackageOf("absl/strings/str_cat.h"), "");
}

TEST(LayerRulesTest, RejectsMalformedTables) {
  EXPECT_THAT(ParseLayerRules("varuna varuna/io\n").status().message(),
              HasSubstr("line 1: \"varuna varuna/io\" is not \"<package>: <packages>\""));
  EXPECT_THAT(ParseLayerRules("a:\nb: a\na: b\n").status().message(),
              HasSubstr("line 3: a has a line already"));
  EXPECT_THAT(ParseLayerRules("a: b\n").status().message(),
              HasSubstr("line 1: b is used but has no line of its own"));
}

TEST(CheckFileTest, AllowedIncludesAndLabelsPass) {
  const LayerRules rules = Rules();
  EXPECT_THAT(CheckFile(rules, "varuna/pipeline/stage_executor.cc",
                        "#include \"varuna/pipeline/p2p.h\"\n#include \"varuna/comm/world.h\"\n"
                        "#include \"absl/status/status.h\"\n#include <vector>\n"),
              IsEmpty());
  EXPECT_THAT(
      CheckFile(rules, "varuna/BUILD",
                "deps = [\"//varuna/pipeline:stage_map\", \"//varuna/io\", "
                "\"//:cuda_enabled\", \"//patches:cuda.bzl\", \"@libtorch//:torch_cpu\"]\n"
                "visibility = [\"//visibility:public\", \"//tests/layering:__pkg__\"]\n"
                "\"//conditions:default\": [],\n    actual = \"//trainer:pretrain_gpt2\",\n"),
      IsEmpty());
}

// The planted wrong dependencies: the floor including a layer above it, a BUILD file depending
// on one, and uses of packages the table does not know.
TEST(CheckFileTest, FlagsAnIncludeAgainstTheLayers) {
  const std::vector<std::string> violations =
      CheckFile(Rules(), "varuna/io/json.cc", "// x\n#include \"varuna/pipeline/stage_map.h\"\n");
  ASSERT_THAT(violations, SizeIs(1));
  EXPECT_EQ(violations[0],
            "varuna/io/json.cc:2: varuna/io uses varuna/pipeline (#include "
            "\"varuna/pipeline/stage_map.h\"), which layers.txt does not allow; varuna/io may "
            "use nothing");
}

TEST(CheckFileTest, FlagsABuildDependencyAgainstTheLayers) {
  const std::vector<std::string> violations =
      CheckFile(Rules(), "varuna/comm/BUILD", "    deps = [\n        \"//varuna:varuna\",\n");
  ASSERT_THAT(violations, SizeIs(1));
  EXPECT_THAT(violations[0], HasSubstr("varuna/comm/BUILD:2: varuna/comm uses varuna "
                                       "(\"//varuna:varuna\"), which layers.txt does not allow"));
}

TEST(CheckFileTest, FlagsUnknownPackages) {
  const LayerRules rules = Rules();
  EXPECT_THAT(CheckFile(rules, "varuna/BUILD", "\"//trainer:flags\""),
              ElementsAre(HasSubstr("varuna uses trainer (\"//trainer:flags\"), which is no "
                                    "package of layers.txt")));
  EXPECT_THAT(CheckFile(rules, "varuna/varuna.cc", "#include \"tests/util/subprocess.h\""),
              ElementsAre(HasSubstr("uses tests/util/subprocess.h")));
  EXPECT_THAT(CheckFile(rules, "models/gpt2/model.cc", ""),
              ElementsAre("models/gpt2/model.cc: its package is not in layers.txt; add a line "
                          "for it"));
  EXPECT_THAT(CheckFile(rules, "varuna/kernels/BUILD", ""),
              ElementsAre(HasSubstr("its package is not in layers.txt")));
}

// A tree with a package missing from the table, a line without a package, and a bad include.
TEST(CheckTreeTest, FlagsPackagesMissingFromTheTableAndTheirFiles) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(std::getenv("TEST_TMPDIR")) / "tree";
  fs::remove_all(root);
  auto write = [&root](const std::string& path, const std::string& text) {
    fs::create_directories((root / path).parent_path());
    std::ofstream(root / path) << text;
  };
  write("BUILD", "");
  write("varuna/io/BUILD", "");
  write("varuna/io/json.cc", "#include \"varuna/comm/world.h\"\n");
  write("varuna/comm/BUILD", "");
  write("tools/new_tool/BUILD", "");  // no line in the table
  write("tests/varuna/BUILD", "");    // tests are exempt
  write("patches/BUILD", "");
  write(".git/x/BUILD", "");
  EXPECT_THAT(FindPackages(root), ElementsAre("tools/new_tool", "varuna/comm", "varuna/io"));
  int checked = 0;
  const std::vector<std::string> violations = CheckTree(Rules(), root, &checked);
  EXPECT_THAT(violations,
              ElementsAre(HasSubstr("tools/new_tool/BUILD: tools/new_tool is a package but has "
                                    "no line in tests/layering/layers.txt"),
                          HasSubstr("varuna has a line but no BUILD file"),
                          HasSubstr("varuna/io/json.cc:1: varuna/io uses varuna/comm"),
                          HasSubstr("varuna/pipeline has a line but no BUILD file")));
  EXPECT_EQ(checked, 3);  // varuna/comm/BUILD, varuna/io/BUILD and json.cc
}

// The real thing: every package of the source tree, found by walking it. The test reaches the
// tree through its runfiles (layers.txt is a link to the tree's copy), and is tagged
// "external" so that it runs every time: a new package changes no declared input.
TEST(RepositoryLayersTest, EveryPackageUsesOnlyWhatLayersTxtAllows) {
  const std::filesystem::path layers =
      std::filesystem::canonical(Runfiles() / "tests/layering/layers.txt");
  const std::filesystem::path root = layers.parent_path().parent_path().parent_path();
  ASSERT_TRUE(std::filesystem::exists(root / "WORKSPACE")) << root << " is not the workspace";
  absl::StatusOr<LayerRules> rules = ParseLayerRules(ReadFile(layers));
  ASSERT_TRUE(rules.ok()) << rules.status();
  int checked = 0;
  EXPECT_THAT(CheckTree(*rules, root, &checked), IsEmpty());
  EXPECT_GT(checked, 150);
}

}  // namespace
}  // namespace varuna::testing
