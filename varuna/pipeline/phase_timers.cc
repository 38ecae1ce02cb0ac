#include "varuna/pipeline/phase_timers.h"

#include <ATen/DeviceAccelerator.h>

namespace varuna {
namespace {

// Waits for the work queued on the device's current stream (the CPU has none).
void Synchronize(const c10::Device& device) {
  if (device.is_cpu()) return;
  const c10::DeviceIndex index =
      device.has_index() ? device.index() : at::accelerator::getDeviceIndex();
  at::accelerator::getCurrentStream(index).synchronize();
}

}  // namespace

void PhaseTimers::Add(const std::string& name, double milliseconds) {
  for (auto& [timer, total] : totals_) {
    if (timer == name) {
      total += milliseconds;
      return;
    }
  }
  totals_.emplace_back(name, milliseconds);
}

std::vector<std::pair<std::string, double>> PhaseTimers::Take() {
  std::vector<std::pair<std::string, double>> taken = totals_;
  for (auto& [timer, total] : totals_) total = 0;
  return taken;
}

Phase::Phase(const char* range_name, PhaseTimers* timers, int level, const char* timer_name)
    : range_(range_name),
      timers_(timers != nullptr && level <= timers->level() ? timers : nullptr),
      timer_name_(timer_name) {
  if (timers_ == nullptr) return;
  Synchronize(timers_->device());
  start_ = std::chrono::steady_clock::now();
}

void Phase::End() {
  if (ended_) return;
  ended_ = true;
  if (timers_ != nullptr) {
    Synchronize(timers_->device());
    timers_->Add(timer_name_, std::chrono::duration<double, std::milli>(
                                  std::chrono::steady_clock::now() - start_)
                                  .count());
  }
  range_.End();
}

}  // namespace varuna
