// Pipeline parity: real processes over Gloo, fp32, a fixed seed. A tiny GPT-2 (4 layers, the
// embedding and LM head tied across the first and last stage) trained on the same global
// batches under P x D layouts gives the losses and, after step 1, the gradients of the
// single-process run; the tied copies stay bitwise equal; evaluate() agrees. The global batch
// of 14 in micro-batches of 4 leaves a smaller last micro-batch (4+4+4+2, or 4+3 per replica),
// and a random loss mask gives the micro-batches and replicas different loss weights.
//
// Built twice from this source. pipeline_parity_test runs on the CPU. pipeline_parity_test_gpu
// (tagged gpu, --config=cuda; VARUNA_PARITY_ON_CUDA) runs the layouts, dropout (under the
// deterministic switches), the tied copies and the overflow on CUDA: rank r on GPU r mod the
// visible count, over host-staged Gloo, so that a one-GPU machine runs every layout; where the
// GPUs suffice for a layout it also runs over NCCL. It skips where no GPU is usable.
#include <ATen/DeviceAccelerator.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/gpt2/config.h"
#include "models/gpt2/model.h"
#include "tests/util/subprocess.h"
#include "tests/varuna/local_job.h"
#include "trainer/deterministic_mode.h"
#include "varuna/comm/world.h"
#include "varuna/io/safetensors.h"
#include "varuna/launch/host.h"
#include "varuna/varuna.h"

#ifdef VARUNA_PARITY_ON_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace varuna {
namespace {

#ifdef VARUNA_PARITY_ON_CUDA
int VisibleGpus() { return c10::cuda::device_count(); }
#else
int VisibleGpus() { return 0; }
#endif

namespace fs = std::filesystem;

constexpr int kGlobalBatch = 14;
constexpr int kChunk = 4;
constexpr int kSeq = 16;
constexpr int kVocab = 64;

gpt2::Gpt2Config Config(double dropout) {
  gpt2::Gpt2Config config;
  config.num_layers = 4;
  config.hidden_size = 32;
  config.num_attention_heads = 2;
  config.seq_length = kSeq;
  config.max_position_embeddings = kSeq;
  config.vocab_size = kVocab;
  config.make_vocab_size_divisible_by = 1;
  config.hidden_dropout = dropout;
  config.attention_dropout = dropout;
  return config;
}

// Global batch `step`: tokens, labels, a loss mask with zeros, positions.
TensorMap GlobalBatch(int step) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1000 + step);
  at::Tensor tokens = at::randint(0, kVocab, {kGlobalBatch, kSeq + 1}, gen, at::kLong);
  at::Tensor mask = (at::rand({kGlobalBatch, kSeq}, gen) > 0.25).to(at::kFloat);
  return {{"input_ids", tokens.narrow(1, 0, kSeq).contiguous()},
          {"labels", tokens.narrow(1, 1, kSeq).contiguous()},
          {"loss_mask", mask},
          {"position_ids", at::arange(kSeq, at::kLong).repeat({kGlobalBatch, 1})}};
}

TensorMap ReplicaSlice(const TensorMap& global, int replica, int replicas) {
  const int64_t per = kGlobalBatch / replicas;
  TensorMap out;
  for (const auto& [name, t] : global) out[name] = t.narrow(0, replica * per, per).contiguous();
  return out;
}

