// The TensorBoard event files: TFRecord framing against bytes written by TensorBoard's own
// Python RecordWriter, Event protos against its event_pb2, and scalars written and read back
// with both checksums checked; the queue, corruption, and write errors; and TensorBoard's
// purge of a crashed run's steps at a restart marker (MergedScalars).
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/tensorboard/event.pb.h"
#include "trainer/tensorboard/event_encoding.h"
#include "trainer/tensorboard/event_file_reader.h"
#include "trainer/tensorboard/event_file_writer.h"
#include "trainer/tensorboard/tf_record.h"

namespace trainer::tensorboard {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  return dir.string();
}

TEST(TfRecordTest, FramesAsTensorBoardsRecordWriter) {
  // tensorboard.summary.writer.record_writer.RecordWriter(f).write(b"hello"), in hex.
  EXPECT_EQ(absl::BytesToHexString(FrameRecord("hello")),
            "0500000000000000eab2043e68656c6c6fbb1f1c19");
  // The mask of CRC-32C("123456789") = 0xE3069283.
  EXPECT_EQ(MaskedCrc32c("123456789", 9), 0xc78ab0e5u);
}

TEST(TfRecordTest, EventProtoMatchesTensorBoards) {
  // event_pb2.Event(wall_time=1.5, step=7, summary=Summary(value=[Value(tag="lm loss",
  // simple_value=2.5)])).SerializeToString(), in hex.
  ::tensorboard::Event event;
  event.set_wall_time(1.5);
  event.set_step(7);
  ::tensorboard::Summary::Value* value = event.mutable_summary()->add_value();
  value->set_tag("lm loss");
  value->set_simple_value(2.5f);
  std::string bytes;
  ASSERT_TRUE(event.SerializeToString(&bytes));
  EXPECT_EQ(absl::BytesToHexString(bytes),
            "09000000000000f83f10072a100a0e0a076c6d206c6f73731500002040");
}

// Our encoder against protobuf's serializer of the generated classes, over zero, negative and
// large values and the file-version event.
TEST(EventEncodingTest, EncodesAsProtobufDoes) {
  struct Case {
    double wall_time;
    int64_t step;
    std::string tag;
    float value;
  };
  for (const Case& c : std::vector<Case>{{1.5, 7, "lm loss", 2.5f},
                                         {0.0, 0, "learning-rate", 0.0f},
                                         {1764000000.123, -3, "", -1e-30f},
                                         {-2.0, int64_t{1} << 40, std::string(300, 'x'), 1e30f}}) {
    ::tensorboard::Event event;
    event.set_wall_time(c.wall_time);
    event.set_step(c.step);
    ::tensorboard::Summary::Value* value = event.mutable_summary()->add_value();
    value->set_tag(c.tag);
    value->set_simple_value(c.value);
    std::string expected;
    ASSERT_TRUE(event.SerializeToString(&expected));
    EXPECT_EQ(absl::BytesToHexString(EncodeScalarEvent(c.wall_time, c.step, c.tag, c.value)),
              absl::BytesToHexString(expected))
        << c.step;
  }
  ::tensorboard::Event first;
  first.set_wall_time(1764000000.5);
  first.set_file_version("brain.Event:2");
  first.mutable_source_metadata()->set_writer("varuna pretrain_gpt2");
  std::string expected;
  ASSERT_TRUE(first.SerializeToString(&expected));
  EXPECT_EQ(EncodeFileVersionEvent(1764000000.5, "brain.Event:2", "varuna pretrain_gpt2"),
            expected);
}

TEST(EventEncodingTest, EncodesSessionStartAsProtobufDoes) {
  for (int64_t step : {int64_t{0}, int64_t{11}, int64_t{1} << 40}) {
    ::tensorboard::Event event;
    event.set_wall_time(1764000000.25);
    event.set_step(step);
    event.mutable_session_log()->set_status(::tensorboard::SessionLog::START);
    std::string expected;
    ASSERT_TRUE(event.SerializeToString(&expected));
    EXPECT_EQ(absl::BytesToHexString(EncodeSessionStartEvent(1764000000.25, step)),
              absl::BytesToHexString(expected))
        << step;
  }
  // event_pb2.Event(step=11, session_log=SessionLog(status=SessionLog.START)), in hex:
  // step (field 2, varint 11), session_log (field 6, 2 bytes: status (field 1) = 1).
  EXPECT_EQ(absl::BytesToHexString(EncodeSessionStartEvent(0.0, 11)), "100b32020801");
}

