// The Hugging Face export computes the trainer's loss (issue 25, item 5). A tiny GPT-2 is trained
// by //trainer:pretrain_gpt2 (vocabulary 50, padded to 128 rows as the trainer pads it) and
// exported twice: as export_hf does by default (every padded row) and with --trim-padded-vocab
// (the 50 real rows). On a fixed batch the test computes
//   - the trainer's loss: the trainer's own model (gpt2::Gpt2Stage, float32, evaluation mode)
//     holding the checkpoint's weights;
//   - each export's loss: from its model.safetensors and config.json alone, the way
//     transformers' GPT2LMHeadModel computes it (Conv1D weights [in, out], lm_head tied to
//     transformer.wte.weight, softmax over config.json's vocab_size rows), mean token cross
//     entropy.
// The whole export's loss is the trainer's within 1e-6 relative; the trimmed export's is lower,
// by exactly the log of the probability the padded rows had in the trainer's softmax.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model.h"
#include "models/gpt2/model_record.h"
#include "tests/trainer/trainer_job.h"
#include "tools/export_hf/hf_export.h"
#include "varuna/checkpoint/files.h"
#include "varuna/io/json.h"
#include "varuna/io/safetensors.h"

namespace tools {
namespace {

using ::testing::HasSubstr;
using trainer::testing::Plus;
using trainer::testing::Result;
using varuna::json::Value;

constexpr int kRealVocab = trainer::testing::kVocab;  // 50
constexpr int kPaddedVocab = 128;  // the trainer's --make-vocab-size-divisible-by
constexpr int kIterations = 400;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A fixed batch of 4 sequences of 16 tokens in the synthetic dataset's patterns (token ids in
// [1, 50)), labels the next token, every token counted.
varuna::TensorMap FixedBatch() {
  constexpr int kBatch = 4, kSeq = 16;
  at::Tensor ids = at::empty({kBatch, kSeq + 1}, at::kLong);
  for (int d = 0; d < kBatch; ++d) {
    const int step = 1 + d % 3;
    for (int i = 0; i <= kSeq; ++i) {
      ids[d][i] = (7 * d + i * step) % (kRealVocab - 1) + 1;
    }
  }
  varuna::TensorMap batch;
  batch["input_ids"] = ids.narrow(1, 0, kSeq).contiguous();
  batch["labels"] = ids.narrow(1, 1, kSeq).contiguous();
  batch["position_ids"] = at::arange(kSeq, at::kLong).expand({kBatch, kSeq}).contiguous();
  batch["loss_mask"] = at::ones({kBatch, kSeq}, at::kFloat);
  return batch;
}

// The trainer's loss on `batch`: Gpt2Stage, the whole model, with the weights of checkpoint
// save_dir/varuna_ckpt_<iteration>. Also returns the logits [b, s, 128] in *logits.
double TrainerLoss(const std::string& save_dir, int64_t iteration, const varuna::TensorMap& batch,
                   at::Tensor* logits) {
  absl::StatusOr<varuna::CheckpointData> first = varuna::ReadCheckpoint(save_dir, iteration, {0});
  EXPECT_TRUE(first.ok()) << first.status();
  if (!first.ok()) return NAN;
  absl::StatusOr<gpt2::ModelRecord> record = gpt2::ReadModelRecord(first->metadata, save_dir);
  EXPECT_TRUE(record.ok()) << record.status();
  if (!record.ok()) return NAN;
  EXPECT_EQ(record->vocab_size, kRealVocab);
  EXPECT_EQ(record->padded_vocab_size, kPaddedVocab);
  std::set<int> segments;
  for (int s = 0; s < record->num_layers; ++s) segments.insert(s);
  absl::StatusOr<varuna::CheckpointData> data =
      varuna::ReadCheckpoint(save_dir, iteration, segments);
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return NAN;
  std::map<std::string, at::Tensor> weights;
  for (const auto& [segment, tensors] : data->segments) {
    for (const auto& [name, tensor] : tensors) weights[name] = tensor;
  }

  gpt2::Gpt2Config config;
  config.num_layers = static_cast<int>(record->num_layers);
  config.hidden_size = static_cast<int>(record->hidden_size);
  config.num_attention_heads = static_cast<int>(record->num_attention_heads);
  config.seq_length = static_cast<int>(record->seq_length);
  config.max_position_embeddings = static_cast<int>(record->max_position_embeddings);
  config.vocab_size = static_cast<int>(record->padded_vocab_size);
  config.make_vocab_size_divisible_by = 1;
  config.layernorm_epsilon = record->layernorm_epsilon;
  config.hidden_dropout = 0;
  config.attention_dropout = 0;
  gpt2::Gpt2Stage model(config, {0, config.num_layers - 1}, /*seed=*/1);
  model.eval();
  torch::NoGradGuard no_grad;
  int copied = 0;
  for (auto& parameter : model.named_parameters()) {
    auto it = weights.find(parameter.key());
    EXPECT_NE(it, weights.end()) << parameter.key();
    if (it == weights.end()) return NAN;
    EXPECT_EQ(parameter.value().sizes(), it->second.sizes()) << parameter.key();
    parameter.value().copy_(it->second);
    ++copied;
  }
  EXPECT_EQ(copied, 4 + 12 * config.num_layers + 1);  // + lm_head_weight
  *logits = model.Logits(at::Tensor(), batch);
  return model.Forward(at::Tensor(), batch).item<double>();
}

// The loss on `batch` of the Hugging Face folder `dir`, computed as transformers'
// GPT2LMHeadModel does, in float32, from model.safetensors and config.json.
double HuggingFaceLoss(const std::string& dir, const varuna::TensorMap& batch) {
  absl::StatusOr<varuna::SafetensorsFile> file =
      varuna::ReadSafetensors(dir + "/model.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  absl::StatusOr<Value> config = varuna::json::Parse(ReadText(dir + "/config.json"));
  EXPECT_TRUE(config.ok()) << config.status();
  if (!file.ok() || !config.ok()) return NAN;
  const int64_t layers = (*config)["n_layer"].get<int64_t>();
  const int64_t heads = (*config)["n_head"].get<int64_t>();
  const int64_t h = (*config)["n_embd"].get<int64_t>();
  const double eps = (*config)["layer_norm_epsilon"].get<double>();
  EXPECT_EQ((*config)["activation_function"], "gelu_new");
  EXPECT_EQ((*config)["tie_word_embeddings"], true);
  bool missing = false;
  auto w = [&](const std::string& name) {
    const at::Tensor* tensor = file->Find(name);
    EXPECT_NE(tensor, nullptr) << name;
    if (tensor == nullptr) {
      missing = true;
      return at::zeros({1});
    }
    return *tensor;
  };
  const at::Tensor wte = w("transformer.wte.weight");
  // transformers sizes the embedding (and so the softmax) by config.json's vocab_size.
  EXPECT_EQ(wte.size(0), (*config)["vocab_size"].get<int64_t>());
  const at::Tensor& ids = batch.at("input_ids");
  const int64_t b = ids.size(0), s = ids.size(1), d = h / heads;
  at::Tensor x = wte.index_select(0, ids.flatten()).view({b, s, h}) +
                 w("transformer.wpe.weight")
                     .index_select(0, batch.at("position_ids").flatten())
                     .view({b, s, h});
  const at::Tensor future = at::ones({s, s}, at::kBool).triu(1);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    auto conv1d = [&](const at::Tensor& in, const std::string& name) {  // x @ W[in, out] + b
      return at::matmul(in, w(p + name + ".weight")) + w(p + name + ".bias");
    };
    const at::Tensor a = at::layer_norm(x, {h}, w(p + "ln_1.weight"), w(p + "ln_1.bias"), eps);
    std::vector<at::Tensor> qkv = conv1d(a, "attn.c_attn").split(h, -1);
    for (at::Tensor& t : qkv) t = t.view({b, s, heads, d}).transpose(1, 2);
    at::Tensor scores = at::matmul(qkv[0], qkv[1].transpose(-1, -2)) / std::sqrt(double(d));
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
    const at::Tensor attended =
        at::matmul(at::softmax(scores, -1), qkv[2]).transpose(1, 2).reshape({b, s, h});
    x = x + conv1d(attended, "attn.c_proj");
    const at::Tensor m = at::layer_norm(x, {h}, w(p + "ln_2.weight"), w(p + "ln_2.bias"), eps);
    x = x + conv1d(at::gelu(conv1d(m, "mlp.c_fc"), "tanh"), "mlp.c_proj");
  }
  x = at::layer_norm(x, {h}, w("transformer.ln_f.weight"), w("transformer.ln_f.bias"), eps);
  if (missing) return NAN;
  const at::Tensor logits = at::matmul(x, wte.t());  // lm_head.weight = wte (tied)
  const at::Tensor nll =
      -at::log_softmax(logits, -1).gather(-1, batch.at("labels").unsqueeze(-1)).squeeze(-1);
  return nll.mean().item<double>();
}

class ExportLossTest : public trainer::testing::TrainerTest {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    TrainerTest::SetUp();
  }
};

TEST_F(ExportLossTest, TheExportsLossIsTheTrainersUnlessTrimmed) {
  const std::string ckpt = dir_ + "/ckpt";
  Result trained =
      Run(Plus(TinyModel(), {"--train-iters=" + std::to_string(kIterations), "--save=" + ckpt}),
          "train");
  ASSERT_EQ(trained.exit.code, 0) << Describe(trained);

  HfExportOptions options;
  options.checkpoint = ckpt;
  options.output_dir = dir_ + "/hf_whole";
  absl::StatusOr<HfExportSummary> whole = ExportHuggingFace(options);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->vocab_rows, kPaddedVocab);
  options.output_dir = dir_ + "/hf_trimmed";
  options.trim_padded_vocab = true;
  absl::StatusOr<HfExportSummary> trimmed = ExportHuggingFace(options);
  ASSERT_TRUE(trimmed.ok()) << trimmed.status();
  EXPECT_EQ(trimmed->vocab_rows, kRealVocab);
  EXPECT_THAT(trimmed->warnings, ::testing::Contains(HasSubstr("no longer in the softmax")));

