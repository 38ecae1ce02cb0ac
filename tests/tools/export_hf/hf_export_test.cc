#include "tools/export_hf/hf_export.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/dataset_tokenizer.h"
#include "data/tokenizer_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model_record.h"
#include "models/gpt2/parameter_names.h"
#include "tools/export_hf/hf_config.h"
#include "varuna/checkpoint/files.h"
#include "varuna/io/json.h"
#include "varuna/io/safetensors.h"

namespace tools {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;
using varuna::NamedTensors;
using varuna::json::Value;

constexpr int kLayers = 2;
constexpr int kHidden = 32;
constexpr int kVocab = 100;
constexpr int kPaddedVocab = 128;  // the trainer's default --make-vocab-size-divisible-by

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

gpt2::Gpt2Config TinyConfig(int vocab_size = kVocab) {
  gpt2::Gpt2Config config;
  config.num_layers = kLayers;
  config.hidden_size = kHidden;
  config.num_attention_heads = 2;
  config.seq_length = 16;
  config.max_position_embeddings = 16;
  config.vocab_size = vocab_size;
  config.make_vocab_size_divisible_by = 128;
  return config;
}

// trainer.model as the trainer records it (with an epsilon other than the default).
Value ModelJson(gpt2::Gpt2Config c) {
  c.layernorm_epsilon = 1e-6;
  return gpt2::ModelConfigJson(c);
}

// Distinct values in every element of every tensor, so that a swapped name, a missed
// transposition or a wrong slice changes what is read back.
at::Tensor Distinct(const std::vector<int64_t>& shape, int index, float seed) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  return at::arange(numel, at::kFloat).mul(0.001).add(index * 100 + seed).reshape(shape);
}

class HfExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    save_dir_ = root_ + "/ckpts";
    out_ = root_ + "/exports/gpt2";
  }

  // Writes save_dir_/varuna_ckpt_<iteration> for `config` (values depend on `seed`) and
  // returns its parameters by name. `model` replaces trainer.model; `edit` may change the
  // tensors and the trainer metadata before writing.
  std::map<std::string, at::Tensor> WriteTinyCheckpoint(
      int64_t iteration, float seed, const gpt2::Gpt2Config& config, Value model,
      const std::function<void(std::map<int, NamedTensors>*, Value*)>& edit = nullptr) {
    std::map<std::string, at::Tensor> parameters;
    varuna::CheckpointData data;
    data.iteration = iteration;
    int index = 0;
    for (int segment = 0; segment < config.num_layers; ++segment) {
      NamedTensors& tensors = data.segments[segment];
      for (const gpt2::ParameterSpec& spec : gpt2::SegmentParameters(config, segment)) {
        at::Tensor value = spec.name == gpt2::kLmHeadName
                               ? parameters.at(gpt2::kWordEmbeddingName).clone()
                               : Distinct(spec.shape, index++, seed);
        parameters[spec.name] = value;
        tensors.emplace_back(spec.name, value);
        tensors.emplace_back(spec.name + ".exp_avg", value.mul(-1));
        tensors.emplace_back(spec.name + ".exp_avg_sq", value.mul(value));
      }
    }
    Value trainer = Value::object();
    trainer["iteration"] = iteration;
    if (!model.is_null()) trainer["model"] = std::move(model);
    if (edit) edit(&data.segments, &trainer);
    data.metadata = Value::object();
    data.metadata["engine"] = Value::object();
    data.metadata["trainer"] = std::move(trainer);
    const absl::Status status = varuna::WriteCheckpoint(save_dir_, data);
    EXPECT_TRUE(status.ok()) << status;
    return parameters;
  }

  std::map<std::string, at::Tensor> WriteTiny(int64_t iteration = 7, float seed = 0.5f) {
    return WriteTinyCheckpoint(iteration, seed, TinyConfig(), ModelJson(TinyConfig()));
  }

  HfExportOptions Options(const std::string& checkpoint) const {
    HfExportOptions options;
    options.checkpoint = checkpoint;
    options.output_dir = out_;
    return options;
  }

  // An error leaves nothing behind: no OUT, no staging directory beside it.
  void ExpectNothingWritten() const {
    EXPECT_FALSE(fs::exists(out_));
    if (fs::exists(root_ + "/exports")) {
      EXPECT_THAT(Listing(root_ + "/exports"), ElementsAre());
    }
  }

  std::string root_;
  std::string save_dir_;
  std::string out_;
};

// The GPT2LMHeadModel keys of docs/formats.md 2a with their shapes for the tiny model.
std::map<std::string, std::vector<int64_t>> ExpectedHfShapes() {
  const int64_t c = kHidden;
  std::map<std::string, std::vector<int64_t>> shapes = {
      {"transformer.wte.weight", {kPaddedVocab, c}},
      {"transformer.wpe.weight", {16, c}},
      {"transformer.ln_f.weight", {c}},
      {"transformer.ln_f.bias", {c}},
  };
  for (int i = 0; i < kLayers; ++i) {
    const std::string h = absl::StrCat("transformer.h.", i, ".");
    shapes[h + "ln_1.weight"] = {c};
    shapes[h + "ln_1.bias"] = {c};
    shapes[h + "attn.c_attn.weight"] = {c, 3 * c};
    shapes[h + "attn.c_attn.bias"] = {3 * c};
    shapes[h + "attn.c_proj.weight"] = {c, c};
    shapes[h + "attn.c_proj.bias"] = {c};
    shapes[h + "ln_2.weight"] = {c};
    shapes[h + "ln_2.bias"] = {c};
    shapes[h + "mlp.c_fc.weight"] = {c, 4 * c};
    shapes[h + "mlp.c_fc.bias"] = {4 * c};
    shapes[h + "mlp.c_proj.weight"] = {4 * c, c};
    shapes[h + "mlp.c_proj.bias"] = {c};
  }
  return shapes;
}

