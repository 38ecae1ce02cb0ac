// LossScaler: the loss scale of fp16 training, static or dynamic.
//
// fp16 gradients underflow unless the loss is multiplied by a scale S before backward; the
// gradients are divided by S again before the optimizer sees them. The dynamic scaler follows
// Megatron's DynamicGradScaler:
//   - a step whose gradients hold inf/NaN ("overflow") is skipped; after `hysteresis`
//     overflowing steps (counted since the last growth) S is multiplied by `backoff_factor`,
//     but never below `min_scale`;
//   - after `growth_interval` consecutive steps without overflow, S is multiplied by
//     `growth_factor` (capped at `max_scale`) and the hysteresis count is reset.
// A static scaler keeps S fixed (a step with inf/NaN is still skipped). Without fp16 the scale
// is 1 and never changes.
//
// Every rank updates its own copy with the same agreed overflow flag, so all copies stay equal.
// Thread safety: none.
#ifndef VARUNA_OPTIM_LOSS_SCALER_H_
#define VARUNA_OPTIM_LOSS_SCALER_H_

#include <cstdint>

namespace varuna {

struct LossScalerOptions {
  bool dynamic = true;
  double initial_scale = 131072.0;  // 2^17, as Varuna's Megatron example; the static value too.
  double min_scale = 1.0;
  double max_scale = 16777216.0;  // 2^24
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 1000;  // Megatron's --loss-scale-window.
  int64_t hysteresis = 2;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& options)
      : options_(options), scale_(options.initial_scale), hysteresis_left_(options.hysteresis) {}

  double scale() const { return scale_; }

  // Records the outcome of one step (overflow: its gradients held inf/NaN anywhere).
  void Update(bool overflow) {
    if (!options_.dynamic) return;
    if (overflow) {
      growth_count_ = 0;
      if (--hysteresis_left_ <= 0) {
        scale_ = scale_ * options_.backoff_factor;
        if (scale_ < options_.min_scale) scale_ = options_.min_scale;
      }
      return;
    }
    if (++growth_count_ >= options_.growth_interval) {
      growth_count_ = 0;
      hysteresis_left_ = options_.hysteresis;
      scale_ = scale_ * options_.growth_factor;
      if (scale_ > options_.max_scale) scale_ = options_.max_scale;
    }
  }

  bool dynamic() const { return options_.dynamic; }

  // The state that a checkpoint saves, and its restore.
  struct State {
    double scale = 1;
    int64_t growth_count = 0;
    int64_t hysteresis_left = 0;
  };
  State state() const { return {scale_, growth_count_, hysteresis_left_}; }
  void set_state(const State& state) {
    scale_ = state.scale;
    growth_count_ = state.growth_count;
    hysteresis_left_ = state.hysteresis_left;
  }

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t growth_count_ = 0;
  int64_t hysteresis_left_;
};

}  // namespace varuna

#endif  // VARUNA_OPTIM_LOSS_SCALER_H_
