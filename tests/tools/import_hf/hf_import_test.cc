// import_hf (tools/import_hf/hf_import.h) on the checked-in transformers fixture (testdata/, made
// by make_fixture.py): the trainer's evaluation of the imported checkpoint gives transformers'
// loss on the same batch (fp32, relative 1e-5); exporting the import gives transformers' own
// model.safetensors byte for byte; the tied pair, the padded rows and the tokenizer are recorded
// as the trainer records them; and every refusal (config fields, tensors, a pickle-only folder,
// a non-empty OUT) names what is wrong.
#include "tools/import_hf/hf_import.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/gpt2/config.h"
#include "models/gpt2/parameter_names.h"
#include "tools/export_hf/hf_export.h"
#include "tools/import_hf/hf_gpt2_config.h"
#include "trainer/arguments.h"
#include "trainer/gpt_engine.h"
#include "trainer/run_checkpoint.h"
#include "varuna/checkpoint/files.h"
#include "varuna/io/json.h"
#include "varuna/io/safetensors.h"

namespace tools {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using varuna::json::Value;

constexpr char kFixture[] = "tests/tools/import_hf/testdata";

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

Value ReadJson(const std::string& path) { return *varuna::json::Parse(ReadBytes(path)); }

std::string Message(const absl::Status& status) { return std::string(status.message()); }

class HfImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }

  // A copy of the fixture folder that a test may change.
  std::string CopyFixture() const {
    const std::string dir = root_ + "/hf";
    fs::create_directories(dir);
    for (const char* name : {"config.json", "model.safetensors"}) {
      fs::copy_file(fs::path(kFixture) / name, fs::path(dir) / name);
    }
    return dir;
  }

  absl::StatusOr<HfImportSummary> Import(const std::string& in, const std::string& out) const {
    HfImportOptions options;
    options.input_dir = in;
    options.output_dir = out;
    return ImportHuggingFace(options);
  }

  std::string root_;
};

// The trainer's evaluation (one stage, CPU, fp32, no dropout) of the checkpoint `dir` of `model`
// on `rows` of token ids: the mean cross entropy of predicting row[1:] from row[:-1].
absl::StatusOr<double> Evaluate(gpt2::Gpt2Config model, const std::string& dir,
                                const std::vector<std::vector<int64_t>>& rows) {
  model.hidden_dropout = 0;
  model.attention_dropout = 0;
  const int64_t batch = static_cast<int64_t>(rows.size());
  const int64_t tokens = static_cast<int64_t>(rows[0].size());
  trainer::GptEngineOptions options;
  options.model = model;
  options.engine.batch_size = static_cast<int>(batch);
  options.attention_backend = "fused-softmax";
  absl::StatusOr<trainer::GptEngine> gpt = trainer::CreateGptEngine(options);
  if (!gpt.ok()) return gpt.status();
  absl::StatusOr<Value> state = trainer::LoadWeights(*gpt->varuna, dir, 0, nullptr);
  if (!state.ok()) return state.status();
  std::vector<int64_t> ids;
  for (const auto& row : rows) ids.insert(ids.end(), row.begin(), row.end());
  const at::Tensor all = at::tensor(ids, at::kLong).reshape({batch, tokens});
  varuna::TensorMap inputs;
  inputs["input_ids"] = all.narrow(1, 0, tokens - 1).contiguous();
  inputs["labels"] = all.narrow(1, 1, tokens - 1).contiguous();
  inputs["position_ids"] =
      at::arange(tokens - 1, at::kLong).expand({batch, tokens - 1}).contiguous();
  inputs["loss_mask"] = at::ones({batch, tokens - 1}, at::kFloat);
  return gpt->varuna->evaluate(inputs);
}

// The fixture's batch of token ids.
std::vector<std::vector<int64_t>> ReferenceRows(const Value& reference) {
  std::vector<std::vector<int64_t>> rows;
  for (const auto& row : reference["tokens"]) {
    rows.emplace_back();
    for (const auto& id : row) rows.back().push_back(id.get<int64_t>());
  }
  return rows;
}