TEST(ParseHfExportArgsTest, HelpListsEveryFlagWithItsDefault) {
  absl::StatusOr<HfExportOptions> options = ParseHfExportArgs({"--help"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->help_requested);
  EXPECT_THAT(options->flags_help, AllOf(HasSubstr("--tokenizer-model"), HasSubstr("--iteration"),
                                         HasSubstr("--vocab-size"), HasSubstr("(default 0)"),
                                         HasSubstr("--[no-]trim-padded-vocab")));
  EXPECT_THAT(std::string(kHfExportUsage),
              AllOf(HasSubstr("[--trim-padded-vocab]"), HasSubstr("padded rows")));
}

TEST_F(HfExportTest, WritesTheHuggingFaceLayout) {
  const auto parameters = WriteTiny();
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_TRUE(summary.ok()) << summary.status();

  EXPECT_THAT(Listing(out_),
              ElementsAre("config.json", "generation_config.json", "model.safetensors"));
  EXPECT_THAT(Listing(root_ + "/exports"), ElementsAre("gpt2"));  // no staging leftovers
  EXPECT_EQ(summary->iteration, 7);
  EXPECT_EQ(summary->checkpoint_dir, save_dir_ + "/varuna_ckpt_7");
  EXPECT_EQ(summary->num_tensors, 4 + 12 * kLayers);
  EXPECT_EQ(summary->bytes, fs::file_size(out_ + "/model.safetensors"));
  EXPECT_THAT(summary->Line(), AllOf(HasSubstr("varuna_ckpt_7"), HasSubstr("iteration 7"),
                                     HasSubstr("28 tensors"), HasSubstr(out_)));
  EXPECT_THAT(summary->notes, testing::Contains(HasSubstr("no tokenizer")));
  // ModelJson is a record without dropouts, as checkpoints written before they were recorded.
  EXPECT_THAT(summary->notes,
              testing::Contains(AllOf(HasSubstr("dropout unknown"), HasSubstr("0.1"),
                                      HasSubstr("Megatron's default"))));
  EXPECT_THAT(summary->warnings, ElementsAre());
  EXPECT_EQ(summary->vocab_rows, kPaddedVocab);
  EXPECT_THAT(summary->notes,
              testing::Contains(AllOf(HasSubstr("vocab_size 128 in config.json"),
                                      HasSubstr("28 padded rows after the 100 real ids"),
                                      HasSubstr("--trim-padded-vocab"))));

  absl::StatusOr<varuna::SafetensorsFile> file =
      varuna::ReadSafetensors(out_ + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  const auto expected = ExpectedHfShapes();
  std::vector<std::string> expected_keys, keys;
  for (const auto& [key, shape] : expected) expected_keys.push_back(key);
  for (const auto& [key, tensor] : file->tensors) keys.push_back(key);
  EXPECT_THAT(keys, UnorderedElementsAreArray(expected_keys));  // no lm_head.weight
  for (const auto& [key, tensor] : file->tensors) {
    EXPECT_EQ(tensor.scalar_type(), at::kFloat) << key;
    ASSERT_TRUE(expected.count(key)) << key;
    EXPECT_EQ(tensor.sizes(), at::IntArrayRef(expected.at(key))) << key;
  }

  // Values: Conv1D weights transposed, wte whole (padded rows too), the rest as stored.
  const at::Tensor& c_attn = *file->Find("transformer.h.1.attn.c_attn.weight");
  EXPECT_TRUE(at::equal(c_attn, parameters.at("h.1.attn.c_attn.weight").t()));
  EXPECT_TRUE(at::equal(*file->Find("transformer.h.0.mlp.c_proj.weight"),
                        parameters.at("h.0.mlp.c_proj.weight").t()));
  EXPECT_TRUE(at::equal(*file->Find("transformer.wte.weight"), parameters.at("wte.weight")));
  EXPECT_TRUE(at::equal(*file->Find("transformer.h.1.ln_2.bias"), parameters.at("h.1.ln_2.bias")));
  EXPECT_TRUE(at::equal(*file->Find("transformer.ln_f.weight"), parameters.at("ln_f.weight")));
  for (const auto& [name, value] : parameters) {
    if (name == gpt2::kLmHeadName) continue;
    at::Tensor want = value;
    if (gpt2::TransposedInHuggingFace(name)) want = want.t();
    EXPECT_TRUE(at::equal(*file->Find(gpt2::HuggingFaceName(name)), want)) << name;
  }

  absl::StatusOr<Value> config = varuna::json::Parse(ReadText(out_ + "/config.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(varuna::json::Find(*config, "model_type")->get<std::string>(), "gpt2");
  EXPECT_EQ(*varuna::json::Find(*config, "architectures"), Value::array({"GPT2LMHeadModel"}));
  // The rows of wte; the real vocabulary's EOD (the last real id without a tokenizer) below.
  EXPECT_EQ(varuna::json::Find(*config, "vocab_size")->get<int64_t>(), kPaddedVocab);
  EXPECT_EQ(varuna::json::Find(*config, "n_positions")->get<int64_t>(), 16);
  EXPECT_EQ(varuna::json::Find(*config, "n_ctx")->get<int64_t>(), 16);
  EXPECT_EQ(varuna::json::Find(*config, "n_embd")->get<int64_t>(), kHidden);
  EXPECT_EQ(varuna::json::Find(*config, "n_layer")->get<int64_t>(), kLayers);
  EXPECT_EQ(varuna::json::Find(*config, "n_head")->get<int64_t>(), 2);
  EXPECT_TRUE(varuna::json::Find(*config, "n_inner")->is_null());
  EXPECT_EQ(varuna::json::Find(*config, "activation_function")->get<std::string>(), "gelu_new");
  EXPECT_DOUBLE_EQ(varuna::json::Find(*config, "layer_norm_epsilon")->get<double>(), 1e-6);
  EXPECT_DOUBLE_EQ(varuna::json::Find(*config, "resid_pdrop")->get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(varuna::json::Find(*config, "attn_pdrop")->get<double>(), 0.1);
  EXPECT_TRUE(varuna::json::Find(*config, "scale_attn_weights")->get<bool>());
  EXPECT_TRUE(varuna::json::Find(*config, "tie_word_embeddings")->get<bool>());
  EXPECT_EQ(varuna::json::Find(*config, "bos_token_id")->get<int64_t>(), kVocab - 1);
  EXPECT_EQ(varuna::json::Find(*config, "eos_token_id")->get<int64_t>(), kVocab - 1);
  EXPECT_EQ(varuna::json::Find(*config, "torch_dtype")->get<std::string>(), "float32");
  absl::StatusOr<Value> generation =
      varuna::json::Parse(ReadText(out_ + "/generation_config.json"));
  ASSERT_TRUE(generation.ok()) << generation.status();
  EXPECT_EQ(varuna::json::Serialize(*generation),
            absl::StrCat(R"({"bos_token_id":)", kVocab - 1, R"(,"eos_token_id":)", kVocab - 1,
                         R"(,"pad_token_id":)", kVocab - 1, "}"));
}

TEST_F(HfExportTest, ConfigJsonHasTheTrainedDropouts) {
  gpt2::Gpt2Config config = TinyConfig();
  config.hidden_dropout = 0.0;
  config.attention_dropout = 0.05;
  WriteTinyCheckpoint(7, 0.5f, config, gpt2::CheckpointModelJson(config));
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_THAT(summary->notes, testing::Not(testing::Contains(HasSubstr("dropout"))));
  absl::StatusOr<Value> json = varuna::json::Parse(ReadText(out_ + "/config.json"));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_DOUBLE_EQ(varuna::json::Find(*json, "resid_pdrop")->get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(varuna::json::Find(*json, "embd_pdrop")->get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(varuna::json::Find(*json, "attn_pdrop")->get<double>(), 0.05);
}

TEST_F(HfExportTest, TrimPaddedVocabKeepsTheRealRowsAndWarns) {
  const auto parameters = WriteTiny();
  HfExportOptions options = Options(save_dir_);
  options.trim_padded_vocab = true;
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->vocab_rows, kVocab);
  EXPECT_THAT(summary->warnings,
              ElementsAre(AllOf(HasSubstr("--trim-padded-vocab"), HasSubstr("keeps 100 of its 128"),
                                HasSubstr("28 padded ids"), HasSubstr("no longer in the softmax"),
                                HasSubstr("transformers' loss comes out lower than the trainer's"),
                                HasSubstr("leave the flag out"))));
  EXPECT_THAT(summary->notes, testing::Not(testing::Contains(HasSubstr("in config.json"))));
  absl::StatusOr<varuna::SafetensorsFile> file =
      varuna::ReadSafetensors(out_ + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(at::equal(*file->Find("transformer.wte.weight"),
                        parameters.at("wte.weight").narrow(0, 0, kVocab)));
  absl::StatusOr<Value> config = varuna::json::Parse(ReadText(out_ + "/config.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(varuna::json::Find(*config, "vocab_size")->get<int64_t>(), kVocab);
  EXPECT_EQ(varuna::json::Find(*config, "eos_token_id")->get<int64_t>(), kVocab - 1);

  // A vocabulary that was not padded has nothing to trim: both forms are the same, no warning.
  fs::remove_all(save_dir_);
  fs::remove_all(out_);
  gpt2::Gpt2Config unpadded = TinyConfig(kPaddedVocab);
  WriteTinyCheckpoint(7, 0.5f, unpadded, ModelJson(unpadded));
  summary = ExportHuggingFace(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_THAT(summary->warnings, ElementsAre());
  EXPECT_THAT(summary->notes, testing::Contains(HasSubstr("nothing to trim")));
  EXPECT_EQ(summary->vocab_rows, kPaddedVocab);
}

TEST_F(HfExportTest, PicksTheNamedOrRequestedCheckpoint) {
  const auto older = WriteTiny(3, 0.25f);
  const auto newer = WriteTiny(5, 0.75f);
  auto exported_wpe = [&]() {
    absl::StatusOr<varuna::SafetensorsFile> file =
        varuna::ReadSafetensors(out_ + "/model.safetensors");
    EXPECT_TRUE(file.ok()) << file.status();
    return file.ok() ? *file->Find("transformer.wpe.weight") : at::Tensor();
  };

  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->iteration, 5);
  EXPECT_TRUE(at::equal(exported_wpe(), newer.at("wpe.weight")));

  fs::remove_all(out_);
  summary = ExportHuggingFace(Options(save_dir_ + "/varuna_ckpt_3/"));
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->iteration, 3);
  EXPECT_TRUE(at::equal(exported_wpe(), older.at("wpe.weight")));

  fs::remove_all(out_);
  fs::create_directories(out_);  // an empty OUT is fine
  HfExportOptions options = Options(save_dir_);
  options.iteration = 3;
  summary = ExportHuggingFace(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->iteration, 3);
  EXPECT_TRUE(at::equal(exported_wpe(), older.at("wpe.weight")));
}

TEST_F(HfExportTest, BadCheckpointPathsAreNamed) {
  WriteTiny(3);
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(root_ + "/nope"));
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(summary.status()), AllOf(HasSubstr(root_ + "/nope"), HasSubstr("--save")));

  HfExportOptions options = Options(save_dir_);
  options.iteration = 9;
  summary = ExportHuggingFace(options);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr("--iteration=9"), HasSubstr("varuna_ckpt_9")));

  options = Options(save_dir_ + "/varuna_ckpt_3");
  options.iteration = 4;
  summary = ExportHuggingFace(options);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr("--iteration=4"), HasSubstr("contradicts")));

  fs::create_directories(root_ + "/empty");
  summary = ExportHuggingFace(Options(root_ + "/empty"));
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(summary.status()), HasSubstr(root_ + "/empty"));
  ExpectNothingWritten();
}

TEST_F(HfExportTest, IncompleteOrDamagedCheckpointIsRefused) {
  WriteTiny(3);
  const std::string ckpt = save_dir_ + "/varuna_ckpt_3";
  fs::remove(ckpt + "/" + varuna::kCheckpointCompleteMarker);  // an interrupted write
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(ckpt));
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(summary.status()), HasSubstr(ckpt));
  summary = ExportHuggingFace(Options(save_dir_));  // no complete checkpoint to pick
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(summary.status()), AllOf(HasSubstr(save_dir_), HasSubstr("varuna_ckpt_3")));
  ExpectNothingWritten();

  // A flipped byte in the largest file (a segment's tensors) is caught by its checksum.
  fs::remove_all(save_dir_);
  WriteTiny(3);
  std::string largest;
  for (const auto& entry : fs::recursive_directory_iterator(ckpt)) {
    if (entry.is_regular_file() &&
        (largest.empty() || entry.file_size() > fs::file_size(largest))) {
      largest = entry.path().string();
    }
  }
  {
    std::fstream file(largest, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-5, std::ios::end);
    file.put('\x7f');
  }
  summary = ExportHuggingFace(Options(ckpt));
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(summary.status()), HasSubstr(ckpt));
  ExpectNothingWritten();
}

