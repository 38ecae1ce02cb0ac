#include "varuna/launch/environment.h"

#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace varuna {
namespace {

constexpr int kNoMaximum = std::numeric_limits<int>::max();

// The value of `name` in `environment`, or nullopt when it is unset or empty.
std::optional<std::string> Find(const std::map<std::string, std::string>& environment,
                                const char* name) {
  const auto it = environment.find(name);
  if (it == environment.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// The integer variable `name`, nullopt when unset; InvalidArgument when it is not an integer
// in [minimum, maximum], calling it `what`.
absl::StatusOr<std::optional<int>> ReadInt(const std::map<std::string, std::string>& environment,
                                           const char* name, int minimum, int maximum,
                                           const char* what) {
  const std::optional<std::string> text = Find(environment, name);
  if (!text) return std::optional<int>();
  int value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < minimum || value > maximum) {
    return absl::InvalidArgumentError(
        absl::StrCat("the environment variable ", name, "=\"", *text, "\" is not ", what,
                     ": set it to an integer >= ", minimum,
                     maximum < kNoMaximum ? absl::StrCat(" and <= ", maximum) : "",
                     " or unset it (//varuna:launch and torchrun set it for each worker)"));
  }
  return std::optional<int>(value);
}

}  // namespace

std::map<std::string, std::string> LaunchEnvironment::Write() const {
  std::map<std::string, std::string> out;
  out["RANK"] = std::to_string(rank);
  out["ROLE_RANK"] = std::to_string(rank);
  out["LOCAL_RANK"] = std::to_string(local_rank);
  out["GROUP_RANK"] = std::to_string(node_rank);
  if (world_size) {
    out["WORLD_SIZE"] = std::to_string(*world_size);
    out["ROLE_WORLD_SIZE"] = std::to_string(*world_size);
  }
  if (local_world_size) out["LOCAL_WORLD_SIZE"] = std::to_string(*local_world_size);
  if (!master_addr.empty()) out["MASTER_ADDR"] = master_addr;
  if (master_port > 0) out["MASTER_PORT"] = std::to_string(master_port);
  return out;
}

absl::StatusOr<LaunchEnvironment> LaunchEnvironment::Read(
    const std::map<std::string, std::string>& environment) {
  LaunchEnvironment env;
  struct IntVariable {
    const char* name;
    int minimum;
    int maximum;
    const char* what;
    std::optional<int>* value;
  };
  std::optional<int> rank;
  std::optional<int> local_rank;
  std::optional<int> node_rank;
  std::optional<int> port;
  for (const IntVariable& v : {
           IntVariable{"RANK", 0, kNoMaximum, "a rank", &rank},
           IntVariable{"LOCAL_RANK", 0, kNoMaximum, "a rank", &local_rank},
           IntVariable{"WORLD_SIZE", 1, kNoMaximum, "a number of processes", &env.world_size},
           IntVariable{"LOCAL_WORLD_SIZE", 1, kNoMaximum, "a number of processes per node",
                       &env.local_world_size},
           IntVariable{"GROUP_RANK", 0, kNoMaximum, "a node rank", &node_rank},
           IntVariable{"MASTER_PORT", 1, 65535, "a port", &port},
       }) {
    absl::StatusOr<std::optional<int>> value =
        ReadInt(environment, v.name, v.minimum, v.maximum, v.what);
    if (!value.ok()) return value.status();
    *v.value = *value;
  }
  env.rank = rank.value_or(0);
  env.local_rank = local_rank.value_or(0);
  env.node_rank = node_rank.value_or(0);
  env.master_port = port.value_or(0);
  env.master_addr = Find(environment, "MASTER_ADDR").value_or("");
  if (env.world_size && env.rank >= *env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the environment variables RANK=", env.rank, " and WORLD_SIZE=", *env.world_size,
        " disagree: ranks run from 0 to WORLD_SIZE - 1"));
  }
  if (env.local_world_size && env.local_rank >= *env.local_world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the environment variables LOCAL_RANK=", env.local_rank, " and LOCAL_WORLD_SIZE=",
        *env.local_world_size, " disagree: local ranks run from 0 to LOCAL_WORLD_SIZE - 1"));
  }
  if (env.world_size && env.local_world_size && *env.local_world_size > *env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the environment variables LOCAL_WORLD_SIZE=", *env.local_world_size, " and WORLD_SIZE=",
        *env.world_size, " disagree: a node cannot run more processes than the job has"));
  }
  return env;
}

}  // namespace varuna
