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

// The placed buffers by time: each is listed in every block of steps its lifetime touches, so
// finding those that share time with a range scans only its own blocks. The layouts of cascaded
// schedules have thousands of short-lived buffers; scanning every placed one made the greedy
// allocator quadratic (palm detection's evicting layouts on U65: 0.7 s each). It works in the
// placer's memory (`blocks`, `seen`, `stamp`), emptied here, not freed.
class TimeIndex {
 public:
  TimeIndex(const std::vector<LiveRange>& ranges, std::vector<std::vector<size_t>>& blocks,
            std::vector<uint32_t>& seen, uint32_t& stamp)
      : ranges_(ranges), blocks_(blocks), seen_(seen), stamp_(stamp) {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
    for (const LiveRange& r : ranges) {
      if (r.end <= r.start) continue;
      lo = std::min(lo, r.start);
      hi = std::max(hi, r.end);
    }
    origin_ = hi > lo ? lo : 0;
    const int64_t span = std::max<int64_t>(hi - origin_, 1);
    // About eight buffers a block, at most kBlocks: few buffers are scanned faster than indexed.
    const int64_t blocks_wanted = std::clamp<int64_t>(int64_t(ranges.size()) / 8, 1, kBlocks);
    width_ = std::max<int64_t>(1, (span + blocks_wanted - 1) / blocks_wanted);
    count_ = size_t((span + width_ - 1) / width_);
    if (blocks_.size() < count_) blocks_.resize(count_);
    for (size_t b = 0; b < count_; ++b) blocks_[b].clear();
    if (seen_.size() < ranges.size()) seen_.resize(ranges.size(), 0);
    if (stamp_ > std::numeric_limits<uint32_t>::max() - 1) {  // wrapped: no stale stamp may match
      std::fill(seen_.begin(), seen_.end(), 0);
      stamp_ = 0;
    }
  }
  void add(size_t j) {
    const LiveRange& r = ranges_[j];
    if (r.end <= r.start || r.size == 0) return;  // shares time with nothing
    for (int64_t b = block(r.start); b <= block(r.end - 1); ++b) blocks_[size_t(b)].push_back(j);
  }
  // Calls visit(j) once for each added buffer j that overlaps `r` in time.
  template <typename Visit>
  void overlapping(const LiveRange& r, Visit visit) {
    if (r.end <= r.start || r.size == 0) return;
    const uint32_t stamp = ++stamp_;
    for (int64_t b = block(r.start); b <= block(r.end - 1); ++b) {
      for (size_t j : blocks_[size_t(b)]) {
        if (seen_[j] == stamp) continue;
        seen_[j] = stamp;
        if (overlaps_in_time(r, ranges_[j])) visit(j);
      }
    }
  }

 private:
  static constexpr int64_t kBlocks = 1024;
  int64_t block(int64_t t) const {
    return std::clamp<int64_t>((t - origin_) / width_, 0, int64_t(count_) - 1);
  }
  const std::vector<LiveRange>& ranges_;
  std::vector<std::vector<size_t>>& blocks_;
  std::vector<uint32_t>& seen_;
  uint32_t& stamp_;
  size_t count_ = 1;
  int64_t origin_ = 0, width_ = 1;
};

// The lowest base at which every member of a tie (range, offset above the base) fits between
// the placed buffers that share time with it.
int64_t lowest_fit(const std::vector<LiveRange>& ranges, const std::vector<std::pair<int, int64_t>>& members,
                   const std::vector<int64_t>& offsets, TimeIndex& placed) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> busy(members.size());
  std::vector<int64_t> candidates{0};
  for (size_t m = 0; m < members.size(); ++m) {
    const auto& [i, rel] = members[m];
    placed.overlapping(ranges[size_t(i)], [&](size_t j) {
      busy[m].emplace_back(offsets[j], offsets[j] + ranges[j].size);
      candidates.push_back(offsets[j] + ranges[j].size - rel);
    });
  }
  int64_t alignment = 1;
  for (const auto& [i, rel] : members) alignment = std::max(alignment, ranges[size_t(i)].alignment);
  std::sort(candidates.begin(), candidates.end());
  for (int64_t c : candidates) {
    const int64_t base = align_up(std::max<int64_t>(c, 0), alignment);
    bool fits = true;
    for (size_t m = 0; m < members.size() && fits; ++m) {
      const int64_t lo = base + members[m].second, hi = lo + ranges[size_t(members[m].first)].size;
      for (const auto& [a, b] : busy[m]) {
        if (lo < b && a < hi) {
          fits = false;
          break;
        }
      }
    }
    if (fits) return base;
  }
  return -1;  // unreachable: above every placed buffer everything fits
}

}  // namespace

bool GreedyPlacer::same_ranges(const std::vector<LiveRange>& ranges) const {
  return ranges.size() == last_ranges_.size() &&
         std::equal(ranges.begin(), ranges.end(), last_ranges_.begin(), [](const LiveRange& a, const LiveRange& b) {
           return a.start == b.start && a.end == b.end && a.size == b.size && a.alignment == b.alignment;
         });
}