// Worker: trains `steps` steps and writes losses, step-1 gradients, final tied copies and an
// evaluation to files named after its rank in `out`.
int RunWorker(const std::map<std::string, std::string>& args) {
  torch::set_num_threads(1);
  const int rank = std::stoi(args.at("rank"));
  const int P = std::stoi(args.at("stages"));
  const int D = std::stoi(args.at("replicas"));
  const int steps = std::stoi(args.at("steps"));
  const std::string out = args.at("out");
  std::unique_ptr<comm::World> world;
  VarunaOptions options;
  options.stage_map = StageMap::Uniform(P, D);
  options.rank = rank;
  options.batch_size = kGlobalBatch / D;
  options.chunk_size = kChunk;
  options.schedule = *ParseScheduleKind(args.at("schedule"));
  options.dtype = args.at("dtype") == "fp16" ? at::kHalf : at::kFloat;
  if (args.at("device") == "cuda") {
    // pretrain_gpt2's --deterministic, before any CUDA work (cuBLAS reads its setting once).
    if (args.at("deterministic") == "1" && !trainer::EnterDeterministicMode().ok()) return 10;
    options.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(rank % VisibleGpus()));
    at::accelerator::setDeviceIndex(options.device.index());  // as pretrain_gpt2 does
    const comm::Backend backend =
        args.at("transport") == "nccl" ? comm::Backend::kNccl : comm::Backend::kGloo;
    options.p2p_backend = backend;
    options.dp_backend = backend;
  }
  options.overlap_grad_reduce = args.at("overlap") == "1";
  if (const int64_t elements = std::stoll(args.at("bucket_elements")); elements > 0) {
    options.grad_bucket_elements = elements;
  }
  const int poison_step = std::stoi(args.at("poison_step"));
  const int die_step = std::stoi(args.at("die_step"));
  const int stop_step = std::stoi(args.at("stop_step"));
  const bool learnable = args.at("learnable") == "1";
  for (absl::string_view size : absl::StrSplit(args.at("stage_segments"), ',', absl::SkipEmpty())) {
    options.stage_segments.push_back(std::stoi(std::string(size)));
  }
  auto joined =
      testing::JoinLocalJob(rank, P * D, std::stoi(args.at("port")), std::chrono::seconds(60),
                            options.device.is_cuda() ? options.device.index() : 0);
  if (!joined.ok()) {
    std::fprintf(stderr, "join: %s\n", std::string(joined.status().message()).c_str());
    return 3;
  }
  world = std::move(*joined);
  options.world = world.get();
  at::manual_seed(5);  // Dropout's stream; the same on every rank.
  const gpt2::Gpt2Config config = Config(std::stod(args.at("dropout")));
  auto engine = Varuna::Create(gpt2::Gpt2StageBuilder(config, 42), config.num_layers, options);
  if (!engine.ok()) {
    std::fprintf(stderr, "create: %s\n", std::string(engine.status().message()).c_str());
    return 4;
  }
  Varuna& v = **engine;
  AdamOptions adam;
  adam.lr = 1e-3;
  LossScalerOptions scaling;
  scaling.hysteresis = 1;
  if (!v.set_optimizer(std::make_unique<Adam>(v.parameters(), adam), scaling).ok()) return 5;
  std::ofstream losses(out + "/losses_" + std::to_string(rank) + ".txt");
  std::ofstream trace(out + "/trace_" + std::to_string(rank) + ".txt");
  std::ofstream stops(out + "/stops_" + std::to_string(rank) + ".txt");
  std::ofstream buckets(out + "/buckets_" + std::to_string(rank) + ".txt");
  std::ofstream(out + "/segments_" + std::to_string(rank) + ".txt")
      << v.segments().first << " " << v.segments().last << "\n";
  at::Tensor first_param = v.parameters()[0].tensor;
  for (int step = 0; step < steps; ++step) {
    // Fault injection in the middle of the backward pass of this rank.
    std::optional<unsigned> hook;
    if (step == poison_step && rank == std::stoi(args.at("poison_rank"))) {
      hook = first_param.register_hook([](const at::Tensor& g) {
        return at::full_like(g, std::numeric_limits<float>::infinity());
      });
    }
    if (step == die_step && rank == std::stoi(args.at("die_rank"))) {
      hook = first_param.register_hook([](const at::Tensor& g) {
        std::raise(SIGKILL);
        return g;
      });
    }
    const bool stop = step == stop_step && rank == std::stoi(args.at("stop_rank"));
    auto result = v.step(ReplicaSlice(GlobalBatch(learnable ? step % 4 : step), v.replica(), D),
                         [stop] { return stop; });
    if (hook) first_param.remove_hook(*hook);
    if (!result.ok()) {
      std::fprintf(stderr, "step: %s\n", std::string(result.status().message()).c_str());
      return 6;
    }
    char line[64];
    std::snprintf(line, sizeof(line), "%.17g\n", result->loss);
    losses << line;
    double checksum = 0;
    for (const auto& p : v.parameters()) checksum += p.tensor.to(at::kDouble).sum().item<double>();
    char traced[128];
    std::snprintf(traced, sizeof(traced), "%d %.17g %.17g\n", result->overflow ? 1 : 0,
                  v.loss_scale(), checksum);
    trace << traced;
    stops << (result->stop ? 1 : 0) << "\n";
    buckets << v.grad_buckets() << " " << v.grad_buckets_started_in_backward() << "\n";
    if (step == 0 && v.replica() == 0) {
      NamedTensors grads;
      for (size_t i = 0; i < v.optimizer().parameters().size(); ++i) {
        grads.emplace_back(v.optimizer().parameters()[i].name,
                           v.optimizer().MasterGrads()[i].to(at::kCPU, /*non_blocking=*/false,
                                                             /*copy=*/true));
      }
      if (!WriteSafetensors(out + "/grads_" + std::to_string(rank) + ".safetensors", grads, {})
               .ok()) {
        return 7;
      }
    }
  }
  losses.close();
  NamedTensors params;
  for (const auto& item : v.model().named_parameters()) {
    params.emplace_back(item.key(),
                        item.value().detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true));
  }
  if (!WriteSafetensors(out + "/params_" + std::to_string(rank) + ".safetensors", params, {})
           .ok()) {
    return 8;
  }
  auto eval = v.evaluate(ReplicaSlice(GlobalBatch(999), v.replica(), D));
  if (!eval.ok()) return 9;
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", *eval);
  std::ofstream(out + "/eval_" + std::to_string(rank) + ".txt") << text;
  return 0;
}

