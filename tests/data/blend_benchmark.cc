// Benchmark (not a test): how long Megatron's blend index (data::BuildBlendIndex, helpers.cpp's
// build_blending_indices) takes to build, and the memory it holds, for --samples samples over
// --datasets datasets of random weights (a fixed seed), the default 10^8 samples over 10
// datasets. Prints the date, the machine's load average, the build time (median of --repeats
// builds), the bytes of the two arrays (10 per sample: int16 + int64, as Megatron's) and the
// process's peak RSS. Asserts nothing; docs/data.md has its figures.
//
//   bazel run -c opt //tests/data:blend_benchmark -- [--samples=100000000] [--datasets=10]
//       [--repeats=3]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <random>
#include <vector>

#include "data/blend.h"
#include "varuna/flags/flag_parser.h"

int main(int argc, char** argv) {
  int64_t samples = 100000000;
  int datasets = 10;
  int repeats = 3;
  varuna::FlagParser flags;
  flags.Add("samples", &samples, "samples of the blend", "100000000");
  flags.SetMinimum("samples", 1);
  flags.Add("datasets", &datasets, "datasets of the blend", "10");
  flags.SetMinimum("datasets", 1);
  flags.SetMaximum("datasets", 32767);
  flags.Add("repeats", &repeats, "builds timed (the median is printed)", "3");
  flags.SetMinimum("repeats", 1);
  if (std::optional<int> exit = flags.ParseMain(
          "blend_benchmark", "Usage: blend_benchmark [--samples=N] [--datasets=D] [--repeats=R]\n",
          argc, argv)) {
    return *exit;
  }
  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> uniform(0.1, 1.0);
  std::vector<double> raw;
  for (int d = 0; d < datasets; ++d) raw.push_back(uniform(rng));
  const std::vector<double> weights = data::NormalizeBlendWeights(raw);

  std::vector<double> seconds;
  int64_t checksum = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    data::BlendOrder order = data::BuildBlendIndex(weights, samples);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    checksum += order.dataset_index[samples - 1] + order.dataset_sample_index[samples - 1];
  }
  std::sort(seconds.begin(), seconds.end());
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::printf("blend index benchmark, %s, load average %.2f\n", date, load[0]);
  std::printf(
      "  %s samples over %d datasets: %.2f s (median of %d; fastest %.2f s), %.1f M "
      "samples/s\n",
      data::BlendCountText(samples).c_str(), datasets, seconds[seconds.size() / 2], repeats,
      seconds[0], samples / seconds[seconds.size() / 2] / 1e6);
  std::printf("  arrays: %.1f MiB (10 bytes per sample); peak RSS %.1f MiB (checksum %lld)\n",
              samples * 10 / 1048576.0, usage.ru_maxrss / 1024.0, static_cast<long long>(checksum));
  return 0;
}
