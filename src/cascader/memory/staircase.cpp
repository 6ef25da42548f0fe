#include "cascader/memory/staircase.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "cascader/common/error.hpp"

namespace cascader {

int64_t staircase_shift(const std::vector<ByteAccess>& writes, const std::vector<ByteAccess>& reads,
                        int64_t alignment) {
  if (alignment < 1) throw InvalidArgument("staircase_shift: alignment must be >= 1");
  // The lowest input byte read at each step or later: reads sorted by step, minimum from the back.
  std::vector<ByteAccess> by_step;
  for (const ByteAccess& r : reads) {
    if (r.end > r.begin) by_step.push_back(r);
  }
  std::sort(by_step.begin(), by_step.end(), [](const ByteAccess& a, const ByteAccess& b) { return a.step < b.step; });
  std::vector<int64_t> lowest(by_step.size() + 1, std::numeric_limits<int64_t>::max());
  for (size_t i = by_step.size(); i-- > 0;) lowest[i] = std::min(lowest[i + 1], by_step[i].begin);
  int64_t shift = 0;
  for (const ByteAccess& w : writes) {
    if (w.end <= w.begin) continue;
    const auto from = std::lower_bound(by_step.begin(), by_step.end(), w.step - 1,
                                       [](const ByteAccess& r, int64_t step) { return r.step < step; });
    const int64_t floor = lowest[size_t(from - by_step.begin())];
    if (floor == std::numeric_limits<int64_t>::max()) continue;  // nothing read from t - 1 on
    shift = std::max(shift, w.end - floor);
  }
  return (shift + alignment - 1) / alignment * alignment;
}

void validate(const std::vector<Tie>& ties, const std::vector<LiveRange>& ranges) {
  const int n = int(ranges.size());
  std::vector<int> up(size_t(n), -1), down(size_t(n), -1);  // the tie a range is the lower / upper of
  for (size_t k = 0; k < ties.size(); ++k) {
    const Tie& t = ties[k];
    if (t.lower < 0 || t.lower >= n || t.upper < 0 || t.upper >= n || t.lower == t.upper) {
      throw InvalidArgument("a tie joins ranges " + std::to_string(t.lower) + " and " + std::to_string(t.upper) +
                            "; need two different ranges of the " + std::to_string(n));
    }
    if (up[size_t(t.lower)] >= 0 || down[size_t(t.upper)] >= 0) {
      throw InvalidArgument("range " + std::to_string(up[size_t(t.lower)] >= 0 ? t.lower : t.upper) +
                            " is the lower or the upper of two ties; ties may only chain");
    }
    up[size_t(t.lower)] = down[size_t(t.upper)] = int(k);
    if (t.offset < 0 || t.offset % ranges[size_t(t.lower)].alignment != 0 ||
        t.offset % ranges[size_t(t.upper)].alignment != 0) {
      throw InvalidArgument("the tie of ranges " + std::to_string(t.lower) + " and " + std::to_string(t.upper) +
                            " has offset " + std::to_string(t.offset) +
                            "; it needs a non-negative multiple of both alignments");
    }
  }
  // Every chain has a lowest range: walking up from it visits each tie once. A tie not
  // visited is on a cycle.
  size_t visited = 0;
  for (int r = 0; r < n; ++r) {
    if (down[size_t(r)] >= 0) continue;
    for (int k = up[size_t(r)]; k >= 0; k = up[size_t(ties[size_t(k)].upper)]) ++visited;
  }
  if (visited != ties.size()) throw InvalidArgument("ties form a cycle");
}

std::vector<std::vector<std::pair<int, int64_t>>> tie_chains(const std::vector<LiveRange>& ranges,
                                                            const std::vector<Tie>& ties) {
  std::vector<int> up(ranges.size(), -1), down(ranges.size(), -1);
  for (size_t k = 0; k < ties.size(); ++k) up[size_t(ties[k].lower)] = down[size_t(ties[k].upper)] = int(k);
  std::vector<std::vector<std::pair<int, int64_t>>> chains;
  for (int r = 0; r < int(ranges.size()); ++r) {
    if (down[size_t(r)] >= 0 || up[size_t(r)] < 0) continue;
    std::vector<std::pair<int, int64_t>> chain{{r, 0}};
    for (int k = up[size_t(r)]; k >= 0; k = up[size_t(ties[size_t(k)].upper)]) {
      const Tie& t = ties[size_t(k)];
      const int64_t at = chain.back().second + t.offset;
      const LiveRange& next = ranges[size_t(t.upper)];
      bool clash = false;
      for (size_t m = 0; m + 1 < chain.size() && !clash; ++m) {  // all but its tied neighbour
        const LiveRange& other = ranges[size_t(chain[m].first)];
        clash = overlaps_in_time(other, next) && chain[m].second < at + next.size && at < chain[m].second + other.size;
      }
      if (clash) {
        if (chain.size() > 1) chains.push_back(std::move(chain));
        chain = {{t.upper, 0}};
      } else {
        chain.emplace_back(t.upper, at);
      }
    }
    if (chain.size() > 1) chains.push_back(std::move(chain));
  }
  return chains;
}

int64_t shared_bytes(const Tie& tie, const std::vector<LiveRange>& ranges) {
  const LiveRange& a = ranges[size_t(tie.lower)];
  const LiveRange& b = ranges[size_t(tie.upper)];
  if (!overlaps_in_time(a, b)) return 0;
  return std::max<int64_t>(0, std::min(a.size, tie.offset + b.size) - tie.offset);
}

int64_t peak_live_bytes(const std::vector<LiveRange>& ranges, const std::vector<Tie>& ties) {
  if (ties.empty()) return peak_live_bytes(ranges);
  validate(ranges);
  validate(ties, ranges);
  // The sweep of peak_live_bytes, with each tie's shared bytes taken off while both live.
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(2 * (ranges.size() + ties.size()));
  for (const LiveRange& r : ranges) {
    if (r.start == r.end || r.size == 0) continue;
    events.emplace_back(r.start, r.size);
    events.emplace_back(r.end, -r.size);
  }
  for (const Tie& t : ties) {
    const int64_t shared = shared_bytes(t, ranges);
    if (shared == 0) continue;
    const LiveRange& a = ranges[size_t(t.lower)];
    const LiveRange& b = ranges[size_t(t.upper)];
    events.emplace_back(std::max(a.start, b.start), -shared);
    events.emplace_back(std::min(a.end, b.end), shared);
  }
  // At equal times the decreases come first (half-open intervals), then the increases.
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < events.size();) {
    const int64_t t = events[i].first;
    for (; i < events.size() && events[i].first == t; ++i) live += events[i].second;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace cascader
