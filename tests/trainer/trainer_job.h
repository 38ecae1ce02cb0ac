// Test helper: runs //trainer:pretrain_gpt2 (alone, or under //varuna:launch) the way a user
// does, on a small synthetic dataset, and reads back its metrics file. The two programs are
// found in the test's runfiles, or, without runfiles (the GPU bundle's bin/), next to the test
// binary.
#ifndef VARUNA_TESTS_TRAINER_TRAINER_JOB_H_
#define VARUNA_TESTS_TRAINER_TRAINER_JOB_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/subprocess.h"
#include "varuna/io/json.h"

namespace trainer::testing {

// The tokens of the synthetic dataset are in [0, kVocab); 0 is the EOD token.
inline constexpr int kVocab = 50;

// Writes <dir>/synthetic_text_document.{bin,idx}: 200 documents that repeat short arithmetic
// patterns, so a tiny model can learn them. Returns the prefix. `seed` salts the patterns and
// the document lengths, so datasets of different seeds hold different tokens (a blend of two
// can tell them apart); seed 0 is the dataset the other tests were written against.
std::string MakeDataset(const std::string& dir, int seed = 0);

struct Result {
  varuna::testing::ExitInfo exit;
  std::vector<varuna::json::Value> metrics;  // the --metrics-file lines
};

// A trainer (or launcher) process started by TrainerTest::Start.
struct Job {
  varuna::testing::Process process;
  std::string metrics;  // path of its --metrics-file
};

// `a` followed by `b`.
std::vector<std::string> Plus(std::vector<std::string> a, const std::vector<std::string>& b);

// Launcher flags for `stages` stages x `replicas` replicas on one node, global batch 8 in
// micro-batches of 2, a free port and a 5 s grace period.
std::vector<std::string> LauncherLayout(int stages, int replicas);

// The "lm_loss" of each logged iteration, as serialized (shortest round-trip text).
std::map<int64_t, std::string> Losses(const Result& r);
// The "consumed_samples" of each logged iteration.
std::map<int64_t, int64_t> ConsumedSamples(const Result& r);

// A fixture with a fresh directory (dir_) per test holding the synthetic dataset (data_).
class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override;

  // A 2-layer GPT-2 (hidden 32, 2 heads, sequence 16) on the dataset, batch 4, logging every
  // iteration, no evaluation.
  std::vector<std::string> TinyModel() const;
  // TinyModel on the CPU, whatever the machine has (for what only the CPU shows: host tables,
  // the CPU's refusals).
  std::vector<std::string> CpuModel() const;

  // Starts the trainer with `flags` (plus --metrics-file), or, with `launcher` flags, the
  // launcher starting it, with `env` added to the environment; output goes to dir_/<name>.log.
  Job Start(std::vector<std::string> flags, const std::string& name,
            std::vector<std::string> launcher = {},
            const std::map<std::string, std::string>& env = {}) const;
  // Waits for `job` (at most 180 s, then kills it) and reads its metrics.
  static Result Finish(const Job& job);
  Result Run(std::vector<std::string> flags, const std::string& name,
             std::vector<std::string> launcher = {}) const {
    return Finish(Start(std::move(flags), name, std::move(launcher)));
  }

  static std::string Describe(const Result& r) { return varuna::testing::Describe({r.exit}); }

  std::string dir_;
  std::string data_;
};

}  // namespace trainer::testing

#endif  // VARUNA_TESTS_TRAINER_TRAINER_JOB_H_
