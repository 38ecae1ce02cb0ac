#include "varuna/comm/failure_records.h"

#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace varuna::comm {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(50);
// How long Explain looks again for the records that would name the rank lost first.
constexpr auto kLookAgain = std::chrono::seconds(1);
constexpr char kCount[] = "failure/count";

std::string Key(int rank) { return absl::StrCat("failure/", rank); }

}  // namespace

FailureRecords::FailureRecords(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size)
    : store_(std::move(store)), rank_(rank), world_size_(world_size) {}

void FailureRecords::AddGroup(std::function<void()> close_connections) {
  std::lock_guard<std::mutex> lock(mu_);
  close_groups_.push_back(std::move(close_connections));
}

void FailureRecords::Record(const absl::Status& failure, int lost_peer) {
  std::vector<std::function<void()>> close_groups;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (recorded_) return;
    recorded_ = true;
    recorded_peer_ = lost_peer;
    close_groups = close_groups_;
  }
  try {
    store_->set(Key(rank_), absl::StrCat(lost_peer, "\n", failure.message()));
    store_->add(kCount, 1);
  } catch (const std::exception&) {
    // The store is gone (rank 0 has ended): nobody can read a record any more.
  }
  for (const std::function<void()>& close : close_groups) close();
}

void FailureRecords::ReadRecords(Records& records) {
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_ || records.count(r) > 0 || !store_->check({Key(r)})) continue;
    const std::vector<uint8_t> bytes = store_->get(Key(r));
    const std::string value(bytes.begin(), bytes.end());
    int lost_peer = -1;
    if (!absl::SimpleAtoi(value.substr(0, value.find('\n')), &lost_peer)) lost_peer = -1;
    records[r] = lost_peer;
  }
}

std::string FailureRecords::ExplainFrom(const Records& records, int lost_peer, bool final_look) {
  // The first rank without a record on the chain from `start`, or -1 if the chain ends at a
  // record that names no peer (or comes back to this rank); `chain` gets the ranks passed.
  auto follow = [&](int start, std::vector<int>& chain) {
    std::set<int> seen = {rank_};
    for (int r = start; r >= 0 && r < world_size_ && seen.insert(r).second;) {
      const auto record = records.find(r);
      if (record == records.end()) return r;
      chain.push_back(r);
      r = record->second;
    }
    return -1;
  };
  auto lost = [&](int root, const std::vector<int>& chain) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      lost_.insert(root);
    }
    std::string text = absl::StrCat(
        "The job lost world rank ", root,
        " first: it ended without reporting a communication failure (killed, crashed, stopped, "
        "or an error elsewhere: see its own output)");
    if (!chain.empty()) {
      absl::StrAppend(&text, "; world rank", chain.size() > 1 ? "s " : " ",
                      absl::StrJoin(chain, ", "), " failed after it");
    }
    return text;
  };
  std::vector<int> chain;
  if (const int root = follow(lost_peer, chain); root >= 0) return lost(root, chain);
  for (const auto& [r, peer] : records) {
    chain = {r};
    if (const int root = follow(peer, chain); root >= 0) return lost(root, chain);
  }
  std::vector<int> unrecorded;
  for (int r = 0; r < world_size_; ++r) {
    if (r != rank_ && records.count(r) == 0) unrecorded.push_back(r);
  }
  if (unrecorded.size() == 1) return lost(unrecorded[0], {});
  if (!final_look || unrecorded.empty()) return "";
  return absl::StrCat("No record names the rank the job lost first; world ranks ",
                      absl::StrJoin(unrecorded, ", "),
                      " have reported no failure (one of them was killed, crashed, stopped, or "
                      "failed elsewhere: see their output)");
}

std::string FailureRecords::Explain(const absl::Status& failure, int lost_peer) {
  if (!absl::IsUnavailable(failure)) return "";
  if (lost_peer < 0) {
    std::lock_guard<std::mutex> lock(mu_);
    if (recorded_) lost_peer = recorded_peer_;
  }
  try {
    const auto deadline = std::chrono::steady_clock::now() + kLookAgain;
    Records records;
    int64_t counted = -1;
    while (true) {
      const bool final_look = std::chrono::steady_clock::now() >= deadline;
      // Records are read again only when their count has changed.
      if (const int64_t count = store_->add(kCount, 0); count != counted) {
        counted = count;
        ReadRecords(records);
      }
      std::string text = ExplainFrom(records, lost_peer, final_look);
      if (!text.empty() || final_look) return text;
      std::this_thread::sleep_for(kPoll);
    }
  } catch (const std::exception&) {
    return kStoreGone;
  }
}

bool FailureRecords::FailedElsewhere() { return store_->add(kCount, 0) > 0 && !HasRecord(rank_); }

bool FailureRecords::HasRecord(int r) { return store_->check({Key(r)}); }

std::set<int> FailureRecords::lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_;
}

}  // namespace varuna::comm
