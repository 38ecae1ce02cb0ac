// Proves HostStagedProcessGroup between real processes: transfers routed by tag, concurrent
// transfers from several threads, all-reduce and broadcast give exact values; a send waits for
// the compute that produces its tensor; a receive waited for on one thread is usable on
// another; bad arguments are refused without breaking the group; asynchronous all-reduces of
// freshly computed tensors, several in flight and interleaved with transfers, are exact; a
// killed peer makes a waiting receive, or an asynchronous all-reduce, fail promptly.
//
// Built twice from this source: host_staged_process_group_test moves CPU tensors (the sender
// thread, queues and Work objects are the same code as for CUDA tensors), and
// host_staged_process_group_test_gpu (tagged gpu, --config=cuda) moves CUDA tensors, with every
// rank on cuda:0: two ranks share one GPU, which only this transport allows. It skips where no
// GPU is usable.

#include "varuna/comm/host_staged_process_group.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <csignal>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/subprocess.h"
#include "tests/util/worker_check.h"
#include "tests/varuna/local_job.h"
#include "varuna/comm/world.h"
#include "varuna/launch/host.h"

#ifdef VARUNA_HOST_STAGED_ON_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace {

using varuna::comm::Backend;
using varuna::comm::HostStagedProcessGroup;
using varuna::comm::ProcessGroup;
using varuna::comm::Work;
using varuna::testing::ExitInfo;

constexpr int kCommFailed = 3;

// The device every tensor of the workers lives on.
c10::Device TestDevice() {
#ifdef VARUNA_HOST_STAGED_ON_CUDA
  return c10::Device(c10::kCUDA, 0);
#else
  return c10::Device(c10::kCPU);
#endif
}

bool DeviceUsable() {
#ifdef VARUNA_HOST_STAGED_ON_CUDA
  return c10::cuda::device_count() > 0;
#else
  return true;
#endif
}

at::TensorOptions On(at::ScalarType dtype = at::kFloat) {
  return at::TensorOptions().dtype(dtype).device(TestDevice());
}

void AllReduceAndBroadcastAreExact(ProcessGroup& group) {
  const int r = group.rank();
  const int n = group.size();
  const int64_t triangle = static_cast<int64_t>(n) * (n + 1) / 2;
  for (at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16, at::kLong}) {
    at::Tensor x = torch::arange(1001, On(at::kLong)).remainder(7).mul(r + 1).to(dtype);
    WORKER_OK(group.AllReduceSum(x));
    WORKER_CHECK(x.device() == TestDevice(), x.device());
    // Read on the current stream, after the copy back was queued there.
    const at::Tensor expected = torch::arange(1001, On(at::kLong)).remainder(7).mul(triangle);
    WORKER_CHECK(torch::equal(x.to(at::kLong), expected), c10::toString(dtype));
  }
  const int root = n - 1;
  at::Tensor y = torch::arange(777, On(at::kLong)) + 1000 * r;
  WORKER_OK(group.Broadcast(y, root));
  WORKER_CHECK(torch::equal(y, torch::arange(777, On(at::kLong)) + 1000 * root), y.sum());
}

void SendRecvRoutesByTagAndWaitsForCompute(ProcessGroup& group) {
  const int r = group.rank();
  const int n = group.size();
  const int next = (r + 1) % n;
  const int prev = (r + n - 1) % n;
  at::Tensor got_a = torch::zeros({1000}, On());
  at::Tensor got_b = torch::zeros({512, 512}, On());
  // Receives posted first and in the other tag order: only the tag can route them.
  std::unique_ptr<Work> recv_b = group.Recv(got_b, prev, 2);
  std::unique_ptr<Work> recv_a = group.Recv(got_a, prev, 1);
  // b comes out of a chain of matrix products queued just before the send: each entry is
  // 10 r + 2 only once every product has run, so a copy that did not wait for them sends
  // something else.
  at::Tensor b = torch::full({512, 512}, 1.0 / 512, On());
  for (int i = 0; i < 20; ++i) b = b.matmul(torch::ones({512, 512}, On())) / 512;
  b = b * 512 * (10.0 * r + 2);
  const at::Tensor a = torch::full({1000}, 10.0 * r + 1, On());
  std::unique_ptr<Work> send_a = group.Send(a, next, 1);
  std::unique_ptr<Work> send_b = group.Send(b, next, 2);
  WORKER_OK(send_a->Wait());
  WORKER_OK(send_b->Wait());
  // Waited for on another thread (as the pipeline's receive threads do), used on this one.
  std::thread waiter([&] {
    WORKER_OK(recv_a->Wait());
    WORKER_OK(recv_b->Wait());
  });
  waiter.join();
  WORKER_CHECK(got_a.eq(10.0 * prev + 1).all().item<bool>(), got_a.sum());
  WORKER_CHECK(got_b.eq(10.0 * prev + 2).all().item<bool>(), got_b.mean());
}

