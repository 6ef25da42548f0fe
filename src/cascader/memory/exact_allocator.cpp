#include "cascader/memory/exact_allocator.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>

#include "cascader/common/error.hpp"
#include "cascader/memory/greedy_allocator.hpp"

namespace cascader {

namespace {

using Clock = std::chrono::steady_clock;

// The division is skipped for byte alignment: it dominates the search's inner loop otherwise.
int64_t align_up(int64_t x, int64_t alignment) {
  return alignment == 1 ? x : (x + alignment - 1) / alignment * alignment;
}

enum class Outcome { Found, NotFound, Aborted };

// The non-empty buffers cut into sections: maximal time slices over which the set of live
// buffers does not change. Buffer b lives in sections [first[b], last[b]).
struct Sections {
  std::vector<LiveRange> buffers;
  std::vector<int> first, last;
  std::vector<std::vector<int>> members;   // per section: the buffers live in it
  std::vector<std::vector<int>> overlaps;  // per buffer: the buffers sharing a section with it
  std::vector<int64_t> total;              // per section: summed sizes
  std::vector<int> crossing;               // per boundary k (between k and k+1): buffers spanning it

  explicit Sections(std::vector<LiveRange> live) : buffers(std::move(live)) {
    std::vector<int64_t> times;
    for (const LiveRange& r : buffers) {
      times.push_back(r.start);
      times.push_back(r.end);
    }
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    const int n_sections = times.empty() ? 0 : static_cast<int>(times.size()) - 1;
    members.resize(static_cast<size_t>(n_sections));
    total.assign(static_cast<size_t>(n_sections), 0);
    crossing.assign(static_cast<size_t>(std::max(n_sections - 1, 0)), 0);
    const auto index = [&](int64_t t) {
      return static_cast<int>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
    };
    for (size_t b = 0; b < buffers.size(); ++b) {
      first.push_back(index(buffers[b].start));
      last.push_back(index(buffers[b].end));
      for (int s = first[b]; s < last[b]; ++s) {
        members[static_cast<size_t>(s)].push_back(static_cast<int>(b));
        total[static_cast<size_t>(s)] += buffers[b].size;
        if (s + 1 < last[b]) ++crossing[static_cast<size_t>(s)];
      }
    }
    overlaps.resize(buffers.size());
    for (size_t a = 0; a < buffers.size(); ++a) {
      for (size_t b = a + 1; b < buffers.size(); ++b) {
        if (first[a] < last[b] && first[b] < last[a]) {
          overlaps[a].push_back(static_cast<int>(b));
          overlaps[b].push_back(static_cast<int>(a));
        }
      }
    }
  }

  int size() const { return static_cast<int>(total.size()); }
};

// Static orders in which equal-offset candidates are tried; round-robin finds what one misses.
// Keys, all descending: W lifetime length, A area (bytes x time), T fullest section's total.
enum class Preorder { WAT, TAW, TWA };
// minimalloc's three preorders. TWA re-ranks each piece split off during the search by its
// remaining bytes (alone it solves 5 of the 7 challenging instances, E among them); the others
// keep their ranks fixed (TAW solves B and C fast).
constexpr std::pair<Preorder, bool> kStrategies[] = {
    {Preorder::TWA, true}, {Preorder::TAW, false}, {Preorder::WAT, false}};
// Node limit growth per round-robin round: each round retries every strategy from scratch.
constexpr int64_t kLimitGrowth = 4;

// Ranks `buffers` (into `rank`) by `order`, with T measured on `totals`, the sections' unplaced
// bytes: a piece split off during the search is ranked by what is left of it.
void preorder_ranks(const Sections& sec, Preorder order, const std::vector<int>& buffers,
                    const std::vector<int64_t>& totals, std::vector<int>& rank) {
  std::vector<std::tuple<int64_t, int64_t, int64_t, int>> keys;
  keys.reserve(buffers.size());
  for (int b : buffers) {
    const auto ub = static_cast<size_t>(b);
    int64_t peak_total = 0;  // the fullest section the buffer lives in
    for (int s = sec.first[ub]; s < sec.last[ub]; ++s) peak_total = std::max(peak_total, totals[static_cast<size_t>(s)]);
    const LiveRange& r = sec.buffers[ub];
    const int64_t length = r.end - r.start;
    const int64_t area = length * r.size;
    switch (order) {
      case Preorder::WAT: keys.emplace_back(length, area, peak_total, -b); break;
      case Preorder::TAW: keys.emplace_back(peak_total, area, length, -b); break;
      case Preorder::TWA: keys.emplace_back(peak_total, length, area, -b); break;
    }
  }
  std::sort(keys.begin(), keys.end(), std::greater<>());
  for (size_t i = 0; i < keys.size(); ++i) rank[static_cast<size_t>(-std::get<3>(keys[i]))] = static_cast<int>(i);
}

// The decision search for one capacity. State changes are logged and undone on the way back,
// so the search allocates nothing per node beyond its candidate list.
class Search {
 public:
  explicit Search(const Sections& sec) : sec_(sec) {}

