#include "cascader/memory/live_range.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "cascader/common/error.hpp"

namespace cascader {

void validate(const std::vector<LiveRange>& ranges) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    const LiveRange& r = ranges[i];
    if (r.start < 0 || r.end < r.start || r.size < 0) {
      throw InvalidArgument("live range " + std::to_string(i) + " is [" + std::to_string(r.start) +
                            ", " + std::to_string(r.end) + ") of " + std::to_string(r.size) +
                            " bytes; need 0 <= start <= end and size >= 0");
    }
    if (r.alignment < 1) {
      throw InvalidArgument("live range " + std::to_string(i) + " has alignment " +
                            std::to_string(r.alignment) + "; need alignment >= 1");
    }
  }
}

int64_t peak_live_bytes(const std::vector<LiveRange>& ranges) {
  validate(ranges);
  // Events sorted by time; at equal times ends (-size) sort before starts (+size) because
  // intervals are half-open, so a buffer ending at t and one starting at t never coexist.
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(ranges.size() * 2);
  for (const LiveRange& r : ranges) {
    if (r.start == r.end || r.size == 0) continue;
    events.emplace_back(r.start, r.size);
    events.emplace_back(r.end, -r.size);
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0;
  int64_t peak = 0;
  for (const auto& e : events) {
    live += e.second;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace cascader
