// The trainer end to end, as a user runs it: a tiny GPT-2 on a small synthetic dataset. The
// loss falls; a run stopped at a checkpoint and resumed continues bitwise as the run that never
// stopped; bad inputs fail with messages that name them and leave no files behind.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/trainer/trainer_job.h"
#include "varuna/io/json.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::Job;
using testing::Losses;
using ::testing::Not;
using testing::Plus;
using testing::Result;

class PretrainGpt2Test : public testing::TrainerTest {};

TEST_F(PretrainGpt2Test, LossFalls) {
  Result r =
      Run(Plus(TinyModel(), {"--train-iters=60", "--eval-interval=30", "--eval-iters=2"}), "train");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  std::vector<double> val;
  for (const auto& line : r.metrics) {
    if (const auto* v = varuna::json::Find(line, "val_loss")) val.push_back(v->get<double>());
  }
  ASSERT_GE(val.size(), 3u) << Describe(r);
  EXPECT_NEAR(val.front(), std::log(128.0), 0.5);  // Untrained: about ln(padded vocab).
  EXPECT_LT(val.back(), val.front() - 1.5) << Describe(r);
  EXPECT_EQ(Losses(r).size(), 60u);
  const varuna::json::Value& step = r.metrics[1];  // metrics[0] is the validation at 0.
  for (const char* key : {"iteration", "consumed_samples", "lm_loss", "lr", "loss_scale",
                          "grad_norm", "skipped", "tokens_per_sec", "tflops", "mfu"}) {
    EXPECT_NE(varuna::json::Find(step, key), nullptr)
        << key << " in " << varuna::json::Serialize(step);
  }
  EXPECT_EQ(varuna::json::Find(step, "iteration")->get<int64_t>(), 1);
  EXPECT_EQ(varuna::json::Find(step, "consumed_samples")->get<int64_t>(), 4);
  EXPECT_EQ(varuna::json::Find(step, "loss_scale")->get<double>(), 1.0);
  // --warmup=0.01 of 60 steps rounds down to no warmup: the first step runs at --lr.
  EXPECT_EQ(varuna::json::Find(step, "lr")->get<double>(), 3e-3);
  EXPECT_TRUE(varuna::json::Find(step, "mfu")->is_null());  // No known peak for the CPU.
  EXPECT_EQ(varuna::json::Find(step, "global_batch_size")->get<int64_t>(), 4);
  // The printed line has Megatron's fields (tests/trainer/training_log_test.cc checks their
  // formats), its timestamp first; one process: the throughput per GPU is the job's.
  const std::regex megatron(
      R"( \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration +10/ +60 \| )"
      R"(consumed samples: +40 \| elapsed time per iteration \(ms\): [0-9.]+ \| )"
      R"(throughput per GPU \(TFLOP/s/GPU\): [0-9.]+ \| learning rate: [0-9.]+E[-+]\d\d \| )"
      R"(global batch size: +4 \| lm loss: [0-9.]+E[-+]\d\d \| loss scale: 1\.0 \| )"
      R"(grad norm: [0-9.]+ \| number of skipped iterations: +0 \| )"
      R"(number of nan iterations: +0 \| tokens per second: \d+ \| )"
      R"(MFU: n/a \(unknown device peak\) \|)");
  std::istringstream lines(r.exit.output);
  bool found = false;
  for (std::string line; std::getline(lines, line);) {
    found = found || std::regex_search(line, megatron);
  }
  EXPECT_TRUE(found) << Describe(r);
  EXPECT_THAT(r.exit.output, HasSubstr("global batch size:"));
  EXPECT_THAT(r.exit.output, HasSubstr("throughput per GPU (TFLOP/s/GPU):"));
  EXPECT_THAT(r.exit.output, HasSubstr("number of nan iterations:"));
  EXPECT_THAT(r.exit.output, HasSubstr("validation loss at iteration 30 on validation set | "));
}

