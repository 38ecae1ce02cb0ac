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

// The real thing: every file of every package in layers.txt (the data of this test).
TEST(RepositoryLayersTest, EveryPackageUsesOnlyWhatLayersTxtAllows) {
  const std::filesystem::path root = Runfiles();
  absl::StatusOr<LayerRules> rules = ParseLayerRules(ReadFile(root / "tests/layering/layers.txt"));
  ASSERT_TRUE(rules.ok()) << rules.status();
  int checked = 0;
  std::set<std::string> packages_seen;
  std::vector<std::string> violations;
  for (const auto& [package, unused] : rules->allowed) {
    const std::filesystem::path dir = root / package;
    ASSERT_TRUE(std::filesystem::is_directory(dir))
        << package << " is in layers.txt but its files are not in this test's data";
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      const std::string name = entry.path().filename().string();
      const std::string ext = entry.path().extension().string();
      if (name != "BUILD" && ext != ".h" && ext != ".cc" && ext != ".cu" && ext != ".cuh") {
        continue;
      }
      const std::string path = package + "/" + name;
      for (std::string& v : CheckFile(*rules, path, ReadFile(entry.path()))) {
        violations.push_back(std::move(v));
      }
      ++checked;
      if (name == "BUILD") packages_seen.insert(package);
    }
  }
  EXPECT_THAT(violations, IsEmpty());
  // Each listed package's BUILD file was read (its filegroup is in the data), so no package
  // escapes the check by being left out of the data.
  for (const auto& [package, unused] : rules->allowed) {
    EXPECT_EQ(packages_seen.count(package), 1u) << package << "/BUILD was not checked";
  }
  EXPECT_GT(checked, 150);
}

}  // namespace
}  // namespace varuna::testing