  const varuna::TensorMap batch = FixedBatch();
  at::Tensor logits;
  const double trainer_loss = TrainerLoss(ckpt, kIterations, batch, &logits);
  const double whole_loss = HuggingFaceLoss(dir_ + "/hf_whole", batch);
  const double trimmed_loss = HuggingFaceLoss(dir_ + "/hf_trimmed", batch);
  ASSERT_TRUE(std::isfinite(trainer_loss) && std::isfinite(whole_loss) &&
              std::isfinite(trimmed_loss));

  // The probability the trainer's softmax gives the padded rows, per token; trimming divides
  // every real probability by (1 - that), so each token's loss falls by -log(1 - that).
  const at::Tensor padded_share = at::softmax(logits.to(at::kDouble), -1)
                                      .narrow(-1, kRealVocab, kPaddedVocab - kRealVocab)
                                      .sum(-1);
  const double expected_shift = at::log1p(-padded_share).mean().item<double>();
  const double whole_relative = std::abs(whole_loss - trainer_loss) / trainer_loss;
  const double trimmed_relative = std::abs(trimmed_loss - trainer_loss) / trainer_loss;
  std::printf(
      "trainer loss %.9f; whole export %.9f (relative %.2e); trimmed export %.9f (relative "
      "%.2e); padded rows' probability: mean %.3e, max %.3e; expected shift %.3e\n",
      trainer_loss, whole_loss, whole_relative, trimmed_loss, trimmed_relative,
      padded_share.mean().item<double>(), padded_share.max().item<double>(), expected_shift);