// Mixed precision: fp16 weights with dynamic loss scaling, and bf16, learn as fp32 does.
TEST_F(PretrainGpt2Test, HalfPrecisionTracksFp32) {
  auto final_val = [](const Result& r) {
    double last = 0;
    for (const auto& line : r.metrics) {
      if (const auto* v = varuna::json::Find(line, "val_loss")) last = v->get<double>();
    }
    return last;
  };
  const auto common =
      Plus(TinyModel(), {"--train-iters=40", "--eval-interval=40", "--eval-iters=2"});
  Result fp32 = Run(common, "fp32");
  Result fp16 = Run(Plus(common, {"--fp16"}), "fp16");
  Result bf16 = Run(Plus(common, {"--bf16"}), "bf16");
  for (const Result* r : {&fp32, &fp16, &bf16}) ASSERT_EQ(r->exit.code, 0) << Describe(*r);
  EXPECT_LT(final_val(fp32), 4.0);  // From about ln(128) = 4.85.
  EXPECT_NEAR(final_val(fp16), final_val(fp32), 0.1);
  EXPECT_NEAR(final_val(bf16), final_val(fp32), 0.15);
  const auto& first_fp16 = fp16.metrics[1];
  EXPECT_EQ(varuna::json::Find(first_fp16, "loss_scale")->get<double>(), 131072.0);
  const auto* skipped =
      varuna::json::Find(fp16.metrics[fp16.metrics.size() - 2], "skipped");  // Step 40.
  ASSERT_NE(skipped, nullptr);
  EXPECT_EQ(skipped->get<int64_t>(), 0) << Describe(fp16);
}

// Two 15-iteration runs of the same model: `b` logs the losses of `a` within `relative`, and
// the model learned.
void ExpectSameTraining(const Result& a, const Result& b, double relative) {
  const std::map<int64_t, std::string> x = Losses(a);
  const std::map<int64_t, std::string> y = Losses(b);
  ASSERT_EQ(x.size(), 15u);
  ASSERT_EQ(y.size(), 15u);
  for (const auto& [iteration, loss] : x) {
    EXPECT_NEAR(std::stod(y.at(iteration)), std::stod(loss), relative * std::stod(loss))
        << "iteration " << iteration;
  }
  EXPECT_LT(std::stod(y.at(15)), std::stod(y.at(1)) - 0.3);
}

// --cross-entropy-loss-fusion (the default): the chunked LM head + loss trains the same model as
// the unfused path, --no-cross-entropy-loss-fusion (without dropout the losses agree to float
// rounding).
TEST_F(PretrainGpt2Test, FusedCrossEntropyTrainsAsTheUnfusedLoss) {
  const auto common =
      Plus(TinyModel(), {"--train-iters=15", "--hidden-dropout=0", "--attention-dropout=0"});
  Result unfused = Run(Plus(common, {"--no-cross-entropy-loss-fusion"}), "unfused");
  Result fused = Run(common, "fused");
  for (const Result* r : {&unfused, &fused}) ASSERT_EQ(r->exit.code, 0) << Describe(*r);
  EXPECT_THAT(fused.exit.output, HasSubstr("> cross entropy: fused with the LM head"));
  EXPECT_THAT(unfused.exit.output, Not(HasSubstr("> cross entropy:")));
  ExpectSameTraining(unfused, fused, 1e-5);
}

// --gradient-accumulation-fusion (the default) against --no-gradient-accumulation-fusion in bf16,
// where it matters: the fused LM head's dW summed by GEMMs into fp32 or rounded to bf16 per chunk
// and then added. The same model: the losses agree to bf16 rounding.
TEST_F(PretrainGpt2Test, GradientAccumulationFusionTrainsAsTheUnfusedSum) {
  const auto common = Plus(
      TinyModel(), {"--train-iters=15", "--hidden-dropout=0", "--attention-dropout=0", "--bf16"});
  Result fused = Run(common, "fused");
  Result unfused = Run(Plus(common, {"--no-gradient-accumulation-fusion"}), "unfused");
  for (const Result* r : {&unfused, &fused}) ASSERT_EQ(r->exit.code, 0) << Describe(*r);
  ExpectSameTraining(unfused, fused, 1e-2);
}