TEST_F(HfExportTest, MissingModelConfigurationIsDataLoss) {
  WriteTinyCheckpoint(3, 0.5f, TinyConfig(), Value());
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr("varuna_ckpt_3"), HasSubstr("no model configuration"),
                    HasSubstr("trainer.model")));
  ExpectNothingWritten();
}

TEST_F(HfExportTest, CheckpointWithoutVocabSizeNeedsTheFlag) {
  Value model = ModelJson(TinyConfig());
  model.erase("vocab_size");
  model.erase("layernorm_epsilon");
  const auto parameters = WriteTinyCheckpoint(3, 0.5f, TinyConfig(), model);
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(summary.status()), AllOf(HasSubstr("varuna_ckpt_3"), HasSubstr("predates"),
                                               HasSubstr("--vocab-size N")));
  ExpectNothingWritten();

  HfExportOptions options = Options(save_dir_);
  options.vocab_size = 129;
  summary = ExportHuggingFace(options);
  ASSERT_FALSE(summary.ok());
  EXPECT_THAT(Message(summary.status()), HasSubstr("vocab_size 129 exceeds"));

  options.vocab_size = 90;
  options.trim_padded_vocab = true;  // the real size given is what is kept
  summary = ExportHuggingFace(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  absl::StatusOr<varuna::SafetensorsFile> file =
      varuna::ReadSafetensors(out_ + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(at::equal(*file->Find("transformer.wte.weight"),
                        parameters.at("wte.weight").narrow(0, 0, 90)));
  absl::StatusOr<Value> config = varuna::json::Parse(ReadText(out_ + "/config.json"));
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(varuna::json::Find(*config, "vocab_size")->get<int64_t>(), 90);
  EXPECT_EQ(varuna::json::Find(*config, "eos_token_id")->get<int64_t>(), 89);
  EXPECT_DOUBLE_EQ(varuna::json::Find(*config, "layer_norm_epsilon")->get<double>(), 1e-5);
}

TEST_F(HfExportTest, MissingTensorIsDataLoss) {
  WriteTinyCheckpoint(3, 0.5f, TinyConfig(), ModelJson(TinyConfig()),
                      [](std::map<int, NamedTensors>* segments, Value*) {
                        NamedTensors& tensors = (*segments)[1];
                        tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                                     [](const auto& named) {
                                                       return named.first == "h.1.mlp.c_fc.weight";
                                                     }),
                                      tensors.end());
                      });
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr("varuna_ckpt_3"), HasSubstr("no tensor h.1.mlp.c_fc.weight")));
  ExpectNothingWritten();
}

