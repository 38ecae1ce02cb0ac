#include "trainer/fp8_linear_choice.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <array>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "varuna/comm/exception_status.h"
#include "varuna/planning/device_timer.h"
#include "varuna/planning/timing_summary.h"

namespace trainer {
namespace {

// The four linears in layer order: name, the flag's field, whether the model gives it a bias in
// the GEMM (c_attn's; c_fc's bias goes to the fused bias + GeLU, the projections' to the fused
// residual adds), and its input and output widths for hidden size h.
struct Role {
  const char* name;
  bool gpt2::Fp8LinearSet::*on;
  bool bias;
  int64_t in_per_h;
  int64_t out_per_h;
};
constexpr std::array<Role, 4> kRoles = {{
    {"linear_qkv", &gpt2::Fp8LinearSet::qkv, true, 1, 3},
    {"linear_proj", &gpt2::Fp8LinearSet::proj, false, 1, 1},
    {"linear_fc1", &gpt2::Fp8LinearSet::fc1, false, 1, 4},
    {"linear_fc2", &gpt2::Fp8LinearSet::fc2, false, 4, 1},
}};

// FP8 where its time is at most this fraction of the dtype's: a tie is not worth FP8's rounding,
// and a narrow win could flip from one start to the next.
constexpr double kFp8Margin = 0.95;

// The median milliseconds of `step` over `iterations` runs after two warm-up runs, each timed as
// training pays it (varuna::DeviceTimer::TimeAhead: the host's queueing or the device's work,
// whichever is longer).
double MedianMs(const c10::Device& device, int iterations, const std::function<void()>& step) {
  varuna::DeviceTimer timer(device);
  step();
  step();
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) ms.push_back(timer.TimeAhead(step));
  return varuna::Summarize(std::move(ms)).median_ms;
}

// Forward + backward of one linear [tokens, in] -> out in FP8 and in `dtype`: {fp8, high} ms.
std::array<double, 2> MeasureRole(const Role& role, const c10::Device& device, at::ScalarType dtype,
                                  int64_t tokens, int64_t h,
                                  const varuna::kernels::Fp8Recipe& recipe, int iterations) {
  const at::AutoGradMode grad_mode(true);
  const at::TensorOptions options = at::TensorOptions().device(device).dtype(dtype);
  const int64_t in = role.in_per_h * h;
  const int64_t out = role.out_per_h * h;
  const at::Tensor x = at::randn({tokens, in}, options).requires_grad_(true);
  const at::Tensor w = (at::randn({out, in}, options) * 0.02).requires_grad_(true);
  const at::Tensor b = role.bias ? at::zeros({out}, options).requires_grad_(true) : at::Tensor();
  const at::Tensor dy = at::randn({tokens, out}, options);
  varuna::kernels::Fp8LinearMeta meta = varuna::kernels::MakeFp8LinearMeta(recipe, device);
  auto run = [&](bool fp8) {
    return [&, fp8] {
      for (const at::Tensor& t : {x, w, b}) {
        if (t.defined()) t.mutable_grad() = at::Tensor();
      }
      const at::Tensor y = fp8 ? varuna::kernels::Fp8Linear(x, w, b, meta) : at::linear(x, w, b);
      y.backward(dy);
    };
  };
  run(true)();  // amaxes recorded, then real scales (training updates them once a step)
  varuna::kernels::UpdateFp8Scales(recipe, &meta);
  return {MedianMs(device, iterations, run(true)), MedianMs(device, iterations, run(false))};
}

}  // namespace

absl::StatusOr<Fp8LinearsFlag> ParseFp8Linears(const std::string& value) {
  Fp8LinearsFlag flag;
  if (value == "all") return flag;
  if (value == "auto") {
    flag.automatic = true;
    return flag;
  }
  flag.linears = gpt2::Fp8LinearSet{false, false, false, false};
  for (absl::string_view word : absl::StrSplit(value, ',')) {
    const Role* found = nullptr;
    for (const Role& role : kRoles) {
      if (word == role.name) found = &role;
    }
    if (found == nullptr || flag.linears.*(found->on)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fp8-linears=", value, ": \"", word, "\" is ",
          found == nullptr ? "not a linear" : "named twice",
          "; give all, auto, or a comma list of linear_qkv, linear_proj, linear_fc1 and "
          "linear_fc2 (Megatron-core's names of attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj), "
          "each once"));
    }
    flag.linears.*(found->on) = true;
  }
  return flag;
}

