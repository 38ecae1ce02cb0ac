#include "varuna/gradient_buckets.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <utility>

#include "varuna/kernels/multi_tensor.h"
#include "varuna/optim/gradient_pairs.h"

namespace varuna {

// Tells the buckets that parameter `index`'s gradient has been accumulated into its .grad.
class GradientBuckets::ReadyHook final : public torch::autograd::PostAccumulateGradHook {
 public:
  ReadyHook(GradientBuckets* owner, size_t index) : owner_(owner), index_(index) {}
  void operator()(const torch::autograd::Variable& /*parameter*/) override {
    owner_->OnReady(index_);
  }

 private:
  GradientBuckets* owner_;
  size_t index_;
};

GradientBuckets::GradientBuckets(const std::vector<NamedParameter>& parameters,
                                 std::vector<at::Tensor>& master_grads, int64_t bucket_elements,
                                 comm::ProcessGroup* data_parallel, bool overlap)
    : parameters_(parameters), data_parallel_(data_parallel), overlap_(overlap) {
  TORCH_CHECK(master_grads.size() == parameters.size(),
              "GradientBuckets: one master gradient per parameter");
  const size_t n = parameters.size();
  int64_t elements = 0;
  for (size_t k = n; k-- > 0;) {  // reverse parameter order
    const int64_t numel = master_grads[k].numel();
    if (buckets_.empty() || (elements > 0 && elements + numel > bucket_elements)) {
      buckets_.emplace_back();
      elements = 0;
    }
    buckets_.back().members.push_back(k);
    elements += numel;
  }
  master_views_.resize(n);
  bucket_of_.resize(n);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    int64_t elements = 0;
    for (size_t k : bucket.members) elements += master_grads[k].numel();
    bucket.flat = at::empty({elements}, master_grads[bucket.members.front()].options());
    int64_t offset = 0;
    for (size_t k : bucket.members) {
      const int64_t numel = master_grads[k].numel();
      at::Tensor view = bucket.flat.narrow(0, offset, numel).view(master_grads[k].sizes());
      view.copy_(master_grads[k]);
      master_grads[k] = view;
      master_views_[k] = view;
      bucket_of_[k] = b;
      offset += numel;
    }
  }
  hooked_.assign(n, false);
  if (overlap_) {
    for (size_t k = 0; k < n; ++k) {
      const at::Tensor& tensor = parameters_[k].tensor;
      if (!tensor.requires_grad() || !tensor.is_leaf()) continue;
      torch::autograd::impl::set_post_acc_grad_hooks(tensor, std::make_unique<ReadyHook>(this, k));
      hooked_[k] = true;
    }
  }
}

GradientBuckets::~GradientBuckets() {
  for (size_t k = 0; k < parameters_.size(); ++k) {
    if (hooked_[k]) torch::autograd::impl::set_post_acc_grad_hooks(parameters_[k].tensor, nullptr);
  }
}

int GradientBuckets::started_in_backward() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_in_backward_;
}

void GradientBuckets::ArmForLastBackward(double inverse_scale) {
  if (!overlap_) return;
  std::lock_guard<std::mutex> lock(mu_);
  ClearStepLocked();  // a step that failed before Reduce may have left some
  armed_ = true;
  armed_this_step_ = true;
  inverse_scale_ = inverse_scale;
  started_in_backward_ = 0;
  for (Bucket& bucket : buckets_) {
    bucket.missing = 0;
    for (size_t k : bucket.members) bucket.missing += hooked_[k] ? 1 : 0;
  }
}

void GradientBuckets::OnReady(size_t parameter) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!armed_) return;
  Bucket& bucket = buckets_[bucket_of_[parameter]];
  if (bucket.started) return;
  --bucket.missing;
  const size_t before = next_;
  StartCompleteBuckets();
  started_in_backward_ += static_cast<int>(next_ - before);
}

void GradientBuckets::StartCompleteBuckets() {
  while (next_ < buckets_.size() && buckets_[next_].missing <= 0) {
    Start(next_, inverse_scale_);
    ++next_;
  }
}

void GradientBuckets::Start(size_t b, double inverse_scale) {
  at::NoGradGuard no_grad;
  Bucket& bucket = buckets_[b];
  const GradientPairs pairs = PairGradients(parameters_, master_views_, bucket.members);
  if (!pairs.model.empty()) kernels::MultiTensorUnscale(pairs.model, pairs.master, inverse_scale);
  bucket.started = true;
  bucket.work = data_parallel_->AllReduceSumAsync(bucket.flat);
}

void GradientBuckets::FinishBackward(double inverse_scale) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
  if (!armed_this_step_) {
    ClearStepLocked();
    started_in_backward_ = 0;
  }
  if (!overlap_) {
    // Every gradient at once, as one multi-tensor pass; Reduce sums the buckets.
    at::NoGradGuard no_grad;
    const GradientPairs pairs = PairGradients(parameters_, master_views_);
    kernels::MultiTensorUnscale(pairs.model, pairs.master, inverse_scale);
    for (Bucket& bucket : buckets_) bucket.started = true;
    return;
  }
  for (; next_ < buckets_.size(); ++next_) Start(next_, inverse_scale);
}

absl::Status GradientBuckets::Reduce() {
  absl::Status status;
  for (Bucket& bucket : buckets_) {
    if (!overlap_) {
      status = data_parallel_->AllReduceSum(bucket.flat);
      if (!status.ok()) break;
    }
  }
  for (Bucket& bucket : buckets_) {
    if (bucket.work == nullptr) continue;
    const absl::Status waited = bucket.work->Wait();
    if (status.ok()) status = waited;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ClearStepLocked();
  return status;
}

void GradientBuckets::Abandon() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
}

void GradientBuckets::ClearStepLocked() {
  armed_ = false;
  armed_this_step_ = false;
  next_ = 0;
  for (Bucket& bucket : buckets_) {
    bucket.started = false;
    bucket.missing = 0;
    // An all-reduce left over from a failed step: the next step may not write its buffer
    // before it is done (on CUDA, Wait makes the current stream wait for it).
    if (bucket.work != nullptr) bucket.work->Wait().IgnoreError();
    bucket.work.reset();
  }
}

}  // namespace varuna
