#include "cascader/memory/allocation.hpp"

#include <algorithm>
#include <numeric>

#include "cascader/common/error.hpp"

namespace cascader {

int64_t allocation_height(const std::vector<LiveRange>& ranges, const std::vector<int64_t>& offsets) {
  int64_t height = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].size > 0 && ranges[i].end > ranges[i].start) {
      height = std::max(height, offsets[i] + ranges[i].size);
    }
  }
  return height;
}

void check_allocation(const std::vector<LiveRange>& ranges, const std::vector<int64_t>& offsets,
                      const std::vector<Tie>& ties) {
  validate(ranges);
  validate(ties, ranges);
  const auto staircased = [&](size_t a, size_t b) {
    return std::any_of(ties.begin(), ties.end(), [&](const Tie& t) {
      return ((size_t(t.lower) == a && size_t(t.upper) == b) || (size_t(t.lower) == b && size_t(t.upper) == a)) &&
             offsets[size_t(t.upper)] - offsets[size_t(t.lower)] == t.offset;
    });
  };
  if (offsets.size() != ranges.size()) {
    throw InvalidArgument("got " + std::to_string(offsets.size()) + " offsets for " +
                          std::to_string(ranges.size()) + " live ranges");
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (offsets[i] < 0 || offsets[i] % ranges[i].alignment != 0) {
      throw InvalidArgument("buffer " + std::to_string(i) + " is at offset " + std::to_string(offsets[i]) +
                            ", which is negative or not a multiple of its alignment " +
                            std::to_string(ranges[i].alignment));
    }
  }
  // Sweep over start times: only ranges still live at a start can collide with it.
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a].start < ranges[b].start; });
  std::vector<size_t> live;
  for (size_t i : order) {
    const LiveRange& r = ranges[i];
    if (r.size == 0 || r.end == r.start) continue;
    live.erase(std::remove_if(live.begin(), live.end(), [&](size_t j) { return ranges[j].end <= r.start; }),
               live.end());
    for (size_t j : live) {
      if (offsets[i] < offsets[j] + ranges[j].size && offsets[j] < offsets[i] + r.size && !staircased(i, j)) {
        throw InvalidArgument("buffers " + std::to_string(j) + " and " + std::to_string(i) +
                              " are live at the same time and overlap in memory");
      }
    }
    live.push_back(i);
  }
}

}  // namespace cascader
