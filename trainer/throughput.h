// Throughput: tokens/s, achieved TFLOP/s and model FLOPs utilisation (MFU) of a training run.
//
// TFLOP/s = (model FLOPs of one iteration, Megatron's formula, see models/gpt2/flops.h)
//           / (seconds per iteration) / 1e12.
// MFU     = TFLOP/s / the device's dense fp16/bf16 peak TFLOP/s.
// The peak comes from --peak-tflops or from a table of known devices; for any other device
// (the CPU included) MFU is reported as unknown instead of a made-up percentage.
#ifndef VARUNA_TRAINER_THROUGHPUT_H_
#define VARUNA_TRAINER_THROUGHPUT_H_

#include <optional>
#include <string>

namespace trainer {

// Dense fp16/bf16 peak TFLOP/s of a device named like "NVIDIA H200" or "NVIDIA A100-SXM4-80GB":
// A100 312, H100 989, H200 989, V100 125. nullopt for devices not in the table.
std::optional<double> PeakTflops(const std::string& device_name);

struct Throughput {
  double tokens_per_second = 0;
  double tflops = 0;          // Achieved model TFLOP/s.
  std::optional<double> mfu;  // Fraction of the peak, when the peak is known.
};

// `flops_per_iteration` for `tokens_per_iteration` tokens took `seconds_per_iteration`.
Throughput MeasureThroughput(double flops_per_iteration, double tokens_per_iteration,
                             double seconds_per_iteration, std::optional<double> peak_tflops);

}  // namespace trainer

#endif  // VARUNA_TRAINER_THROUGHPUT_H_