  int64_t nodes() const { return nodes_; }
  const std::vector<int64_t>& solution() const { return solution_; }

  Outcome decide(int64_t capacity, int64_t node_budget, Clock::time_point deadline) {
    capacity_ = capacity;
    deadline_ = deadline;
    const int64_t budget_end = nodes_ + node_budget;
    int64_t limit = std::max<int64_t>(64, static_cast<int64_t>(sec_.buffers.size()));
    while (true) {
      limit *= kLimitGrowth;
      for (const auto& [p, rerank] : kStrategies) {
        reset(p, rerank);
        node_limit_ = std::min(budget_end, nodes_ + limit);
        std::vector<int> all(sec_.buffers.size());
        std::iota(all.begin(), all.end(), 0);
        const Outcome outcome = solve_partition(all, 0, sec_.size());
        if (outcome != Outcome::Aborted) return outcome;
        if (nodes_ >= budget_end || timed_out_) return Outcome::Aborted;
      }
    }
  }

 private:
  void reset(Preorder p, bool rerank) {
    const size_t n = sec_.buffers.size();
    preorder_ = p;
    rerank_ = rerank;
    depth_ = 0;
    candidate_pool_.resize(n + 1);
    rank_.assign(n, 0);
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    preorder_ranks(sec_, p, all, sec_.total, rank_);
    offset_.assign(n, -1);
    min_offset_.assign(n, 0);
    solution_.assign(n, -1);
    floor_.assign(static_cast<size_t>(sec_.size()), 0);
    unplaced_ = sec_.total;
    crossing_ = sec_.crossing;
    timed_out_ = false;
  }

  // Splits [lo, hi) at boundaries no unplaced buffer crosses and solves the pieces one by one:
  // they share no time, so a failure of one piece is a failure of the whole.
  Outcome solve_partition(const std::vector<int>& buffers, int lo, int hi) {
    int piece_lo = lo;
    for (int k = lo; k < hi; ++k) {
      if (k + 1 < hi && crossing_[static_cast<size_t>(k)] != 0) continue;
      std::vector<int> piece;
      for (int b : buffers) {
        if (offset_[static_cast<size_t>(b)] < 0 && sec_.first[static_cast<size_t>(b)] < k + 1 &&
            piece_lo < sec_.last[static_cast<size_t>(b)]) {
          piece.push_back(b);
        }
      }
      if (!piece.empty()) {
        std::vector<int> saved;
        for (int b : piece) saved.push_back(rank_[static_cast<size_t>(b)]);
        if (rerank_) preorder_ranks(sec_, preorder_, piece, unplaced_, rank_);
        const Outcome outcome = dfs(piece, piece_lo, k + 1, 0, -1);
        for (size_t i = 0; i < piece.size(); ++i) rank_[static_cast<size_t>(piece[i])] = saved[i];
        if (outcome != Outcome::Found) return outcome;
      }
      piece_lo = k + 1;
    }
    return Outcome::Found;
  }

  Outcome dfs(const std::vector<int>& part, int lo, int hi, int64_t last_offset, int last_rank) {
    if (++nodes_ > node_limit_) return Outcome::Aborted;
    if ((nodes_ & 255) == 0 && Clock::now() > deadline_) timed_out_ = true;
    if (timed_out_) return Outcome::Aborted;
    int64_t min_top = std::numeric_limits<int64_t>::max();
    bool any = false;
    for (int b : part) {
      const auto ub = static_cast<size_t>(b);
      if (offset_[ub] >= 0) continue;
      any = true;
      min_top = std::min(min_top, min_offset_[ub] + sec_.buffers[ub].size);
    }
    if (!any) return Outcome::Found;
    // Only buffers that can go at or above the last offset (symmetry) and below every unplaced
    // buffer's lowest top (dominance) are candidates, sorted by (offset, rank).
    std::vector<std::pair<int64_t, uint64_t>>& candidates = candidates_at(depth_);
    candidates.clear();
    for (int b : part) {
      const auto ub = static_cast<size_t>(b);
      if (offset_[ub] >= 0) continue;
      const int64_t offset = min_offset_[ub];
      if (offset < last_offset || offset >= min_top || (offset == last_offset && rank_[ub] < last_rank)) continue;
      candidates.emplace_back(offset, (static_cast<uint64_t>(rank_[ub]) << 32) | static_cast<uint64_t>(b));
    }
    std::sort(candidates.begin(), candidates.end());
    ++depth_;
    for (const auto& [offset, key] : candidates) {
      const auto rank = static_cast<int>(key >> 32);
      const auto b = static_cast<int>(key & 0xffffffffu);
      const size_t log_mark = offset_log_.size();
      const size_t floor_mark = floor_log_.size();
      const bool new_cut = place(b, offset);
      Outcome outcome = Outcome::NotFound;
      if (feasible(lo, hi, offset, last_offset)) {
        outcome = new_cut ? solve_partition(part, lo, hi) : dfs(part, lo, hi, offset, rank);
      }
      const bool hatless = no_unplaced_overlap(b);
      unplace(b, log_mark, floor_mark);
      if (outcome != Outcome::NotFound) {
        --depth_;
        return outcome;
      }
      // b shares no time with any unplaced buffer, so where it sits constrains no one: if the rest
      // fails with b here, it fails with b anywhere else too.
      if (hatless) break;
    }
    --depth_;
    return Outcome::NotFound;
  }