absl::StatusOr<Fp8LinearsFlag> CheckFp8Linears(const std::string& value, bool given,
                                               const std::string& fp8_format, bool deterministic) {
  if (given && fp8_format.empty()) {
    return absl::InvalidArgumentError(
        "--fp8-linears chooses which linears compute in FP8, which is off: add "
        "--fp8-format=hybrid (or e4m3), or drop --fp8-linears");
  }
  absl::StatusOr<Fp8LinearsFlag> flag = ParseFp8Linears(value);
  if (!flag.ok()) return flag.status();
  if (flag->automatic && deterministic) {
    return absl::InvalidArgumentError(
        "--fp8-linears=auto chooses by a timing at start-up, so two runs may choose "
        "differently, which --deterministic rules out: name the linears (--fp8-linears=all, or "
        "a list), or drop --deterministic");
  }
  return flag;
}

std::string Fp8LinearsNames(const gpt2::Fp8LinearSet& linears) {
  if (linears.all()) return "all four";
  std::vector<std::string> names;
  for (const Role& role : kRoles) {
    if (linears.*(role.on)) names.push_back(role.name);
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

Fp8LinearsChoice DecideFp8Linears(const std::vector<double>& ms, at::ScalarType dtype,
                                  int64_t tokens, int ranks) {
  TORCH_CHECK(ms.size() == 2 * kRoles.size(), "DecideFp8Linears: ", ms.size(),
              " timings; it takes 2 per linear, ", 2 * kRoles.size(), " in all");
  Fp8LinearsChoice choice;
  std::string measured;
  for (size_t i = 0; i < kRoles.size(); ++i) {
    const double fp8_ms = ms[2 * i];
    const double dtype_ms = ms[2 * i + 1];
    choice.linears.*(kRoles[i].on) = fp8_ms <= kFp8Margin * dtype_ms;
    absl::StrAppend(
        &measured, i == 0 ? "" : ", ", kRoles[i].name,
        absl::StrFormat(" fp8 %.3f ms vs %s %.3f ms", fp8_ms, c10::toString(dtype), dtype_ms));
  }
  choice.reason =
      absl::StrCat(Fp8LinearsNames(choice.linears), " (auto: forward + backward of ", tokens,
                   " tokens", ranks > 1 ? absl::StrCat(", summed over ", ranks, " ranks") : "",
                   "; FP8 where at least 5% faster: ", measured, ")");
  return choice;
}

absl::StatusOr<Fp8LinearsChoice> ChooseFp8Linears(const Fp8LinearsFlag& flag,
                                                  const c10::Device& device, at::ScalarType dtype,
                                                  const gpt2::Gpt2Config& model,
                                                  int64_t micro_batch,
                                                  const varuna::kernels::Fp8Recipe& recipe,
                                                  varuna::comm::World* world) {
  if (!flag.automatic) {
    return Fp8LinearsChoice{flag.linears,
                            absl::StrCat(Fp8LinearsNames(flag.linears), " (--fp8-linears)")};
  }
  if (!device.is_cuda()) {
    return Fp8LinearsChoice{gpt2::Fp8LinearSet{},
                            "all four (auto: on the CPU LibTorch emulates the FP8 GEMM, so "
                            "there is nothing to measure)"};
  }
  constexpr int kIterations = 20;
  const int64_t tokens = micro_batch * model.seq_length;
  // Per linear its FP8 and its dtype's milliseconds, then whether this rank failed: every rank
  // reaches the sum below even when its measurement throws, so that none waits for it.
  std::vector<double> values;
  std::string failure;
  try {
    for (const Role& role : kRoles) {
      for (double ms :
           MeasureRole(role, device, dtype, tokens, model.hidden_size, recipe, kIterations)) {
        values.push_back(ms);
      }
    }
  } catch (const std::exception& e) {
    failure = varuna::comm::OneLineMessage(e);
    values.assign(2 * kRoles.size(), 0.0);
  }
  values.push_back(failure.empty() ? 0.0 : 1.0);
  int ranks = 1;
  if (world != nullptr && world->size() > 1) {
    // Every rank decides on the same sums: the replicas of a stage must hold the same FP8 state.
    const at::Tensor times = at::tensor(values, at::kDouble);
    const bool host = world->group().backend() == varuna::comm::Backend::kGloo;
    at::Tensor sum = host ? times : times.to(device);
    if (absl::Status status = world->group().AllReduceSum(sum); !status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("--fp8-linears=auto: summing the timings over the ranks "
                                       "failed: ",
                                       status.message()));
    }
    const at::Tensor summed = sum.to(at::kCPU).contiguous();
    values.assign(summed.data_ptr<double>(), summed.data_ptr<double>() + summed.numel());
    ranks = world->size();
  }
  if (values.back() > 0) {
    return absl::InternalError(absl::StrCat(
        "--fp8-linears=auto: timing the linears at start-up failed",
        failure.empty() ? " on another rank (its log says why)" : absl::StrCat(": ", failure),
        "; name the linears instead (--fp8-linears=all, or a list)"));
  }
  values.pop_back();
  return DecideFp8Linears(values, dtype, tokens, ranks);
}

}  // namespace trainer
