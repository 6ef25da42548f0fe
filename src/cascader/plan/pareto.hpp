// Pareto frontiers of (memory, cycles) points, both minimised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cascader {

struct CostPoint {
  int64_t memory = 0;
  double cycles = 0;
};

// Indices of the non-dominated points, by increasing memory (and so decreasing cycles). Ties
// keep the first. O(n log n). Throws InvalidArgument for NaN cycles.
std::vector<size_t> pareto_frontier(const std::vector<CostPoint>& points);

// At most `keep` of the frontier `front` (indices into points, by increasing memory): both
// ends, and then the points whose removal would bend the curve most (Visvalingam's effective
// area on log memory / log cycles), so that the knees stay. O(n log n).
std::vector<size_t> thin_frontier(const std::vector<CostPoint>& points, const std::vector<size_t>& front, size_t keep);

}  // namespace cascader
