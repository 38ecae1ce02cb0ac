#include "varuna/comm/heartbeat.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "varuna/comm/exception_status.h"
#include "varuna/comm/store_client.h"

namespace varuna::comm {
namespace {

constexpr char kDone[] = "done";

std::string Key(int rank) { return absl::StrCat("heartbeat/", rank); }

double Seconds(std::chrono::milliseconds duration) { return duration.count() / 1000.0; }

}  // namespace

absl::StatusOr<std::unique_ptr<Heartbeat>> Heartbeat::Start(const WorldOptions& world,
                                                            const HeartbeatOptions& options,
                                                            OnFailure on_failure) {
  if (options.interval.count() <= 0 || options.timeout <= options.interval) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "heartbeat timeout %.3g s must exceed its interval %.3g s (and the interval be positive)",
        Seconds(options.timeout), Seconds(options.interval)));
  }
  StoreClientOptions client;
  client.host = world.master_addr;
  client.port = world.master_port;
  client.timeout = options.timeout;
  client.who = absl::StrCat("rank ", world.rank, "'s heartbeat");
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = ConnectToStore(client);
  if (!store.ok()) return store.status();
  try {
    (*store)->set(Key(world.rank), "0");
  } catch (const std::exception& e) {
    return StatusFromException(absl::StrCat("rank ", world.rank, ": starting the heartbeat at ",
                                            world.master_addr, ":", world.master_port),
                               e);
  }
  absl::StatusOr<std::unique_ptr<PeerLiveness>> liveness =
      PeerLiveness::Start(**store, world.rank, world.world_size, ReachableAddress(world));
  if (!liveness.ok()) return liveness.status();
  return std::unique_ptr<Heartbeat>(new Heartbeat(world, options, *std::move(store),
                                                  *std::move(liveness), std::move(on_failure)));
}

Heartbeat::Heartbeat(WorldOptions world, HeartbeatOptions options,
                     c10::intrusive_ptr<c10d::Store> store, std::unique_ptr<PeerLiveness> liveness,
                     OnFailure on_failure)
    : world_(std::move(world)),
      options_(options),
      store_(std::move(store)),
      records_(store_, world_.rank, world_.world_size),
      liveness_(std::move(liveness)),
      on_failure_(std::move(on_failure)),
      answered_(std::chrono::steady_clock::now()) {
  prober_ = std::thread([this] { Probe(); });
  watcher_ = std::thread([this] { Watch(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  watcher_.join();
  // A prober blocked in a call to a store that stopped answering returns when the store
  // client's timeout (options_.timeout) ends the call.
  prober_.join();
  bool reported;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reported = reported_;
  }
  if (reported) return;
  try {
    store_->set(Key(world_.rank), kDone);
  } catch (const std::exception&) {
    // The store is gone (rank 0 has exited): nobody is watching any more.
  }
}

absl::Status Heartbeat::Look(std::vector<std::string>& last,
                             std::vector<std::chrono::steady_clock::time_point>& changed,
                             int& lost_peer) {
  const auto now = std::chrono::steady_clock::now();
  for (int r = 0; r < world_.world_size; ++r) {
    if (r == world_.rank || last[r] == kDone) continue;
    // check() first: get() of a key not written yet would wait for it.
    if (store_->check({Key(r)})) {
      const std::vector<uint8_t> bytes = store_->get(Key(r));
      std::string value(bytes.begin(), bytes.end());
      if (value != last[r]) {
        last[r] = std::move(value);
        changed[r] = now;
        continue;
      }
    }
    if (now - changed[r] > options_.timeout) {
      lost_peer = r;
      return absl::DeadlineExceededError(absl::StrFormat(
          "rank %d stopped answering: its heartbeat has not changed for %.3g s (rank %d "
          "watching; the process is stopped, frozen or its machine is unreachable). The job "
          "cannot go on without it: restart it, from its last checkpoint with --load",
          r, Seconds(std::chrono::duration_cast<std::chrono::milliseconds>(now - changed[r])),
          world_.rank));
    }
  }
  return absl::OkStatus();
}

absl::Status Heartbeat::LookForEndedRanks(int& lost_peer) {
  for (int r : liveness_->Look(*store_)) {
    // A rank that finished wrote "done", and one that failed its record, before its process
    // ended; the records tell of the latter (LookForFailures).
    if (store_->check({Key(r)})) {
      const std::vector<uint8_t> beat = store_->get(Key(r));
      if (std::string(beat.begin(), beat.end()) == kDone) continue;
    }
    if (records_.HasRecord(r)) continue;
    lost_peer = r;
    return absl::UnavailableError(
        absl::StrCat("rank ", world_.rank, " cannot go on. ",
                     records_.Explain(absl::UnavailableError("lost"), /*lost_peer=*/r),
                     ". Restart the job, from its last checkpoint with --load"));
  }
  return absl::OkStatus();
}

absl::Status Heartbeat::LookForFailures(
    std::optional<std::chrono::steady_clock::time_point>& since) {
  if (!records_.FailedElsewhere()) return absl::OkStatus();
  const auto now = std::chrono::steady_clock::now();
  if (!since) since = now;
  if (now - *since < options_.interval) return absl::OkStatus();
  // Another rank's failure closed its connections an interval ago: this rank's operations with
  // it have failed by now, unless one was a transfer already under way, which Gloo fails only
  // at the distributed timeout.
  return absl::UnavailableError(absl::StrCat(
      "rank ", world_.rank,
      " cannot go on: another rank has failed, and this one still waits in an operation that "
      "cannot complete. ",
      records_.Explain(absl::UnavailableError("lost"), /*lost_peer=*/-1),
      ". Restart the job, from its last checkpoint with --load"));
}

absl::Status Heartbeat::StoreSilent(const std::string& detail) const {
  return absl::DeadlineExceededError(absl::StrFormat(
      "rank 0 stopped answering: the rendezvous store it serves did not answer rank %d's "
      "heartbeat within %.3g s%s. The job cannot go on without it: restart it, from its last "
      "checkpoint with --load",
      world_.rank, Seconds(options_.timeout),
      detail.empty() ? "" : absl::StrCat(" (", detail, ")")));
}

void Heartbeat::Leave(const absl::Status& failure, int lost_peer) {
  records_.Record(failure, lost_peer);
  MarkLeft(*store_, world_.rank);
  if (world_.rank == 0 && !world_.store_is_external) {
    AwaitOthersLeaving(*store_, world_, records_.lost());
  }
}

void Heartbeat::Report(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reported_) return;
    reported_ = true;
    done_ = true;
  }
  wake_.notify_all();
  on_failure_(status);
}