int64_t GreedyPlacer::place(const std::vector<LiveRange>& ranges, GreedyFit fit, const std::vector<Tie>& ties,
                           GreedyOrder placement, std::vector<int64_t>& offsets, int64_t cutoff,
                           const std::vector<size_t>& first) {
  const size_t n = ranges.size();
  // A chain of ties is placed as one unit, when its first range comes up, each range at its
  // offset; it sorts by the bytes it spans.
  const std::vector<std::vector<std::pair<int, int64_t>>> chains =
      ties.empty() ? std::vector<std::vector<std::pair<int, int64_t>>>{} : tie_chains(ranges, ties);
  chain_of_.assign(n, -1);
  span_.resize(n);
  first_.resize(n);
  for (size_t i = 0; i < n; ++i) span_[i] = ranges[i].size, first_[i] = ranges[i].start;
  // Placement order: earliest first (ByStart), then the most bytes spanned, the longest
  // lifetime, the lowest index. Without ties it depends on the ranges alone: an arena layout
  // places the same ranges once per subset of its ties, so they are sorted once and only the
  // members of chains, whose keys differ, are sorted and merged in at each placement.
  const auto before = [&](size_t a, size_t b) {
    if (placement == GreedyOrder::ByStart && first_[a] != first_[b]) return first_[a] < first_[b];
    if (span_[a] != span_[b]) return span_[a] > span_[b];
    const int64_t la = ranges[a].end - ranges[a].start, lb = ranges[b].end - ranges[b].start;
    return la != lb ? la > lb : a < b;
  };
  if (!same_ranges(ranges)) {
    last_ranges_ = ranges;
    for (auto& o : untied_order_) o.clear();
  }
  std::vector<size_t>& untied = untied_order_[placement == GreedyOrder::ByStart ? 1 : 0];
  if (untied.size() != n) {  // sorted before any chain changes a key
    untied.resize(n);
    std::iota(untied.begin(), untied.end(), 0);
    std::sort(untied.begin(), untied.end(), before);
  }
  for (size_t c = 0; c < chains.size(); ++c) {
    int64_t top = 0, start = std::numeric_limits<int64_t>::max();
    for (const auto& [i, at] : chains[c]) {
      top = std::max(top, at + ranges[size_t(i)].size);
      start = std::min(start, ranges[size_t(i)].start);
    }
    for (const auto& [i, at] : chains[c]) chain_of_[size_t(i)] = int(c), span_[size_t(i)] = top, first_[size_t(i)] = start;
  }
  moved_.clear();
  for (size_t i = 0; i < n; ++i) if (chain_of_[i] >= 0) moved_.push_back(i);
  std::sort(moved_.begin(), moved_.end(), before);
  order_.clear();
  auto next_moved = moved_.begin();
  for (size_t i : untied) {
    if (chain_of_[i] >= 0) continue;
    for (; next_moved != moved_.end() && before(*next_moved, i); ++next_moved) order_.push_back(*next_moved);
    order_.push_back(i);
  }
  order_.insert(order_.end(), next_moved, moved_.end());
  if (!first.empty()) {  // those first, the rest in order (a range placed twice is skipped: done_)
    order_.insert(order_.begin(), first.begin(), first.end());
  }
  offsets.assign(n, 0);
  TimeIndex placed(ranges, blocks_, seen_, stamp_);
  done_.assign(n, 0);
  int64_t top = 0;  // the height so far (allocation_height of the placed ranges)
  for (size_t i : order_) {
    const LiveRange& r = ranges[i];
    if (done_[i]) continue;
    if (chain_of_[i] >= 0) {
      const auto& chain = chains[size_t(chain_of_[i])];
      const int64_t base = lowest_fit(ranges, chain, offsets, placed);
      for (const auto& [m, at] : chain) {
        offsets[size_t(m)] = base + at;
        done_[size_t(m)] = 1;
        placed.add(size_t(m));
        const LiveRange& member = ranges[size_t(m)];
        if (member.size > 0 && member.end > member.start) top = std::max(top, base + at + member.size);
      }
      if (top >= cutoff) return top;
      continue;
    }
    if (r.size == 0 || r.end == r.start) continue;
    // busy_: [offset, offset + size) of the placed buffers that share time with r
    busy_.clear();
    placed.overlapping(r, [&](size_t j) { busy_.emplace_back(offsets[j], offsets[j] + ranges[j].size); });
    std::sort(busy_.begin(), busy_.end());
    int64_t best = -1;
    int64_t best_slack = std::numeric_limits<int64_t>::max();
    int64_t cursor = 0;  // lowest address not covered by the busy intervals seen so far
    for (const auto& [lo, hi] : busy_) {
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
    offsets[i] = best;
    done_[i] = 1;
    placed.add(i);
    top = std::max(top, best + r.size);
    if (top >= cutoff) return top;
  }
  return top;
}

Allocation greedy_allocate(const std::vector<LiveRange>& ranges, GreedyFit fit, const std::vector<Tie>& ties,
                           GreedyOrder placement) {
  const auto t0 = std::chrono::steady_clock::now();
  validate(ranges);
  validate(ties, ranges);
  Allocation result;
  GreedyPlacer placer;
  result.height = placer.place(ranges, fit, ties, placement, result.offsets);
  result.lower_bound = peak_live_bytes(ranges, ties);
  result.optimal = result.height == result.lower_bound;
  result.solver = fit == GreedyFit::BestFit ? "greedy-best-fit" : "greedy-first-fit";
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace cascader