TEST(EventFileTest, WritesScalarsThatReadBack) {
  const std::string dir = FreshDir("scalars") + "/nested/run";  // parents are created
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer =
      EventFileWriter::Open({dir, /*queue_size=*/1000, "test writer"});
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string name = fs::path((*writer)->path()).filename().string();
  EXPECT_THAT(name, ::testing::StartsWith("events.out.tfevents."));
  EXPECT_THAT(name, ::testing::EndsWith(absl::StrCat(".", getpid(), ".0")));
  ASSERT_TRUE((*writer)->AddScalar("lm loss", 1, 5.25).ok());
  ASSERT_TRUE((*writer)->AddScalar("learning-rate", 1, 1.5e-4).ok());
  ASSERT_TRUE((*writer)->AddScalar("lm loss", 2, 4.75).ok());
  ASSERT_TRUE((*writer)->Close().ok());

  absl::StatusOr<std::vector<std::string>> files = ListEventFiles(dir);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 1u);
  absl::StatusOr<EventFile> file = ReadEventFile(files->front());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->file_version, "brain.Event:2");
  EXPECT_EQ(file->writer, "test writer");
  ASSERT_EQ(file->scalars.size(), 3u);
  EXPECT_EQ(file->scalars[0].tag, "lm loss");
  EXPECT_EQ(file->scalars[0].step, 1);
  EXPECT_EQ(file->scalars[0].value, 5.25f);
  EXPECT_EQ(file->scalars[1].tag, "learning-rate");
  EXPECT_EQ(file->scalars[1].value, 1.5e-4f);
  EXPECT_EQ(file->scalars[2].step, 2);
  EXPECT_EQ(file->scalars[2].value, 4.75f);
  EXPECT_GT(file->scalars[0].wall_time, 1.7e9);  // seconds since 1970, after 2023
}

// One run's event file in `dir`: a START at `start` (none when negative), then "lm loss" at
// `first`..`last` with value step + `offset`, and its "vs samples" twin at 4 x step.
void WriteRun(const std::string& dir, int64_t start, int64_t first, int64_t last, float offset) {
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer = EventFileWriter::Open({dir});
  ASSERT_TRUE(writer.ok()) << writer.status();
  if (start >= 0) ASSERT_TRUE((*writer)->AddSessionStart(start).ok());
  for (int64_t step = first; step <= last; ++step) {
    ASSERT_TRUE((*writer)->AddScalar("lm loss", step, step + offset).ok());
    ASSERT_TRUE((*writer)->AddScalar("lm loss vs samples", 4 * step, step + offset).ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
}

// tag -> [(step, value)] of the scalars TensorBoard shows, in its order.
std::map<std::string, std::vector<std::pair<int64_t, float>>> Shown(const std::string& dir) {
  absl::StatusOr<std::vector<Scalar>> merged = MergedScalars(dir);
  EXPECT_TRUE(merged.ok()) << merged.status();
  std::map<std::string, std::vector<std::pair<int64_t, float>>> shown;
  if (!merged.ok()) return shown;
  for (const Scalar& s : *merged) shown[s.tag].emplace_back(s.step, s.value);
  return shown;
}

TEST(MergedScalarsTest, RestartHidesTheCrashedRunsStepsFromItsStartOn) {
  // A run killed at 16 after its checkpoint at 10, then resumed from 10 to 20 (its START at
  // 11, the first step it writes): TensorBoard keeps 1..10 of the first and 11..20 of the
  // second, each step once and in order.
  const std::string dir = FreshDir("merged");
  WriteRun(dir, /*start=*/0, 1, 16, /*offset=*/0);
  WriteRun(dir, /*start=*/11, 11, 20, /*offset=*/0.5f);
  std::vector<std::pair<int64_t, float>> expected;
  for (int64_t step = 1; step <= 20; ++step) {
    expected.emplace_back(step, step + (step > 10 ? 0.5f : 0.0f));
  }
  const auto shown = Shown(dir);
  EXPECT_EQ(shown.at("lm loss"), expected);
  // The purge is by step over every tag: the twins' steps are samples, so the first run's
  // from sample 11 on go too (TensorBoard's rule, whatever the axis).
  std::vector<int64_t> samples;
  for (const auto& [step, value] : shown.at("lm loss vs samples")) samples.push_back(step);
  EXPECT_THAT(samples, ElementsAre(4, 8, 44, 48, 52, 56, 60, 64, 68, 72, 76, 80));
}

TEST(MergedScalarsTest, FirstStartOfADirectoryIsNoRestart) {
  // A first file without a START (an older writer): the resumed run's START is the run's
  // first, so TensorBoard purges nothing and shows 11..16 twice.
  const std::string dir = FreshDir("unmarked");
  WriteRun(dir, /*start=*/-1, 1, 16, /*offset=*/0);
  WriteRun(dir, /*start=*/11, 11, 20, /*offset=*/0.5f);
  EXPECT_EQ(Shown(dir).at("lm loss").size(), 16u + 10u);
  // A third run resumed from 12: its START purges steps >= 13 of both earlier files.
  WriteRun(dir, /*start=*/13, 13, 14, /*offset=*/0.25f);
  const auto shown = Shown(dir);
  std::vector<int64_t> steps;
  for (const auto& [step, value] : shown.at("lm loss")) steps.push_back(step);
  EXPECT_THAT(steps, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 11, 12, 13, 14));
}

TEST(EventFileTest, QueueIsWrittenWhenFullAndOnFlush) {
  const std::string dir = FreshDir("queue");
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer =
      EventFileWriter::Open({dir, /*queue_size=*/3});
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string path = (*writer)->path();
  auto scalars_on_disk = [&] {
    absl::StatusOr<EventFile> file = ReadEventFile(path);
    EXPECT_TRUE(file.ok()) << file.status();
    return file.ok() ? file->scalars.size() : 0;
  };
  EXPECT_EQ(scalars_on_disk(), 0u);  // the file-version event is written at once
  ASSERT_TRUE((*writer)->AddScalar("a", 1, 1).ok());
  ASSERT_TRUE((*writer)->AddScalar("a", 2, 2).ok());
  EXPECT_EQ(scalars_on_disk(), 0u);
  ASSERT_TRUE((*writer)->AddScalar("a", 3, 3).ok());
  EXPECT_EQ(scalars_on_disk(), 3u);
  ASSERT_TRUE((*writer)->AddScalar("a", 4, 4).ok());
  EXPECT_EQ(scalars_on_disk(), 3u);
  ASSERT_TRUE((*writer)->Flush().ok());
  EXPECT_EQ(scalars_on_disk(), 4u);
}

TEST(EventFileTest, WritersInOneSecondGetTheirOwnFiles) {
  const std::string dir = FreshDir("two");
  auto first = EventFileWriter::Open({dir});
  auto second = EventFileWriter::Open({dir});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE((*first)->path(), (*second)->path());
  absl::StatusOr<std::vector<std::string>> files = ListEventFiles(dir);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 2u);
}