TEST_F(HfImportTest, TrainerEvaluationGivesTransformersLoss) {
  const std::string out = root_ + "/ckpt";
  absl::StatusOr<HfImportSummary> summary = Import(kFixture, out);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->checkpoint_dir, out + "/varuna_ckpt_0");
  const Value reference = ReadJson(std::string(kFixture) + "/reference_loss.json");

  absl::StatusOr<double> loss = Evaluate(summary->model, out, ReferenceRows(reference));
  ASSERT_TRUE(loss.ok()) << loss.status();
  const double expected = reference["loss"].get<double>();
  std::printf("trainer %.9g, transformers %.9g (relative %.2g)\n", *loss, expected,
              std::abs(*loss - expected) / expected);
  EXPECT_NEAR(*loss, expected, 1e-5 * expected)
      << "transformers " << reference["transformers_version"];
}

TEST_F(HfImportTest, ExportOfTheImportIsTransformersFileByteForByte) {
  const std::string out = root_ + "/ckpt";
  ASSERT_TRUE(Import(kFixture, out).ok());
  HfExportOptions options;
  options.checkpoint = out;
  options.output_dir = root_ + "/exported";
  absl::StatusOr<HfExportSummary> exported = ExportHuggingFace(options);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_TRUE(ReadBytes(root_ + "/exported/model.safetensors") ==
              ReadBytes(std::string(kFixture) + "/model.safetensors"));
}

TEST_F(HfImportTest, StoresTheTiedPairAndTheModelRecord) {
  const std::string out = root_ + "/ckpt";
  ASSERT_TRUE(Import(kFixture, out).ok());
  absl::StatusOr<varuna::CheckpointData> data = varuna::ReadCheckpoint(out, 0, {});
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->segments.size(), 2u);
  auto find = [&](int segment, const std::string& name) {
    for (const auto& [key, tensor] : data->segments.at(segment)) {
      if (key == name) return tensor;
    }
    return at::Tensor();
  };
  const at::Tensor wte = find(0, "wte.weight"), head = find(1, "lm_head_weight");
  ASSERT_TRUE(wte.defined() && head.defined());
  EXPECT_TRUE(at::equal(wte, head));
  // No optimizer state: weights only.
  EXPECT_FALSE(find(0, "wte.weight.exp_avg").defined());
  // Conv1D [in, out] is stored as the trainer's Linear [out, in].
  absl::StatusOr<varuna::SafetensorsFile> hf =
      varuna::ReadSafetensors(std::string(kFixture) + "/model.safetensors");
  ASSERT_TRUE(hf.ok());
  EXPECT_TRUE(
      at::equal(find(1, "h.1.mlp.c_fc.weight"), hf->Find("transformer.h.1.mlp.c_fc.weight")->t()));
  const Value& trainer = data->metadata["trainer"];
  EXPECT_EQ(trainer["weights_only"], true);
  EXPECT_EQ(trainer["iteration"], 0);
  EXPECT_EQ(trainer["model"]["vocab_size"], 1024);
  EXPECT_EQ(trainer["model"]["padded_vocab_size"], 1024);
  EXPECT_EQ(trainer["model"]["hidden_size"], 64);
  EXPECT_EQ(trainer["model"]["seq_length"], 64);
  EXPECT_TRUE(trainer["tokenizer"].is_null());
  EXPECT_EQ(data->metadata["engine"]["num_segments"], 2);
}