struct Options {
  std::string schedule = "varuna";
  double dropout = 0;
  std::string dtype = "fp32";
  bool learnable = false;
  int poison_step = -1, poison_rank = -1;
  int die_step = -1, die_rank = -1;
  int stop_step = -1, stop_rank = -1;
  std::string stage_segments;  // e.g. "1,1,2"; empty: the even partition
  // gloo or nccl (CUDA only; the CPU is always Gloo).
  std::string transport = "gloo";
  bool deterministic = false;   // CUDA: pretrain_gpt2's --deterministic (EnterDeterministicMode)
  bool overlap = true;          // VarunaOptions::overlap_grad_reduce
  int64_t bucket_elements = 0;  // VarunaOptions::grad_bucket_elements; 0: the default
};

struct RunResult {
  std::vector<std::vector<double>> traces;  // per rank: overflow, scale, checksum per step
  std::vector<testing::ExitInfo> exits;
  std::vector<double> losses;                // rank 0's (every rank reports the same)
  std::map<std::string, at::Tensor> grads;   // step 1, over the stages of replica 0
  std::map<std::string, at::Tensor> params;  // final, over the stages of replica 0
  std::vector<double> evals;                 // one per rank
  std::vector<std::vector<double>> all_losses;
  std::vector<std::vector<double>> stops;     // per rank: 1 where the step reported stop
  std::vector<std::vector<double>> segments;  // per rank: first and last segment of its stage
  // per rank, per step: gradient buckets, and how many started inside the last backward
  std::vector<std::vector<double>> buckets;
};

std::vector<double> ReadNumbers(const std::string& path) {
  std::ifstream in(path);
  std::vector<double> out;
  for (double x; in >> x;) out.push_back(x);
  return out;
}

