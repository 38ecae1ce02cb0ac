#include "data/file_paths.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace data {
namespace {

TEST(FilePathsTest, BasenameIsThePartAfterTheLastSlash) {
  EXPECT_EQ(Basename("/d/x/a_text_document"), "a_text_document");
  EXPECT_EQ(Basename("a_text_document"), "a_text_document");
  EXPECT_EQ(Basename("x/"), "");
}

TEST(FilePathsTest, DirnameIsThePartBeforeTheLastSlashOrDot) {
  EXPECT_EQ(Dirname("/d/x/a_text_document"), "/d/x");
  EXPECT_EQ(Dirname("x/a"), "x");
  EXPECT_EQ(Dirname("a_text_document"), ".");
}

TEST(FilePathsTest, FileExistsForFilesAndDirectoriesOnly) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const std::string file = dir + "/file_paths_test_file";
  std::ofstream(file) << "x";
  EXPECT_TRUE(FileExists(file));
  EXPECT_TRUE(FileExists(dir));
  EXPECT_FALSE(FileExists(dir + "/file_paths_test_missing"));
}

}  // namespace
}  // namespace data