  // Returns whether the placement leaves a boundary that no unplaced buffer crosses.
  bool place(int b, int64_t offset) {
    const auto ub = static_cast<size_t>(b);
    const LiveRange& r = sec_.buffers[ub];
    const int64_t top = offset + r.size;
    offset_[ub] = offset;
    solution_[ub] = offset;
    // Sections where a lowest offset rose, or that b left, may now have their unplaced buffers
    // all too high to fit: feasible() re-examines this span of sections.
    touched_lo_ = sec_.first[ub];
    touched_hi_ = sec_.last[ub];
    for (int c : sec_.overlaps[ub]) {
      const auto uc = static_cast<size_t>(c);
      if (offset_[uc] >= 0 || min_offset_[uc] >= top) continue;
      offset_log_.emplace_back(c, min_offset_[uc]);
      min_offset_[uc] = align_up(top, sec_.buffers[uc].alignment);
      touched_lo_ = std::min(touched_lo_, sec_.first[uc]);
      touched_hi_ = std::max(touched_hi_, sec_.last[uc]);
    }
    for (int s = sec_.first[ub]; s < sec_.last[ub]; ++s) {
      unplaced_[static_cast<size_t>(s)] -= r.size;
      raise_floor(s, top);
    }
    bool new_cut = false;
    for (int k = sec_.first[ub]; k + 1 < sec_.last[ub]; ++k) {
      if (--crossing_[static_cast<size_t>(k)] == 0) new_cut = true;
    }
    return new_cut;
  }

  // One candidate list per search depth, reused across nodes. Sized in reset(): every depth
  // places one more buffer, so depth <= n, and the pool never reallocates under a reference.
  std::vector<std::pair<int64_t, uint64_t>>& candidates_at(size_t depth) { return candidate_pool_[depth]; }

  bool no_unplaced_overlap(int b) const {
    for (int c : sec_.overlaps[static_cast<size_t>(b)]) if (offset_[static_cast<size_t>(c)] < 0) return false;
    return true;
  }

  void raise_floor(int s, int64_t value) {
    const auto us = static_cast<size_t>(s);
    if (floor_[us] >= value) return;
    floor_log_.emplace_back(s, floor_[us]);
    floor_[us] = value;
  }

  void unplace(int b, size_t log_mark, size_t floor_mark) {
    const auto ub = static_cast<size_t>(b);
    while (offset_log_.size() > log_mark) {
      min_offset_[static_cast<size_t>(offset_log_.back().first)] = offset_log_.back().second;
      offset_log_.pop_back();
    }
    while (floor_log_.size() > floor_mark) {
      floor_[static_cast<size_t>(floor_log_.back().first)] = floor_log_.back().second;
      floor_log_.pop_back();
    }
    for (int s = sec_.first[ub]; s < sec_.last[ub]; ++s) unplaced_[static_cast<size_t>(s)] += sec_.buffers[ub].size;
    for (int k = sec_.first[ub]; k + 1 < sec_.last[ub]; ++k) ++crossing_[static_cast<size_t>(k)];
    offset_[ub] = -1;
  }

