#include "trainer/op_profile.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "varuna/pipeline/trace_range.h"

namespace trainer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kMs = 1000000;  // nanoseconds

ProfiledEvent Host(const std::string& name, uint64_t thread, uint64_t start_ms, uint64_t end_ms,
                   uint64_t correlation = 0) {
  return {name, false, thread, start_ms * kMs, end_ms * kMs, correlation};
}

ProfiledEvent Kernel(const std::string& name, uint64_t start_ms, uint64_t end_ms,
                     uint64_t launched_by) {
  return {name, true, 0, start_ms * kMs, end_ms * kMs, launched_by};
}

// A CUDA runtime call on thread 1 (cudaLaunchKernel, cudaStreamSynchronize, ...).
ProfiledEvent Runtime(const std::string& name) {
  ProfiledEvent event = Host(name, 1, 0, 1, 5);
  event.runtime = true;
  return event;
}

std::map<std::string, OpTime> ByName(const std::vector<OpTime>& rows) {
  std::map<std::string, OpTime> out;
  for (const OpTime& row : rows) out[row.name] = row;
  return out;
}

TEST(HostSelfTimeByOp, SubtractsDirectlyNestedOpsPerThread) {
  // Thread 1: linear [0, 10] holds t [1, 2] and addmm [2, 9]; addmm holds mm [3, 8].
  // Thread 2: addmm [0, 4] alone (overlapping thread 1's times, not nested in them).
  const std::vector<ProfiledEvent> events = {
      Host("aten::mm", 1, 3, 8),
      Host("aten::linear", 1, 0, 10),
      Host("aten::t", 1, 1, 2),
      Host("aten::addmm", 1, 2, 9),
      Host("aten::addmm", 2, 0, 4),
      Kernel("gemm_kernel", 0, 100, 0),  // device activity: ignored here
  };
  const std::vector<OpTime> rows = HostSelfTimeByOp(events);
  ASSERT_EQ(rows.size(), 4u);
  std::map<std::string, OpTime> by_name = ByName(rows);
  EXPECT_DOUBLE_EQ(by_name["aten::linear"].milliseconds, 2.0);  // 10 - 1 - 7
  EXPECT_EQ(by_name["aten::linear"].calls, 1);
  EXPECT_DOUBLE_EQ(by_name["aten::addmm"].milliseconds, 2.0 + 4.0);  // (7 - 5) + 4
  EXPECT_EQ(by_name["aten::addmm"].calls, 2);
  EXPECT_DOUBLE_EQ(by_name["aten::mm"].milliseconds, 5.0);
  EXPECT_DOUBLE_EQ(by_name["aten::t"].milliseconds, 1.0);
  // Largest first, ties by name.
  EXPECT_EQ(rows[0].name, "aten::addmm");
  EXPECT_EQ(rows[1].name, "aten::mm");
  EXPECT_EQ(rows[2].name, "aten::linear");
  EXPECT_EQ(rows[3].name, "aten::t");
}

TEST(HostSelfTimeByOp, BackToBackOpsAreSiblingsNotNested) {
  const std::vector<ProfiledEvent> events = {Host("a", 1, 0, 5), Host("b", 1, 5, 8),
                                             Host("c", 1, 6, 7)};
  std::map<std::string, OpTime> by_name = ByName(HostSelfTimeByOp(events));
  EXPECT_DOUBLE_EQ(by_name["a"].milliseconds, 5.0);
  EXPECT_DOUBLE_EQ(by_name["b"].milliseconds, 2.0);
  EXPECT_DOUBLE_EQ(by_name["c"].milliseconds, 1.0);
}

TEST(DeviceTimeByOp, ChargesKernelsToTheOpThatLaunchedThem) {
  const std::vector<ProfiledEvent> events = {
      Host("aten::mm", 1, 0, 1, /*correlation=*/7),
      Host("aten::mm", 1, 2, 3, /*correlation=*/8),
      Host("aten::add", 1, 4, 5, /*correlation=*/9),
      Host("aten::relu", 1, 6, 7, /*correlation=*/10),  // launched nothing
      Kernel("gemm_a", 10, 14, 7),
      Kernel("gemm_b", 14, 15, 7),  // a second kernel of the same call
      Kernel("gemm_a", 15, 19, 8),
      Kernel("add_kernel", 19, 20, 9),
      Kernel("custom_kernel", 20, 23, 0),   // launched outside any op
      Kernel("custom_kernel", 23, 24, 99),  // its op was not recorded
  };
  const std::vector<OpTime> rows = DeviceTimeByOp(events);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "aten::mm");
  EXPECT_EQ(rows[0].calls, 2);
  EXPECT_DOUBLE_EQ(rows[0].milliseconds, 9.0);
  EXPECT_EQ(rows[1].name, "[kernel] custom_kernel");
  EXPECT_EQ(rows[1].calls, 2);
  EXPECT_DOUBLE_EQ(rows[1].milliseconds, 4.0);
  EXPECT_EQ(rows[2].name, "aten::add");
  EXPECT_EQ(rows[2].calls, 1);
  EXPECT_DOUBLE_EQ(rows[2].milliseconds, 1.0);
}

