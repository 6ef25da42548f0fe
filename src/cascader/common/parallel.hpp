// Independent work spread over the machine's cores.
//
// parallel_blocks(count, block, body) calls body(worker, begin, end) for consecutive blocks of
// [0, count), each block once, on up to worker_count(count, block) threads. `worker` (0 ..
// workers - 1) names the calling thread, so a body can keep per-worker state (a cost cache,
// say) in a vector of that size; blocks are handed out in order, so one worker's blocks are
// mostly neighbours. The first exception a body throws is rethrown here once every thread has
// stopped. Results must not depend on which worker ran a block: the callers write each block's
// results to its own slots and read them back in order, so the outcome is the same on any
// number of cores.
//
// The helper threads are kept for the process (WorkerPool): a plan spreads work some 25 times,
// and a thread started per call cost its start and a join that waited until the new thread had
// run, on a busy host several milliseconds each. A caller never waits for a helper that has not
// started: it runs the blocks left itself, so a call made from a helper (a layout inside a
// scored proposal) or in a forked child, where the pool's threads are gone, still ends.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <unistd.h>

#include "cascader/common/error.hpp"

namespace cascader {

// The cores a compile may use: CASCADER_NUM_THREADS when set (a build running several compiles
// at once, or a profile that must not depend on how work is split), else every core. The
// Python side (the weight encoders' pool) asks this too. Throws InvalidArgument for a value
// that is not a positive integer.
inline size_t core_count() {
  if (const char* env = std::getenv("CASCADER_NUM_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 1) {
      throw InvalidArgument(std::string("CASCADER_NUM_THREADS must be a positive integer, not '") + env +
                            "'; unset it to use every core");
    }
    return size_t(n);
  }
  // Asked once: the library reads /sys for it, and a plan spreads work over the cores a few
  // hundred times (each exact layout asks per worker it starts).
  static const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return cores;
}

// The most workers this thread's parallel_blocks calls take (0: no cap): work run beside
// another busy thread (pending.hpp) leaves that thread its core.
inline size_t& worker_cap() {
  thread_local size_t cap = 0;
  return cap;
}

inline size_t worker_count(size_t count, size_t block) {
  const size_t blocks = (count + block - 1) / std::max<size_t>(block, 1);
  const size_t cores = worker_cap() > 0 ? std::min(core_count(), worker_cap()) : core_count();
  return std::max<size_t>(1, std::min({cores, blocks, size_t{8}}));
}

// The process's helper threads: each takes a ticket (one worker of one parallel_blocks call)
// from a queue and runs it unless its call has already ended. Made on first use and never
// destroyed (the threads wait on the queue until the process exits); grown to as many helpers
// as a call asks for. A forked child makes a new one.
class WorkerPool {
 public:
  // One parallel_blocks call's shared state: the tickets hold it, so it outlives a call that
  // ended before a helper took its ticket.
  struct Job {
    std::function<void(size_t)> run;  // valid while !closed or while a started ticket runs
    std::mutex lock;
    std::condition_variable done;
    bool closed = false;
    size_t started = 0, finished = 0;
  };

  static std::mutex& made_lock() {
    static std::mutex lock;
    return lock;
  }

  static WorkerPool& instance() {
    // A fork while another thread held this lock would leave the child's copy held for good:
    // every fork takes it first and both sides release it.
    static const int at_fork = pthread_atfork([] { made_lock().lock(); }, [] { made_lock().unlock(); },
                                              [] { made_lock().unlock(); });
    (void)at_fork;
    static WorkerPool* pool = nullptr;
    static pid_t owner = 0;
    std::lock_guard<std::mutex> guard(made_lock());
    if (pool == nullptr || owner != getpid()) {  // the parent's pool is left as it is: its threads are not here
      pool = new WorkerPool();
      owner = getpid();
    }
    return *pool;
  }

  // Queues tickets for workers 1 .. workers - 1 of `job`, starting helpers up to that many.
  void post(const std::shared_ptr<Job>& job, size_t workers) {
    {
      std::lock_guard<std::mutex> guard(lock_);
      for (size_t w = 1; w < workers; ++w) tickets_.emplace_back(job, w);
      while (threads_ < workers - 1) {
        std::thread([this] { serve(); }).detach();
        ++threads_;
      }
    }
    wake_.notify_all();
  }

 private:
  void serve() {
    for (;;) {
      std::pair<std::shared_ptr<Job>, size_t> ticket;
      {
        std::unique_lock<std::mutex> guard(lock_);
        wake_.wait(guard, [this] { return !tickets_.empty(); });
        ticket = std::move(tickets_.front());
        tickets_.pop_front();
      }
      Job& job = *ticket.first;
      {
        std::lock_guard<std::mutex> guard(job.lock);
        if (job.closed) continue;
        ++job.started;
      }
      job.run(ticket.second);
      {
        std::lock_guard<std::mutex> guard(job.lock);
        ++job.finished;
      }
      job.done.notify_all();
    }
  }

  std::mutex lock_;
  std::condition_variable wake_;
  std::deque<std::pair<std::shared_ptr<Job>, size_t>> tickets_;
  size_t threads_ = 0;
};

template <typename Body>
void parallel_blocks(size_t count, size_t block, Body body) {
  block = std::max<size_t>(block, 1);
  const size_t workers = worker_count(count, block);
  if (workers == 1) {
    for (size_t begin = 0; begin < count; begin += block) body(size_t{0}, begin, std::min(count, begin + block));
    return;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_lock;
  auto run = [&](size_t worker) {
    try {
      for (size_t begin = next.fetch_add(block); begin < count; begin = next.fetch_add(block)) {
        body(worker, begin, std::min(count, begin + block));
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_lock);
      if (!error) error = std::current_exception();
      next.store(count);  // the others stop at their next block
    }
  };
  auto job = std::make_shared<WorkerPool::Job>();
  job->run = run;
  WorkerPool::instance().post(job, workers);
  run(0);
  {
    // No block is left: a helper yet to start has nothing to do, and must not start now.
    std::unique_lock<std::mutex> guard(job->lock);
    job->closed = true;
    job->done.wait(guard, [&] { return job->finished == job->started; });
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace cascader