RunResult RunLayout(int P, int D, int steps, const Options& o = Options()) {
  static int run_count = 0;
  const std::string out = ::testing::TempDir() + "/parity_" + std::to_string(P) + "x" +
                          std::to_string(D) + "_" + std::to_string(run_count++);
  fs::remove_all(out);
  fs::create_directories(out);
  const int port = FreeTcpPort();
  auto processes = testing::SpawnRanks("train", P * D, [&](int) {
    return std::vector<std::string>{"--stages=" + std::to_string(P),
                                    "--replicas=" + std::to_string(D),
                                    "--steps=" + std::to_string(steps),
                                    "--out=" + out,
                                    "--port=" + std::to_string(port),
                                    "--schedule=" + o.schedule,
                                    "--dropout=" + std::to_string(o.dropout),
                                    "--dtype=" + o.dtype,
                                    std::string("--learnable=") + (o.learnable ? "1" : "0"),
                                    "--poison_step=" + std::to_string(o.poison_step),
                                    "--poison_rank=" + std::to_string(o.poison_rank),
                                    "--die_step=" + std::to_string(o.die_step),
                                    "--die_rank=" + std::to_string(o.die_rank),
                                    "--stop_step=" + std::to_string(o.stop_step),
                                    "--stop_rank=" + std::to_string(o.stop_rank),
                                    "--stage_segments=" + o.stage_segments,
                                    std::string("--device=") + (VisibleGpus() > 0 ? "cuda" : "cpu"),
                                    "--transport=" + o.transport,
                                    std::string("--deterministic=") + (o.deterministic ? "1" : "0"),
                                    std::string("--overlap=") + (o.overlap ? "1" : "0"),
                                    "--bucket_elements=" + std::to_string(o.bucket_elements)};
  });
  RunResult result;
  result.exits = testing::WaitAll(processes, std::chrono::seconds(120));
  if (o.die_step >= 0) return result;  // The caller checks how the processes ended.
  for (const auto& e : result.exits) {
    EXPECT_TRUE(e.exited && e.code == 0) << testing::Describe(result.exits);
  }
  const StageMap map = StageMap::Uniform(P, D);
  for (int rank = 0; rank < P * D; ++rank) {
    result.all_losses.push_back(ReadNumbers(out + "/losses_" + std::to_string(rank) + ".txt"));
    result.traces.push_back(ReadNumbers(out + "/trace_" + std::to_string(rank) + ".txt"));
    result.stops.push_back(ReadNumbers(out + "/stops_" + std::to_string(rank) + ".txt"));
    result.segments.push_back(ReadNumbers(out + "/segments_" + std::to_string(rank) + ".txt"));
    result.buckets.push_back(ReadNumbers(out + "/buckets_" + std::to_string(rank) + ".txt"));
    const std::vector<double> eval = ReadNumbers(out + "/eval_" + std::to_string(rank) + ".txt");
    result.evals.push_back(eval.empty() ? NAN : eval[0]);
    if (map.Position(rank).replica != 0) continue;
    for (const char* kind : {"grads_", "params_"}) {
      auto file = ReadSafetensors(out + "/" + kind + std::to_string(rank) + ".safetensors");
      EXPECT_TRUE(file.ok()) << file.status();
      if (!file.ok()) continue;
      for (auto& [name, t] : file->tensors) {
        (std::string(kind) == "grads_" ? result.grads : result.params)[name] = t;
      }
    }
  }
  result.losses = result.all_losses[0];
  return result;
}

void ExpectSameRun(const RunResult& reference, const RunResult& run, const std::string& what) {
  ASSERT_EQ(run.losses.size(), reference.losses.size()) << what;
  for (size_t i = 0; i < run.losses.size(); ++i) {
    EXPECT_NEAR(run.losses[i], reference.losses[i], 1e-5 * std::abs(reference.losses[i]))
        << what << " step " << i + 1;
  }
  for (const auto& losses : run.all_losses) {
    EXPECT_EQ(losses, run.losses) << what << ": every rank reports the same loss";
  }
  ASSERT_EQ(run.grads.size(), reference.grads.size()) << what;
  for (const auto& [name, grad] : reference.grads) {
    ASSERT_TRUE(run.grads.count(name)) << what << " " << name;
    EXPECT_TRUE(at::allclose(run.grads.at(name), grad, 1e-5, 4e-5))
        << what << " " << name << " max diff " << (run.grads.at(name) - grad).abs().max();
  }
  for (double eval : run.evals) EXPECT_NEAR(eval, reference.evals[0], 1e-5) << what;
}

#ifdef VARUNA_PARITY_ON_CUDA
constexpr bool kOnCuda = true;
#else
constexpr bool kOnCuda = false;
#endif

class PipelineParityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!kOnCuda || VisibleGpus() > 0) reference_ = new RunResult(RunLayout(1, 1, kSteps));
  }
  static void TearDownTestSuite() { delete reference_; }
  void SetUp() override {
    if (reference_ == nullptr) GTEST_SKIP() << "no usable GPU";
  }
  static constexpr int kSteps = 6;
  static RunResult* reference_;
};
RunResult* PipelineParityTest::reference_ = nullptr;

#ifndef VARUNA_PARITY_ON_CUDA  // CPU only: the engine's logic, not the device's
#ifndef VARUNA_PARITY_ON_CUDA  // CPU only: the engine's logic, not the device's
#ifndef VARUNA_PARITY_ON_CUDA  // CPU only: the engine's logic, not the device's
TEST_F(PipelineParityTest, TwoStages) {
  ExpectSameRun(*reference_, RunLayout(2, 1, kSteps), "2x1");
}
TEST_F(PipelineParityTest, TwoReplicas) {
  ExpectSameRun(*reference_, RunLayout(1, 2, kSteps), "1x2");
}
TEST_F(PipelineParityTest, TwoByTwo) { ExpectSameRun(*reference_, RunLayout(2, 2, kSteps), "2x2"); }
TEST_F(PipelineParityTest, FourStages) {
  ExpectSameRun(*reference_, RunLayout(4, 1, kSteps), "4x1");
}
#endif
TEST_F(PipelineParityTest, ThreeUnevenStages) {
  ExpectSameRun(*reference_, RunLayout(3, 1, kSteps), "3x1 (segments 2+1+1)");
}
// Explicit uneven boundaries (VarunaOptions::stage_segments), the heavier stage last this time.
TEST_F(PipelineParityTest, ThreeStagesWithChosenSegments) {
  Options o;
  o.stage_segments = "1,1,2";
  const RunResult run = RunLayout(3, 1, kSteps, o);
  EXPECT_EQ(run.segments,
            (std::vector<std::vector<double>>{{0, 0}, {1, 1}, {2, 3}}));  // The split was used.
  ExpectSameRun(*reference_, run, "3x1 (segments 1+1+2)");
}
#endif
TEST_F(PipelineParityTest, OtherSchedules) {
  ExpectSameRun(*reference_, RunLayout(2, 1, kSteps, Options{"gpipe"}), "2x1 gpipe");
  ExpectSameRun(*reference_, RunLayout(2, 1, kSteps, Options{"1f1b"}), "2x1 1f1b");
}
#endif

// --overlap-grad-reduce (the default): with small buckets, most buckets start their all-reduce
// inside the last backward, and the run equals the synchronous reduce's bit for bit (the same
// buckets, summed in the same order) as well as the single-process reference. The pipelined
// layouts run the Varuna schedule and 1F1B (whose last task is not a backward on every stage).
TEST_F(PipelineParityTest, OverlappedGradReduceEqualsSynchronous) {
  struct Layout {
    int stages, replicas;
    const char* schedule;
  };
  for (const Layout& layout :
       {Layout{1, 2, "varuna"}, Layout{2, 2, "varuna"}, Layout{2, 2, "1f1b"}}) {
    const std::string what = std::to_string(layout.stages) + "x" + std::to_string(layout.replicas) +
                             " " + layout.schedule;
    Options overlapped;
    overlapped.schedule = layout.schedule;
    overlapped.bucket_elements = 3000;
    Options synchronous = overlapped;
    synchronous.overlap = false;
    const RunResult a = RunLayout(layout.stages, layout.replicas, kSteps, overlapped);
    const RunResult b = RunLayout(layout.stages, layout.replicas, kSteps, synchronous);
    ExpectSameRun(*reference_, a, what + " overlapped");
    EXPECT_EQ(a.all_losses, b.all_losses) << what;
    ASSERT_EQ(a.grads.size(), b.grads.size()) << what;
    for (const auto& [name, grad] : b.grads) {
      EXPECT_TRUE(at::equal(a.grads.at(name), grad)) << what << " gradient " << name;
    }
    for (const auto& [name, param] : b.params) {
      EXPECT_TRUE(at::equal(a.params.at(name), param)) << what << " weight " << name;
    }
    for (size_t rank = 0; rank < a.buckets.size(); ++rank) {
      ASSERT_EQ(a.buckets[rank].size(), 2u * kSteps) << what;
      for (int step = 0; step < kSteps; ++step) {
        const double count = a.buckets[rank][2 * step];
        const double started = a.buckets[rank][2 * step + 1];
        EXPECT_GE(count, 4) << what << " rank " << rank;
        // Every bucket started inside the backward (the last micro-batch touches every weight).
        EXPECT_EQ(started, count) << what << " rank " << rank << " step " << step;
        EXPECT_EQ(b.buckets[rank][2 * step + 1], 0) << what << " rank " << rank;
      }
      std::cout << what << " rank " << rank << ": " << a.buckets[rank][1] << " of "
                << a.buckets[rank][0] << " buckets started inside the last backward\n";
    }
  }
}

