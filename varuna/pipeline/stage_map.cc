#include "varuna/pipeline/stage_map.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace varuna {
namespace {

absl::Status Invalid(const std::string& text, const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("--stage_to_rank_map=\"", text, "\" is invalid: ", problem,
                   ". Expected one group of ranks per stage, e.g. \"0,2;1,3;\" for 2 stages x 2 "
                   "replicas, every rank 0..P*D-1 exactly once"));
}

}  // namespace

absl::StatusOr<StageMap> StageMap::Parse(const std::string& text) {
  absl::string_view body = absl::StripAsciiWhitespace(text);
  absl::ConsumeSuffix(&body, ";");
  if (body.empty()) return Invalid(text, "it is empty");
  std::vector<std::vector<int>> ranks;
  int total = 0;
  for (absl::string_view group : absl::StrSplit(body, ';')) {
    std::vector<int>& stage = ranks.emplace_back();
    for (absl::string_view item : absl::StrSplit(group, ',')) {
      int rank = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(item), &rank) || rank < 0) {
        return Invalid(text, absl::StrCat("stage ", ranks.size() - 1, " has \"", item,
                                          "\", which is not a rank (a non-negative integer)"));
      }
      stage.push_back(rank);
      ++total;
    }
    if (stage.size() != ranks[0].size()) {
      return Invalid(text, absl::StrCat("stage 0 has ", ranks[0].size(), " replicas but stage ",
                                        ranks.size() - 1, " has ", stage.size()));
    }
  }
  std::vector<int> seen(total, 0);
  for (const auto& stage : ranks) {
    for (int rank : stage) {
      if (rank >= total) {
        return Invalid(text, absl::StrCat("rank ", rank, " is out of range for ", total,
                                          " ranks (0..", total - 1, ")"));
      }
      if (seen[rank]++) return Invalid(text, absl::StrCat("rank ", rank, " appears twice"));
    }
  }
  return StageMap(std::move(ranks));
}

StageMap StageMap::Uniform(int stages, int replicas) {
  std::vector<std::vector<int>> ranks(stages);
  for (int s = 0; s < stages; ++s) {
    for (int r = 0; r < replicas; ++r) ranks[s].push_back(r * stages + s);
  }
  return StageMap(std::move(ranks));
}

StagePosition StageMap::Position(int rank) const {
  for (int s = 0; s < num_stages(); ++s) {
    for (int r = 0; r < num_replicas(); ++r) {
      if (ranks_[s][r] == rank) return {s, r};
    }
  }
  return {-1, -1};
}

std::string StageMap::ToString() const {
  std::string out;
  for (const auto& stage : ranks_) absl::StrAppend(&out, absl::StrJoin(stage, ","), ";");
  return out;
}

}  // namespace varuna
