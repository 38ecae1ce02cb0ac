// GradientBuckets: the data-parallel sum of a stage's fp32 master gradients over its replicas,
// a bucket at a time, optionally overlapped with the last backward of the step (Megatron's
// --overlap-grad-reduce, PyTorch DDP's bucketed reducer).
//
// Layout. The parameters are grouped into buckets of at most `bucket_elements` fp32 elements
// (a bigger parameter gets a bucket of its own), in reverse parameter order: the order in which
// the backward produces their gradients. Each bucket is one flat fp32 buffer, and the
// optimizer's master gradients become views into the buffers, so a bucket is all-reduced in
// place. Every replica of a stage builds the same buckets (same parameters, same order), so
// the all-reduces match.
//
// Per step, after the model's gradients were zeroed:
//   ArmForLastBackward(1 / S)   right before the step's last backward (overlapped only)
//   ... the backward ...
//   FinishBackward(1 / S)       after the pipeline ran
//   Reduce()                    every bucket summed over the replicas
// Synchronous (overlap = false): FinishBackward unscales every gradient into its master
// gradient (master = model gradient * (1 / S), fp32), and Reduce all-reduces the buckets one
// after the other, in order. Overlapped: once armed, a hook on every parameter (run by
// autograd after the gradient was accumulated into .grad) notes the parameter ready; as soon
// as all parameters of the next bucket in order are ready, that bucket is unscaled and its
// asynchronous all-reduce started, still inside the backward. FinishBackward starts, in order,
// the buckets whose parameters did not all report (a gradient the last micro-batch did not
// touch, or no last backward on this rank); Reduce waits for all. Buckets start in the same
// order in both modes, with the same values, so the two give bit-identical master gradients.
//
// Thread safety: one thread drives the calls; the hooks may run on autograd's device thread
// while that thread is inside backward().
#ifndef VARUNA_GRADIENT_BUCKETS_H_
#define VARUNA_GRADIENT_BUCKETS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "varuna/comm/process_group.h"
#include "varuna/optim/adam.h"

namespace varuna {

class GradientBuckets {
 public:
  // `parameters` and `master_grads` are the optimizer's (equal length; the master gradients are
  // replaced by views into the buckets, keeping their values). `data_parallel` (not owned) is
  // the stage's group over its replicas. With `overlap`, installs a post-accumulate-grad hook on
  // every parameter that requires a gradient; the destructor removes them.
  GradientBuckets(const std::vector<NamedParameter>& parameters,
                  std::vector<at::Tensor>& master_grads, int64_t bucket_elements,
                  comm::ProcessGroup* data_parallel, bool overlap);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Number of buckets, and how many were started inside the last backward during the last
  // step (0 when not overlapped): for tests and logs.
  int size() const { return static_cast<int>(buckets_.size()); }
  int started_in_backward() const;

  // Overlapped only (a no-op otherwise): the next gradients accumulated are the step's final
  // ones; their buckets are unscaled by `inverse_scale` and started as they become complete.
  void ArmForLastBackward(double inverse_scale);

  // See the class comment. Gradients that are undefined count as zeros.
  void FinishBackward(double inverse_scale);

  // Sums every bucket over the replicas and waits for all of them; returns the first failure
  // (the group is then broken, see comm/process_group.h).
  absl::Status Reduce();

  // The step failed before Reduce: later gradients are not the step's. The all-reduces in
  // flight are left to finish (or fail, as the peers give up) and are dropped by the next
  // step's first call or the destructor.
  void Abandon();

 private:
  struct Bucket {
    std::vector<size_t> members;  // parameter indices, in the order laid out
    at::Tensor flat;              // fp32, the members' master gradients end to end
    int missing = 0;              // members not reported ready since arming; guarded by mu_
    bool started = false;  // unscaled (and, overlapped, its all-reduce issued); guarded by mu_
    std::unique_ptr<comm::Work> work;
  };
  class ReadyHook;

  // A parameter's gradient is final (a hook, on autograd's thread).
  void OnReady(size_t parameter);
  // Unscales bucket b's members into their master gradients and starts its all-reduce.
  // Requires mu_.
  void Start(size_t b, double inverse_scale);
  // Forgets the step: no bucket started, none in flight (dropping a Work waits for it).
  // Requires mu_.
  void ClearStepLocked();
  // Starts, in order, the next buckets that are complete. Requires mu_.
  void StartCompleteBuckets();

  const std::vector<NamedParameter> parameters_;
  comm::ProcessGroup* data_parallel_;
  const bool overlap_;
  std::vector<Bucket> buckets_;
  std::vector<at::Tensor> master_views_;  // parameter -> its master gradient (a view)
  std::vector<size_t> bucket_of_;         // parameter -> its bucket
  std::vector<bool> hooked_;              // parameter -> a hook was installed
  mutable std::mutex mu_;
  bool armed_ = false;            // guarded by mu_
  bool armed_this_step_ = false;  // guarded by mu_
  double inverse_scale_ = 1.0;    // guarded by mu_
  size_t next_ = 0;               // guarded by mu_: the next bucket in order to start
  int started_in_backward_ = 0;   // guarded by mu_
};

}  // namespace varuna

#endif  // VARUNA_GRADIENT_BUCKETS_H_