TEST_F(HfExportTest, WrongShapeIsDataLoss) {
  WriteTinyCheckpoint(3, 0.5f, TinyConfig(), ModelJson(TinyConfig()),
                      [](std::map<int, NamedTensors>* segments, Value*) {
                        for (auto& [name, tensor] : (*segments)[0]) {
                          if (name == "h.0.attn.c_proj.weight") tensor = Distinct({32, 31}, 1, 0);
                        }
                      });
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr("varuna_ckpt_3"), HasSubstr("h.0.attn.c_proj.weight"),
                    HasSubstr("[32, 31]"), HasSubstr("[32, 32]")));
  ExpectNothingWritten();
}

TEST_F(HfExportTest, UntiedLmHeadIsWarnedAbout) {
  WriteTinyCheckpoint(3, 0.5f, TinyConfig(), ModelJson(TinyConfig()),
                      [](std::map<int, NamedTensors>* segments, Value*) {
                        for (auto& [name, tensor] : (*segments)[kLayers - 1]) {
                          if (name == gpt2::kLmHeadName) tensor = tensor.add(1);
                        }
                      });
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_THAT(summary->warnings,
              ElementsAre(AllOf(HasSubstr("lm_head_weight differs from wte.weight"),
                                HasSubstr("varuna_ckpt_3"))));
}

