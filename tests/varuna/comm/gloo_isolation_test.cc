// Proves that the Gloo backend's gloo (Debian's libgloo.so) and the gloo inside
// libtorch_cpu.so never bind to each other's symbols (gloo_backend.h explains the clash).
// A worker joins a one-rank world and all-reduces under LD_DEBUG=bindings; the dynamic
// linker's log of every symbol binding is then checked.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "tests/util/subprocess.h"
#include "varuna/comm/world.h"
#include "varuna/launch/host.h"

namespace {

int RunWorker(const std::map<std::string, std::string>& args) {
  varuna::comm::WorldOptions options;
  options.master_port = std::stoi(args.at("port"));
  auto world = varuna::comm::World::Join(options);
  if (!world.ok()) return 3;
  at::Tensor x = torch::ones({8});
  return (*world)->group().AllReduceSum(x).ok() && (*world)->group().Barrier().ok() ? 0 : 1;
}

// The library file a path names, e.g. "libgloo.so.0".
std::string Library(const std::string& path) { return path.substr(path.rfind('/') + 1); }

TEST(GlooIsolationTest, GlooSymbolsNeverCrossBetweenLibglooAndLibtorchCpu) {
  const std::string log = ::testing::TempDir() + "bindings";
  const varuna::testing::Process worker = varuna::testing::Spawn(
      {varuna::testing::SelfPath(), "--worker=allreduce",
       "--port=" + std::to_string(varuna::FreeTcpPort())},
      ::testing::TempDir() + "worker.log", {{"LD_DEBUG", "bindings"}, {"LD_DEBUG_OUTPUT", log}});
  const std::vector<varuna::testing::ExitInfo> exits =
      varuna::testing::WaitAll({worker}, std::chrono::seconds(60));
  ASSERT_TRUE(exits[0].exited && exits[0].code == 0) << varuna::testing::Describe(exits);

  // LD_DEBUG_OUTPUT appends ".<pid>" to the file name.
  std::ifstream bindings(log + "." + std::to_string(worker.pid));
  ASSERT_TRUE(bindings.good()) << "no LD_DEBUG output at " << log << "." << worker.pid;
  // "binding file <from> [0] to <to> [0]: normal symbol `<name>'"
  const std::regex line(R"(binding file (\S+) \[\d+\] to (\S+) \[\d+\]: \S+ symbol `([^']+)')");
  std::map<std::pair<std::string, std::string>, int> gloo_bindings;  // (from, to) -> count
  std::string text;
  std::smatch m;
  while (std::getline(bindings, text)) {
    if (std::regex_search(text, m, line) && m[3].str().rfind("_ZN4gloo", 0) == 0) {
      ++gloo_bindings[{Library(m[1]), Library(m[2])}];
    }
  }
  std::string summary;
  for (const auto& [pair, count] : gloo_bindings) {
    summary += pair.first + " -> " + pair.second + ": " + std::to_string(count) + "\n";
  }
  // The backend used gloo, and gloo's symbols came from libgloo.so.0 only.
  EXPECT_GT((gloo_bindings[{"libvaruna_gloo.so", "libgloo.so.0"}]), 0) << summary;
  EXPECT_GT((gloo_bindings[{"libgloo.so.0", "libgloo.so.0"}]), 0) << summary;
  for (const auto& [pair, count] : gloo_bindings) {
    const bool from_torch = pair.first == "libtorch_cpu.so";
    const bool to_torch = pair.second == "libtorch_cpu.so";
    EXPECT_EQ(from_torch, to_torch) << "gloo symbols bound across copies:\n" << summary;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) return RunWorker(*args);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