// --bias-dropout-fusion (the default) against --no-bias-dropout-fusion, with dropout: on the CPU
// the fused op draws its masks exactly as at::dropout does and computes the same float32
// values, so the two runs log the same losses, digit for digit.
TEST_F(PretrainGpt2Test, BiasDropoutFusionTrainsAsTheUnfusedPath) {
  const auto common =
      Plus(TinyModel(), {"--train-iters=15", "--hidden-dropout=0.1", "--attention-dropout=0.1"});
  Result fused = Run(common, "fused");
  Result unfused = Run(Plus(common, {"--no-bias-dropout-fusion"}), "unfused");
  for (const Result* r : {&unfused, &fused}) ASSERT_EQ(r->exit.code, 0) << Describe(*r);
  EXPECT_THAT(fused.exit.output, HasSubstr("> residual adds: bias, dropout and add fused"));
  EXPECT_THAT(unfused.exit.output, HasSubstr("> residual adds: unfused"));
  EXPECT_EQ(Losses(fused), Losses(unfused));
  ExpectSameTraining(unfused, fused, 0.0);
}

// --bias-dropout-add-layernorm-fusion (the default) against
// --no-bias-dropout-add-layernorm-fusion, with dropout: on the CPU the fused op runs the unfused
// pair's own math and draws the same masks, so the runs log the same losses, digit for digit.
TEST_F(PretrainGpt2Test, BiasDropoutAddLayerNormFusionTrainsAsTheSeparateOps) {
  const auto common =
      Plus(TinyModel(), {"--train-iters=15", "--hidden-dropout=0.1", "--attention-dropout=0.1"});
  Result fused = Run(common, "fused");
  Result separate = Run(Plus(common, {"--no-bias-dropout-add-layernorm-fusion"}), "separate");
  for (const Result* r : {&separate, &fused}) ASSERT_EQ(r->exit.code, 0) << Describe(*r);
  EXPECT_EQ(Losses(fused), Losses(separate));
  ExpectSameTraining(separate, fused, 0.0);
}

// --bias-gelu-gemm-fusion against the default (unfused MLP), with dropout: on the CPU the fused
// MLP's reference runs the unfused ops, so in float32 the runs log the same losses, digit for
// digit.
TEST_F(PretrainGpt2Test, BiasGeluGemmFusionTrainsAsTheUnfusedMlp) {
  const auto common =
      Plus(TinyModel(), {"--train-iters=15", "--hidden-dropout=0.1", "--attention-dropout=0.1"});
  Result unfused = Run(common, "unfused");
  Result fused = Run(Plus(common, {"--bias-gelu-gemm-fusion"}), "fused");
  for (const Result* r : {&unfused, &fused}) ASSERT_EQ(r->exit.code, 0) << Describe(*r);
  EXPECT_THAT(fused.exit.output, HasSubstr("> MLP: bias + GeLU in the first GEMM's epilogue"));
  EXPECT_THAT(unfused.exit.output, Not(HasSubstr("> MLP:")));
  EXPECT_EQ(Losses(fused), Losses(unfused));
  ExpectSameTraining(unfused, fused, 0.0);
}

// --attention-backend: LibTorch's scaled_dot_product_attention computes the same model as the
// fused causal softmax (the CPU default under auto), so without dropout the losses agree.
TEST_F(PretrainGpt2Test, SdpaAttentionTrainsAsTheFusedSoftmax) {
  const auto common =
      Plus(TinyModel(), {"--train-iters=15", "--hidden-dropout=0", "--attention-dropout=0"});
  Result fused = Run(common, "fused");
  Result sdpa = Run(Plus(common, {"--attention-backend=sdpa"}), "sdpa");
  for (const Result* r : {&fused, &sdpa}) ASSERT_EQ(r->exit.code, 0) << Describe(*r);
  EXPECT_THAT(fused.exit.output,
              HasSubstr("> attention: fused-softmax (auto: the reference composition on the CPU)"));
  EXPECT_THAT(sdpa.exit.output, HasSubstr("> attention: sdpa (--attention-backend)"));
  ExpectSameTraining(fused, sdpa, 1e-4);
}