TEST(EventFileTest, CorruptionAndTruncationAreDetected) {
  const std::string dir = FreshDir("corrupt");
  std::string path;
  {
    auto writer = EventFileWriter::Open({dir});
    ASSERT_TRUE(writer.ok());
    path = (*writer)->path();
    ASSERT_TRUE((*writer)->AddScalar("lm loss", 1, 3.0).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  const uintmax_t size = fs::file_size(path);
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(size) - 6);  // inside the last record's data
    file.put('\x7f');
  }
  absl::StatusOr<EventFile> flipped = ReadEventFile(path);
  ASSERT_FALSE(flipped.ok());
  EXPECT_EQ(flipped.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(flipped.status().message(), HasSubstr("bad data checksum"));
  fs::resize_file(path, size - 2);
  absl::StatusOr<EventFile> cut = ReadEventFile(path);
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(cut.status().message(), HasSubstr("is cut short"));
}

TEST(EventFileTest, RefusesADirectoryItCannotCreate) {
  const std::string dir = FreshDir("blocked");
  fs::create_directories(dir);
  std::ofstream(dir + "/file") << "x";
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer =
      EventFileWriter::Open({dir + "/file/tb"});
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(writer.status().message(), HasSubstr("cannot create the directory " + dir));
}

TEST(EventFileTest, WriteErrorsAreReturnedAndSticky) {
  const std::string dir = FreshDir("full");
  auto writer = EventFileWriter::Open({dir, /*queue_size=*/1});
  ASSERT_TRUE(writer.ok());
  // Files may not grow past 4 KiB: the write that would fails with EFBIG (and SIGXFSZ,
  // ignored here).
  signal(SIGXFSZ, SIG_IGN);
  rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit limit = old_limit;
  limit.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  absl::Status status;
  for (int step = 0; step < 1000 && status.ok(); ++step) {
    status = (*writer)->AddScalar("lm loss", step, 1.0);
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("writing the TensorBoard events"));
  EXPECT_THAT(status.message(), HasSubstr((*writer)->path()));
  EXPECT_FALSE((*writer)->AddScalar("lm loss", 2000, 1.0).ok());  // nothing after an error
  EXPECT_FALSE((*writer)->Close().ok());
}

}  // namespace
}  // namespace trainer::tensorboard
