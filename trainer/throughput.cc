#include "trainer/throughput.h"

#include "absl/strings/match.h"

namespace trainer {

std::optional<double> PeakTflops(const std::string& device_name) {
  struct Entry {
    const char* name;
    double tflops;
  };
  static constexpr Entry kTable[] = {
      {"H200", 989.0}, {"H100", 989.0}, {"A100", 312.0}, {"V100", 125.0}};
  for (const Entry& entry : kTable) {
    if (absl::StrContains(device_name, entry.name)) return entry.tflops;
  }
  return std::nullopt;
}

Throughput MeasureThroughput(double flops_per_iteration, double tokens_per_iteration,
                             double seconds_per_iteration, std::optional<double> peak_tflops) {
  Throughput out;
  if (seconds_per_iteration <= 0) return out;
  out.tokens_per_second = tokens_per_iteration / seconds_per_iteration;
  out.tflops = flops_per_iteration / seconds_per_iteration / 1e12;
  if (peak_tflops && *peak_tflops > 0) out.mfu = out.tflops / *peak_tflops;
  return out;
}

}  // namespace trainer