TEST(DeviceBusyMilliseconds, CountsOverlappingActivitiesOnce) {
  EXPECT_DOUBLE_EQ(DeviceBusyMilliseconds({Host("aten::mm", 1, 0, 50, 7)}), 0.0);
  const std::vector<ProfiledEvent> events = {
      Host("aten::mm", 1, 0, 50, 7),  // host time is not device time
      Kernel("a", 10, 14, 7),
      Kernel("b", 12, 15, 7),  // overlaps a (another stream): 10..15 is 5 ms
      Kernel("c", 15, 16, 7),  // back to back
      Kernel("d", 20, 22, 0),  // after an idle gap of 4 ms
      Kernel("e", 20, 21, 0),  // inside d
  };
  EXPECT_DOUBLE_EQ(DeviceBusyMilliseconds(events), 8.0);
}

TEST(HostSyncCalls, CountsTheBlockingRuntimeCallsOnly) {
  const std::vector<ProfiledEvent> events = {
      Runtime("cudaLaunchKernel"),      Runtime("cudaStreamSynchronize"),
      Runtime("cudaStreamSynchronize"), Runtime("cudaEventSynchronize"),
      Runtime("cudaMemcpyAsync"),       Host("cudaStreamSynchronize", 1, 0, 1, 6),  // an op
  };
  const std::map<std::string, int64_t> calls = HostSyncCalls(events);
  EXPECT_EQ(calls, (std::map<std::string, int64_t>{{"cudaEventSynchronize", 1},
                                                   {"cudaStreamSynchronize", 2}}));
  // The op tables leave runtime calls out.
  EXPECT_TRUE(HostSelfTimeByOp({Runtime("cudaLaunchKernel")}).empty());
}

TEST(DeviceTimeByOp, EmptyWithoutDeviceActivity) {
  EXPECT_TRUE(DeviceTimeByOp({Host("aten::mm", 1, 0, 1, 3)}).empty());
}

TEST(FormatOpTable, ListsTheTopRowsThenTheRestAndTheSum) {
  const std::vector<OpTime> rows = {
      {"aten::mm", 6, 30.0}, {"aten::add", 3, 10.0}, {"aten::relu", 2, 6.0}, {"aten::t", 1, 4.0}};
  const std::string table = FormatOpTable("title line", rows, /*total_milliseconds=*/100, 2);
  EXPECT_THAT(table, HasSubstr("title line\n"));
  EXPECT_THAT(table, HasSubstr("aten::mm"));
  EXPECT_THAT(table, HasSubstr("30.000"));
  EXPECT_THAT(table, HasSubstr("30.0%"));
  EXPECT_THAT(table, HasSubstr("aten::add"));
  EXPECT_THAT(table, Not(HasSubstr("aten::relu")));
  EXPECT_THAT(table, HasSubstr("(2 other ops)"));
  EXPECT_THAT(table, HasSubstr("10.000"));  // 6 + 4, the rest
  EXPECT_THAT(table, HasSubstr("50.000"));  // the sum
  EXPECT_THAT(table, HasSubstr("50.0%"));
}

TEST(ProfileEvents, RecordsTheHostOpsOfTheBodyOnTheCpu) {
  at::set_num_threads(1);
  const at::Tensor a = at::randn({64, 64});
  const at::Tensor b = at::randn({64, 64});
  absl::StatusOr<std::vector<ProfiledEvent>> events = ProfileEvents(false, [&]() {
    for (int i = 0; i < 3; ++i) at::relu(at::mm(a, b));
    return absl::OkStatus();
  });
  ASSERT_TRUE(events.ok()) << events.status();
  std::map<std::string, OpTime> by_name = ByName(HostSelfTimeByOp(*events));
  ASSERT_EQ(by_name.count("aten::mm"), 1u);
  EXPECT_EQ(by_name["aten::mm"].calls, 3);
  EXPECT_GT(by_name["aten::mm"].milliseconds, 0.0);
  ASSERT_EQ(by_name.count("aten::relu"), 1u);
  EXPECT_EQ(by_name["aten::relu"].calls, 3);
  EXPECT_TRUE(DeviceTimeByOp(*events).empty());
  for (const ProfiledEvent& event : *events) {
    EXPECT_THAT(event.name, Not(HasSubstr("profiler::")));
    EXPECT_LE(event.start_ns, event.end_ns);
  }
}