// With dropout, a recomputed forward must draw the masks of its original forward: Varuna's
// schedule (which recomputes) then matches GPipe's (which keeps every graph) exactly.
TEST_F(PipelineParityTest, RecomputeReplaysDropout) {
  Options gpipe_options{"gpipe", 0.1};
  gpipe_options.deterministic = kOnCuda;  // CUDA's attention backward may add in any order
  Options varuna_options = gpipe_options;
  varuna_options.schedule = "varuna";
  const RunResult gpipe = RunLayout(2, 1, kSteps, gpipe_options);
  const RunResult varuna = RunLayout(2, 1, kSteps, varuna_options);
  ExpectSameRun(gpipe, varuna, "2x1 dropout, varuna vs gpipe");
  EXPECT_GT(std::abs(gpipe.losses[0] - reference_->losses[0]), 1e-4);  // Dropout is on.
}

TEST_F(PipelineParityTest, TiedCopiesStayBitwiseEqual) {
  const RunResult run = RunLayout(2, 2, 50);
  ASSERT_TRUE(run.params.count("wte.weight") && run.params.count("lm_head_weight"));
  EXPECT_TRUE(at::equal(run.params.at("wte.weight"), run.params.at("lm_head_weight")));
  // And they were trained: both moved away from their initial value.
  gpt2::Gpt2Stage initial(Config(0), SegmentRange{0, 3}, 42);
  const at::Tensor init = initial.named_parameters()["wte.weight"].detach();
  EXPECT_GT((run.params.at("wte.weight") - init).abs().max().item<double>(), 1e-3);
}

#ifndef VARUNA_PARITY_ON_CUDA  // CPU only: the engine's logic, not the device's
// fp16 weights with dynamic loss scaling learn as fp32 does (a fixed set of 4 batches).
TEST_F(PipelineParityTest, Fp16TracksFp32) {
  Options fp32;
  fp32.learnable = true;
  Options fp16 = fp32;
  fp16.dtype = "fp16";
  const RunResult a = RunLayout(2, 1, 200, fp32);
  const RunResult b = RunLayout(2, 1, 200, fp16);
  ASSERT_EQ(a.losses.size(), 200u);
  ASSERT_EQ(b.losses.size(), 200u);
  // The mean loss over the last cycle of the 4 batches.
  auto final_loss = [](const RunResult& r) {
    return (r.losses[196] + r.losses[197] + r.losses[198] + r.losses[199]) / 4;
  };
  EXPECT_LT(final_loss(a), 0.5 * a.losses.front());  // It learned.
  // Within 3%: fp16 rounds at other places than fp32 does (e.g. dropout on the fp16 attention
  // probabilities, as Megatron's fused softmax path does); 200 steps amplify that to ~2%.
  EXPECT_NEAR(final_loss(b), final_loss(a), 0.03 * final_loss(a));
  // The scale found its level: few skipped steps after the first ones.
  int skipped = 0;
  for (size_t step = 10; step < 200; ++step) skipped += b.traces[0][3 * step] > 0;
  EXPECT_LE(skipped, 4);
}
#endif

