// Proves the --config=cuda build on a GPU host: a kernel compiled by nvcc takes at::Tensors
// and runs on the current CUDA stream, and NCCL groups (c10d's ProcessGroupNCCL through
// World) all-reduce, broadcast and send/recv between one process per visible GPU.
// Without a usable GPU every test skips, saying why.

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "tests/toolchain/scale_add_kernel.h"
#include "tests/util/subprocess.h"
#include "varuna/comm/world.h"
#include "varuna/launch/host.h"

namespace {

#define SKIP_WITHOUT_GPU()                                                              \
  if (!torch::cuda::is_available()) {                                                   \
    GTEST_SKIP() << "no usable CUDA device here (no driver, or no GPU); run this test " \
                    "on a GPU host (README, \"GPU tests\")";                            \
  }

TEST(CudaSmokeTest, KernelTakesTensorsAndRunsOnTheCurrentStream) {
  SKIP_WITHOUT_GPU();
  torch::manual_seed(0);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
  const int64_t n = (1 << 22) + 7;  // not a multiple of the block size
  at::Tensor x = torch::randn({n}, cuda);
  at::Tensor y = torch::randn({n}, cuda);
  const at::Tensor expected = ((y + 2.5f * x) * 2.0f).cpu();

  // On a side stream that first waits for x and y: the kernel must be queued there, in
  // order with the multiply that follows it on the same stream.
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  at::cuda::CUDAEvent inputs_ready;
  inputs_ready.record(c10::cuda::getCurrentCUDAStream());
  inputs_ready.block(side);
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    varuna::testing::ScaleAdd(x, y, 2.5f);
    y.mul_(2.0f);
  }
  side.synchronize();
  EXPECT_TRUE(torch::allclose(y.cpu(), expected, /*rtol=*/1e-6, /*atol=*/1e-6));

  const at::Tensor on_cpu = torch::ones({4});
  at::Tensor y_small = torch::ones({4}, cuda);
  EXPECT_THROW(varuna::testing::ScaleAdd(on_cpu, y_small, 1.0f), c10::Error);
}

int RunNcclWorker(const std::map<std::string, std::string>& args) {
  varuna::comm::WorldOptions options;
  options.rank = std::stoi(args.at("rank"));
  options.world_size = std::stoi(args.at("world_size"));
  options.master_port = std::stoi(args.at("port"));
  options.backend = varuna::comm::Backend::kNccl;
  options.cuda_device = options.rank;
  options.timeout = std::chrono::seconds(60);
  auto world = varuna::comm::World::Join(options);
  if (!world.ok()) {
    std::cerr << world.status() << std::endl;
    return 3;
  }
  varuna::comm::ProcessGroup& group = (*world)->group();
  const int r = group.rank();
  const int n = group.size();
  const auto cuda = torch::TensorOptions().device(torch::kCUDA, r);
  bool ok = true;
  auto check = [&](bool cond, const std::string& what) {
    if (!cond) std::cerr << "rank " << r << ": " << what << " is wrong" << std::endl;
    ok = ok && cond;
  };

  at::Tensor sum = torch::full({(1 << 20) + 3}, static_cast<float>(r + 1), cuda);
  absl::Status s = group.AllReduceSum(sum);
  check(s.ok() && sum.eq(n * (n + 1) / 2.0f).all().item<bool>(), "all-reduce " + s.ToString());

  at::Tensor root = torch::arange(1000, cuda.dtype(torch::kLong)) + 1000 * r;
  s = group.Broadcast(root, n - 1);
  check(s.ok() && torch::equal(root.cpu(), torch::arange(1000, torch::kLong) + 1000 * (n - 1)),
        "broadcast " + s.ToString());

  if (n > 1) {
    // NCCL runs a pair's transfers in issue order: with two ranks, if both received first
    // both would wait forever, so rank 0 sends first (process_group.h, "Matching").
    const at::Tensor out = torch::full({4096}, static_cast<float>(r), cuda);
    at::Tensor in = torch::zeros({4096}, cuda);
    std::unique_ptr<varuna::comm::Work> send, recv;
    if (r == 0) send = group.Send(out, (r + 1) % n, 0);
    recv = group.Recv(in, (r + n - 1) % n, 0);
    if (r != 0) send = group.Send(out, (r + 1) % n, 0);
    s = send->Wait();
    if (s.ok()) s = recv->Wait();
    check(s.ok() && in.eq(static_cast<float>((r + n - 1) % n)).all().item<bool>(),
          "send/recv " + s.ToString());
  }
  s = group.Barrier();
  check(s.ok(), "barrier " + s.ToString());
  std::cout << "rank " << r << " of " << n << (ok ? ": NCCL checks passed" : ": FAILED")
            << std::endl;
  return ok ? 0 : 1;
}

TEST(CudaSmokeTest, NcclAllReduceBroadcastAndSendRecvAcrossTheVisibleGpus) {
  SKIP_WITHOUT_GPU();
  const int n = std::min<int>(static_cast<int>(torch::cuda::device_count()), 8);
  const std::string port = std::to_string(varuna::FreeTcpPort());
  const std::vector<varuna::testing::Process> workers =
      varuna::testing::SpawnRanks("nccl", n, [&](int) {
        return std::vector<std::string>{"--world_size=" + std::to_string(n), "--port=" + port};
      });
  const auto exits = varuna::testing::WaitAll(workers, std::chrono::seconds(180));
  for (const auto& e : exits) {
    ASSERT_TRUE(e.exited && e.code == 0) << varuna::testing::Describe(exits);
    EXPECT_NE(e.output.find("NCCL checks passed"), std::string::npos) << e.output;
  }
  std::cout << "NCCL checks passed on " << n << " GPU(s)" << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) return RunNcclWorker(*args);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
