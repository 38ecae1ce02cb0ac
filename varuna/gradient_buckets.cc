#include "varuna/gradient_buckets.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <utility>

#include "varuna/kernels/multi_tensor.h"

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
                                 std::vector<at::Tensor>& master_grads,
                                 const std::vector<bool>& held_back, int64_t bucket_elements,
                                 comm::ProcessGroup* data_parallel, bool overlap)
    : parameters_(parameters), data_parallel_(data_parallel), overlap_(overlap) {
  TORCH_CHECK(master_grads.size() == parameters.size() && held_back.size() == parameters.size(),
              "GradientBuckets: one master gradient and one held-back flag per parameter");
  const size_t n = parameters.size();
  // The released parameters' buckets, then the held-back ones', each in reverse order.
  for (const bool held : {false, true}) {
    int64_t elements = 0;
    for (size_t k = n; k-- > 0;) {
      if (held_back[k] != held) continue;
      const int64_t numel = master_grads[k].numel();
      if (buckets_.empty() || buckets_.back().held_back != held ||
          (elements > 0 && elements + numel > bucket_elements)) {
        buckets_.emplace_back();
        buckets_.back().held_back = held;
        elements = 0;
      }
      buckets_.back().members.push_back(k);
      elements += numel;
    }
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
  if (bucket.held_back || bucket.started) return;
  --bucket.missing;
  const size_t before = next_;
  StartCompleteBuckets();
  started_in_backward_ += static_cast<int>(next_ - before);
}

void GradientBuckets::StartCompleteBuckets() {
  while (next_ < buckets_.size() && !buckets_[next_].held_back && buckets_[next_].missing <= 0) {
    Start(next_, inverse_scale_, /*launch=*/true);
    ++next_;
  }
}

void GradientBuckets::Start(size_t b, double inverse_scale, bool launch) {
  at::NoGradGuard no_grad;
  Bucket& bucket = buckets_[b];
  std::vector<at::Tensor> model_grads;
  std::vector<at::Tensor> master_grads;
  for (size_t k : bucket.members) {
    const at::Tensor& grad = parameters_[k].tensor.grad();
    if (grad.defined()) {
      model_grads.push_back(grad.is_contiguous() ? grad : grad.contiguous());
      master_grads.push_back(master_views_[k]);
    } else {
      master_views_[k].zero_();
    }
  }
  if (!model_grads.empty()) kernels::MultiTensorUnscale(model_grads, master_grads, inverse_scale);
  bucket.started = true;
  if (launch) bucket.work = data_parallel_->AllReduceSumAsync(bucket.flat);
}

void GradientBuckets::FinishBackward(double inverse_scale) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
  if (!armed_this_step_) started_in_backward_ = 0;
  if (!overlap_) {
    // Every gradient at once, as one multi-tensor pass; Reduce sums the buckets.
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> model_grads;
    std::vector<at::Tensor> master_grads;
    for (size_t k = 0; k < parameters_.size(); ++k) {
      const at::Tensor& grad = parameters_[k].tensor.grad();
      if (grad.defined()) {
        model_grads.push_back(grad.is_contiguous() ? grad : grad.contiguous());
        master_grads.push_back(master_views_[k]);
      } else {
        master_views_[k].zero_();
      }
    }
    kernels::MultiTensorUnscale(model_grads, master_grads, inverse_scale);
    for (Bucket& bucket : buckets_) bucket.started = true;
    return;
  }
  for (; next_ < buckets_.size() && !buckets_[next_].held_back; ++next_) {
    Start(next_, inverse_scale, /*launch=*/true);
  }
  for (size_t b = next_; b < buckets_.size(); ++b) Start(b, inverse_scale, /*launch=*/false);
}

absl::Status GradientBuckets::Reduce() {
  absl::Status status;
  for (Bucket& bucket : buckets_) {
    if (!overlap_) {
      status = data_parallel_->AllReduceSum(bucket.flat);
      if (!status.ok()) break;
    } else if (bucket.work == nullptr) {
      bucket.work = data_parallel_->AllReduceSumAsync(bucket.flat);
    }
  }
  for (Bucket& bucket : buckets_) {
    if (bucket.work == nullptr) continue;
    const absl::Status waited = bucket.work->Wait();
    if (status.ok()) status = waited;
  }
  Reset();
  return status;
}

void GradientBuckets::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
  armed_this_step_ = false;
  next_ = 0;
  for (Bucket& bucket : buckets_) {
    bucket.started = false;
    bucket.missing = 0;
    bucket.work.reset();
  }
}

}  // namespace varuna