// A vocabulary that is not a multiple of --make-vocab-size-divisible-by gets copies of the mean
// row, in both copies of the tied pair; the record keeps the real size. The padded rows then take
// at most P / (V + P) of the trainer's softmax: the loss is above the unpadded model's (which is
// transformers') by at most -log(1 - 24/1024) here.
TEST_F(HfImportTest, PadsTheVocabularyWithTheMeanRow) {
  const std::string in = CopyFixture();
  Value config = ReadJson(in + "/config.json");
  config["vocab_size"] = 1000;
  WriteBytes(in + "/config.json", varuna::json::Serialize(config));
  absl::StatusOr<varuna::SafetensorsFile> file = varuna::ReadSafetensors(in + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  varuna::NamedTensors tensors;
  for (auto& [name, tensor] : file->tensors) {
    tensors.emplace_back(
        name, name == "transformer.wte.weight" ? tensor.narrow(0, 0, 1000).clone() : tensor);
  }
  ASSERT_TRUE(
      varuna::WriteSafetensors(in + "/model.safetensors", tensors, {{"format", "pt"}}).ok());
  const std::string out = root_ + "/ckpt";
  absl::StatusOr<HfImportSummary> summary = Import(in, out);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->model.vocab_size, 1000);
  EXPECT_EQ(summary->model.padded_vocab_size(), 1024);
  EXPECT_THAT(summary->Report(out), HasSubstr("vocabulary 1000 (padded to 1024)"));
  absl::StatusOr<varuna::CheckpointData> data = varuna::ReadCheckpoint(out, 0, {});
  ASSERT_TRUE(data.ok());
  for (const auto& [segment, name] :
       {std::pair<int, std::string>{0, "wte.weight"}, {1, "lm_head_weight"}}) {
    for (const auto& [key, tensor] : data->segments.at(segment)) {
      if (key != name) continue;
      ASSERT_EQ(tensor.size(0), 1024) << name;
      const at::Tensor mean = tensor.narrow(0, 0, 1000).to(at::kDouble).mean(0).to(at::kFloat);
      EXPECT_TRUE(at::allclose(tensor.narrow(0, 1000, 24), mean.expand({24, -1}))) << name;
      EXPECT_TRUE(at::equal(tensor.narrow(0, 0, 1000),
                            file->Find("transformer.wte.weight")->narrow(0, 0, 1000)));
    }
  }
  EXPECT_EQ(data->metadata["trainer"]["model"]["vocab_size"], 1000);
  EXPECT_EQ(data->metadata["trainer"]["model"]["padded_vocab_size"], 1024);

  HfImportOptions unpadded;
  unpadded.input_dir = in;
  unpadded.output_dir = root_ + "/unpadded";
  unpadded.make_vocab_size_divisible_by = 1;
  absl::StatusOr<HfImportSummary> exact = ImportHuggingFace(unpadded);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->model.padded_vocab_size(), 1000);
  std::vector<std::vector<int64_t>> rows =
      ReferenceRows(ReadJson(std::string(kFixture) + "/reference_loss.json"));
  for (auto& row : rows) {
    for (int64_t& id : row) id %= 1000;
  }
  absl::StatusOr<double> without = Evaluate(exact->model, unpadded.output_dir, rows);
  absl::StatusOr<double> with = Evaluate(summary->model, out, rows);
  ASSERT_TRUE(without.ok()) << without.status();
  ASSERT_TRUE(with.ok()) << with.status();
  std::printf("1000 ids: unpadded %.9g, padded to 1024 with the mean row %.9g (bound %.6g)\n",
              *without, *with, -std::log(1.0 - 24.0 / 1024.0));
  EXPECT_GT(*with, *without);
  EXPECT_LE(*with - *without, -std::log(1.0 - 24.0 / 1024.0) + 1e-6);
}

// GPT-2's own vocab.json and merges.txt (@gpt2_bpe), in the test's runfiles.
std::string Gpt2File(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : "..") + "/gpt2_bpe/" + name;
}

