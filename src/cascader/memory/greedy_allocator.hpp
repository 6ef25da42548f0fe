// Greedy offset allocators: the fast baseline, the exact solver's warm start, and TFLM's planner.
//
// Buffers are taken largest first (ties: longer lifetime first, then input order); each goes into
// a gap between the already placed buffers that overlap it in time:
//   - BestFit:  the smallest gap that holds it (the top of the arena counts as unbounded);
//   - FirstFit: the lowest gap that holds it, as TFLM's GreedyMemoryPlanner does.
// A tie (staircase.hpp) is placed as one unit, by the bytes it spans, at the lowest address
// where both its ranges fit at their offset.
// O(n^2 log n) for n buffers when all share time; a buffer is checked only against the placed
// buffers of the time blocks it spans, so short-lived ones (stripes) cost far less.
#pragma once

#include <limits>
#include <vector>

#include "cascader/memory/allocation.hpp"
#include "cascader/memory/live_range.hpp"
#include "cascader/memory/staircase.hpp"

namespace cascader {

enum class GreedyFit { BestFit, FirstFit };
// The order buffers are placed in: largest first (the default), or earliest first (a cascade's
// chain of staircases then lands before what it shares time with).
enum class GreedyOrder { BySize, ByStart };

Allocation greedy_allocate(const std::vector<LiveRange>& ranges, GreedyFit fit = GreedyFit::BestFit,
                           const std::vector<Tie>& ties = {}, GreedyOrder order = GreedyOrder::BySize);

// The placement alone, for callers that lay out the same ranges many times: an arena layout
// tries dozens of subsets of its ties, and the planner scores each proposal by such a layout
// (allocation, bounds and validation were a quarter of that). It neither validates nor bounds
// (greedy_allocate does both): `ranges` and `ties` must have passed validate(). Its working
// memory is kept from one call to the next; one placer per thread.
class GreedyPlacer {
 public:
  // Sets `offsets` (one per range) as greedy_allocate places them and returns the height. With
  // a `cutoff`, it stops as soon as a placed buffer's top reaches it and returns that top (at
  // least `cutoff`; `offsets` are then incomplete): a caller that keeps only layouts lower than
  // its best so far need not finish one that cannot be. `first`: ranges placed before all
  // others, in that order (each with its chain of ties), then the rest in `order`.
  int64_t place(const std::vector<LiveRange>& ranges, GreedyFit fit, const std::vector<Tie>& ties,
                GreedyOrder order, std::vector<int64_t>& offsets,
                int64_t cutoff = std::numeric_limits<int64_t>::max(), const std::vector<size_t>& first = {});

 private:
  bool same_ranges(const std::vector<LiveRange>& ranges) const;  // as the last placed

  std::vector<std::vector<size_t>> blocks_;  // the time index: placed ranges per block of steps
  std::vector<uint32_t> seen_;               // per range, the last query that visited it
  uint32_t stamp_ = 0;
  std::vector<size_t> order_;
  // The ranges last placed and their order without ties, by size and by start (made when
  // first needed): the same ranges come back with other ties.
  std::vector<LiveRange> last_ranges_;
  std::vector<size_t> untied_order_[2];
  std::vector<size_t> moved_;  // the members of chains, in placement order
  std::vector<int> chain_of_;
  std::vector<int64_t> span_, first_;
  std::vector<char> done_;
  std::vector<std::pair<int64_t, int64_t>> busy_;
};

}  // namespace cascader