// Two threads per rank, one sending and one receiving, 64 tensors each way in flight at once.
void ConcurrentTransfersArriveIntact(ProcessGroup& group) {
  constexpr int kCount = 64;
  const int r = group.rank();
  const int peer = 1 - r;  // ranks 0 and 1
  std::vector<at::Tensor> received(kCount);
  std::thread receiver([&] {
    std::vector<std::unique_ptr<Work>> works;
    for (int i = 0; i < kCount; ++i) {
      received[i] = torch::empty({100 + i}, On());
      works.push_back(group.Recv(received[i], peer, 100 + i));
    }
    for (auto& work : works) WORKER_OK(work->Wait());
  });
  std::vector<std::unique_ptr<Work>> sends;
  std::vector<at::Tensor> sent;
  for (int i = 0; i < kCount; ++i) {
    sent.push_back(torch::arange(100 + i, On()) + 1000.0 * r + i);
    sends.push_back(group.Send(sent.back(), peer, 100 + i));
  }
  for (auto& work : sends) WORKER_OK(work->Wait());
  receiver.join();
  for (int i = 0; i < kCount; ++i) {
    WORKER_CHECK(torch::equal(received[i], torch::arange(100 + i, On()) + 1000.0 * peer + i),
                 "transfer " << i);
  }
}

void BadArgumentsAreRefusedAndTheGroupStillWorks(ProcessGroup& group) {
  at::Tensor strided = torch::ones({4, 4}, On()).t();
  absl::Status s = group.AllReduceSum(strided);
  WORKER_CHECK(absl::IsInvalidArgument(s) && s.message().find("contiguous") != std::string::npos,
               s.ToString());
  s = group.Send(strided, 1 - group.rank(), 0)->Wait();
  WORKER_CHECK(absl::IsInvalidArgument(s) && s.message().find("host-staged") != std::string::npos,
               s.ToString());
  s = group.Send(torch::ones({2}, On()), group.rank(), 0)->Wait();
  WORKER_CHECK(absl::IsInvalidArgument(s), s.ToString());
  at::Tensor flags = torch::ones({3}, On(at::kBool));
  s = group.AllReduceSum(flags);
  WORKER_CHECK(absl::IsInvalidArgument(s) && s.message().find("Bool") != std::string::npos,
               s.ToString());
  at::Tensor x = torch::ones({2}, On());
  WORKER_OK(group.AllReduceSum(x));
  WORKER_CHECK(x.eq(group.size()).all().item<bool>(), x);
}

// Asynchronous all-reduces: several in flight at once, of tensors produced by compute queued
// just before (the device-to-host copy must wait for it), interleaved with transfers and a
// synchronous all-reduce; each result is exact once its Work was waited for.
void AsyncAllReducesAreExactAndOrdered(ProcessGroup& group) {
  const int r = group.rank();
  const int n = group.size();
  const int next = (r + 1) % n;
  const int prev = (r + n - 1) % n;
  const int64_t triangle = static_cast<int64_t>(n) * (n + 1) / 2;
  at::Tensor got = torch::zeros({300}, On());
  std::unique_ptr<Work> recv = group.Recv(got, prev, 5);
  std::vector<at::Tensor> xs;
  std::vector<std::unique_ptr<Work>> works;
  for (int k = 0; k < 5; ++k) {
    // (r + 1) * (k + 1) in every entry, but only once the chain of products has run.
    at::Tensor x = torch::full({256, 256}, 1.0 / 256, On());
    for (int i = 0; i < 10; ++i) x = x.matmul(torch::ones({256, 256}, On())) / 256;
    x = x * 256 * (r + 1) * (k + 1);
    xs.push_back(x);
    works.push_back(group.AllReduceSumAsync(xs.back()));
  }
  const at::Tensor sent = torch::full({300}, 3.0 + r, On());
  WORKER_OK(group.Send(sent, next, 5)->Wait());
  WORKER_OK(recv->Wait());
  WORKER_CHECK(got.eq(3.0 + prev).all().item<bool>(), got.sum());
  at::Tensor sync = torch::full({7}, static_cast<int64_t>(r + 1), On(at::kLong));
  WORKER_OK(group.AllReduceSum(sync));
  WORKER_CHECK(sync.eq(triangle).all().item<bool>(), sync.sum());
  for (int k = 4; k >= 0; --k) {
    WORKER_OK(works[k]->Wait());
    WORKER_CHECK(xs[k].eq(static_cast<double>(triangle * (k + 1))).all().item<bool>(),
                 "async all-reduce " << k << ": " << xs[k].mean());
  }
  at::Tensor flags = torch::ones({3}, On(at::kBool));
  const absl::Status s = group.AllReduceSumAsync(flags)->Wait();
  WORKER_CHECK(absl::IsInvalidArgument(s), s.ToString());
}

std::unique_ptr<ProcessGroup> StagedGroup(varuna::comm::World& world) {
  std::vector<int> all;
  for (int r = 0; r < world.size(); ++r) all.push_back(r);
  auto gloo = world.NewGroup(all, Backend::kGloo);
  WORKER_OK(gloo.status());
  return std::make_unique<HostStagedProcessGroup>(std::move(*gloo));
}

