#include "cascader/memory/exact_allocator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>

#include "cascader/common/error.hpp"
#include "cascader/common/parallel.hpp"
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
  std::vector<std::vector<int>> twins;     // per buffer: the others with the same lifetime
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
    twins.resize(buffers.size());
    for (size_t a = 0; a < buffers.size(); ++a) {
      for (size_t b = a + 1; b < buffers.size(); ++b) {
        if (first[a] < last[b] && first[b] < last[a]) {
          overlaps[a].push_back(static_cast<int>(b));
          overlaps[b].push_back(static_cast<int>(a));
        }
        if (first[a] == first[b] && last[a] == last[b]) {
          twins[a].push_back(static_cast<int>(b));
          twins[b].push_back(static_cast<int>(a));
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
struct Strategy {
  Preorder preorder;
  bool rerank;
  bool bottom_left;     // canonical order (offset, first section) instead of (offset, rank)
  bool right_to_left;   // bottom-left from the other end: (offset, -last section)
  bool largest_first = false;  // bottom-left: of the buffers starting at one place, by size
  int from_round = 1;          // the first round-robin round it runs in
};
// Bottom-left fills each level from one end, so a gap it passes over is known at once to stay
// empty at that offset, which prunes tight (near-perfect) packings that minimalloc's rank order
// explores deeply: with both directions it solves minimalloc's H and most generated perfect
// packings (python/cascader/memory_instances.py), which the rank orders miss. The last two
// swap the tie rule of the two bottom-left ones (largest first from the end, rank order from
// the start): alone each is weaker, but they solve other instances. They join from the third
// round: the instances they add need deep searches, and the quick ones keep their first two
// rounds (generated packings solved within 2 s: 129 -> 134 of 200, none of the 129 lost;
// minimalloc's A-G take the same nodes but E, 108,623 -> 136,145; joining from the first
// round solved one more packing but took F from 34,744 to 46,588 nodes, over a second).
constexpr Strategy kStrategies[] = {
    {Preorder::TWA, true, false, false},        {Preorder::TWA, false, true, false, true},
    {Preorder::TWA, false, true, true},         {Preorder::TAW, false, false, false},
    {Preorder::WAT, false, false, false},       {Preorder::TWA, false, true, true, true, 3},
    {Preorder::TWA, false, true, false, false, 3}};
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

// A buffer that may be placed next, at `offset`; candidates are tried in (offset, major,
// misfit, minor, rank) order, and placements happen in increasing (offset, major): major is the
// preorder rank (minimalloc) or, bottom-left, the first section (then the misfit, minor, the
// size largest first, and the rank break ties).
struct Candidate {
  int64_t offset;
  int major;
  int misfit;  // bottom-left: how badly the buffer fits its spot (Search::misfit)
  int64_t minor;
  int rank, buffer;
  bool operator<(const Candidate& o) const {
    return std::tie(offset, major, misfit, minor, rank) < std::tie(o.offset, o.major, o.misfit, o.minor, o.rank);
  }
};

// One strategy's decision search for one capacity. State changes are logged and undone on the
// way back, so the search allocates nothing per node beyond its candidate list.
class Search {
 public:
  explicit Search(const Sections& sec) : sec_(sec) {}

  const std::vector<int64_t>& solution() const { return solution_; }
  int64_t used() const { return nodes_ - run_start_; }  // the last run's nodes, its last one included
  bool timed_out() const { return timed_out_; }

  // Runs strategy `index` within `node_limit` nodes. It gives up (Aborted) past the deadline,
  // or once `winner` names a lower strategy index that has already decided.
  Outcome run(int index, int64_t capacity, int64_t node_limit, Clock::time_point deadline,
              const std::atomic<int>* winner = nullptr) {
    const Strategy& st = kStrategies[index];
    capacity_ = capacity;
    deadline_ = deadline;
    index_ = index;
    winner_ = winner;
    reset(st.preorder, st.rerank);
    bottom_left_ = st.bottom_left;
    largest_first_ = st.largest_first;
    right_to_left_ = st.right_to_left;
    run_start_ = nodes_;
    node_limit_ = nodes_ + node_limit;
    std::vector<int> all(sec_.buffers.size());
    std::iota(all.begin(), all.end(), 0);
    return solve_partition(all, 0, sec_.size());
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
    cancelled_ = false;
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
        const Outcome outcome = dfs(piece, piece_lo, k + 1, 0, std::numeric_limits<int>::min());
        for (size_t i = 0; i < piece.size(); ++i) rank_[static_cast<size_t>(piece[i])] = saved[i];
        if (outcome != Outcome::Found) return outcome;
      }
      piece_lo = k + 1;
    }
    return Outcome::Found;
  }

  Outcome dfs(const std::vector<int>& part, int lo, int hi, int64_t last_offset, int last_major) {
    if (++nodes_ > node_limit_) return Outcome::Aborted;
    if ((nodes_ & 255) == 0) {
      if (Clock::now() > deadline_) timed_out_ = true;
      if (winner_ != nullptr && winner_->load(std::memory_order_relaxed) < index_) cancelled_ = true;
    }
    if (timed_out_ || cancelled_) return Outcome::Aborted;
    int64_t min_top = std::numeric_limits<int64_t>::max();
    bool any = false;
    for (int b : part) {
      const auto ub = static_cast<size_t>(b);
      if (offset_[ub] >= 0) continue;
      any = true;
      min_top = std::min(min_top, min_offset_[ub] + sec_.buffers[ub].size);
    }
    if (!any) return Outcome::Found;
    // Only buffers that can go after the last placement in the canonical order (symmetry) and
    // below every unplaced buffer's lowest top (dominance) are candidates, sorted by that order.
    std::vector<Candidate>& candidates = candidates_at(depth_);
    candidates.clear();
    for (int b : part) {
      const auto ub = static_cast<size_t>(b);
      if (offset_[ub] >= 0) continue;
      const int64_t offset = min_offset_[ub];
      const int major = bottom_left_ ? (right_to_left_ ? -sec_.last[ub] : sec_.first[ub]) : rank_[ub];
      if (offset < last_offset || offset >= min_top || (offset == last_offset && major <= last_major)) continue;
      if (twin_breaks_order(b, offset)) continue;
      // Bottom-left from the start, of the buffers starting at the same place the largest is
      // tried first: in a tight packing a wrong small one there is found out only many levels
      // up. (Generated perfect packings solved within 400k nodes, seeds 100-199: 64 -> 73;
      // minimalloc's B 46,222 -> 870 nodes, C 62,687 -> 8,155, the others unchanged. From
      // the end, rank order stays: largest first there loses minimalloc's H.)
      const int64_t minor = largest_first_ ? -sec_.buffers[ub].size : 0;
      candidates.push_back({offset, major, bottom_left_ ? misfit(b, offset, lo, hi) : 0, minor, rank_[ub], b});
    }
    std::sort(candidates.begin(), candidates.end());
    ++depth_;
    for (const Candidate& c : candidates) {
      const int b = c.buffer;
      const size_t log_mark = offset_log_.size();
      const size_t floor_mark = floor_log_.size();
      const bool new_cut = place(b, c.offset);
      Outcome outcome = Outcome::NotFound;
      // Bottom-left, nothing more goes at this offset on the near side of b's start (or, right
      // to left, beyond its end).
      const int blocked_lo = bottom_left_ && right_to_left_ ? -c.major : lo;
      const int blocked_hi = bottom_left_ ? (right_to_left_ ? hi : c.major) : lo;
      if (feasible(lo, hi, c.offset, blocked_lo, blocked_hi)) {
        outcome = new_cut ? solve_partition(part, lo, hi) : dfs(part, lo, hi, c.offset, c.major);
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

  // Bottom-left, of the buffers that can start at one spot, those that fit it are tried first,
  // as a skyline packer would: 0 when the buffer's far end meets a wall (the section past it is
  // higher than this offset, or the range ends: the level's gap is filled exactly in time) and
  // its top is flush with the floor of the section before its near end, 1 at a wall only, 2
  // flush only, 3 neither. A wrong choice here leaves a sliver that is found out many levels
  // up. (Generated perfect packings solved within 2 s: 134 -> 138 of 200, 11 gained and 2
  // lost. minimalloc's A-G take the same nodes except C, 8,155 -> 62,687 (0.17 s), and D,
  // 20,250 -> 1,295. Counting a top flush with the wall too measured 136.)
  int misfit(int b, int64_t offset, int lo, int hi) const {
    const auto ub = static_cast<size_t>(b);
    const int64_t top = offset + sec_.buffers[ub].size;
    const int far = right_to_left_ ? sec_.first[ub] - 1 : sec_.last[ub];
    const int near = right_to_left_ ? sec_.last[ub] : sec_.first[ub] - 1;
    const bool wall = far < lo || far >= hi || floor_[static_cast<size_t>(far)] > offset;
    const bool flush = near >= lo && near < hi && floor_[static_cast<size_t>(near)] == top;
    return (wall ? 0 : 2) + (flush ? 0 : 1);
  }

  // Symmetry among buffers with the same lifetime. Of all allocations within capacity, the
  // search keeps finding one that minimises the sum of size x offset, and among those the
  // lexicographically least offsets, buffers listed by size (descending), then index. In it,
  // identical buffers are stacked in index order, and of two same-lifetime buffers stacked with
  // no gap, the lower is the larger (or the earlier of equal sizes): swapping such a pair keeps
  // the sum and, when the swap keeps alignment, lowers the order. (Moving any buffer down lowers
  // the sum, so that allocation is also canonical and survives the dominance rule.) Placing b
  // at `offset` is redundant if that breaks either rule.
  bool twin_breaks_order(int b, int64_t offset) const {
    const auto ub = static_cast<size_t>(b);
    const LiveRange& rb = sec_.buffers[ub];
    for (int c : sec_.twins[ub]) {
      const auto uc = static_cast<size_t>(c);
      const LiveRange& rc = sec_.buffers[uc];
      if (rc.size == rb.size && rc.alignment == rb.alignment) {
        if ((offset_[uc] >= 0) == (c > b)) return true;  // identical: placed in buffer order
        continue;
      }
      if (offset_[uc] < 0 || offset_[uc] + rc.size != offset || rc.alignment != rb.alignment) continue;
      if (rb.size % rb.alignment != 0 || rc.size % rc.alignment != 0) continue;
      if (rc.size < rb.size || (rc.size == rb.size && c > b)) return true;
    }
    return false;
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
  std::vector<Candidate>& candidates_at(size_t depth) { return candidate_pool_[depth]; }

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
  // the highest placed top there, the last offset (placements only go up; strictly above it in
  // the sections [blocked_lo, blocked_hi) that bottom-left has passed at this offset), and, where
  // a placement moved lowest offsets, the lowest of the unplaced buffers' lowest offsets.
  bool feasible(int lo, int hi, int64_t offset, int blocked_lo, int blocked_hi) const {
    for (int s = lo; s < hi; ++s) {
      const auto us = static_cast<size_t>(s);
      const int64_t above = blocked_lo <= s && s < blocked_hi ? 1 : 0;
      const int64_t bottom = std::max(floor_[us], unplaced_[us] == 0 ? 0 : offset + above);
      if (bottom + unplaced_[us] > capacity_) return false;
    }
    const int t_lo = std::max(lo, touched_lo_);
    const int t_hi = std::min(hi, touched_hi_);
    for (int s = t_lo; s < t_hi; ++s) {
      const auto us = static_cast<size_t>(s);
      if (unplaced_[us] == 0) continue;
      const int64_t headroom = capacity_ - unplaced_[us];  // highest floor that still fits
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
  int64_t run_start_ = 0;
  int64_t node_limit_ = 0;
  bool timed_out_ = false;
  int index_ = 0;
  const std::atomic<int>* winner_ = nullptr;
  bool cancelled_ = false;
  size_t depth_ = 0;
  std::vector<std::vector<Candidate>> candidate_pool_;
  bool bottom_left_ = false;
  bool right_to_left_ = false;
  bool largest_first_ = false;
  Preorder preorder_ = Preorder::WAT;
  bool rerank_ = false;
  std::vector<int> rank_;
  std::vector<int64_t> offset_, min_offset_, solution_, floor_, unplaced_;
  std::vector<int> crossing_;
  int touched_lo_ = 0, touched_hi_ = 0;
  std::vector<std::pair<int, int64_t>> offset_log_, floor_log_;
};

// Decides a capacity with the strategies round-robin under a node limit that grows each round.
// From the second round a round's strategies run on the cores a compile may use (core_count)
// when the node budget covers all of them: the decision is the lowest strategy's that decides,
// and the nodes counted are those of it and the strategies before it, so the result and the
// count are what one thread running them in order gives (the threads only end sooner in wall
// time; past the deadline, as on one thread, what is found depends on the machine's speed).
class Portfolio {
 public:
  explicit Portfolio(const Sections& sec) : sec_(sec) {}

  int64_t nodes() const { return nodes_; }
  const std::vector<int64_t>& solution() const { return solution_; }

  Outcome decide(int64_t capacity, int64_t node_budget, Clock::time_point deadline) {
    const int64_t budget_end = nodes_ + node_budget;
    timed_out_ = false;
    int64_t limit = std::max<int64_t>(64, static_cast<int64_t>(sec_.buffers.size()));
    for (int round = 1;; ++round) {
      limit *= kLimitGrowth;
      std::vector<int> strategies;
      for (int i = 0; i < static_cast<int>(std::size(kStrategies)); ++i) {
        if (round >= kStrategies[i].from_round) strategies.push_back(i);
      }
      const bool covered = budget_end - nodes_ >= (limit + 1) * static_cast<int64_t>(strategies.size());
      if (round >= 2 && covered && core_count() > 1) {
        const Outcome outcome = decide_round_in_parallel(strategies, capacity, limit, deadline);
        if (outcome != Outcome::Aborted) return outcome;
        if (timed_out_) return Outcome::Aborted;
        continue;
      }
      Search& search = worker(0);
      for (int i : strategies) {
        const Outcome outcome = search.run(i, capacity, std::min(limit, budget_end - nodes_), deadline);
        nodes_ += search.used();
        if (outcome != Outcome::Aborted) {
          solution_ = search.solution();
          return outcome;
        }
        if (nodes_ >= budget_end || search.timed_out()) return Outcome::Aborted;
      }
    }
  }

 private:
  Outcome decide_round_in_parallel(const std::vector<int>& strategies, int64_t capacity, int64_t limit,
                                   Clock::time_point deadline) {
    const size_t n = strategies.size();
    std::vector<Outcome> outcomes(n, Outcome::Aborted);
    std::vector<int64_t> used(n, 0);
    std::vector<std::vector<int64_t>> solutions(n);
    std::vector<char> timed_out(n, 0);
    std::atomic<int> winner{std::numeric_limits<int>::max()};  // the lowest strategy that decided
    for (size_t w = 0; w < worker_count(n, 1); ++w) worker(w);  // made here: the threads only use them
    parallel_blocks(n, 1, [&](size_t w, size_t k, size_t) {
      const int index = strategies[k];
      if (winner.load() < index) return;
      Search& search = *workers_[w];
      outcomes[k] = search.run(strategies[k], capacity, limit, deadline, &winner);
      used[k] = search.used();
      timed_out[k] = search.timed_out();
      if (outcomes[k] == Outcome::Aborted) return;
      solutions[k] = search.solution();
      for (int seen = winner.load(); index < seen && !winner.compare_exchange_weak(seen, index);) {
      }
    });
    // Strategy runs are independent of each other: each one's outcome within `limit` nodes is
    // the same whichever thread ran it, and none before the winner was cut short.
    for (size_t k = 0; k < n; ++k) {
      nodes_ += used[k];
      if (outcomes[k] != Outcome::Aborted) {
        solution_ = std::move(solutions[k]);
        return outcomes[k];
      }
      if (timed_out[k]) timed_out_ = true;
    }
    return Outcome::Aborted;
  }

  Search& worker(size_t w) {
    while (workers_.size() <= w) workers_.push_back(std::make_unique<Search>(sec_));
    return *workers_[w];
  }

  const Sections& sec_;
  std::vector<std::unique_ptr<Search>> workers_;
  std::vector<int64_t> solution_;
  int64_t nodes_ = 0;
  bool timed_out_ = false;
};

}  // namespace

Allocation exact_allocate(const std::vector<LiveRange>& ranges, const ExactOptions& options) {
  const auto t0 = Clock::now();
  if (options.node_limit < 0 || options.time_limit_s < 0 || options.good_enough_bytes < 0) {
    throw InvalidArgument("node_limit, time_limit_s and good_enough_bytes must be >= 0");
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
  Portfolio search(sections);
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
    while (lo + options.good_enough_bytes < best.height && search.nodes() < options.node_limit &&
           Clock::now() < deadline) {
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
