#include "tests/trainer/trainer_job.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "data/indexed_dataset.h"

namespace trainer::testing {
namespace {

// `path` in the test's Bazel runfiles; where there are none (the GPU bundle copies test
// binaries into gpu_bundle/bin/ next to pretrain_gpt2 and launch), the file of that name next
// to the running test binary.
std::string Runfile(const std::string& path) {
  if (const char* srcdir = std::getenv("TEST_SRCDIR"); srcdir != nullptr && *srcdir != '\0') {
    const std::string runfile = std::string(srcdir) + "/varuna/" + path;
    if (std::filesystem::exists(runfile)) return runfile;
  }
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return (self.parent_path() / std::filesystem::path(path).filename()).string();
}

}  // namespace

std::string MakeDataset(const std::string& dir, int seed) {
  const std::string prefix = dir + "/synthetic_text_document";
  auto builder = data::IndexedDatasetBuilder::Create(prefix, data::TokenDtype::kUInt16);
  EXPECT_TRUE(builder.ok()) << builder.status();
  for (int d = 0; d < 200; ++d) {
    std::vector<int32_t> tokens;
    const int step = 1 + (d + seed) % 3;
    const int length = 20 + (d + 5 * seed) % 17;
    for (int i = 0; i < length; ++i) {
      tokens.push_back((d * (1 + seed) + i * step + 7 * seed) % (kVocab - 1) + 1);
    }
    tokens.push_back(0);  // EOD
    EXPECT_TRUE((*builder)->AddDocument(tokens).ok());
  }
  EXPECT_TRUE((*builder)->Finish().ok());
  return prefix;
}

std::vector<std::string> Plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> LauncherLayout(int stages, int replicas) {
  return {absl::StrCat("--nstages=", stages),
          absl::StrCat("--gpus_per_node=", stages * replicas),
          "--batch_size=8",
          "--chunk_size=2",
          "--master_port=0",
          "--grace_seconds=5"};
}

std::map<int64_t, std::string> Losses(const Result& r) {
  std::map<int64_t, std::string> out;
  for (const auto& line : r.metrics) {
    if (const auto* loss = varuna::json::Find(line, "lm_loss")) {
      out[varuna::json::Find(line, "iteration")->get<int64_t>()] = varuna::json::Serialize(*loss);
    }
  }
  return out;
}

std::map<int64_t, int64_t> ConsumedSamples(const Result& r) {
  std::map<int64_t, int64_t> out;
  for (const auto& line : r.metrics) {
    if (const auto* consumed = varuna::json::Find(line, "consumed_samples")) {
      out[varuna::json::Find(line, "iteration")->get<int64_t>()] = consumed->get<int64_t>();
    }
  }
  return out;
}

void TrainerTest::SetUp() {
  dir_ =
      ::testing::TempDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  data_ = MakeDataset(dir_);
}

std::vector<std::string> TrainerTest::CpuModel() const {
  return Plus(TinyModel(), {"--device=cpu"});
}

std::vector<std::string> TrainerTest::TinyModel() const {
  return {"--num-layers=2",
          "--hidden-size=32",
          "--num-attention-heads=2",
          "--seq-length=16",
          "--max-position-embeddings=16",
          "--batch-size=4",
          "--lr=3e-3",
          "--data-path=" + data_,
          "--vocab-size=50",
          "--log-interval=1",
          "--eval-interval=0",
          "--seed=7",
          "--split=90,10,0"};
}

Job TrainerTest::Start(std::vector<std::string> flags, const std::string& name,
                       std::vector<std::string> launcher,
                       const std::map<std::string, std::string>& env) const {
  Job job;
  job.metrics = dir_ + "/" + name + ".jsonl";
  flags.insert(flags.begin(), Runfile("trainer/pretrain_gpt2"));
  if (!launcher.empty()) {
    launcher.insert(launcher.begin(), Runfile("varuna/launch/launch"));
    launcher.push_back("--");
    flags.insert(flags.begin(), launcher.begin(), launcher.end());
  }
  flags.push_back("--metrics-file=" + job.metrics);
  std::map<std::string, std::string> full_env = env;
  full_env["OMP_NUM_THREADS"] = "1";
  job.process = varuna::testing::Spawn(flags, dir_ + "/" + name + ".log", full_env);
  return job;
}

Result TrainerTest::Finish(const Job& job) {
  Result result;
  result.exit = varuna::testing::WaitAll({job.process}, std::chrono::seconds(180))[0];
  std::ifstream in(job.metrics);
  for (std::string line; std::getline(in, line);) {
    auto value = varuna::json::Parse(line);
    EXPECT_TRUE(value.ok()) << line;
    if (value.ok()) result.metrics.push_back(*value);
  }
  return result;
}

}  // namespace trainer::testing