// A folder with GPT-2's tokenizer files is recorded as the trainer records its tokenizer, the
// files copied beside the checkpoint; GPT-2's 50,257 ids are padded to 50,304.
TEST_F(HfImportTest, RecordsGpt2TokenizerFiles) {
  const std::string in = root_ + "/hf";
  fs::create_directories(in);
  Value config = Value::object();
  config["model_type"] = "gpt2";
  config["n_layer"] = 1;
  config["n_embd"] = 8;
  config["n_head"] = 2;
  config["n_positions"] = 8;
  config["vocab_size"] = 50257;
  WriteBytes(in + "/config.json", varuna::json::Serialize(config));
  gpt2::Gpt2Config shapes;
  shapes.num_layers = 1;
  shapes.hidden_size = 8;
  shapes.num_attention_heads = 2;
  shapes.seq_length = shapes.max_position_embeddings = 8;
  shapes.vocab_size = 50257;
  shapes.make_vocab_size_divisible_by = 1;
  varuna::NamedTensors tensors;
  for (const gpt2::ParameterSpec& spec : gpt2::SegmentParameters(shapes, 0)) {
    if (spec.name == gpt2::kLmHeadName) continue;
    std::vector<int64_t> shape = spec.shape;
    if (gpt2::TransposedInHuggingFace(spec.name)) std::swap(shape[0], shape[1]);
    tensors.emplace_back(gpt2::HuggingFaceName(spec.name), at::randn(shape));
  }
  ASSERT_TRUE(
      varuna::WriteSafetensors(in + "/model.safetensors", tensors, {{"format", "pt"}}).ok());
  fs::copy_file(Gpt2File("gpt2-vocab.json"), in + "/vocab.json");
  fs::copy_file(Gpt2File("gpt2-merges.txt"), in + "/merges.txt");
  const std::string out = root_ + "/ckpt";
  absl::StatusOr<HfImportSummary> summary = Import(in, out);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->model.padded_vocab_size(), 50304);
  const std::string vocab = fs::absolute(out + "/tokenizer/vocab.json").string();
  const std::string merges = fs::absolute(out + "/tokenizer/merges.txt").string();
  EXPECT_EQ(ReadBytes(vocab), ReadBytes(Gpt2File("gpt2-vocab.json")));
  EXPECT_THAT(summary->Report(out),
              AllOf(HasSubstr("--vocab-file=" + vocab + " --merge-file=" + merges),
                    HasSubstr("rows padded to 50304")));
  absl::StatusOr<varuna::CheckpointData> data = varuna::ReadCheckpoint(out, 0, {});
  ASSERT_TRUE(data.ok());
  const Value& tokenizer = data->metadata["trainer"]["tokenizer"];
  EXPECT_EQ(tokenizer["type"], "GPT2BPETokenizer");
  EXPECT_EQ(tokenizer["files"], Value::array({vocab, merges}));
  EXPECT_EQ(tokenizer["vocab_size"], 50257);
  EXPECT_EQ(tokenizer["crc32c"].get<std::string>().size(), 8u);
  EXPECT_EQ(data->metadata["trainer"]["model"]["vocab_size"], 50257);
  EXPECT_EQ(data->metadata["trainer"]["model"]["padded_vocab_size"], 50304);
}

TEST_F(HfImportTest, ConfigProblemsAreNamedFieldByField) {
  const std::string in = CopyFixture();
  Value config = ReadJson(in + "/config.json");
  config["n_head"] = 5;
  config["activation_function"] = "relu";
  config["scale_attn_by_inverse_layer_idx"] = true;
  config["reorder_and_upcast_attn"] = true;
  config["tie_word_embeddings"] = false;
  config["n_inner"] = 100;
  config.erase("n_layer");
  WriteBytes(in + "/config.json", varuna::json::Serialize(config));
  absl::StatusOr<HfImportSummary> summary = Import(in, root_ + "/ckpt");
  ASSERT_FALSE(summary.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(summary.status()));
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr(in + "/config.json"), HasSubstr("n_layer is missing"),
                    HasSubstr("n_embd 64 is not divisible by n_head 5"),
                    HasSubstr("activation_function is \"relu\""),
                    HasSubstr("scale_attn_by_inverse_layer_idx is true"),
                    HasSubstr("reorder_and_upcast_attn is true"),
                    HasSubstr("tie_word_embeddings is false"), HasSubstr("n_inner is 100")));
  EXPECT_FALSE(fs::exists(root_ + "/ckpt"));
}

