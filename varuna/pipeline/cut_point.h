// CutPoint: a marker between two segments of a model, where the model may be split into
// pipeline stages.
//
// A model places one CutPoint after every segment but the last and passes the activation
// through it: `x = cut_points_[k](x)`. A CutPoint is the identity on the tensor; it carries its
// index (cut point k separates segment k from segment k+1) and lets the engine observe the
// activation crossing it (the profiler times segments there, the pipeline attaches its
// transfers at the boundaries of a stage). The activation must be one tensor with the batch in
// dimension 0.
//
// Thread safety: none; owned by one model, used by one thread.
#ifndef VARUNA_PIPELINE_CUT_POINT_H_
#define VARUNA_PIPELINE_CUT_POINT_H_

#include <ATen/core/Tensor.h>

#include <functional>
#include <utility>

namespace varuna {

class CutPoint {
 public:
  // Called with (index, activation) each time an activation crosses the cut point.
  using Observer = std::function<void(int, const at::Tensor&)>;

  explicit CutPoint(int index) : index_(index) {}

  // Cut point k lies between segment k and segment k + 1.
  int index() const { return index_; }

  // Replaces the observer (an empty function removes it).
  void set_observer(Observer observer) { observer_ = std::move(observer); }

  // Returns `activation` unchanged after notifying the observer, if any.
  const at::Tensor& operator()(const at::Tensor& activation) const {
    if (observer_) observer_(index_, activation);
    return activation;
  }

 private:
  int index_;
  Observer observer_;
};

}  // namespace varuna

#endif  // VARUNA_PIPELINE_CUT_POINT_H_
