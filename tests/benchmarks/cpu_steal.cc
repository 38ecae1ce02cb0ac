#include "tests/benchmarks/cpu_steal.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace varuna::benchmarks {

absl::StatusOr<CpuTicks> ParseCpuTicks(const std::string& proc_stat, const std::string& source) {
  std::istringstream lines(proc_stat);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    if (name != "cpu") continue;
    // user nice system idle iowait irq softirq steal [guest guest_nice, already in user/nice]
    std::vector<int64_t> ticks;
    for (int64_t value = 0; ticks.size() < 8 && fields >> value;) ticks.push_back(value);
    if (ticks.size() < 8) {
      return absl::FailedPreconditionError(
          absl::StrCat(source, ": the \"cpu\" line has ", ticks.size(),
                       " counters where 8 (user .. steal) are needed: \"", line, "\""));
    }
    CpuTicks result;
    result.busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6];
    result.idle = ticks[3] + ticks[4];
    result.steal = ticks[7];
    return result;
  }
  return absl::FailedPreconditionError(
      absl::StrCat(source, " has no aggregate \"cpu\" line (is it a Linux /proc/stat?)"));
}

absl::StatusOr<CpuTicks> ReadCpuTicks(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseCpuTicks(text.str(), path);
}

double StealFraction(const CpuTicks& before, const CpuTicks& after) {
  const int64_t busy = after.busy - before.busy;
  const int64_t steal = after.steal - before.steal;
  if (busy + steal <= 0 || steal <= 0) return 0.0;
  return static_cast<double>(steal) / static_cast<double>(busy + steal);
}

}  // namespace varuna::benchmarks