TEST_F(HfImportTest, ConfigReaderTakesGpt2Defaults) {
  Value config = Value::object();
  config["n_layer"] = 3;
  config["n_embd"] = 48;
  config["n_head"] = 6;
  config["n_ctx"] = 32;  // older configs: n_ctx without n_positions
  config["vocab_size"] = 200;
  absl::StatusOr<gpt2::Gpt2Config> read = Gpt2ConfigFromHuggingFace(config, "config.json", 64);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->num_layers, 3);
  EXPECT_EQ(read->max_position_embeddings, 32);
  EXPECT_EQ(read->seq_length, 32);
  EXPECT_EQ(read->padded_vocab_size(), 256);
  EXPECT_EQ(read->layernorm_epsilon, 1e-5);
  config["layer_norm_epsilon"] = 1e-6;
  config["model_type"] = "gpt_neo";
  read = Gpt2ConfigFromHuggingFace(config, "config.json", 64);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(Message(read.status()), AllOf(HasSubstr("layer_norm_epsilon is 1e-06"),
                                            HasSubstr("model_type is \"gpt_neo\"")));
}

TEST_F(HfImportTest, TensorProblemsAreNamedOneByOne) {
  const std::string in = CopyFixture();
  absl::StatusOr<varuna::SafetensorsFile> file = varuna::ReadSafetensors(in + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  varuna::NamedTensors tensors;
  for (auto& [name, tensor] : file->tensors) {
    if (name == "transformer.h.1.ln_2.bias") continue;
    if (name == "transformer.h.0.attn.c_attn.weight") {
      tensors.emplace_back(name, tensor.t().contiguous());  // [192, 64], not Conv1D's [64, 192]
      continue;
    }
    tensors.emplace_back(name, tensor);
  }
  tensors.emplace_back("transformer.h.2.ln_1.weight", at::ones({64}));
  tensors.emplace_back("lm_head.weight", at::zeros({1024, 64}));
  ASSERT_TRUE(
      varuna::WriteSafetensors(in + "/model.safetensors", tensors, {{"format", "pt"}}).ok());
  absl::StatusOr<HfImportSummary> summary = Import(in, root_ + "/ckpt");
  ASSERT_FALSE(summary.ok());
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr("h.1.ln_2.bias is missing ([64])"),
                    HasSubstr("h.0.attn.c_attn.weight has shape [192, 64], config.json gives "
                              "[64, 192]"),
                    HasSubstr("h.2.ln_1.weight [64] is not a GPT-2 parameter"),
                    HasSubstr("lm_head.weight differs from transformer.wte.weight")));
  EXPECT_FALSE(fs::exists(root_ + "/ckpt"));
}

TEST_F(HfImportTest, PickleOnlyFolderIsRefusedWithTheConversion) {
  const std::string in = root_ + "/hf";
  fs::create_directories(in);
  fs::copy_file(fs::path(kFixture) / "config.json", fs::path(in) / "config.json");
  WriteBytes(in + "/pytorch_model.bin", "not read");
  absl::StatusOr<HfImportSummary> summary = Import(in, root_ + "/ckpt");
  ASSERT_FALSE(summary.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(summary.status()));
  EXPECT_THAT(Message(summary.status()),
              AllOf(HasSubstr("has pytorch_model.bin but no model.safetensors"),
                    HasSubstr("from safetensors.torch import save_file"),
                    HasSubstr(in + "/pytorch_model.bin"), HasSubstr(in + "/model.safetensors"),
                    HasSubstr("save_pretrained('" + in + "', safe_serialization=True)")));
}

