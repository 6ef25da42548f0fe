// Work queued for the process's background threads while the caller goes on, taken when the
// caller needs it (Pending<T>::take): the scheduler's weight encodings, one job per operation,
// taken in schedule order, and the planner's proposal scores, made while its Python thread lays
// out the leanest proposal.
//
// Python threads would not do: each needs the interpreter lock to start a job and to hand back
// its result, and waits for it while the caller's thread holds it (up to the interpreter's
// switch interval, 5 ms, measured so for the scores). These threads touch no Python object.
//
// A job no thread has started when the caller takes it runs on the caller, so the caller never
// waits for work queued behind other work; one that is running is waited for. The queue has
// max(cores - 1, 1) threads, which leave the caller its core (the caller schedules or lays out
// while they work), and runs jobs in the order they were queued. A job's parallel_blocks calls
// stay on its thread (worker_cap 1): the other threads are busy with jobs of their own.
//
// The threads are made on first use and kept for the process, as WorkerPool's; a forked child
// makes new ones. A Pending dropped before its job started drops the job; one dropped while its
// job runs waits for it, so that nothing the job reads is freed under it.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <pthread.h>
#include <unistd.h>

#include "cascader/common/error.hpp"
#include "cascader/common/parallel.hpp"

namespace cascader {

// One queued job's state, shared by the queue and its Pending.
class PendingJob {
 public:
  virtual ~PendingJob() = default;

  // Runs the job unless it was started or dropped already; true when this call ran it.
  bool run_if_queued() {
    {
      std::lock_guard<std::mutex> guard(lock_);
      if (state_ != State::Queued) return false;
      state_ = State::Running;
    }
    try {
      run();
    } catch (...) {
      error_ = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> guard(lock_);
      state_ = State::Done;
    }
    done_.notify_all();
    return true;
  }

  // Waits until the job has run, running it here if it has not started; rethrows its error.
  void finish() {
    if (!run_if_queued()) {
      std::unique_lock<std::mutex> guard(lock_);
      done_.wait(guard, [&] { return state_ == State::Done || state_ == State::Dropped; });
    }
    if (error_) std::rethrow_exception(error_);
  }

  // Drops the job if it has not started, else waits for it to end.
  void drop() {
    std::unique_lock<std::mutex> guard(lock_);
    if (state_ == State::Queued) {
      state_ = State::Dropped;
      return;
    }
    done_.wait(guard, [&] { return state_ == State::Done || state_ == State::Dropped; });
  }

 protected:
  virtual void run() = 0;

 private:
  enum class State { Queued, Running, Done, Dropped };
  std::mutex lock_;
  std::condition_variable done_;
  State state_ = State::Queued;
  std::exception_ptr error_;
};

// The process's background threads and their queue of jobs.
class JobQueue {
 public:
  static JobQueue& instance() {
    static std::mutex made;
    // As WorkerPool's: a fork while another thread held the lock would leave the child's copy
    // held for good, so every fork takes it first and both sides release it.
    static const int at_fork = pthread_atfork([] { made.lock(); }, [] { made.unlock(); }, [] { made.unlock(); });
    (void)at_fork;
    static JobQueue* queue = nullptr;
    static pid_t owner = 0;
    std::lock_guard<std::mutex> guard(made);
    if (queue == nullptr || owner != getpid()) {  // a forked child has none of the parent's threads
      queue = new JobQueue();
      owner = getpid();
    }
    return *queue;
  }

  void push(std::shared_ptr<PendingJob> job) {
    {
      std::lock_guard<std::mutex> guard(lock_);
      jobs_.push_back(std::move(job));
      const size_t wanted = std::max<size_t>(core_count(), 2) - 1;
      for (; threads_ < wanted; ++threads_) std::thread([this] { serve(); }).detach();
    }
    wake_.notify_one();
  }

 private:
  void serve() {
    worker_cap() = 1;
    for (;;) {
      std::shared_ptr<PendingJob> job;
      {
        std::unique_lock<std::mutex> guard(lock_);
        wake_.wait(guard, [&] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job->run_if_queued();
    }
  }

  std::mutex lock_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<PendingJob>> jobs_;
  size_t threads_ = 0;
};

template <typename T>
class Pending {
 public:
  explicit Pending(std::function<T()> work) : job_(std::make_shared<Job>(std::move(work))) {
    JobQueue::instance().push(job_);
  }
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;
  ~Pending() { job_->drop(); }

  // The job's result, once (run here if no thread has started it); throws InvalidArgument when
  // it was taken already, and what the job threw.
  T take() {
    job_->finish();
    if (!job_->value) throw InvalidArgument("this pending work's result was taken already");
    T out = std::move(*job_->value);
    job_->value.reset();
    return out;
  }

 private:
  struct Job : PendingJob {
    explicit Job(std::function<T()> w) : work(std::move(w)) {}
    void run() override { value = work(); }
    std::function<T()> work;
    std::optional<T> value;
  };
  std::shared_ptr<Job> job_;
};

}  // namespace cascader