TEST_F(PretrainGpt2Test, ResumeContinuesBitwise) {
  const auto common = Plus(TinyModel(), {"--train-iters=10", "--hidden-dropout=0.1"});
  Result straight = Run(common, "straight");
  ASSERT_EQ(straight.exit.code, 0) << Describe(straight);
  const std::string ckpt = dir_ + "/ckpt";
  // --load of a directory that does not exist yet starts from scratch (as Megatron does), so
  // the same command serves the first run and every restart.
  Result first =
      Run(Plus(common, {"--load=" + ckpt, "--save=" + ckpt, "--exit-interval=5"}), "first");
  ASSERT_EQ(first.exit.code, 0) << Describe(first);
  EXPECT_THAT(first.exit.output, HasSubstr("holds no checkpoint yet: starting from scratch"));
  ASSERT_TRUE(fs::exists(ckpt + "/varuna_ckpt_5"));
  Result second = Run(Plus(common, {"--load=" + ckpt, "--save=" + ckpt}), "second");
  ASSERT_EQ(second.exit.code, 0) << Describe(second);
  EXPECT_THAT(second.exit.output, HasSubstr("resumed from"));

  const auto a = Losses(straight), b = Losses(first), c = Losses(second);
  ASSERT_EQ(a.size(), 10u);
  ASSERT_EQ(b.size(), 5u);
  ASSERT_EQ(c.size(), 5u);
  for (int64_t i = 1; i <= 5; ++i) EXPECT_EQ(a.at(i), b.at(i)) << "iteration " << i;
  for (int64_t i = 6; i <= 10; ++i) EXPECT_EQ(a.at(i), c.at(i)) << "iteration " << i;

  // Resuming a finished run takes no step and rewrites nothing: the tracker still names 10.
  std::ifstream tracker_before(ckpt + "/latest_checkpointed_iteration.txt");
  std::string before((std::istreambuf_iterator<char>(tracker_before)), {});
  Result again =
      Run(Plus(common, {"--load=" + ckpt, "--resume_step=5", "--train-iters=5", "--save=" + ckpt}),
          "again");
  ASSERT_EQ(again.exit.code, 0) << Describe(again);
  std::ifstream tracker_after(ckpt + "/latest_checkpointed_iteration.txt");
  std::string after((std::istreambuf_iterator<char>(tracker_after)), {});
  EXPECT_EQ(after, before);
  EXPECT_THAT(before, HasSubstr("10"));
}

// SIGTERM while the sample run prepares its data ends the run within a second or so (not at
// the launcher's SIGKILL 10 s later), with exit 0 and no partial dataset left behind.
TEST_F(PretrainGpt2Test, StopWhilePreparingTheSampleDataExitsPromptly) {
  Job job = Start({"--train-iters=1"}, "sample_stop", {}, {{"BUILD_WORKING_DIRECTORY", dir_}});
  const std::string log = dir_ + "/sample_stop.log";
  bool preprocessing = false;
  for (int i = 0; i < 1200 && !preprocessing; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    preprocessing = text.find("> preprocessing ") != std::string::npos;
  }
  ASSERT_TRUE(preprocessing) << "the sample run never started preprocessing";
  const auto signalled = std::chrono::steady_clock::now();
  ::kill(job.process.pid, SIGTERM);
  Result r = Finish(job);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  ASSERT_TRUE(r.exit.exited) << Describe(r);
  EXPECT_EQ(r.exit.code, 0) << Describe(r);
  EXPECT_LT(seconds, 5.0);
  EXPECT_THAT(r.exit.output, HasSubstr("stop requested (SIGTERM) while preparing the data"));
  const std::string folder = dir_ + "/varuna_sample_run";
  EXPECT_TRUE(fs::exists(folder + "/fortunes_spm.model"));  // finished before the stop
  EXPECT_FALSE(fs::exists(folder + "/fortunes_text_document.bin"));
  EXPECT_FALSE(fs::exists(folder + "/fortunes_text_document.idx"));
}