TEST_F(HfExportTest, NonEmptyOutputIsRefusedAndLeftAlone) {
  WriteTiny(3);
  fs::create_directories(out_);
  std::ofstream(out_ + "/keep.txt") << "mine";
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr(out_), HasSubstr("not an empty directory")));
  EXPECT_THAT(Listing(out_), ElementsAre("keep.txt"));
  EXPECT_EQ(ReadText(out_ + "/keep.txt"), "mine");
  EXPECT_THAT(Listing(root_ + "/exports"), ElementsAre("gpt2"));

  fs::remove_all(out_);
  std::ofstream(out_) << "a file";
  summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadText(out_), "a file");
}

// Tokenizer cases share one tiny SentencePiece model (300 pieces: 256 bytes, 4 specials and
// some merges), trained once.
class HfExportTokenizerTest : public HfExportTest {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = std::getenv("TEST_TMPDIR");
    {
      std::ofstream corpus(dir + "/hf_corpus.txt");
      const char* words[] = {"the", "quick",  "brown", "fox",  "jumps", "over",  "lazy", "dog",
                             "cat", "sleeps", "under", "warm", "sun",   "birds", "sing", "trees"};
      for (int i = 0; i < 300; ++i) {
        for (int w = 0; w < 8; ++w) corpus << (w ? " " : "") << words[(i * 7 + w * 3) % 16];
        corpus << ".\n";
      }
    }
    data::TokenizerTrainOptions options;
    options.input_files = {dir + "/hf_corpus.txt"};
    options.model_prefix = dir + "/hf_tokenizer";
    options.vocab_size = kTokenizerVocab;
    options.num_threads = 1;
    const absl::Status status = data::TrainTokenizer(options);
    ASSERT_TRUE(status.ok()) << status;
    model_file_ = new std::string(options.model_prefix + ".model");
  }
  static void TearDownTestSuite() { delete model_file_; }

  static constexpr int kTokenizerVocab = 300;
  static std::string* model_file_;
};
std::string* HfExportTokenizerTest::model_file_ = nullptr;

TEST_F(HfExportTokenizerTest, CopiesTheTokenizerAndUsesItsEod) {
  const gpt2::Gpt2Config config = TinyConfig(kTokenizerVocab);  // padded to 384
  WriteTinyCheckpoint(3, 0.5f, config, ModelJson(config));
  HfExportOptions options = Options(save_dir_);
  options.tokenizer_model = *model_file_;
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->tokenizer_model, *model_file_);
  EXPECT_THAT(Listing(out_),
              ElementsAre("config.json", "generation_config.json", "model.safetensors",
                          "special_tokens_map.json", "tokenizer.json", "tokenizer.model",
                          "tokenizer_config.json"));
  EXPECT_EQ(ReadText(out_ + "/tokenizer.model"), ReadText(*model_file_));
  // The tokenizer files (their structure is hf_tokenizer_test's; ids hf_tokenizer_parity_test's).
  absl::StatusOr<Value> tokenizer = varuna::json::Parse(ReadText(out_ + "/tokenizer.json"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)["model"]["type"], "BPE");
  EXPECT_EQ((*tokenizer)["model"]["vocab"].size(), static_cast<size_t>(kTokenizerVocab));
  EXPECT_EQ((*tokenizer)["model"]["vocab"]["</s>"], 2);
  EXPECT_FALSE((*tokenizer)["model"]["vocab"].contains("<|endoftext|>"));
  absl::StatusOr<Value> tokenizer_config =
      varuna::json::Parse(ReadText(out_ + "/tokenizer_config.json"));
  ASSERT_TRUE(tokenizer_config.ok()) << tokenizer_config.status();
  EXPECT_EQ((*tokenizer_config)["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_EQ((*tokenizer_config)["model_max_length"], 16);  // n_positions
  EXPECT_EQ((*tokenizer_config)["eos_token"], "</s>");
  EXPECT_EQ((*tokenizer_config)["pad_token"], "<pad>");
  absl::StatusOr<Value> map = varuna::json::Parse(ReadText(out_ + "/special_tokens_map.json"));
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ((*map)["eos_token"], "</s>");
  absl::StatusOr<Value> generation =
      varuna::json::Parse(ReadText(out_ + "/generation_config.json"));
  ASSERT_TRUE(generation.ok()) << generation.status();
  EXPECT_EQ(varuna::json::Serialize(*generation),
            R"({"bos_token_id":2,"eos_token_id":2,"pad_token_id":3})");
  absl::StatusOr<Value> json = varuna::json::Parse(ReadText(out_ + "/config.json"));
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(varuna::json::Find(*json, "vocab_size")->get<int64_t>(), 384);  // the padded rows
  EXPECT_EQ(varuna::json::Find(*json, "eos_token_id")->get<int64_t>(), 2);  // "</s>", the EOD
  EXPECT_EQ(varuna::json::Find(*json, "bos_token_id")->get<int64_t>(), 2);
  absl::StatusOr<varuna::SafetensorsFile> file =
      varuna::ReadSafetensors(out_ + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->Find("transformer.wte.weight")->size(0), 384);
}

TEST_F(HfExportTokenizerTest, RecordedTokenizerIsUsedAndSuppliesAMissingVocabSize) {
  const gpt2::Gpt2Config config = TinyConfig(kTokenizerVocab);
  Value model = ModelJson(config);
  model.erase("vocab_size");  // an older checkpoint
  WriteTinyCheckpoint(3, 0.5f, config, model, [](std::map<int, NamedTensors>*, Value* trainer) {
    (*trainer)["tokenizer_model"] = *model_file_;
  });
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(ReadText(out_ + "/tokenizer.model"), ReadText(*model_file_));
  EXPECT_THAT(summary->notes, testing::Contains(HasSubstr("vocab_size 300 taken from")));
}

TEST_F(HfExportTokenizerTest, TokenizerProblemsAreNamed) {
  WriteTiny(3);  // vocab_size 100
  HfExportOptions options = Options(save_dir_);
  options.tokenizer_model = *model_file_;
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(options);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr("--tokenizer-model=" + *model_file_), HasSubstr("300 pieces"),
                    HasSubstr("vocab_size is 100")));

  options.tokenizer_model = root_ + "/missing.model";
  summary = ExportHuggingFace(options);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(summary.status()),
              HasSubstr("--tokenizer-model=" + root_ + "/missing.model"));
  ExpectNothingWritten();

  // A recorded tokenizer that has moved away: the message points at the flag.
  fs::remove_all(save_dir_);
  WriteTinyCheckpoint(3, 0.5f, TinyConfig(), ModelJson(TinyConfig()),
                      [this](std::map<int, NamedTensors>*, Value* trainer) {
                        (*trainer)["tokenizer_model"] = root_ + "/moved.model";
                      });
  summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr(root_ + "/moved.model"), HasSubstr("--tokenizer-model PATH")));
  ExpectNothingWritten();
}