void Heartbeat::Probe() {
  std::vector<std::string> last(world_.world_size);
  std::vector<std::chrono::steady_clock::time_point> changed(world_.world_size,
                                                             std::chrono::steady_clock::now());
  std::optional<std::chrono::steady_clock::time_point> failed_elsewhere;
  for (int64_t beat = 1;; ++beat) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (wake_.wait_for(lock, options_.interval, [this] { return stopping_ || done_; })) return;
    }
    absl::Status failure;
    try {
      store_->set(Key(world_.rank), absl::StrCat(beat));
      int lost_peer = -1;
      failure = Look(last, changed, lost_peer);
      if (failure.ok()) failure = LookForEndedRanks(lost_peer);
      if (failure.ok()) failure = LookForFailures(failed_elsewhere);
      if (!failure.ok()) Leave(failure, lost_peer);
    } catch (const std::exception& e) {
      failure = absl::IsDeadlineExceeded(StatusFromException("the heartbeat's store", e))
                    ? StoreSilent(OneLineMessage(e))
                    : absl::UnavailableError(
                          absl::StrCat("rank ", world_.rank, " cannot go on. ", kStoreGone,
                                       ". Restart the job, from its last checkpoint with --load"));
    }
    if (!failure.ok()) {
      Report(failure);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    answered_ = std::chrono::steady_clock::now();
  }
}

void Heartbeat::Watch() {
  while (true) {
    std::unique_lock<std::mutex> lock(mu_);
    if (wake_.wait_for(lock, options_.interval, [this] { return stopping_ || done_; })) return;
    // A round of store calls takes milliseconds; one that has not finished for the timeout
    // (plus the interval the prober sleeps) is blocked on a store that does not answer.
    if (std::chrono::steady_clock::now() - answered_ > options_.timeout + options_.interval) {
      lock.unlock();
      Report(StoreSilent(""));
      return;
    }
  }
}

}  // namespace varuna::comm