  // Section inference: the unplaced bytes of every slice must stack within capacity on its floor:
  // the highest placed top there, the last offset (placements only go up), and the lowest of the
  // unplaced buffers' lowest offsets. Outside the touched span only the offset can have changed
  // since the parent's check passed, so there a max over the unplaced bytes is enough.
  bool feasible(int lo, int hi, int64_t offset, int64_t parent_offset) const {
    const int t_lo = std::max(lo, touched_lo_);
    const int t_hi = std::min(hi, touched_hi_);
    if (offset != parent_offset) {
      int64_t most = 0;
      for (int s = lo; s < t_lo; ++s) most = std::max(most, unplaced_[static_cast<size_t>(s)]);
      for (int s = t_hi; s < hi; ++s) most = std::max(most, unplaced_[static_cast<size_t>(s)]);
      if (most > 0 && offset + most > capacity_) return false;
    }
    for (int s = t_lo; s < t_hi; ++s) {
      const auto us = static_cast<size_t>(s);
      if (unplaced_[us] == 0) {
        if (floor_[us] > capacity_) return false;
        continue;
      }
      const int64_t headroom = capacity_ - unplaced_[us];  // highest floor that still fits
      if (std::max(floor_[us], offset) > headroom) return false;
      bool fits = false;
      for (int m : sec_.members[us]) {
        const auto um = static_cast<size_t>(m);
        if (offset_[um] < 0 && min_offset_[um] <= headroom) {
          fits = true;
          break;
        }
      }
      if (!fits) return false;
    }
    return true;
  }

  const Sections& sec_;
  Clock::time_point deadline_;
  int64_t capacity_ = 0;
  int64_t nodes_ = 0;
  int64_t node_limit_ = 0;
  bool timed_out_ = false;
  size_t depth_ = 0;
  std::vector<std::vector<std::pair<int64_t, uint64_t>>> candidate_pool_;
  Preorder preorder_ = Preorder::WAT;
  bool rerank_ = false;
  std::vector<int> rank_;
  std::vector<int64_t> offset_, min_offset_, solution_, floor_, unplaced_;
  std::vector<int> crossing_;
  int touched_lo_ = 0, touched_hi_ = 0;
  std::vector<std::pair<int, int64_t>> offset_log_, floor_log_;
};

}  // namespace

Allocation exact_allocate(const std::vector<LiveRange>& ranges, const ExactOptions& options) {
  const auto t0 = Clock::now();
  if (options.node_limit < 0 || options.time_limit_s < 0) {
    throw InvalidArgument("node_limit and time_limit_s must be >= 0");
  }
  Allocation best = greedy_allocate(ranges, GreedyFit::BestFit);  // validates; the warm start
  best.solver = "exact";
  std::vector<size_t> live;  // the buffers that occupy memory at some time
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].size > 0 && ranges[i].end > ranges[i].start) live.push_back(i);
  }
  std::vector<LiveRange> compact;
  for (size_t i : live) compact.push_back(ranges[i]);
  const Sections sections(std::move(compact));
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.time_limit_s));
  Search search(sections);
  const auto adopt = [&]() {
    for (size_t k = 0; k < live.size(); ++k) best.offsets[live[k]] = search.solution()[k];
    best.height = allocation_height(ranges, best.offsets);
  };
  // A decision gets all that is left, or half of it when later decisions may still use the rest.
  const auto budget = [&](bool all) {
    const int64_t left = std::max<int64_t>(options.node_limit - search.nodes(), 0);
    return all ? left : left / 2 + 1;
  };
  const auto time_slice = [&](bool all) {
    const auto now = Clock::now();
    return all || now >= deadline ? deadline : now + (deadline - now) / 2;
  };
  int64_t lo = best.lower_bound;
  if (options.capacity >= 0 && best.height > options.capacity) {
    const Outcome outcome = search.decide(options.capacity, budget(!options.minimise), time_slice(!options.minimise));
    if (outcome != Outcome::Found) {
      const bool proven = outcome == Outcome::NotFound;
      throw BudgetError("the buffers do not fit the capacity of " + std::to_string(options.capacity) + " B (" +
                        (proven ? "proven: at least " + std::to_string(options.capacity + 1) + " B are needed"
                                : "none found within the search limits; lower bound " + std::to_string(lo) + " B") +
                        "); the smallest allocation found needs " + std::to_string(best.height) + " B");
    }
    adopt();
  }
  if (options.minimise) {
    int64_t aborted_at = -1;  // the highest capacity whose search ran out of budget
    while (lo < best.height && search.nodes() < options.node_limit && Clock::now() < deadline) {
      const int64_t capacity = aborted_at < lo ? lo : aborted_at + (best.height - aborted_at) / 2;
      if (capacity <= aborted_at || capacity >= best.height) break;
      const Outcome outcome = search.decide(capacity, budget(false), time_slice(false));
      if (outcome == Outcome::Found) adopt();
      if (outcome == Outcome::NotFound) lo = capacity + 1;
      if (outcome == Outcome::Aborted) aborted_at = capacity;
    }
  }
  best.lower_bound = std::min(lo, best.height);
  best.optimal = best.height == best.lower_bound;
  best.nodes = search.nodes();
  best.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return best;
}

}  // namespace cascader
