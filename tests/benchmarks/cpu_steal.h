// The share of the CPU time a job wanted that the hypervisor gave to someone else ("steal" in
// /proc/stat), for the CPU benchmarks that compare a prediction with a measured time.
//
// On a virtual machine that shares its host, a virtual CPU that goes idle (a rank waiting for
// another) can lose its physical core, and when it wakes it waits to get it back: the kernel
// counts that wait as steal. Two ranks that synchronise often are stolen from far more than two
// processes that never wait (docs/performance.md, "Steal time"), so a benchmark that times
// them must say how much of its wall time the machine was not its own.
//
// Thread safety: the functions are pure but for reading the file.
#ifndef VARUNA_TESTS_BENCHMARKS_CPU_STEAL_H_
#define VARUNA_TESTS_BENCHMARKS_CPU_STEAL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace varuna::benchmarks {

// The machine's CPU time so far, all CPUs together, in the kernel's ticks (USER_HZ).
struct CpuTicks {
  int64_t busy = 0;   // user, nice, system, irq and softirq: time the CPUs ran something
  int64_t idle = 0;   // idle and iowait
  int64_t steal = 0;  // time a virtual CPU wanted to run and its host ran someone else
};

// Parses the aggregate "cpu" line of a /proc/stat text. An error names the file and what is
// missing (a kernel before 2.6.11 has no steal column: an error, not a zero).
absl::StatusOr<CpuTicks> ParseCpuTicks(const std::string& proc_stat, const std::string& source);

// Reads `path` (the machine's own /proc/stat by default) and parses it.
absl::StatusOr<CpuTicks> ReadCpuTicks(const std::string& path = "/proc/stat");

// The share of the time the CPUs wanted between `before` and `after` that was stolen:
// steal / (busy + steal), in [0, 1]; 0 when they wanted none. Idle time is not in the
// denominator: a job of one process on a two-CPU machine leaves one CPU idle, which the
// hypervisor may take without slowing the job.
double StealFraction(const CpuTicks& before, const CpuTicks& after);

}  // namespace varuna::benchmarks

#endif  // VARUNA_TESTS_BENCHMARKS_CPU_STEAL_H_
