// Work of the core run on a thread of its own while the calling thread goes on with other work
// (the planner's Python thread lays out its leanest proposal while the other proposals are
// scored). A Python thread would not do: it needs the interpreter lock to start and to hand
// back each result, and waits for it up to the interpreter's switch interval (5 ms) while the
// caller runs Python.
//
// The work's parallel_blocks calls leave one core to the caller (worker_cap): on two cores the
// work runs on one thread beside it, not on two that the caller's thread then shares a core
// with. result() waits for the work and rethrows what it threw; the destructor waits for it too,
// so that nothing it reads is freed under it.
#pragma once

#include <algorithm>
#include <functional>
#include <future>
#include <utility>

#include "cascader/common/error.hpp"
#include "cascader/common/parallel.hpp"

namespace cascader {

template <typename T>
class Background {
 public:
  explicit Background(std::function<T()> work)
      : future_(std::async(std::launch::async, [work = std::move(work)] {
          worker_cap() = std::max<size_t>(core_count(), 2) - 1;
          return work();
        })) {}
  Background(Background&&) noexcept = default;
  Background& operator=(Background&&) noexcept = default;
  ~Background() {
    if (future_.valid()) future_.wait();
  }

  // The work's result, once; throws InvalidArgument when it was taken already.
  T result() {
    if (!future_.valid()) throw InvalidArgument("this background work's result was taken already");
    return future_.get();
  }

 private:
  std::future<T> future_;
};

}  // namespace cascader
