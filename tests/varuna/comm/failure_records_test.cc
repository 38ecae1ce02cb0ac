// Proves FailureRecords (varuna/comm/failure_records.h) on an in-process store: a lost peer
// without a record is named at once, a chain of records leads to the first rank without one,
// a failure naming no peer follows the rank's own record, a failure among several peers waits
// for the others' records, a timeout is not explained, every registered group is closed by the
// first record (and only then), and a rank learns that the job failed elsewhere.

#include "varuna/comm/failure_records.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

namespace varuna::comm {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const absl::Status kLost = absl::UnavailableError("recv failed: Connection reset by peer");

class FailureRecordsTest : public ::testing::Test {
 protected:
  // Rank `rank` of a job of `size`, sharing the test's store.
  FailureRecords Rank(int rank, int size = 4) { return FailureRecords(store_, rank, size); }
  c10::intrusive_ptr<c10d::Store> store_ = c10::make_intrusive<c10d::HashStore>();
};

TEST_F(FailureRecordsTest, ALostPeerWithoutARecordIsTheRankLostFirst) {
  FailureRecords rank0 = Rank(0);
  rank0.Record(kLost, /*lost_peer=*/1);
  const auto start = Clock::now();
  EXPECT_THAT(rank0.Explain(kLost, 1),
              HasSubstr("The job lost world rank 1 first: it ended without reporting a "
                        "communication failure"));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 0.2);
}

TEST_F(FailureRecordsTest, ARecordChainLeadsToTheFirstRankWithoutOne) {
  FailureRecords rank0 = Rank(0), rank2 = Rank(2), rank3 = Rank(3);
  rank0.Record(kLost, 1);  // rank 1 was killed; rank 0 lost it
  rank2.Record(kLost, 0);  // rank 2 lost rank 0 after that
  rank3.Record(kLost, 2);
  EXPECT_THAT(rank3.Explain(kLost, 2),
              HasSubstr("The job lost world rank 1 first: it ended without reporting a "
                        "communication failure (killed, crashed, stopped, or an error "
                        "elsewhere: see its own output); world ranks 2, 0 failed after it"));
}

// A later failure naming no peer (a transfer this rank stopped when it closed its groups) is
// explained from the peer of the rank's own record.
TEST_F(FailureRecordsTest, AFailureWithoutAPeerFollowsThisRanksOwnRecord) {
  FailureRecords rank0 = Rank(0);
  rank0.Record(kLost, 2);
  const auto start = Clock::now();
  EXPECT_THAT(rank0.Explain(absl::UnavailableError("send stopped"), -1),
              HasSubstr("The job lost world rank 2 first"));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 0.2);
}

TEST_F(FailureRecordsTest, AFailureAmongSeveralPeersWaitsForTheOthersRecords) {
  FailureRecords rank0 = Rank(0), rank2 = Rank(2), rank3 = Rank(3);
  rank2.Record(kLost, -1);
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    rank3.Record(kLost, -1);
  });
  // Ranks 1 and 3 have no record at first; once rank 3 has one, rank 1 is the only rank left.
  EXPECT_THAT(rank0.Explain(kLost, -1), HasSubstr("The job lost world rank 1 first"));
  later.join();
}

TEST_F(FailureRecordsTest, WithoutRecordsTheRanksThatReportedNothingAreListed) {
  FailureRecords rank0 = Rank(0);
  const auto start = Clock::now();
  EXPECT_THAT(rank0.Explain(kLost, -1),
              HasSubstr("No record names the rank the job lost first; world ranks 1, 2, 3 have "
                        "reported no failure"));
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - start).count(), 0.9);
}

TEST_F(FailureRecordsTest, OnlyALostConnectionIsExplained) {
  FailureRecords rank0 = Rank(0);
  EXPECT_EQ(rank0.Explain(absl::DeadlineExceededError("all-reduce timed out"), 1), "");
  EXPECT_EQ(WithExplanation(kLost, "Why"),
            absl::UnavailableError(std::string(kLost.message()) + ". Why"));
  EXPECT_EQ(WithExplanation(kLost, ""), kLost);
}

TEST_F(FailureRecordsTest, TheFirstRecordClosesEveryGroupOnce) {
  FailureRecords rank0 = Rank(0);
  int closed_a = 0, closed_b = 0;
  rank0.AddGroup([&] { ++closed_a; });
  rank0.AddGroup([&] { ++closed_b; });
  EXPECT_EQ(closed_a + closed_b, 0);
  rank0.Record(kLost, 1);
  rank0.Record(absl::UnavailableError("a second failure"), 2);
  EXPECT_EQ(closed_a, 1);
  EXPECT_EQ(closed_b, 1);
  const std::vector<uint8_t> record = store_->get("failure/0");
  EXPECT_EQ(std::string(record.begin(), record.end()), "1\n" + std::string(kLost.message()));
}

// The job has failed elsewhere once some rank has a record and this one has none; the ranks
// Explain found lost are kept (World's rank 0 does not wait for them to leave).
TEST_F(FailureRecordsTest, FailedElsewhereAndTheLostRanks) {
  FailureRecords rank0 = Rank(0, 3), rank2 = Rank(2, 3);
  EXPECT_FALSE(rank0.FailedElsewhere());
  EXPECT_FALSE(rank2.FailedElsewhere());
  rank2.Record(kLost, 1);
  EXPECT_TRUE(rank0.FailedElsewhere());
  EXPECT_FALSE(rank2.FailedElsewhere());
  EXPECT_TRUE(rank0.lost().empty());
  EXPECT_THAT(rank0.Explain(kLost, 2), HasSubstr("The job lost world rank 1 first"));
  EXPECT_EQ(rank0.lost(), std::set<int>{1});
}

}  // namespace
}  // namespace varuna::comm
