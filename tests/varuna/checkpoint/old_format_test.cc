// Checkpoints written before the JSON library became nlohmann/json still load. testdata/old_format
// holds a checkpoint of iteration 12 written by the earlier code (commit b244ef4, its own JSON
// library) with WriteCheckpoint: two segments of float tensors, and metadata, layout and a rank
// state with integers (one above 2^53), doubles, strings, nested objects and an array.
#include <ATen/ops/equal.h>
#include <ATen/ops/tensor.h>

#include <algorithm>
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
#include "varuna/checkpoint/files.h"
#include "varuna/io/json.h"

namespace varuna {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::Pair;

constexpr char kTestData[] = "tests/varuna/checkpoint/testdata/old_format";

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Every file under `dir`, relative to it, sorted.
std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) names.push_back(fs::relative(entry.path(), dir).string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The keys of an object, in order.
std::vector<std::string> Keys(const json::Value& object) {
  std::vector<std::string> keys;
  for (const auto& [key, unused] : object.items()) keys.push_back(key);
  return keys;
}

class OldFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A writable copy of the test data (the runfiles are links to the sources).
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::copy(kTestData, dir_, fs::copy_options::recursive);
  }

  std::string dir_;
};

TEST_F(OldFormatTest, VerifiesAndReadsWithTheExactValues) {
  EXPECT_EQ(LatestCheckpointIteration(dir_).value_or(-1), 12);
  ASSERT_TRUE(VerifyCheckpoint(dir_, 12, CheckpointCheck::kChecksums).ok())
      << VerifyCheckpoint(dir_, 12, CheckpointCheck::kChecksums);
  absl::StatusOr<CheckpointData> data = ReadCheckpoint(dir_, 12, {});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->iteration, 12);

  std::map<std::string, at::Tensor> tensors;
  ASSERT_EQ(data->segments.size(), 2u);
  for (const auto& [segment, named] : data->segments) {
    for (const auto& [name, tensor] : named) tensors[absl::StrCat(segment, "/", name)] = tensor;
  }
  ASSERT_EQ(tensors.size(), 4u);
  EXPECT_TRUE(at::equal(tensors["0/wte.weight"],
                        at::tensor({0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f}).reshape({2, 3})));
  EXPECT_TRUE(at::equal(tensors["0/wpe.weight"], at::tensor({1.5f, -2.25f, 3.0f, 0.1f})));
  EXPECT_TRUE(at::equal(tensors["1/h.0.attn.c_attn.weight"],
                        at::tensor({0.25f, -0.5f, 1e-3f, 7.0f}).reshape({2, 2})));
  EXPECT_TRUE(at::equal(tensors["1/h.0.ln_1.bias"], at::tensor({-1.0f})));

  const json::Value& m = data->metadata;
  EXPECT_THAT(Keys(m), ElementsAre("consumed_samples", "learning_rate", "loss_scale", "negative",
                                   "tenth", "name", "enabled", "nothing", "scheduler", "list"));
  EXPECT_EQ(json::AsInt64(m["consumed_samples"]), 1234567890123);
  EXPECT_TRUE(m["learning_rate"].is_number_float());
  EXPECT_EQ(m["learning_rate"].get<double>(), 0.00015);
  EXPECT_TRUE(m["loss_scale"].is_number_float());
  EXPECT_EQ(m["loss_scale"].get<double>(), 65536.0);
  EXPECT_EQ(json::AsInt64(m["negative"]), -42);
  EXPECT_EQ(m["tenth"].get<double>(), 0.1);
  EXPECT_EQ(m["name"].get<std::string>(), "gpt2-tiny \xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(m["enabled"], true);
  EXPECT_TRUE(m["nothing"].is_null());
  const json::Value& scheduler = m["scheduler"];
  EXPECT_THAT(Keys(scheduler), ElementsAre("warmup_iterations", "decay_style", "min_lr"));
  EXPECT_EQ(json::AsInt64(scheduler["warmup_iterations"]), 100);
  EXPECT_EQ(scheduler["decay_style"].get<std::string>(), "cosine");
  EXPECT_EQ(scheduler["min_lr"].get<double>(), 1e-5);
  const json::Value& list = m["list"];
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(json::AsInt64(list[0]), 1);
  EXPECT_EQ(list[1].get<double>(), 2.5);
  EXPECT_EQ(list[2].get<std::string>(), "three");

  const json::Value& layout = data->layout;
  EXPECT_THAT(Keys(layout), ElementsAre("pipeline_stages", "data_parallel", "stage_to_segments"));
  EXPECT_EQ(json::AsInt64(layout["pipeline_stages"]), 2);
  EXPECT_EQ(json::AsInt64(layout["data_parallel"]), 1);
  EXPECT_EQ(layout["stage_to_segments"], json::Value::array({0, 1}));

  ASSERT_THAT(data->rank_states, ElementsAre(Pair(0, ::testing::_)));
  const json::Value& rank = data->rank_states.at(0);
  EXPECT_THAT(Keys(rank), ElementsAre("rng_seed", "note"));
  EXPECT_EQ(json::AsInt64(rank["rng_seed"]), int64_t{9007199254740993});  // 2^53 + 1: exact
  EXPECT_EQ(rank["note"].get<std::string>(), "rank zero");
}

TEST_F(OldFormatTest, ReserializedJsonIsTheSame) {
  // Each JSON file reads back and writes out as the same text (metadata.json pretty, the
  // markers compact), so the values are the same, in the same order and form.
  const std::string ckpt = dir_ + "/varuna_ckpt_12";
  for (const auto& [name, pretty] :
       {std::make_pair("metadata.json", true), std::make_pair("COMPLETE", false),
        std::make_pair("markers/rank_0.json", false)}) {
    const std::string text = ReadText(ckpt + "/" + name);
    absl::StatusOr<json::Value> value = json::Parse(text);
    ASSERT_TRUE(value.ok()) << name << ": " << value.status();
    EXPECT_EQ(json::Serialize(*value, pretty) + "\n", text) << name;
  }

  // Writing what was read gives back the old checkpoint byte for byte (the segment files'
  // safetensors headers are JSON too).
  absl::StatusOr<CheckpointData> data = ReadCheckpoint(dir_, 12, {});
  ASSERT_TRUE(data.ok()) << data.status();
  const std::string rewritten = dir_ + "_rewritten";
  fs::remove_all(rewritten);
  ASSERT_TRUE(WriteCheckpoint(rewritten, *data).ok());
  ASSERT_EQ(Files(rewritten), Files(dir_));
  for (const std::string& name : Files(dir_)) {
    EXPECT_EQ(ReadText(rewritten + "/" + name), ReadText(dir_ + "/" + name)) << name;
  }
  absl::StatusOr<CheckpointData> again = ReadCheckpoint(rewritten, 12, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->metadata, data->metadata);
  EXPECT_EQ(again->layout, data->layout);
  EXPECT_EQ(again->rank_states, data->rank_states);
}

}  // namespace
}  // namespace varuna