// GPT-2's own vocab.json and merges.txt (@gpt2_bpe), in the test's runfiles.
std::string Gpt2File(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : "..") + "/gpt2_bpe/" + name;
}

// trainer.tokenizer as the trainer records it (trainer/run_checkpoint.cc): type, absolute files,
// their crc32c and the vocabulary size.
Value TokenizerRecord(const data::TokenizerSpec& spec) {
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer = data::LoadTokenizer(spec);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (!tokenizer.ok()) return Value();
  absl::StatusOr<data::DatasetTokenizer> described = data::DescribeTokenizer(**tokenizer);
  EXPECT_TRUE(described.ok()) << described.status();
  if (!described.ok()) return Value();
  Value record = Value::object();
  record["type"] = data::TokenizerTypeName(described->kind);
  record["files"] = described->files;
  record["crc32c"] = absl::StrFormat("%08x", described->crc32c);
  record["vocab_size"] = described->vocab_size;
  return record;
}

// The GPT-2 export: the real vocabulary (50257 ids, padded to 50304) on the tiny model.
class HfExportGpt2Test : public HfExportTokenizerTest {
 protected:
  static constexpr int kGpt2Vocab = 50257;
  static constexpr int kEndOfText = 50256;

  data::TokenizerSpec Gpt2Spec() const {
    return {"", "", Gpt2File("gpt2-vocab.json"), Gpt2File("gpt2-merges.txt")};
  }
  // A checkpoint of the tiny model with GPT-2's vocabulary; `tokenizer` as trainer.tokenizer.
  void WriteGpt2Checkpoint(Value tokenizer) {
    const gpt2::Gpt2Config config = TinyConfig(kGpt2Vocab);
    WriteTinyCheckpoint(3, 0.5f, config, ModelJson(config),
                        [&](std::map<int, NamedTensors>*, Value* trainer) {
                          (*trainer)["tokenizer_model"] = "";
                          (*trainer)["tokenizer"] = tokenizer;
                        });
  }
  // A GPT-2 vocab.json of the 256 byte tokens (GPT-2's byte -> character map) and
  // "<|endoftext|>", with an empty merges.txt: a valid GPT-2 BPE of 257 ids.
  std::pair<std::string, std::string> WriteSmallGpt2Files() const {
    std::vector<int> printable;
    for (int b = '!'; b <= '~'; ++b) printable.push_back(b);
    for (int b = 0xA1; b <= 0xAC; ++b) printable.push_back(b);
    for (int b = 0xAE; b <= 0xFF; ++b) printable.push_back(b);
    std::map<int, int> to_char;
    for (int b : printable) to_char[b] = b;
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      if (!to_char.count(b)) to_char[b] = next++;
    }
    Value vocab = Value::object();
    for (int b = 0; b < 256; ++b) {
      std::string utf8;
      const int c = to_char[b];
      if (c < 0x80) {
        utf8 = std::string(1, static_cast<char>(c));
      } else {
        utf8 = {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
      }
      vocab[utf8] = b;
    }
    vocab["<|endoftext|>"] = 256;
    const std::string vocab_file = root_ + "/small-vocab.json";
    const std::string merge_file = root_ + "/small-merges.txt";
    std::ofstream(vocab_file) << varuna::json::Serialize(vocab);
    std::ofstream(merge_file) << "#version: 0.2\n";
    return {vocab_file, merge_file};
  }
};

