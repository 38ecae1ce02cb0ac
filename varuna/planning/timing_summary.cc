#include "varuna/planning/timing_summary.h"

#include <algorithm>

namespace varuna {

TimingSummary Summarize(std::vector<double> samples_ms) {
  TimingSummary summary;
  if (samples_ms.empty()) return summary;
  std::sort(samples_ms.begin(), samples_ms.end());
  const size_t n = samples_ms.size();
  summary.count = static_cast<int>(n);
  summary.min_ms = samples_ms.front();
  summary.max_ms = samples_ms.back();
  summary.median_ms =
      n % 2 == 1 ? samples_ms[n / 2] : (samples_ms[n / 2 - 1] + samples_ms[n / 2]) / 2;
  return summary;
}

}  // namespace varuna