  // For the check with transformers itself (hf_loss_check.py): the two exports, the batch and
  // the losses, in the test's undeclared outputs (bazel-testlogs/.../test.outputs/).
  if (const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR"); outputs != nullptr) {
    for (const char* name : {"hf_whole", "hf_trimmed"}) {
      std::filesystem::copy(dir_ + "/" + name, std::string(outputs) + "/" + name,
                            std::filesystem::copy_options::recursive |
                                std::filesystem::copy_options::overwrite_existing);
    }
    Value record = Value::object();
    for (const char* key : {"input_ids", "labels"}) {
      const at::Tensor& t = batch.at(key);
      Value rows = Value::array();
      for (int64_t r = 0; r < t.size(0); ++r) {
        Value row = Value::array();
        for (int64_t c = 0; c < t.size(1); ++c) row.push_back(t[r][c].item<int64_t>());
        rows.push_back(std::move(row));
      }
      record[key] = std::move(rows);
    }
    record["trainer_loss"] = trainer_loss;
    record["whole_loss"] = whole_loss;
    record["trimmed_loss"] = trimmed_loss;
    std::ofstream(std::string(outputs) + "/loss_check.json")
        << varuna::json::Serialize(record, /*pretty=*/true) << "\n";
  }

  EXPECT_LE(whole_relative, 1e-6) << "the whole export's loss should be the trainer's";
  EXPECT_GT(trimmed_relative, 1e-6) << "trimming should move the loss";
  EXPECT_LT(trimmed_loss, trainer_loss);
  EXPECT_NEAR(trimmed_loss - whole_loss, expected_shift, 1e-6 * trainer_loss);
}

}  // namespace
}  // namespace tools
