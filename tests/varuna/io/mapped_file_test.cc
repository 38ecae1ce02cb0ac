#include "varuna/io/mapped_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varuna {
namespace {

using ::testing::HasSubstr;

std::string WriteTempFile(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

TEST(MappedFileTest, MapsTheFileBytesExactly) {
  std::string bytes;
  for (int i = 0; i < 10000; ++i) bytes.push_back(static_cast<char>(i * 7 + i / 256));
  bytes[17] = '\0';
  const std::string path = WriteTempFile("bytes.bin", bytes);
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_NE(file->data(), nullptr);
  EXPECT_EQ(file->size(), bytes.size());
  EXPECT_EQ(std::string(file->data(), file->size()), bytes);
  EXPECT_EQ(file->view(), bytes);
}

TEST(MappedFileTest, EmptyFileIsAnEmptyView) {
  const std::string path = WriteTempFile("empty.bin", "");
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->data(), nullptr);
  EXPECT_EQ(file->size(), 0u);
  EXPECT_TRUE(file->view().empty());
}

TEST(MappedFileTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = ::testing::TempDir() + "/no_such_file.bin";
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr(path));
  EXPECT_THAT(file.status().message(), HasSubstr("No such file or directory"));
}

TEST(MappedFileTest, UnreadableFileIsPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  const std::string path = WriteTempFile("unreadable.bin", "secret");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(file.status().message(), HasSubstr(path));
}

TEST(MappedFileTest, DirectoryIsAnErrorNamingThePath) {
  const std::string path = ::testing::TempDir() + "/a_directory";
  ::mkdir(path.c_str(), 0755);
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(file.status().message(), HasSubstr(path + ": Is a directory"));
}

TEST(MappedFileTest, MoveHandsOverTheMappingAndEmptiesTheSource) {
  const std::string path = WriteTempFile("move.bin", "moved bytes");
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const char* data = file->data();

  MappedFile constructed(*std::move(file));
  EXPECT_EQ(file->data(), nullptr);
  EXPECT_EQ(file->size(), 0u);
  EXPECT_EQ(constructed.data(), data);
  EXPECT_EQ(constructed.view(), "moved bytes");

  MappedFile assigned;
  assigned = std::move(constructed);
  EXPECT_EQ(constructed.data(), nullptr);
  EXPECT_EQ(constructed.size(), 0u);
  EXPECT_EQ(assigned.data(), data);
  EXPECT_EQ(assigned.view(), "moved bytes");

  // Assigning over a mapping unmaps it and takes the other's.
  absl::StatusOr<MappedFile> other = MappedFile::Open(WriteTempFile("other.bin", "other"));
  ASSERT_TRUE(other.ok()) << other.status();
  assigned = *std::move(other);
  EXPECT_EQ(assigned.view(), "other");

  MappedFile empty;
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
}

}  // namespace
}  // namespace varuna
