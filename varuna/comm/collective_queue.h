// CollectiveQueue: runs a group's asynchronous collectives on a worker thread of its own, one at
// a time, in the order they were enqueued, so the thread that issues them carries on. Members
// of a group issue collectives in the same order (ProcessGroup's contract), so running them in
// issue order keeps them matched. Synchronous collectives call Drain() first and then run on
// the caller's thread: at no time do two threads drive the group's collectives.
//
// The worker starts on the first Enqueue (most groups never run an asynchronous collective).
// The destructor runs the jobs still queued, then joins the worker.
//
// Thread safety: Enqueue and Drain from the one thread that issues the group's collectives;
// QueuedResult::Wait from any thread. Header-only because libvaruna_gloo.so uses it too.
#ifndef VARUNA_COMM_COLLECTIVE_QUEUE_H_
#define VARUNA_COMM_COLLECTIVE_QUEUE_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "varuna/comm/process_group.h"

namespace varuna::comm {

// The outcome of one queued job, set once by the worker.
class QueuedResult {
 public:
  // Blocks until the job has run and returns its status.
  absl::Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    return status_;
  }

  void Set(absl::Status status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = std::move(status);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;    // guarded by mu_
  absl::Status status_;  // guarded by mu_
};

// A queued collective seen as a Work. Dropping it unwaited waits for it (the job may still
// write into the caller's tensor).
class QueuedWork final : public Work {
 public:
  explicit QueuedWork(std::shared_ptr<QueuedResult> result) : result_(std::move(result)) {}
  ~QueuedWork() override { result_->Wait().IgnoreError(); }
  absl::Status Wait() override { return result_->Wait(); }

 private:
  std::shared_ptr<QueuedResult> result_;
};

class CollectiveQueue {
 public:
  CollectiveQueue() = default;
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  ~CollectiveQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  // Queues `job` behind the jobs already queued; its status is delivered to the result.
  std::shared_ptr<QueuedResult> Enqueue(std::function<absl::Status()> job) {
    auto result = std::make_shared<QueuedResult>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back({std::move(job), result});
      ++pending_;
      if (!worker_.joinable()) worker_ = std::thread([this] { Loop(); });
    }
    cv_.notify_all();
    return result;
  }

  // Blocks until every job enqueued so far has run.
  void Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  struct Job {
    std::function<absl::Status()> run;
    std::shared_ptr<QueuedResult> result;
  };

  void Loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      absl::Status status = job.run();
      job.run = nullptr;  // drop the tensors it holds before the caller learns it is done
      job.result->Set(std::move(status));
      {
        std::lock_guard<std::mutex> lock(mu_);
        --pending_;
      }
      idle_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;    // jobs_ or stopping_ changed
  std::condition_variable idle_;  // pending_ decreased
  std::deque<Job> jobs_;          // guarded by mu_
  int pending_ = 0;               // guarded by mu_: queued or running
  bool stopping_ = false;         // guarded by mu_
  std::thread worker_;
};

}  // namespace varuna::comm

#endif  // VARUNA_COMM_COLLECTIVE_QUEUE_H_