// The sample run with GPT-2's own tokenizer (the files ./setup.sh fetches): the bundled corpus
// preprocessed with GPT-2's byte-level BPE, 50,257 ids padded to 50,304, <|endoftext|> as the
// EOD (so --eod-mask-loss is accepted); the record beside the data names the tokenizer, and the
// validation loss falls from about ln(50,304).
TEST_F(PretrainGpt2Test, SampleRunWithGpt2sTokenizerTrains) {
  Result r =
      Finish(Start({"--tokenizer-type=GPT2BPETokenizer", "--train-iters=40", "--eval-interval=20",
                    "--eval-iters=2", "--batch-size=8", "--eod-mask-loss"},
                   "gpt2_sample", {}, {{"BUILD_WORKING_DIRECTORY", dir_}}));
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  std::vector<double> val;
  for (const auto& line : r.metrics) {
    if (const auto* v = varuna::json::Find(line, "val_loss")) val.push_back(v->get<double>());
  }
  ASSERT_GE(val.size(), 2u) << Describe(r);
  EXPECT_NEAR(val.front(), std::log(50304.0), 0.5);
  EXPECT_LT(val.back(), val.front() - 1.0) << Describe(r);
  const std::string prefix = dir_ + "/varuna_sample_run/fortunes_gpt2_text_document";
  EXPECT_TRUE(fs::exists(prefix + ".bin"));
  std::ifstream record_file(prefix + ".tokenizer-record.json");
  const std::string record((std::istreambuf_iterator<char>(record_file)), {});
  EXPECT_THAT(record, HasSubstr("\"tokenizer_type\":\"GPT2BPETokenizer\""));
  EXPECT_THAT(record, HasSubstr("\"vocab_size\":50257"));
  EXPECT_THAT(record, HasSubstr("\"eod_id\":50256"));
}

// Data without a tokenizer record (as Megatron's tools make it), trained with a larger
// vocabulary than it was made with: every id is checked below the vocabulary, and the run says
// once that nothing more could be checked, with the largest id it found.
TEST_F(PretrainGpt2Test, DataWithoutATokenizerRecordIsCheckedAndSaidOnce) {
  std::vector<std::string> flags = Plus(TinyModel(), {"--train-iters=1"});
  std::replace(flags.begin(), flags.end(), std::string("--vocab-size=50"),
               std::string("--vocab-size=8000"));
  Result r = Run(flags, "no_record");
  ASSERT_TRUE(r.exit.exited && r.exit.code == 0) << Describe(r);
  const std::string said =
      "> warning: " + data_ + " has no tokenizer record (" + data_ +
      ".tokenizer-record.json; Megatron's tools write none), so the tokenizer cannot be checked "
      "against the data: every token id is below the 8000 of the vocabulary (the largest is 49)";
  const size_t at = r.exit.output.find(said);
  EXPECT_NE(at, std::string::npos) << Describe(r);
  EXPECT_EQ(r.exit.output.find(said, at + 1), std::string::npos) << "said twice\n" << Describe(r);
}

// The launcher starting 2 stages x 2 replicas gives the losses of one process on the same
// global batch (no dropout: each process draws its own dropout masks).
TEST_F(PretrainGpt2Test, LaunchedPipelineMatchesOneProcess) {
  std::vector<std::string> model = TinyModel();
  model.erase(std::find(model.begin(), model.end(), "--batch-size=4"));
  model.insert(model.end(), {"--train-iters=5", "--hidden-dropout=0", "--attention-dropout=0",
                             "--peak-tflops=1"});
  Result single = Run(Plus(model, {"--batch-size=8", "--chunk_size=2"}), "single");
  ASSERT_EQ(single.exit.code, 0) << Describe(single);
  Result launched = Run(model, "launched",
                        {"--nstages=2", "--gpus_per_node=4", "--batch_size=8", "--chunk_size=2",
                         "--master_port=0", "--grace_seconds=5"});
  ASSERT_EQ(launched.exit.code, 0) << Describe(launched);
  EXPECT_THAT(launched.exit.output, HasSubstr("2 stages x 2 replicas"));
  EXPECT_THAT(launched.exit.output, HasSubstr("[rank 0]"));
  const auto a = Losses(single), b = Losses(launched);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  for (int64_t i = 1; i <= 5; ++i) {
    const double x = std::stod(a.at(i)), y = std::stod(b.at(i));
    EXPECT_NEAR(y, x, 1e-5 * x) << "iteration " << i;
  }
  // The TFLOP/s are the job's, so MFU divides them by the peak of all its (here 4) devices.
  auto mfu_per_tflops = [](const Result& r) {
    for (auto line = r.metrics.rbegin(); line != r.metrics.rend(); ++line) {
      const varuna::json::Value* mfu = varuna::json::Find(*line, "mfu");
      if (mfu != nullptr && mfu->is_number()) {
        return mfu->get<double>() / varuna::json::Find(*line, "tflops")->get<double>();
      }
    }
    return 0.0;
  };
  EXPECT_NEAR(mfu_per_tflops(single), 1.0, 1e-9) << Describe(single);  // --peak-tflops=1
  EXPECT_NEAR(mfu_per_tflops(launched), 0.25, 1e-9) << Describe(launched);
}

