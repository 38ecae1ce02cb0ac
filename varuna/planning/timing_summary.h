// TimingSummary: what the compute profiler reports of one quantity timed several times: the
// median (robust against the odd slow repetition: a page fault, a clock ramp, another process
// on the core), and the smallest and largest sample, whose difference is the spread the
// profile records next to the median.
//
// Thread safety: pure function.
#ifndef VARUNA_PLANNING_TIMING_SUMMARY_H_
#define VARUNA_PLANNING_TIMING_SUMMARY_H_

#include <vector>

namespace varuna {

struct TimingSummary {
  double median_ms = 0;  // the middle sample; for an even count the mean of the two middle ones
  double min_ms = 0;
  double max_ms = 0;
  int count = 0;  // samples summarised

  double spread_ms() const { return max_ms - min_ms; }
};

// The summary of `samples_ms` (any order); all zero for no samples.
TimingSummary Summarize(std::vector<double> samples_ms);

}  // namespace varuna

#endif  // VARUNA_PLANNING_TIMING_SUMMARY_H_