TEST_F(HfExportGpt2Test, WritesGpt2TokenizerFilesFromTheRecordedTokenizer) {
  WriteGpt2Checkpoint(TokenizerRecord(Gpt2Spec()));
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(Options(save_dir_));
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->tokenizer_model, "");
  ASSERT_EQ(summary->tokenizer_files.size(), 2u);
  EXPECT_THAT(Listing(out_), ElementsAre("config.json", "generation_config.json", "merges.txt",
                                         "model.safetensors", "special_tokens_map.json",
                                         "tokenizer.json", "tokenizer_config.json", "vocab.json"));
  EXPECT_EQ(ReadText(out_ + "/vocab.json"), ReadText(Gpt2File("gpt2-vocab.json")));
  EXPECT_EQ(ReadText(out_ + "/merges.txt"), ReadText(Gpt2File("gpt2-merges.txt")));

  // nlohmann::json (a std::map per object): ordered_json would look 50257 keys up one by one.
  const nlohmann::json tokenizer = nlohmann::json::parse(ReadText(out_ + "/tokenizer.json"));
  const nlohmann::json& model = tokenizer["model"];
  EXPECT_EQ(model["type"], "BPE");
  EXPECT_TRUE(model["unk_token"].is_null());
  EXPECT_EQ(model["byte_fallback"], false);
  EXPECT_EQ(model["vocab"].size(), static_cast<size_t>(kGpt2Vocab));
  EXPECT_EQ(model["vocab"]["<|endoftext|>"], kEndOfText);
  EXPECT_EQ(model["vocab"]["!"], 0);
  EXPECT_EQ(model["vocab"]["\xC4\xA0the"], 262);  // "Ġthe"
  ASSERT_EQ(model["merges"].size(), 50000u);
  EXPECT_EQ(model["merges"][0].dump(), "[\"\xC4\xA0\",\"t\"]");  // ["Ġ", "t"]
  EXPECT_EQ(
      tokenizer["pre_tokenizer"].dump(),
      R"({"add_prefix_space":false,"trim_offsets":true,"type":"ByteLevel","use_regex":true})");
  EXPECT_EQ(tokenizer["decoder"]["type"], "ByteLevel");
  EXPECT_EQ(tokenizer["post_processor"]["type"], "ByteLevel");
  EXPECT_TRUE(tokenizer["normalizer"].is_null());
  // "<|endoftext|>" is no added token: `tokenizers` would turn the text "<|endoftext|>" into it.
  EXPECT_EQ(tokenizer["added_tokens"].size(), 0u);

  absl::StatusOr<Value> config = varuna::json::Parse(ReadText(out_ + "/tokenizer_config.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)["tokenizer_class"], "GPT2Tokenizer");
  EXPECT_EQ((*config)["model_max_length"], 16);
  EXPECT_EQ((*config)["bos_token"], "<|endoftext|>");
  EXPECT_EQ((*config)["eos_token"], "<|endoftext|>");
  EXPECT_EQ((*config)["unk_token"], "<|endoftext|>");
  EXPECT_FALSE(config->contains("pad_token"));
  EXPECT_EQ((*config)["add_prefix_space"], false);
  EXPECT_EQ((*config)["split_special_tokens"], true);
  EXPECT_EQ((*config)["added_tokens_decoder"]["50256"]["content"], "<|endoftext|>");
  EXPECT_EQ((*config)["added_tokens_decoder"]["50256"]["special"], true);
  absl::StatusOr<Value> map = varuna::json::Parse(ReadText(out_ + "/special_tokens_map.json"));
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(varuna::json::Serialize(*map),
            R"({"bos_token":"<|endoftext|>","eos_token":"<|endoftext|>",)"
            R"("unk_token":"<|endoftext|>"})");
  absl::StatusOr<Value> generation =
      varuna::json::Parse(ReadText(out_ + "/generation_config.json"));
  ASSERT_TRUE(generation.ok());
  EXPECT_EQ(varuna::json::Serialize(*generation),
            R"({"bos_token_id":50256,"eos_token_id":50256,"pad_token_id":50256})");
  absl::StatusOr<Value> json = varuna::json::Parse(ReadText(out_ + "/config.json"));
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(varuna::json::Find(*json, "vocab_size")->get<int64_t>(), 50304);  // padded, as trained
  EXPECT_EQ(varuna::json::Find(*json, "bos_token_id")->get<int64_t>(), kEndOfText);
  EXPECT_EQ(varuna::json::Find(*json, "eos_token_id")->get<int64_t>(), kEndOfText);
  absl::StatusOr<varuna::SafetensorsFile> file =
      varuna::ReadSafetensors(out_ + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->Find("transformer.wte.weight")->size(0), 50304);
}

TEST_F(HfExportGpt2Test, FlagsChooseTheTokenizerOfACheckpointThatRecordsNone) {
  WriteGpt2Checkpoint(Value());
  HfExportOptions options = Options(save_dir_);
  options.tokenizer_type = "GPT2BPETokenizer";
  options.vocab_file = Gpt2File("gpt2-vocab.json");
  options.merge_file = Gpt2File("gpt2-merges.txt");
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(ReadText(out_ + "/vocab.json"), ReadText(Gpt2File("gpt2-vocab.json")));
  EXPECT_EQ(ReadText(out_ + "/merges.txt"), ReadText(Gpt2File("gpt2-merges.txt")));
  EXPECT_TRUE(fs::exists(out_ + "/tokenizer.json"));

  // The files recorded, passed again: the same tokenizer, accepted.
  fs::remove_all(root_ + "/exports");
  fs::remove_all(save_dir_);
  WriteGpt2Checkpoint(TokenizerRecord(Gpt2Spec()));
  summary = ExportHuggingFace(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
}

TEST_F(HfExportGpt2Test, TokenizerOtherThanTheRecordedOneIsRefusedByName) {
  WriteGpt2Checkpoint(TokenizerRecord(Gpt2Spec()));
  const std::string recorded_flags =
      absl::StrCat("--tokenizer-type=GPT2BPETokenizer --vocab-file=", Gpt2File("gpt2-vocab.json"),
                   " --merge-file=", Gpt2File("gpt2-merges.txt"));
  auto refusal = [&](const HfExportOptions& options) {
    absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(options);
    EXPECT_FALSE(summary.ok());
    EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument);
    ExpectNothingWritten();
    return Message(summary.status());
  };
  // Another kind: a SentencePiece model.
  HfExportOptions options = Options(save_dir_);
  options.tokenizer_model = *model_file_;
  EXPECT_THAT(refusal(options),
              AllOf(HasSubstr("was trained with GPT2BPETokenizer"), HasSubstr("50257 ids"),
                    HasSubstr("SentencePieceTokenizer (" + *model_file_), HasSubstr("another kind"),
                    HasSubstr("pass " + recorded_flags)));
  // Another vocabulary size: a GPT-2 BPE of 257 ids.
  const auto [small_vocab, small_merges] = WriteSmallGpt2Files();
  options = Options(save_dir_);
  options.vocab_file = small_vocab;
  options.merge_file = small_merges;
  EXPECT_THAT(refusal(options), AllOf(HasSubstr(small_vocab), HasSubstr(small_merges),
                                      HasSubstr("another vocabulary (257 ids, not 50257)"),
                                      HasSubstr("pass " + recorded_flags)));
  // Other bytes: GPT-2's vocabulary with a newline added.
  const std::string changed_vocab = root_ + "/changed-vocab.json";
  std::ofstream(changed_vocab) << ReadText(Gpt2File("gpt2-vocab.json")) << "\n";
  options = Options(save_dir_);
  options.vocab_file = changed_vocab;
  options.merge_file = Gpt2File("gpt2-merges.txt");
  EXPECT_THAT(refusal(options), AllOf(HasSubstr(changed_vocab), HasSubstr("other bytes (crc32c "),
                                      HasSubstr("pass " + recorded_flags)));
}

TEST_F(HfExportTokenizerTest, SentencePieceCheckpointRefusesAnotherModel) {
  const gpt2::Gpt2Config config = TinyConfig(kTokenizerVocab);
  const Value record = TokenizerRecord({"", *model_file_, "", ""});
  WriteTinyCheckpoint(3, 0.5f, config, ModelJson(config),
                      [&](std::map<int, NamedTensors>*, Value* trainer) {
                        (*trainer)["tokenizer_model"] = *model_file_;
                        (*trainer)["tokenizer"] = record;
                      });
  // Another model of the same kind and size (other bytes): one trained on other text.
  const std::string corpus = root_ + "/other.txt";
  {
    std::ofstream out(corpus);
    for (int i = 0; i < 300; ++i) {
      out << "zebra yak walrus vole " << i << " umbrella tiger " << i * 7 << " quilt.\n";
    }
  }
  data::TokenizerTrainOptions train;
  train.input_files = {corpus};
  train.model_prefix = root_ + "/other";
  train.vocab_size = kTokenizerVocab;
  train.num_threads = 1;
  ASSERT_TRUE(data::TrainTokenizer(train).ok());
  HfExportOptions options = Options(save_dir_);
  options.tokenizer_model = root_ + "/other.model";
  absl::StatusOr<HfExportSummary> summary = ExportHuggingFace(options);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr("other bytes"), HasSubstr(root_ + "/other.model"),
                    HasSubstr("pass --tokenizer-model=" + *model_file_)));
  ExpectNothingWritten();
  // The recorded model itself is accepted.
  options.tokenizer_model = *model_file_;
  summary = ExportHuggingFace(options);
  EXPECT_TRUE(summary.ok()) << summary.status();
}

