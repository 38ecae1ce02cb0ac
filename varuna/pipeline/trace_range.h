// TraceRange: a named stretch of host time in LibTorch's profiler traces, what
// torch.profiler.record_function marks in Python (a user annotation: Kineto's USER_ANNOTATION).
// The trainer and the engine mark their phases with it ("varuna::optimizer",
// "pretrain_gpt2::batch", ...), so that a trace from --profile says which phase the host was in
// when the device went idle, and how long each phase held the host (trainer/op_profile.h).
//
// Costs a few loads when no profiler runs (LibTorch's RecordFunction fast path). `name` must
// outlive the range (a string literal).
//
// Thread safety: a range belongs to the thread that made it (it nests with that thread's ops).
#ifndef VARUNA_PIPELINE_TRACE_RANGE_H_
#define VARUNA_PIPELINE_TRACE_RANGE_H_

#include <ATen/record_function.h>

#include <string_view>

namespace varuna {

class TraceRange {
 public:
  // Starts the range (where a profiler records user scopes).
  explicit TraceRange(const char* name) : guard_(at::RecordScope::USER_SCOPE) {
    if (guard_.isActive())
      guard_.before(std::string_view(name), c10::ArrayRef<const c10::IValue>{});
  }
  // Ends it, if End() did not.
  ~TraceRange() = default;

  // Ends the range here, before the end of its scope. Later calls do nothing.
  void End() {
    if (ended_) return;
    ended_ = true;
    guard_.end();
  }

  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;

 private:
  at::RecordFunction guard_;
  bool ended_ = false;
};

}  // namespace varuna

#endif  // VARUNA_PIPELINE_TRACE_RANGE_H_
