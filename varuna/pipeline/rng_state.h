// RngState: a snapshot of the random generators a forward pass draws from (the CPU generator,
// and the CUDA generator of the device when it is a GPU), so that a recomputed forward draws
// the same dropout masks as the original one.
#ifndef VARUNA_PIPELINE_RNG_STATE_H_
#define VARUNA_PIPELINE_RNG_STATE_H_

#include <ATen/Context.h>
#include <ATen/core/Generator.h>

#include <mutex>

namespace varuna {

// The state of `device`'s default generator (CPU: the Mersenne Twister's whole state; CUDA:
// seed and offset), as a CPU byte tensor.
inline at::Tensor GeneratorState(const c10::Device& device) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

// Sets `device`'s default generator to `state`; throws c10::Error if the state is malformed.
inline void SetGeneratorState(const c10::Device& device, const at::Tensor& state) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

class RngState {
 public:
  // The generators' current state.
  static RngState Capture(const c10::Device& device) {
    RngState state;
    state.device_ = device;
    state.cpu_ = GeneratorState(c10::Device(c10::kCPU));
    if (device.is_cuda()) state.cuda_ = GeneratorState(device);
    return state;
  }

  // Puts the generators back into this state.
  void Restore() const {
    SetGeneratorState(c10::Device(c10::kCPU), cpu_);
    if (device_.is_cuda()) SetGeneratorState(device_, cuda_);
  }

 private:
  c10::Device device_ = c10::Device(c10::kCPU);
  at::Tensor cpu_;
  at::Tensor cuda_;
};

}  // namespace varuna

#endif  // VARUNA_PIPELINE_RNG_STATE_H_
