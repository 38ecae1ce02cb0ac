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
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
constexpr int kVocab = 100;  // padded to 128

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
      {"transformer.wte.weight", {kVocab, c}},
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
                                         HasSubstr("--vocab-size"), HasSubstr("(default 0)")));
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

  // Values: Conv1D weights transposed, wte cut to the real vocabulary, the rest as stored.
  const at::Tensor& c_attn = *file->Find("transformer.h.1.attn.c_attn.weight");
  EXPECT_TRUE(at::equal(c_attn, parameters.at("h.1.attn.c_attn.weight").t()));
  EXPECT_TRUE(at::equal(*file->Find("transformer.h.0.mlp.c_proj.weight"),
                        parameters.at("h.0.mlp.c_proj.weight").t()));
  EXPECT_TRUE(at::equal(*file->Find("transformer.wte.weight"),
                        parameters.at("wte.weight").narrow(0, 0, kVocab)));
  EXPECT_TRUE(at::equal(*file->Find("transformer.h.1.ln_2.bias"), parameters.at("h.1.ln_2.bias")));
  EXPECT_TRUE(at::equal(*file->Find("transformer.ln_f.weight"), parameters.at("ln_f.weight")));
  for (const auto& [name, value] : parameters) {
    if (name == gpt2::kLmHeadName) continue;
    at::Tensor want = value;
    if (gpt2::TransposedInHuggingFace(name)) want = want.t();
    if (name == gpt2::kWordEmbeddingName) want = want.narrow(0, 0, kVocab);
    EXPECT_TRUE(at::equal(*file->Find(gpt2::HuggingFaceName(name)), want)) << name;
  }

  absl::StatusOr<Value> config = varuna::json::Parse(ReadText(out_ + "/config.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(varuna::json::Find(*config, "model_type")->get<std::string>(), "gpt2");
  EXPECT_EQ(*varuna::json::Find(*config, "architectures"), Value::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(varuna::json::Find(*config, "vocab_size")->get<int64_t>(), kVocab);
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
  EXPECT_EQ(varuna::json::Find(*json, "vocab_size")->get<int64_t>(), kTokenizerVocab);
  EXPECT_EQ(varuna::json::Find(*json, "eos_token_id")->get<int64_t>(), 2);  // "</s>", the EOD
  EXPECT_EQ(varuna::json::Find(*json, "bos_token_id")->get<int64_t>(), 2);
  absl::StatusOr<varuna::SafetensorsFile> file =
      varuna::ReadSafetensors(out_ + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->Find("transformer.wte.weight")->size(0), kTokenizerVocab);
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

TEST(HfExportArgsTest, ParsesPathsAndFlags) {
  absl::StatusOr<HfExportOptions> options = ParseHfExportArgs(
      {"ckpts", "--iteration", "12", "out", "--tokenizer-model=t.model", "--vocab-size=50257"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->checkpoint, "ckpts");
  EXPECT_EQ(options->output_dir, "out");
  EXPECT_EQ(options->iteration, 12);
  EXPECT_EQ(options->tokenizer_model, "t.model");
  EXPECT_EQ(options->vocab_size, 50257);

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