TEST_F(HfImportTest, NonEmptyOutputAndMissingInputAreRefused) {
  fs::create_directories(root_ + "/full");
  WriteBytes(root_ + "/full/keep", "x");
  absl::StatusOr<HfImportSummary> summary = Import(kFixture, root_ + "/full");
  ASSERT_FALSE(summary.ok());
  EXPECT_THAT(Message(summary.status()), HasSubstr("exists and is not an empty directory"));
  EXPECT_EQ(ReadBytes(root_ + "/full/keep"), "x");
  summary = Import(root_ + "/nothing", root_ + "/ckpt");
  ASSERT_FALSE(summary.ok());
  EXPECT_TRUE(absl::IsNotFound(summary.status()));
  fs::create_directories(root_ + "/empty");
  summary = Import(root_ + "/empty", root_ + "/ckpt");
  ASSERT_FALSE(summary.ok());
  EXPECT_THAT(Message(summary.status()), HasSubstr("has no model.safetensors"));
}

// --use-checkpoint-args fills the trainer's shape flags from the imported record, finds the
// divisor that gives the recorded padded vocabulary, and names flags given with other values.
TEST_F(HfImportTest, UseCheckpointArgsFillsTheShape) {
  HfImportOptions options;
  options.input_dir = kFixture;
  options.output_dir = root_ + "/ckpt";
  options.make_vocab_size_divisible_by = 1000;  // 1024 ids -> 2000 rows
  ASSERT_TRUE(ImportHuggingFace(options).ok());
  trainer::TrainerArguments a;
  a.load = options.output_dir;
  absl::StatusOr<std::string> line = trainer::UseCheckpointArgs(a);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(a.num_layers, 2);
  EXPECT_EQ(a.hidden_size, 64);
  EXPECT_EQ(a.num_attention_heads, 4);
  EXPECT_EQ(a.max_position_embeddings, 64);
  EXPECT_EQ(a.seq_length, 64);
  EXPECT_EQ(a.make_vocab_size_divisible_by, 1000);
  EXPECT_THAT(*line, AllOf(HasSubstr("--num-layers=2 --hidden-size=64"),
                           HasSubstr("(1024 ids, padded to 2000)")));

  trainer::TrainerArguments given;
  given.load = options.output_dir;
  given.hidden_size = 32;
  given.seq_length = 16;  // wins: it shapes no weight
  given.make_vocab_size_divisible_by = 128;
  given.given = {"hidden-size", "seq-length", "make-vocab-size-divisible-by"};
  line = trainer::UseCheckpointArgs(given);
  ASSERT_FALSE(line.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(line.status()));
  EXPECT_THAT(Message(line.status()),
              AllOf(HasSubstr("--hidden-size=32, checkpoint 64"),
                    HasSubstr("--make-vocab-size-divisible-by=128 pads the vocabulary of 1024 ids "
                              "to 1024, checkpoint 2000 rows")));
  EXPECT_THAT(Message(line.status()), ::testing::Not(HasSubstr("seq-length")));

  // The first run of a job (--load is also its --save): nothing to take, the flags stay.
  trainer::TrainerArguments empty;
  empty.load = root_ + "/nothing";
  empty.hidden_size = 48;
  absl::StatusOr<std::string> note = trainer::UseCheckpointArgs(empty);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_THAT(*note, HasSubstr("holds no checkpoint yet"));
  EXPECT_EQ(empty.hidden_size, 48);
  // An iteration asked for by --load-iteration must exist.
  empty.resume_step = 7;
  EXPECT_FALSE(trainer::UseCheckpointArgs(empty).ok());
}

TEST(HfImportArgsTest, ParsesPathsAndRefusesOthers) {
  absl::StatusOr<HfImportOptions> options =
      ParseHfImportArgs({"in", "out", "--make-vocab-size-divisible-by=64"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->input_dir, "in");
  EXPECT_EQ(options->output_dir, "out");
  EXPECT_EQ(options->make_vocab_size_divisible_by, 64);
  EXPECT_THAT(Message(ParseHfImportArgs({"in"}).status()), HasSubstr("expected 2 paths (IN OUT)"));
  EXPECT_FALSE(ParseHfImportArgs({"in", "out", "--make-vocab-size-divisible-by=0"}).ok());
  EXPECT_FALSE(ParseHfImportArgs({"in", "out", "--bogus"}).ok());
}

}  // namespace
}  // namespace tools
