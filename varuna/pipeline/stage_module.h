// StageModule: the part of a model that one pipeline stage holds, as the engine sees it.
//
// A model that the Varuna engine trains is a sequence of segments separated by cut points
// (see pipeline/cut_point.h): segment 0 starts at the model's inputs, the last segment ends with
// the loss. A StageModule is built for one contiguous range of segments and allocates only the
// parameters of that range, so no process ever materialises the whole model. The engine
// knows nothing else about the model: it moves the activation at the range's boundaries
// between stages, and treats parameters by name.
//
// Thread safety: none; a StageModule is used by one thread at a time.
#ifndef VARUNA_PIPELINE_STAGE_MODULE_H_
#define VARUNA_PIPELINE_STAGE_MODULE_H_

#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "varuna/pipeline/segment_range.h"
#include "varuna/pipeline/tensor_map.h"

namespace varuna {

// Two parameters that hold the same weight in the full model (for GPT-2: the word embedding
// on segment 0 and the LM head on the last segment). They are separate parameters, possibly on
// different stages; the engine keeps them equal by summing their gradients and applying the
// same update to both.
struct SharedWeight {
  std::string first;   // Full parameter name, e.g. "wte.weight".
  std::string second;  // e.g. "lm_head_weight".
};

class StageModule : public torch::nn::Module {
 public:
  ~StageModule() override = default;

  // The segments this module holds.
  virtual SegmentRange segments() const = 0;

  // The number of segments in the full model.
  virtual int num_segments() const = 0;

  // Runs the held segments on one micro-batch.
  // `activation`: the activation entering segments().first, as produced by the previous
  //   stage; undefined when segments().first == 0 (the module then reads its inputs).
  // `inputs`: the micro-batch's input tensors, batch in dimension 0 (for GPT-2: input_ids,
  //   position_ids, labels, loss_mask and, optionally, attention_mask). A module reads only
  //   the entries its segments need.
  // Returns the activation leaving segments().last, batch in dimension 0, or, when the range
  // ends at the last segment, the scalar loss of the micro-batch.
  virtual torch::Tensor Forward(const torch::Tensor& activation, const TensorMap& inputs) = 0;

  // The shared-weight pairs of the full model, whether or not this range holds them.
  virtual std::vector<SharedWeight> shared_weights() const = 0;

  // The segment that owns the named parameter of the full model, or -1 if no such name.
  virtual int SegmentOf(const std::string& parameter_name) const = 0;

  // Whether weight decay applies to the named parameter (not to biases or LayerNorm).
  virtual bool DecaysWeight(const std::string& parameter_name) const = 0;

  // How much a micro-batch counts in the batch's loss: the loss of a batch split into
  // micro-batches is the mean of their losses weighted by this, so that it equals the loss of
  // the whole batch at once. The default is the number of examples (for a loss that is a mean
  // over examples); a loss that is a mean over unmasked tokens returns their count. Must be
  // computable from the inputs on every stage.
  virtual double LossWeight(const TensorMap& micro_batch) const {
    return micro_batch.empty() ? 0.0 : static_cast<double>(micro_batch.begin()->second.size(0));
  }

  // Model state that is not a parameter (the optimizer never sees it) but changes as the model
  // trains, e.g. the amax histories and scales of FP8 layers. The default module has none.
  //
  // named_state(): every such tensor of this stage, by full-model name (SegmentOf must map each
  // name to the segment that holds it); the engine saves them in checkpoints (written by
  // replica 0) and loads them in place, and evaluate() leaves them as they were. The tensors'
  // identity never changes, and the list is the same on every replica of a stage.
  virtual std::vector<std::pair<std::string, at::Tensor>> named_state() { return {}; }
  // replica_max_state(): tensors (a subset of named_state()'s, or views of them) that the
  // engine sets, once per step after the backward of every micro-batch, to their elementwise
  // maximum over the replicas of the stage, so that every replica then updates alike.
  virtual std::vector<at::Tensor> replica_max_state() { return {}; }
  // Called once per step on every rank, after that reduction and before the optimizer update,
  // also on steps whose update the loss scaler skips. Must run on the device without host
  // synchronisation and without collectives.
  virtual void UpdateStateAfterBackward() {}
};

// Builds the StageModule of a segment range. Called once per rank with the rank's range.
using StageBuilder = std::function<std::shared_ptr<StageModule>(SegmentRange)>;

}  // namespace varuna

#endif  // VARUNA_PIPELINE_STAGE_MODULE_H_