TEST_F(PretrainGpt2Test, RefusesACheckpointOfAnotherModel) {
  const std::string ckpt = dir_ + "/ckpt";
  Result saved = Run(Plus(TinyModel(), {"--train-iters=2", "--save=" + ckpt}), "a");
  ASSERT_EQ(saved.exit.code, 0) << Describe(saved);
  // Megatron's words around a save, then our timing.
  EXPECT_THAT(saved.exit.output, HasSubstr("saving checkpoint at iteration 2 to " + ckpt + "\n"));
  EXPECT_THAT(saved.exit.output,
              HasSubstr("successfully saved checkpoint at iteration 2 to " + ckpt + " (took "));
  EXPECT_THAT(saved.exit.output,
              ::testing::ContainsRegex("saved checkpoint at iteration 2 to [^\n]* \\(took "
                                       "[0-9]+\\.[0-9][0-9] s\\)\n"));
  // A load says when it starts and how long it took, as Megatron's does.
  Result loaded = Run(Plus(TinyModel(), {"--train-iters=3", "--load=" + ckpt}), "loaded");
  ASSERT_EQ(loaded.exit.code, 0) << Describe(loaded);
  EXPECT_THAT(loaded.exit.output, HasSubstr("loading checkpoint from " + ckpt + "\n"));
  EXPECT_THAT(loaded.exit.output,
              HasSubstr("successfully loaded checkpoint from " + ckpt + " at iteration 2 (took "));
  EXPECT_THAT(loaded.exit.output,
              ::testing::ContainsRegex("loaded checkpoint from [^\n]* at iteration 2 \\(took "
                                       "[0-9]+\\.[0-9][0-9] s\\)\n"));
  Result at =
      Run(Plus(TinyModel(), {"--train-iters=3", "--load=" + ckpt, "--load-iteration=2"}), "at");
  ASSERT_EQ(at.exit.code, 0) << Describe(at);
  EXPECT_THAT(at.exit.output, HasSubstr("loading checkpoint from " + ckpt + " at iteration 2\n"));
  Result r = Run(Plus(TinyModel(), {"--train-iters=4", "--load=" + ckpt, "--hidden-size=64"}), "b");
  EXPECT_EQ(r.exit.code, 1);
  EXPECT_THAT(r.exit.output, HasSubstr("was written for another model: --hidden-size: "
                                       "checkpoint 32, now 64"));
}

