#include "data/npy.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

std::string MakeDir(const std::string& name) {
  const std::string dir = TempDir() + "/" + name;
  mkdir(dir.c_str(), 0755);
  return dir;
}

// The dict padded as NumPy pads it: `dict` + spaces + '\n', header length `length`.
std::string NumpyPreamble(const std::string& dict, size_t total) {
  EXPECT_GT(total, 10 + dict.size());
  std::string header = dict;
  header.append(total - 10 - dict.size() - 1, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header;
}

// Bytes printed by NumPy 2.4: np.save(f, np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int32))
// and np.save(f, np.arange(5, dtype=np.uint32)); and
// numpy.lib._format_impl._write_array_header for shapes (123456789012, 2) '<i8' and
// (7, 10**18, 10**18) '<i4'.
TEST(NpyHeaderTest, MatchesNumpyBytes) {
  EXPECT_EQ(NpyHeaderBytes(NpyDtype::kInt32, {3, 2}),
            NumpyPreamble("{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), }", 128));
  EXPECT_EQ(NpyHeaderBytes(NpyDtype::kUInt32, {5}),
            NumpyPreamble("{'descr': '<u4', 'fortran_order': False, 'shape': (5,), }", 128));
  EXPECT_EQ(
      NpyHeaderBytes(NpyDtype::kInt64, {123456789012, 2}),
      NumpyPreamble("{'descr': '<i8', 'fortran_order': False, 'shape': (123456789012, 2), }", 128));
  // Here the room NumPy (>= 1.24) leaves for the first dimension to grow pushes the header
  // from 128 to 192 bytes.
  EXPECT_EQ(NpyHeaderBytes(NpyDtype::kInt32, {7, 1000000000000000000, 1000000000000000000}),
            NumpyPreamble("{'descr': '<i4', 'fortran_order': False, 'shape': (7, "
                          "1000000000000000000, 1000000000000000000), }",
                          192));
  // Already a multiple of 64 before padding: NumPy still pads a full 64 bytes (256, not 192).
  const int64_t e18 = 1000000000000000000;
  EXPECT_EQ(NpyHeaderBytes(NpyDtype::kInt32, {7, e18, e18, e18, e18, e18}),
            NumpyPreamble("{'descr': '<i4', 'fortran_order': False, 'shape': (7, "
                          "1000000000000000000, 1000000000000000000, 1000000000000000000, "
                          "1000000000000000000, 1000000000000000000), }",
                          256));
  const std::string header = NpyHeaderBytes(NpyDtype::kInt32, {3, 2});
  EXPECT_EQ(header.substr(0, 10), std::string("\x93NUMPY\x01\x00v\x00", 10));
  EXPECT_EQ(header.size() % 64, 0u);
}

TEST(NpyTest, WriteThenLoadRoundTripsEveryDtype) {
  const std::string dir = MakeDir("roundtrip");
  {
    ASSERT_TRUE(WriteNpy(dir + "/a.npy",
                         NpyArray::FromVector(std::vector<int32_t>{1, -2, 3, 4, 5, -6}, {3, 2}))
                    .ok());
    absl::StatusOr<NpyArray> a = NpyArray::Load(dir + "/a.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->dtype(), NpyDtype::kInt32);
    EXPECT_EQ(a->shape(), (std::vector<int64_t>{3, 2}));
    ASSERT_EQ(a->size(), 6);
    EXPECT_EQ(a->Get(1), -2);
    EXPECT_EQ(a->Get(5), -6);
    // Exactly what np.save writes: the header, then the little-endian elements.
    const std::string bytes = ReadFile(dir + "/a.npy");
    ASSERT_EQ(bytes.size(), 128u + 24u);
    EXPECT_EQ(bytes.substr(0, 128), NpyHeaderBytes(NpyDtype::kInt32, {3, 2}));
    EXPECT_EQ(bytes.substr(128, 8), std::string("\x01\x00\x00\x00\xfe\xff\xff\xff", 8));
  }
  ASSERT_TRUE(
      WriteNpy(dir + "/u4.npy", NpyArray::FromVector(std::vector<uint32_t>{4000000000u}, {1}))
          .ok());
  EXPECT_EQ(NpyArray::Load(dir + "/u4.npy")->Get(0), 4000000000);
  ASSERT_TRUE(WriteNpy(dir + "/i8.npy",
                       NpyArray::FromVector(std::vector<int64_t>{int64_t{1} << 40, -1}, {2}))
                  .ok());
  EXPECT_EQ(NpyArray::Load(dir + "/i8.npy")->Get(0), int64_t{1} << 40);
  EXPECT_EQ(NpyArray::Load(dir + "/i8.npy")->Get(1), -1);
  ASSERT_TRUE(
      WriteNpy(dir + "/u8.npy", NpyArray::FromVector(std::vector<uint64_t>{7, 9}, {2})).ok());
  EXPECT_EQ(NpyArray::Load(dir + "/u8.npy")->dtype(), NpyDtype::kUInt64);
  EXPECT_EQ(NpyArray::Load(dir + "/u8.npy")->Get(1), 9);
  // Empty arrays are valid too.
  ASSERT_TRUE(
      WriteNpy(dir + "/empty.npy", NpyArray::FromVector(std::vector<int32_t>{}, {0, 2})).ok());
  EXPECT_EQ(NpyArray::Load(dir + "/empty.npy")->shape(), (std::vector<int64_t>{0, 2}));
  // No temporary file is left behind.
  for (const std::string& name : ListDir(dir)) EXPECT_THAT(name, Not(HasSubstr(".tmp")));
}

TEST(NpyTest, WriteReplacesAnExistingFile) {
  const std::string dir = MakeDir("replace");
  ASSERT_TRUE(
      WriteNpy(dir + "/x.npy", NpyArray::FromVector(std::vector<int32_t>{1, 2, 3}, {3})).ok());
  ASSERT_TRUE(WriteNpy(dir + "/x.npy", NpyArray::FromVector(std::vector<int32_t>{9}, {1})).ok());
  absl::StatusOr<NpyArray> x = NpyArray::Load(dir + "/x.npy");
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->size(), 1);
  EXPECT_EQ(x->Get(0), 9);
  EXPECT_EQ(ListDir(dir).size(), 1u);
}

// Header spellings other NumPy versions (and Python 2) write.
TEST(NpyTest, LoadsHeaderVariants) {
  const std::string dir = MakeDir("variants");
  const std::string data("\x05\x00\x00\x00\x06\x00\x00\x00", 8);
  struct Case {
    std::string name;
    std::string preamble;
  };
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
  const std::string dict2 = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  std::string header2 = dict2 + std::string(128 - 12 - dict2.size() - 1, ' ') + "\n";
  v2.push_back(static_cast<char>(header2.size()));
  v2.append(std::string("\x00\x00\x00", 3));
  v2 += header2;
  for (const Case& c : {
           Case{"old_padding",  // NumPy < 1.24: no growth space, 16-byte alignment
                NumpyPreamble("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 80)},
           Case{"python2_long",
                NumpyPreamble("{'descr': '<i4', 'fortran_order': False, 'shape': (2L,), }", 128)},
           Case{"reordered_double_quotes",
                NumpyPreamble("{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<i4\"}",
                              128)},
           Case{"fortran_1d",
                NumpyPreamble("{'descr': '<i4', 'fortran_order': True, 'shape': (2,), }", 128)},
           Case{"version2", v2},
       }) {
    const std::string path = dir + "/" + c.name + ".npy";
    WriteFile(path, c.preamble + data);
    absl::StatusOr<NpyArray> a = NpyArray::Load(path);
    ASSERT_TRUE(a.ok()) << c.name << ": " << a.status();
    EXPECT_EQ(a->shape(), (std::vector<int64_t>{2})) << c.name;
    EXPECT_EQ(a->Get(0), 5) << c.name;
    EXPECT_EQ(a->Get(1), 6) << c.name;
  }
}

TEST(NpyTest, BadFilesAreRejectedNamingFileAndProblem) {
  const std::string dir = MakeDir("bad");
  const std::string four_ints(16, '\0');
  struct Case {
    std::string name;
    std::string bytes;
    std::string problem;
  };
  for (const Case& c : {
           Case{"magic", "PK\x03\x04 not numpy at all, just some bytes", "magic"},
           Case{"empty", "", "magic"},
           Case{"version", std::string("\x93NUMPY\x04\x00\x10\x00", 10) + std::string(16, ' '),
                "version 4.0"},
           Case{"float",
                NumpyPreamble("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 128) +
                    four_ints,
                "'<f4' is not one of"},
           Case{"big_endian",
                NumpyPreamble("{'descr': '>i4', 'fortran_order': False, 'shape': (4,), }", 128) +
                    four_ints,
                "big-endian"},
           Case{"fortran_2d",
                NumpyPreamble("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 2), }", 128) +
                    four_ints,
                "Fortran order"},
           Case{"missing_key", NumpyPreamble("{'descr': '<i4', 'shape': (4,), }", 128) + four_ints,
                "lacks one of"},
           Case{"extra_key",
                NumpyPreamble("{'descr': '<i4', 'fortran_order': False, 'shape': (4,), 'x': 1}",
                              128) +
                    four_ints,
                "unexpected key 'x'"},
           Case{"syntax",
                NumpyPreamble("{'descr': '<i4', 'fortran_order': Maybe, 'shape': (4,), }", 128) +
                    four_ints,
                "cannot parse"},
           Case{"truncated",
                NumpyPreamble("{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }", 128) +
                    four_ints,
                "truncated or corrupt"},
           Case{"trailing",
                NumpyPreamble("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", 128) +
                    four_ints,
                "truncated or corrupt"},
           Case{"short_header", std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 17),
                "file is shorter"},
       }) {
    const std::string path = dir + "/" + c.name + ".npy";
    WriteFile(path, c.bytes);
    absl::StatusOr<NpyArray> a = NpyArray::Load(path);
    ASSERT_FALSE(a.ok()) << c.name;
    EXPECT_THAT(a.status().message(), HasSubstr(path)) << c.name;
    EXPECT_THAT(a.status().message(), HasSubstr(c.problem)) << c.name;
  }
  absl::StatusOr<NpyArray> missing = NpyArray::Load(dir + "/missing.npy");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.npy"));
}

TEST(NpyTest, WriteIntoMissingDirectoryFailsNamingThePath) {
  const std::string path = TempDir() + "/no/such/dir/x.npy";
  absl::Status s = WriteNpy(path, NpyArray::FromVector(std::vector<int32_t>{1}, {1}));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr("writable"));
}

}  // namespace
}  // namespace data
