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
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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

inline size_t worker_count(size_t count, size_t block) {
  const size_t blocks = (count + block - 1) / std::max<size_t>(block, 1);
  return std::max<size_t>(1, std::min({core_count(), blocks, size_t{8}}));
}

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
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w) threads.emplace_back(run, w);
  run(0);
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace cascader