TEST(ProfileEvents, ReturnsTheBodysErrorAndLeavesTheProfilerOff) {
  absl::StatusOr<std::vector<ProfiledEvent>> events =
      ProfileEvents(false, [] { return absl::InternalError("body failed"); });
  ASSERT_FALSE(events.ok());
  EXPECT_THAT(std::string(events.status().message()), HasSubstr("body failed"));
  // The profiler was turned off: a second session can start.
  absl::StatusOr<std::vector<ProfiledEvent>> again =
      ProfileEvents(false, [] { return absl::OkStatus(); });
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(ProfileEvents, RefusesToNestInARunningProfiler) {
  absl::Status inner;
  absl::StatusOr<std::vector<ProfiledEvent>> outer = ProfileEvents(false, [&] {
    inner = ProfileEvents(false, [] { return absl::OkStatus(); }).status();
    return absl::OkStatus();
  });
  ASSERT_TRUE(outer.ok()) << outer.status();
  EXPECT_EQ(inner.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(inner.message()), HasSubstr("already running"));
}

TEST(SummarizeSteps, DeviceTablesBusyFractionAndTheStepsOwnWaits) {
  const std::vector<ProfiledEvent> events = {
      Host("aten::mm", 1, 0, 10, 7),    Kernel("gemm", 10, 16, 7),
      Kernel("gemm", 20, 24, 7),        Runtime("cudaDeviceSynchronize"),
      Runtime("cudaDeviceSynchronize"), Runtime("cudaDeviceSynchronize"),
      Runtime("cudaStreamSynchronize"),
  };
  const StepsProfileSummary summary =
      SummarizeSteps(events, /*cuda=*/true, /*wall_milliseconds=*/40, /*steps=*/2,
                     /*bracketing_syncs=*/2, /*rows=*/5);
  ASSERT_TRUE(summary.device_busy_fraction.has_value());
  EXPECT_DOUBLE_EQ(*summary.device_busy_fraction, 10.0 / 40.0);
  // One cudaDeviceSynchronize beyond the two around the steps, and one stream sync: 2 in 2 steps.
  ASSERT_TRUE(summary.host_syncs_per_step.has_value());
  EXPECT_DOUBLE_EQ(*summary.host_syncs_per_step, 1.0);
  EXPECT_THAT(summary.text, HasSubstr("device time by op (2 profiled steps, 40.0 ms of wall time"));
  EXPECT_THAT(summary.text, HasSubstr("device busy fraction: 25.0%"));
  EXPECT_THAT(summary.text, HasSubstr("idle 15.0 ms per step"));
  EXPECT_THAT(summary.text, HasSubstr("host waits for the device: 1.0 per step"));
}

TEST(SummarizeSteps, HostTableWithoutDeviceActivity) {
  const StepsProfileSummary cpu =
      SummarizeSteps({Host("aten::mm", 1, 0, 10, 7)}, /*cuda=*/false, 20, 1, 2, 5);
  EXPECT_FALSE(cpu.device_busy_fraction.has_value());
  EXPECT_FALSE(cpu.host_syncs_per_step.has_value());
  EXPECT_THAT(cpu.text, HasSubstr("host self time by op (1 profiled step, 20.0 ms"));
  EXPECT_THAT(cpu.text, HasSubstr("aten::mm"));
  EXPECT_THAT(cpu.text, HasSubstr("n/a on the CPU"));
  const StepsProfileSummary blind = SummarizeSteps({Host("aten::mm", 1, 0, 10, 7)},
                                                   /*cuda=*/true, 20, 1, 2, 5);
  EXPECT_THAT(blind.text, HasSubstr("no CUDA activity"));
  EXPECT_THAT(blind.text, HasSubstr("unknown (the profiler saw no device activity)"));
}

TEST(LongestIdleGaps, LongestFirstWithWhatTheHostWasInAndWhatEndedThem) {
  ProfiledEvent sync = Host("cudaEventSynchronize", 1, 14, 19, 90);
  sync.runtime = true;
  const std::vector<ProfiledEvent> events = {
      Host("aten::mm", 1, 0, 2, 7),
      Kernel("gemm", 2, 10, 7),
      Kernel("other_stream", 9, 12, 7),  // overlaps: busy until 12
      Host("Varuna::step", 1, 12, 30, 0),
      sync,  // the host waits from 14 to 19
      Host("aten::embedding", 1, 19, 20, 8),
      Kernel("index", 20, 21, 8),   // ends an 8 ms gap (12..20) begun inside Varuna::step's wait?
      Kernel("orphan", 22, 23, 0),  // ends a 1 ms gap; no op launched it
      Host("aten::add", 2, 23, 24, 9),
      Kernel("add", 24, 25, 9),  // ends a 1 ms gap launched from thread 2
  };
  std::vector<IdleGap> gaps = LongestIdleGaps(events, 5);
  ASSERT_EQ(gaps.size(), 3u);
  EXPECT_DOUBLE_EQ(gaps[0].start_ms, 10.0);  // 12 ms after the first activity at 2
  EXPECT_DOUBLE_EQ(gaps[0].milliseconds, 8.0);
  // At 12 the launching thread was inside Varuna::step only (the sync began at 14).
  EXPECT_EQ(gaps[0].waiting_in, "Varuna::step");
  EXPECT_EQ(gaps[0].ended_by, "aten::embedding");
  EXPECT_DOUBLE_EQ(gaps[1].milliseconds, 1.0);
  EXPECT_EQ(gaps[1].ended_by, "[kernel] orphan");
  EXPECT_EQ(gaps[1].waiting_in, "");
  EXPECT_EQ(gaps[2].ended_by, "aten::add");
  EXPECT_EQ(gaps[2].waiting_in, "aten::add");  // thread 2's op spans the gap's start at 23
  EXPECT_EQ(LongestIdleGaps(events, 1).size(), 1u);
  EXPECT_TRUE(LongestIdleGaps({Host("aten::mm", 1, 0, 2, 7)}, 5).empty());

  // The innermost event spanning the start wins: a sync inside the step.
  std::vector<ProfiledEvent> waiting = events;
  waiting[3] = Host("Varuna::step", 1, 10, 30, 0);
  waiting[4].start_ns = 11 * kMs;
  EXPECT_EQ(LongestIdleGaps(waiting, 1)[0].waiting_in, "cudaEventSynchronize");

  const StepsProfileSummary summary = SummarizeSteps(events, true, 30, 1, 0, 5);
  EXPECT_THAT(summary.text, HasSubstr("the device's longest idle stretches"));
  EXPECT_THAT(summary.text, HasSubstr("8.000 ms; Varuna::step -> aten::embedding"));
  EXPECT_THAT(summary.text, HasSubstr("(no host op) -> [kernel] orphan"));
}

TEST(PhaseTimes, SumsTheNamedRangesInclusively) {
  ProfiledEvent step = Host("varuna::step", 1, 0, 10, 0);
  step.annotation = true;
  ProfiledEvent optimizer = Host("varuna::optimizer", 1, 6, 9, 0);
  optimizer.annotation = true;
  ProfiledEvent second_step = Host("varuna::step", 1, 20, 25, 0);
  second_step.annotation = true;
  const std::vector<ProfiledEvent> events = {step, Host("aten::mm", 1, 1, 5, 3), optimizer,
                                             second_step};
  const std::map<std::string, OpTime> phases = ByName(PhaseTimes(events));
  ASSERT_EQ(phases.size(), 2u);  // ops are not phases
  EXPECT_EQ(phases.at("varuna::step").calls, 2);
  EXPECT_DOUBLE_EQ(phases.at("varuna::step").milliseconds, 15.0);  // inclusive of what it holds
  EXPECT_DOUBLE_EQ(phases.at("varuna::optimizer").milliseconds, 3.0);
  const StepsProfileSummary summary = SummarizeSteps(events, /*cuda=*/false, 30, 2, 0, 5);
  EXPECT_THAT(summary.text, HasSubstr("host time in the trainer's and the engine's phases (2 "
                                      "profiled steps"));
  EXPECT_THAT(summary.text, HasSubstr("varuna::optimizer"));
  // No sum row under the phases: they nest, so a sum would count time twice.
  const std::string phase_table = summary.text.substr(summary.text.find("host time in the"));
  EXPECT_THAT(phase_table, Not(HasSubstr("  sum ")));
}

TEST(TraceRange, NamesAStretchOfHostTimeInTheTrace) {
  const at::Tensor a = at::ones({8, 8});
  absl::StatusOr<std::vector<ProfiledEvent>> events = ProfileEvents(false, [&] {
    varuna::TraceRange outer("test::outer");
    (void)at::mm(a, a);
    outer.End();
    outer.End();  // a second End does nothing
    (void)at::relu(a);
    return absl::OkStatus();
  });
  ASSERT_TRUE(events.ok()) << events.status();
  const ProfiledEvent* range = nullptr;
  const ProfiledEvent* mm = nullptr;
  const ProfiledEvent* relu = nullptr;
  for (const ProfiledEvent& event : *events) {
    if (event.name == "test::outer") range = &event;
    if (event.name == "aten::mm") mm = &event;
    if (event.name == "aten::relu") relu = &event;
  }
  ASSERT_NE(range, nullptr);
  ASSERT_NE(mm, nullptr);
  ASSERT_NE(relu, nullptr);
  EXPECT_TRUE(range->annotation);
  EXPECT_FALSE(mm->annotation);
  EXPECT_LE(range->start_ns, mm->start_ns);
  EXPECT_GE(range->end_ns, mm->end_ns);
  EXPECT_LE(range->end_ns, relu->start_ns);  // ended before the op after End()
  EXPECT_EQ(PhaseTimes(*events).size(), 1u);
}

TEST(FormatOpTable, LeavesTheSumRowOutWhenAsked) {
  const std::string table =
      FormatOpTable("t", {{"a", 1, 2.0}, {"b", 1, 1.0}}, 10, 5, /*sum_row=*/false);
  EXPECT_THAT(table, HasSubstr("  a "));
  EXPECT_THAT(table, Not(HasSubstr("  sum ")));
}

TEST(OpProfiler, WritesTheChromeTraceAndNamesAPathItCannotWrite) {
  const std::string dir = ::testing::TempDir() + "/op_profiler_trace";
  std::filesystem::create_directories(dir);
  const at::Tensor a = at::randn({32, 32});
  {
    absl::StatusOr<std::unique_ptr<OpProfiler>> session = OpProfiler::Start(false);
    ASSERT_TRUE(session.ok()) << session.status();
    (void)at::mm(a, a);
    absl::StatusOr<std::vector<ProfiledEvent>> events = (*session)->Stop(dir + "/t.pt.trace.json");
    ASSERT_TRUE(events.ok()) << events.status();
    EXPECT_EQ(ByName(HostSelfTimeByOp(*events)).count("aten::mm"), 1u);
    std::ifstream in(dir + "/t.pt.trace.json");
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_THAT(text.str(), HasSubstr("\"traceEvents\""));
    EXPECT_THAT(text.str(), HasSubstr("aten::mm"));
    EXPECT_EQ((*session)->Stop().status().code(), absl::StatusCode::kFailedPrecondition);
  }
  {
    absl::StatusOr<std::unique_ptr<OpProfiler>> session = OpProfiler::Start(false);
    ASSERT_TRUE(session.ok()) << session.status();
    const std::string bad = dir + "/no/such/dir/t.pt.trace.json";
    absl::StatusOr<std::vector<ProfiledEvent>> events = (*session)->Stop(bad);
    ASSERT_FALSE(events.ok());
    EXPECT_THAT(std::string(events.status().message()), HasSubstr(bad));
  }
  // Both sessions ended with the profiler off: a third starts.
  EXPECT_TRUE(OpProfiler::Start(false).ok());
}

TEST(ShortOpName, DropsTheSharedNamespacesAndAKernelsSignature) {
  EXPECT_EQ(ShortOpName("[kernel] void varuna::kernels::cuda::(anonymous namespace)::"
                        "LayerNormForward<c10::BFloat16, float>(c10::BFloat16 const*, float*, "
                        "int)"),
            "[kernel] LayerNormForward<c10::BFloat16, float>");
  EXPECT_EQ(ShortOpName("torch::autograd::CppNode<varuna::kernels::(anonymous namespace)::"
                        "BiasGeluFunction>"),
            "CppNode<BiasGeluFunction>");
  EXPECT_EQ(ShortOpName("[kernel] void at::native::vectorized_elementwise_kernel<4, "
                        "at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, "
                        "at::native::FillFunctor<float>, std::array<char*, 1ul>)"),
            "[kernel] vectorized_elementwise_kernel<4, FillFunctor<float>, std::array<char*, "
            "1ul> >");
  EXPECT_EQ(ShortOpName("aten::mm"), "aten::mm");
  EXPECT_EQ(ShortOpName("[kernel] sm90_xmma_gemm_bf16bf16_bf16f32"),
            "[kernel] sm90_xmma_gemm_bf16bf16_bf16f32");
  // A table shows the short name.
  EXPECT_THAT(FormatOpTable("t", {{"torch::autograd::CppNode<varuna::kernels::X>", 1, 1.0}}, 1, 5),
              HasSubstr("CppNode<X>"));
}

}  // namespace
}  // namespace trainer