// An inf in one rank's gradient (stage 0 of replica 1 of 2x2) skips the step on every rank,
// halves the loss scale (hysteresis 1 here) and leaves every weight unchanged.
TEST_F(PipelineParityTest, OverflowOnOneRankSkipsTheStepEverywhere) {
  Options o;
  o.dtype = "fp16";
  o.poison_step = 2;
  o.poison_rank = 2;  // Uniform(2, 2): rank 2 = stage 0, replica 1.
  const RunResult run = RunLayout(2, 2, 4, o);
  ASSERT_EQ(run.traces.size(), 4u);
  for (int rank = 0; rank < 4; ++rank) {
    const std::vector<double>& t = run.traces[rank];  // [overflow, scale, checksum] per step
    ASSERT_EQ(t.size(), 12u) << rank;
    EXPECT_EQ(t[3 * 1], 0) << "rank " << rank;
    EXPECT_EQ(t[3 * 2], 1) << "rank " << rank << ": step 3 overflowed everywhere";
    EXPECT_EQ(t[3 * 2 + 1], t[3 * 1 + 1] / 2) << "rank " << rank << ": scale halved";
    EXPECT_EQ(t[3 * 2 + 2], t[3 * 1 + 2]) << "rank " << rank << ": weights unchanged";
    EXPECT_NE(t[3 * 3 + 2], t[3 * 2 + 2]) << "rank " << rank << ": the next step applies";
  }
}

#ifndef VARUNA_PARITY_ON_CUDA  // CPU only: the engine's logic, not the device's
// A stop request (a signal) on one rank is reported by that step on every rank.
TEST_F(PipelineParityTest, StopRequestOnOneRankReachesEveryRank) {
  Options o;
  o.stop_step = 1;
  o.stop_rank = 3;
  const RunResult run = RunLayout(2, 2, 3, o);
  ASSERT_EQ(run.stops.size(), 4u);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(run.stops[rank], (std::vector<double>{0, 1, 0})) << "rank " << rank;
  }
}
#endif

#ifndef VARUNA_PARITY_ON_CUDA  // CPU only: the engine's logic, not the device's
// A rank killed in the middle of a step makes every other rank exit non-zero, quickly, with a
// code of its own (no SIGPIPE) and a message that names the killed rank.
TEST_F(PipelineParityTest, KilledRankStopsTheOthers) {
  Options o;
  o.die_step = 2;
  o.die_rank = 1;  // Uniform(2, 2): stage 1 of replica 0, killed during its backward.
  const auto start = std::chrono::steady_clock::now();
  const RunResult run = RunLayout(2, 2, 50, o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(run.exits.size(), 4u);
  EXPECT_EQ(run.exits[1].signal, SIGKILL) << testing::Describe(run.exits);
  for (int rank : {0, 2, 3}) {
    EXPECT_TRUE(run.exits[rank].exited && run.exits[rank].code != 0)
        << testing::Describe(run.exits);
    EXPECT_FALSE(run.exits[rank].timed_out);
    EXPECT_THAT(run.exits[rank].output, ::testing::HasSubstr("The job lost world rank 1 first"))
        << testing::Describe(run.exits);
  }
  EXPECT_LT(seconds, 60);
}
#endif

#ifdef VARUNA_PARITY_ON_CUDA
// The layouts over NCCL, each where the visible GPUs give every rank its own.
TEST_F(PipelineParityTest, LayoutsOverNcclWhereTheGpusSuffice) {
  if (VisibleGpus() < 2)
    GTEST_SKIP() << "NCCL needs a GPU per rank; " << VisibleGpus() << " visible";
  Options nccl;
  nccl.transport = "nccl";
  for (const auto& [P, D] : std::vector<std::pair<int, int>>{{2, 1}, {1, 2}, {2, 2}, {3, 1}}) {
    if (P * D > VisibleGpus()) continue;
    ExpectSameRun(*reference_, RunLayout(P, D, kSteps, nccl),
                  std::to_string(P) + "x" + std::to_string(D) + " nccl");
  }
}
#endif

}  // namespace
}  // namespace varuna

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) return varuna::RunWorker(*args);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
