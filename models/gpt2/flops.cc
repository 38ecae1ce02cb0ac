#include "models/gpt2/flops.h"

namespace gpt2 {
namespace {

// coefficient * B s L h^2 (1 + s/(6h) + V/(vocab_divisor L h)), in doubles throughout so that
// 8.3B-scale products do not overflow.
double MegatronFlops(double coefficient, double vocab_divisor, int64_t batch, int64_t seq,
                     int64_t layers, int64_t hidden, int64_t vocab) {
  const double b = static_cast<double>(batch);
  const double s = static_cast<double>(seq);
  const double l = static_cast<double>(layers);
  const double h = static_cast<double>(hidden);
  const double v = static_cast<double>(vocab);
  return coefficient * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (vocab_divisor * l * h));
}

}  // namespace

double TrainingFlopsPerIteration(int64_t batch, int64_t seq_length, int64_t num_layers,
                                 int64_t hidden_size, int64_t vocab_size) {
  return MegatronFlops(72.0, 12.0, batch, seq_length, num_layers, hidden_size, vocab_size);
}

double TrainingFlopsWithFullRecompute(int64_t batch, int64_t seq_length, int64_t num_layers,
                                      int64_t hidden_size, int64_t vocab_size) {
  return MegatronFlops(96.0, 16.0, batch, seq_length, num_layers, hidden_size, vocab_size);
}

double TrainingFlopsPerIteration(const Gpt2Config& config, int64_t global_batch) {
  return TrainingFlopsPerIteration(global_batch, config.seq_length, config.num_layers,
                                   config.hidden_size, config.padded_vocab_size());
}

double TrainingFlopsWithFullRecompute(const Gpt2Config& config, int64_t global_batch) {
  return TrainingFlopsWithFullRecompute(global_batch, config.seq_length, config.num_layers,
                                        config.hidden_size, config.padded_vocab_size());
}

}  // namespace gpt2