TEST(HfExportArgsTest, ParsesGpt2TokenizerFlags) {
  absl::StatusOr<HfExportOptions> options =
      ParseHfExportArgs({"ckpts", "out", "--tokenizer-type=GPT2BPETokenizer", "--vocab-file=v.json",
                         "--merge-file", "m.txt"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->tokenizer_type, "GPT2BPETokenizer");
  EXPECT_EQ(options->vocab_file, "v.json");
  EXPECT_EQ(options->merge_file, "m.txt");
  auto error = [](const std::vector<std::string>& args) {
    absl::StatusOr<HfExportOptions> parsed = ParseHfExportArgs(args);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    return Message(parsed.status());
  };
  EXPECT_THAT(error({"a", "b", "--vocab-file=v.json"}), HasSubstr("--merge-file"));
  EXPECT_THAT(error({"a", "b", "--vocab-file="}), HasSubstr("--vocab-file needs a path"));
  EXPECT_THAT(error({"a", "b", "--tokenizer-model=t.model", "--vocab-file=v", "--merge-file=m"}),
              HasSubstr("--tokenizer-model"));
  EXPECT_THAT(error({"a", "b", "--tokenizer-type=Gpt2", "--tokenizer-model=t.model"}),
              HasSubstr("Gpt2"));
}

TEST(HfExportArgsTest, ParsesPathsAndFlags) {
  absl::StatusOr<HfExportOptions> options = ParseHfExportArgs(
      {"ckpts", "--iteration", "12", "out", "--tokenizer-model=t.model", "--vocab-size=50257"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->checkpoint, "ckpts");
  EXPECT_EQ(options->output_dir, "out");
  EXPECT_EQ(options->iteration, 12);
  EXPECT_EQ(options->tokenizer_model, "t.model");
  EXPECT_EQ(options->vocab_size, 50257);
  EXPECT_FALSE(options->trim_padded_vocab);
  options = ParseHfExportArgs({"ckpts", "out", "--trim-padded-vocab"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->trim_padded_vocab);

  options = ParseHfExportArgs({"ckpts", "out"});
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->iteration, -1);
  EXPECT_EQ(options->vocab_size, 0);
  EXPECT_EQ(options->tokenizer_model, "");
}

TEST(HfExportArgsTest, BadArgumentsAreNamed) {
  auto error = [](const std::vector<std::string>& args) {
    absl::StatusOr<HfExportOptions> options = ParseHfExportArgs(args);
    EXPECT_FALSE(options.ok());
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
    return Message(options.status());
  };
  EXPECT_THAT(error({"ckpts"}), HasSubstr("expected 2 paths (CKPT OUT), got 1"));
  EXPECT_THAT(error({"a", "b", "c"}), HasSubstr("got 3: a b c"));
  EXPECT_THAT(error({"a", "b", "--iter=3"}), HasSubstr("unknown flag --iter"));
  EXPECT_THAT(error({"a", "b", "--iteration=x"}), HasSubstr("--iteration=x is not an integer"));
  EXPECT_THAT(error({"a", "b", "--vocab-size=0"}),
              HasSubstr("--vocab-size=0 must be >= 1: pass e.g. --vocab-size=50257, or leave "
                        "--vocab-size out for its default"));
  EXPECT_THAT(error({"a", "b", "--iteration=-1"}),
              HasSubstr("--iteration=-1 must be >= 0: pass e.g. --iteration=1000"));
  EXPECT_THAT(error({"a", "b", "--tokenizer-model"}), HasSubstr("--tokenizer-model needs a value"));
}

}  // namespace
}  // namespace tools
