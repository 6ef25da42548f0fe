#include "cascader/memory/greedy_allocator.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <utility>

namespace cascader {

namespace {

// The division is skipped for byte alignment: it dominates the search's inner loop otherwise.
int64_t align_up(int64_t x, int64_t alignment) {
  return alignment == 1 ? x : (x + alignment - 1) / alignment * alignment;
}

}  // namespace

Allocation greedy_allocate(const std::vector<LiveRange>& ranges, GreedyFit fit) {
  const auto t0 = std::chrono::steady_clock::now();
  validate(ranges);
  const size_t n = ranges.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ranges[a].size != ranges[b].size) return ranges[a].size > ranges[b].size;
    return ranges[a].end - ranges[a].start > ranges[b].end - ranges[b].start;
  });
  Allocation result;
  result.offsets.assign(n, 0);
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, offset + size) of time-overlapping placed buffers
  for (size_t i : order) {
    const LiveRange& r = ranges[i];
    if (r.size == 0 || r.end == r.start) continue;
    busy.clear();
    for (size_t j : placed) {
      if (overlaps_in_time(r, ranges[j])) busy.emplace_back(result.offsets[j], result.offsets[j] + ranges[j].size);
    }
    std::sort(busy.begin(), busy.end());
    int64_t best = -1;
    int64_t best_slack = std::numeric_limits<int64_t>::max();
    int64_t cursor = 0;  // lowest address not covered by the busy intervals seen so far
    for (const auto& [lo, hi] : busy) {
      const int64_t at = align_up(cursor, r.alignment);
      if (at + r.size <= lo) {
        const int64_t slack = lo - at - r.size;
        if (fit == GreedyFit::FirstFit) {
          best = at;
          break;
        }
        if (slack < best_slack) {
          best_slack = slack;
          best = at;
        }
      }
      cursor = std::max(cursor, hi);
    }
    if (best < 0) best = align_up(cursor, r.alignment);
    result.offsets[i] = best;
    placed.push_back(i);
  }
  result.height = allocation_height(ranges, result.offsets);
  result.lower_bound = peak_live_bytes(ranges);
  result.optimal = result.height == result.lower_bound;
  result.solver = fit == GreedyFit::BestFit ? "greedy-best-fit" : "greedy-first-fit";
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace cascader
