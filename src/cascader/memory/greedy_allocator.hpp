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

}  // namespace cascader
