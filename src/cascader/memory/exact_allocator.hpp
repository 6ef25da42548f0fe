// An exact offset allocator of the minimalloc class (Moffitt, ASPLOS 2023).
//
// The decision problem "do these live ranges fit in C bytes?" is a depth-first search over
// canonical placements: buffers are placed in increasing (offset, preorder rank), or bottom-left
// in increasing (offset, first step) from either end of time, each at the lowest aligned offset
// that the placed, time-overlapping buffers allow. Every allocation can be pushed down into such
// a form, so the search is complete. It prunes with
//   - section inference: in every time slice, floor + unplaced bytes <= C;
//   - dominance: never place a buffer above a point where another unplaced one fits entirely
//     below it (that gap could only be filled by moving the other one down);
//   - symmetry: equal offsets are taken in that order only; a buffer that shares time with no
//     unplaced buffer is tried at its lowest offset only; buffers of the same lifetime stacked
//     with no gap are taken largest first, identical ones in input order;
// and it solves independent partitions (time cuts no unplaced buffer crosses, found statically
// and again during the search) separately. Seven strategies (minimalloc's TWA, TAW, WAT, and
// bottom-left from each end with two tie rules each; bottom-left tries first, of the buffers that
// can start at one spot, those that fit it) are tried round-robin under a node limit that grows
// 4x per round. From the second round a round's strategies run on several threads, with the
// result and node count of running them one after another.
//
// The optimisation driver starts from the greedy best-fit allocation (the warm start and upper
// bound), then decides capacities between the lower bound (peak live bytes) and the best height
// found, lowest first, then by bisection; a finished search that finds nothing proves a higher
// lower bound. Each decision gets half the remaining nodes and time. Results depend only on the
// input and options as long as the node limit, not the time limit, ends the search.
// Worst case exponential; each node costs O(n log n + sections).
#pragma once

#include <cstdint>
#include <vector>

#include "cascader/memory/allocation.hpp"
#include "cascader/memory/live_range.hpp"

namespace cascader {

struct ExactOptions {
  int64_t capacity = -1;       // bytes; -1: unbounded. Exceeding it throws BudgetError.
  bool minimise = true;        // false: stop at the first allocation that fits `capacity`
  int64_t node_limit = 2'000'000;
  double time_limit_s = 2.0;
  // Minimising stops once the height is within this many bytes of the lower bound (0: only at
  // a proven optimum).
  int64_t good_enough_bytes = 0;
};

// Best allocation found; `optimal` and `lower_bound` say how good it is proven to be.
// Throws BudgetError when nothing within `capacity` was found (the message says whether that
// is proven and names the smallest height known to work).
Allocation exact_allocate(const std::vector<LiveRange>& ranges, const ExactOptions& options = {});

}  // namespace cascader