TEST_F(PretrainGpt2Test, BadInputsNameTheProblem) {
  struct Case {
    std::vector<std::string> extra;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--num-layer=3"}, 2, "unknown flag --num-layer (did you mean --num-layers?)"},
      {{"--lr=fast"}, 2, "--lr=fast is not a number"},
      {{"--heartbeat-timeout-seconds=1"},
       2,
       "--heartbeat-timeout-seconds=1 must be 0 (off) or at least 2"},
      {{"--num-layers=0"},
       2,
       "--num-layers=0 must be at least 1: leave --num-layers out to use the value of --preset="},
      {{"--lr-decay-style=exp"}, 2, "--lr-decay-style=exp is not a decay style"},
      {{"--fp16", "--bf16"}, 2, "--fp16 and --bf16 exclude each other"},
      {{"--save-interval=5"}, 2, "--save-interval=5 needs --save=DIR"},
      {{"--hidden-size=33"}, 1, "--hidden-size=33"},
      {{"--stage_to_rank_map=0;1;"}, 1, "has 2 ranks but this process was started alone"},
      {{"--stage_to_rank_map=0;1;2;3;4;"}, 1, "has 5 pipeline stages but the model has only 2"},
      {{"--stage_to_rank_map=0;0;"}, 1, "rank 0 appears twice"},
      {{"--stage_to_rank_map=0;1;", "--stage-segments=1,2"},
       1,
       "--stage-segments=1,2 covers 3 segments but the model has 2 (layers)"},
      {{"--stage_segments=2,2"}, 1, "--stage-segments=2,2 gives 2 stage sizes but"},
      {{"--stage-segments=1,x"}, 2, "--stage-segments=1,x: \"x\" is not a number of layers"},
      {{"--stage-segments=0,2"}, 2, "--stage-segments=0,2: a stage of 0 layers"},
      {{"--profiling"}, 2, "--profiling needs --profile-dir=DIR or --save=DIR"},
      {{"--profile-micro-batches=4-2"}, 2, "--profile-micro-batches=4-2: the range 4-2 is empty"},
      {{"--profile-micro-batches=1,0"}, 2, "micro-batch sizes must be at least 1"},
      {{"--profile-micro-batches=1,x"}, 2, "\"x\" is not a size or a range A-B"},
      {{"--profile-rounds=0"}, 2, "--profile-rounds=0 must be >= 1"},
      {{"--data-path=" + dir_ + "/missing"}, 2, "--data-path: no dataset at " + dir_ + "/missing"},
      {{"--data-path", "0.5", data_, "0.5", dir_ + "/missing"},
       2,
       "--data-path: no dataset at " + dir_ + "/missing ("},
      {{"--data-path", "0.3", data_, "0.7"}, 2, "(a prefix without its weight?)"},
      {{"--data-path", "1", data_, "-1", data_}, 2, "the weight -1 of " + data_ + " is negative"},
      {{"--data-path", "0", data_, "0", data_}, 2, "the weights are all zero"},
      {{"--data-path", "x", data_, "1", data_},
       2,
       "the weight \"x\" of " + data_ + " is not a number"},
      {{"--test-data-path=" + data_}, 2, "exclude each other"},
      {{"--vocab-size=20"}, 1, "--vocab-size"},
      {{"--tokenizer-model=" + dir_ + "/none.model"}, 1, dir_ + "/none.model"},
      {{"--split=a,b"}, 1, "--split"},
      {{"--device=tpu"}, 2, "--device=tpu is not a device"},
      {{"--attention-backend=flash"},
       2,
       "--attention-backend=flash is not a backend: use fused-softmax, sdpa or auto"},
      {{"--bias-dropout-fusion", "--no-bias-dropout-fusion"},
       2,
       "--bias-dropout-fusion and --no-bias-dropout-fusion contradict each other: give one"},
      {{"--no-bias-dropout-fusion=1"}, 2, "--no-bias-dropout-fusion=1: a negation takes no value"},
      {{"--batch-size=0"}, 2, "--batch-size=0 must be >= 1: pass e.g. --batch-size=8"},
      {{"--clip-grad=-1"}, 2, "--clip-grad=-1 must be >= 0: pass e.g. --clip-grad=1"},
      {{"--adam-eps=0"}, 2, "--adam-eps=0 must be > 0: pass e.g. --adam-eps=1e-08"},
      {{"--adam-beta2=1"}, 2, "--adam-beta2=1 must be in [0, 1): pass e.g. --adam-beta2=0.999"},
      {{"--warmup=2"}, 2, "--warmup=2 must be in [0, 1]: pass e.g. --warmup=0.01"},
      {{"--lr=1e-4", "--min-lr=1e-3"}, 2, "--min-lr=0.001 is above --lr=0.0001"},
      {{"--min-loss-scale=4", "--initial-loss-scale=2"},
       2,
       "--min-loss-scale=4 is above --initial-loss-scale=2"},
      {{"--p2p-backend=mpi"}, 2, "--p2p-backend=mpi is not a backend: use nccl, gloo or auto"},
      {{"--device=cpu", "--dp-backend=nccl"},
       1,
       "--dp-backend=nccl needs CUDA tensors but the device is cpu: use gloo on the CPU"},
      {{"--overlap-grad-reduce", "--no-overlap-grad-reduce"},
       2,
       "--overlap-grad-reduce and --no-overlap-grad-reduce contradict each other"},
      {{"--resume_step=3"}, 2, "--resume_step=3 needs --load=DIR"},
      {{"--eod-mask-loss"}, 1, "need the EOD token: give --tokenizer-model"},
      {{"--load=" + dir_ + "/a_file"}, 1, "--load=" + dir_ + "/a_file is a file, not a directory"},
      {{"--load=" + dir_ + "/ckpts/varuna_ckpt_6"},
       1,
       "names one checkpoint; --load takes the directory that holds it: use --load=" + dir_ +
           "/ckpts (add --load-iteration=6"},
      {{"--load=" + dir_ + "/no_checkpoints", "--load-iteration=3"},
       1,
       dir_ + "/no_checkpoints/varuna_ckpt_3 does not exist"},
      {{"--save=" + dir_ + "/a_file/ckpts"},
       1,
       "--save=" + dir_ + "/a_file/ckpts: " + dir_ + "/a_file is not a directory"},
      {{"--save=" + dir_ + "/new_ckpts", "--checkpoint-tmpdir=" + dir_ + "/a_file"},
       1,
       "--checkpoint-tmpdir=" + dir_ + "/a_file: " + dir_ + "/a_file is not a directory"},
  };
  std::ofstream(dir_ + "/a_file") << "not a checkpoint directory\n";
  std::vector<std::string> files_before;
  for (const auto& entry : fs::directory_iterator(dir_)) files_before.push_back(entry.path());
  int n = 0;
  for (const Case& c : cases) {
    Result r =
        Run(Plus(Plus(TinyModel(), {"--train-iters=2"}), c.extra), "bad" + std::to_string(n++));
    EXPECT_TRUE(r.exit.exited) << Describe(r);
    EXPECT_EQ(r.exit.code, c.code) << c.extra[0] << "\n" << Describe(r);
    EXPECT_THAT(r.exit.output, HasSubstr(c.message)) << c.extra[0];
    EXPECT_THAT(r.exit.output, HasSubstr("pretrain_gpt2: error: ")) << c.extra[0];
  }
  // Nothing was written but the logs and metrics files of the runs themselves.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const std::string name = entry.path().filename();
    const bool ours = name.rfind("bad", 0) == 0;
    const bool existed =
        std::find(files_before.begin(), files_before.end(), entry.path()) != files_before.end();
    EXPECT_TRUE(ours || existed) << "unexpected file " << entry.path();
  }
}

// The launcher's environment is read once, with one validation (varuna/launch/environment.h):
// a value that is not a number of its kind, or variables that disagree, stop the program
// before it reads anything, as a bad flag does. LOCAL_WORLD_SIZE used to be silently 0 here.
TEST_F(PretrainGpt2Test, ABadLauncherEnvironmentIsAUsageError) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"LOCAL_WORLD_SIZE", "x"}},
       "the environment variable LOCAL_WORLD_SIZE=\"x\" is not a number of processes per node"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}},
       "the environment variables RANK=2 and WORLD_SIZE=2 disagree"},
      {{{"MASTER_PORT", "http"}}, "the environment variable MASTER_PORT=\"http\" is not a port"},
  };
  int n = 0;
  for (const auto& [env, message] : cases) {
    const Result r = Finish(Start(Plus(TinyModel(), {"--train-iters=2"}),
                                  "env" + std::to_string(n++), /*launcher=*/{}, env));
    EXPECT_TRUE(r.exit.exited) << Describe(r);
    EXPECT_EQ(r.exit.code, 2) << message << "\n" << Describe(r);
    EXPECT_THAT(r.exit.output, HasSubstr("pretrain_gpt2: error: " + message));
  }
}

}  // namespace
}  // namespace trainer