int RunWorker(const std::map<std::string, std::string>& args) {
  torch::set_num_threads(1);
  const int rank = std::stoi(args.at("rank"));
  auto world =
      varuna::testing::JoinLocalJob(rank, 2, std::stoi(args.at("port")), std::chrono::seconds(30));
  if (!world.ok()) {
    std::cerr << "join failed: " << world.status() << std::endl;
    return kCommFailed;
  }
  std::unique_ptr<ProcessGroup> group = StagedGroup(**world);
  const std::string& role = args.at("worker");
  if (role == "transfers") {
    AllReduceAndBroadcastAreExact(*group);
    SendRecvRoutesByTagAndWaitsForCompute(*group);
    ConcurrentTransfersArriveIntact(*group);
    BadArgumentsAreRefusedAndTheGroupStillWorks(*group);
    AsyncAllReducesAreExactAndOrdered(*group);
    WORKER_OK(group->Barrier());
    std::cout << "rank " << rank << ": all checks passed" << std::endl;
    return 0;
  }
  if (role == "victim") {
    if (rank == 1) {
      WORKER_OK(group->Barrier());
      std::raise(SIGKILL);
    }
    at::Tensor never = torch::zeros({10}, On());
    std::unique_ptr<Work> recv = group->Recv(never, 1, 7);
    WORKER_OK(group->Barrier());
    const absl::Status s = recv->Wait();
    std::cerr << "receive from the killed rank: " << s << std::endl;
    std::_Exit(s.ok() ? varuna::testing::kWorkerCheckFailed : kCommFailed);
  }
  if (role == "async_victim") {
    if (rank == 1) {
      WORKER_OK(group->Barrier());
      std::raise(SIGKILL);
    }
    WORKER_OK(group->Barrier());
    at::Tensor x = torch::ones({1 << 16}, On());
    std::unique_ptr<Work> first = group->AllReduceSumAsync(x);
    at::Tensor y = torch::ones({1 << 16}, On());
    std::unique_ptr<Work> second = group->AllReduceSumAsync(y);
    const absl::Status s = first->Wait();
    const absl::Status t = second->Wait();
    std::cerr << "all-reduce with the killed rank: " << s << "; the next: " << t << std::endl;
    std::_Exit(s.ok() || t.ok() ? varuna::testing::kWorkerCheckFailed : kCommFailed);
  }
  std::cerr << "unknown worker role " << role << std::endl;
  return 2;
}

std::vector<ExitInfo> RunJob(const std::string& role) {
  const int port = varuna::FreeTcpPort();
  auto processes = varuna::testing::SpawnRanks(
      role, 2, [&](int) { return std::vector<std::string>{"--port=" + std::to_string(port)}; });
  return varuna::testing::WaitAll(processes, std::chrono::seconds(90));
}

TEST(HostStagedProcessGroupTest, TransfersAndCollectivesAreExact) {
  if (!DeviceUsable()) GTEST_SKIP() << "no usable GPU";
  const std::vector<ExitInfo> exits = RunJob("transfers");
  for (const ExitInfo& e : exits) {
    ASSERT_TRUE(e.exited && e.code == 0) << varuna::testing::Describe(exits);
    EXPECT_NE(e.output.find("all checks passed"), std::string::npos) << e.output;
  }
}

TEST(HostStagedProcessGroupTest, AKilledPeerFailsAWaitingReceivePromptly) {
  if (!DeviceUsable()) GTEST_SKIP() << "no usable GPU";
  const auto start = std::chrono::steady_clock::now();
  const std::vector<ExitInfo> exits = RunJob("victim");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string all = varuna::testing::Describe(exits);
  EXPECT_EQ(exits[1].signal, SIGKILL) << all;
  EXPECT_TRUE(exits[0].exited && exits[0].code == kCommFailed) << all;
  EXPECT_NE(exits[0].output.find("recv from rank 1"), std::string::npos) << all;
  EXPECT_LT(seconds, 25) << all;  // the group timeout is 30 s: a closed connection is sooner
}

TEST(HostStagedProcessGroupTest, AKilledPeerFailsAsyncAllReducesPromptly) {
  if (!DeviceUsable()) GTEST_SKIP() << "no usable GPU";
  const auto start = std::chrono::steady_clock::now();
  const std::vector<ExitInfo> exits = RunJob("async_victim");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string all = varuna::testing::Describe(exits);
  EXPECT_EQ(exits[1].signal, SIGKILL) << all;
  EXPECT_TRUE(exits[0].exited && exits[0].code == kCommFailed) << all;
  EXPECT_NE(exits[0].output.find("all-reduce"), std::string::npos) << all;
  EXPECT_LT(seconds, 25) << all;  // the group timeout is 30 s
}

}  // namespace

int main(int argc, char** argv) {
  if (auto args = varuna::testing::WorkerArgs(argc, argv)) return RunWorker(*args);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
