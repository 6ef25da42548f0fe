#include "cascader/memory/arena_layout.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "cascader/common/error.hpp"
#include "cascader/memory/exact_allocator.hpp"
#include "cascader/memory/greedy_allocator.hpp"
#include "cascader/memory/staircase.hpp"

namespace cascader {

namespace {

// The greedy layout's promotions (tied_greedy): per round, up to this many of the buffers that
// share time with the topmost one are each tried placed first; at most this many rounds.
constexpr size_t kPromotionCandidates = 8;
constexpr int kPromotionRounds = 4;

// Node budget of the exact fit check run once per eviction round: enough for real schedules
// (they fit within a few hundred nodes), small enough that many rounds stay fast.
constexpr int64_t kFitCheckNodes = 50'000;

// A layout within this fraction of its arena's peak live bytes is taken as it is: proving the
// last bytes can take the whole time limit (emza's SSD cascaded for least SRAM on U65-256:
// 67,432 B against a 67,400 B lower bound, 0.5 s per layout), and it ends on the clock, so
// the result could depend on the machine's speed.
constexpr int64_t kGoodEnoughDivisor = 1000;

int64_t align_up(int64_t x, int64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

// The ties whose two buffers are both among `members`, renumbered to positions in it.
std::vector<Tie> member_ties(const std::vector<Tie>& ties, const std::vector<size_t>& members, size_t n) {
  std::vector<int> position(n, -1);
  for (size_t k = 0; k < members.size(); ++k) position[members[k]] = int(k);
  std::vector<Tie> out;
  for (const Tie& t : ties) {
    if (position[size_t(t.lower)] >= 0 && position[size_t(t.upper)] >= 0) {
      out.push_back(Tie{position[size_t(t.lower)], position[size_t(t.upper)], t.offset});
    }
  }
  return out;
}

// The greedy layout with ties. Chained ties drift down by the sum of their offsets (each output
// below its input, the next output below that), so keeping every tie can cost more than it
// saves: MobileNetV1's stem chain at 8-row stripes drifts 15 KB, where placing one output
// above its input instead takes none. So: every subset keeping the ties below some offset (one
// per distinct offset, the empty one included), then, from the best, each tie dropped or
// restored in turn while that lowers the layout; each subset placed largest first and earliest
// first. Each try is two greedy layouts: a few ties make a few dozen. Last, while above the lower
// bound, promotions: a buffer sharing time with the topmost one (itself included), else one
// sharing time with a chain of ties one of those is in, placed before the rest, kept when that
// lowers the layout, and again from there. Largest first puts a chain
// of ties at the bottom and stacks a map that shares time with it on top: zoo ResNet-8's
// cascades on U55-128 within 35,840 B laid out in 35,664 B, in 33,744 B (the bound) with one
// promotion; Vela's Size SRAM layouts of MobileNetV2-224 on U55-128 357,184 -> 332,096 B.
Allocation tied_greedy(const std::vector<LiveRange>& ranges, const std::vector<Tie>& ties, bool promote = true) {
  // Every try lays out the same ranges: one placer keeps its memory across them. The ranges and
  // ties were validated by layout_arenas.
  GreedyPlacer placer;
  std::vector<Tie> kept;
  std::vector<int64_t> by_size, by_start;
  Allocation best;
  bool any = false;  // a layout is in `best`
  std::vector<char> keep(ties.size(), 1), best_keep = keep;
  // No subset of the ties lays out below this: once a layout reaches it, the rest are skipped.
  const int64_t lower = peak_live_bytes(ranges, ties);
  // Lays out with the ties of `mask` and keeps the result when lower than the best so far.
  std::vector<size_t> first;  // the promoted ranges, placed first
  auto run = [&](const std::vector<char>& mask) {
    if (any && best.height <= lower) return false;
    kept.clear();
    for (size_t k = 0; k < ties.size(); ++k) {
      if (mask[k]) kept.push_back(ties[k]);
    }
    // A layout that reaches the best height so far is given up where it does (`cutoff`): it
    // would not be kept. The layout by start then only has to beat the lower of the two.
    const int64_t cutoff = any ? best.height : std::numeric_limits<int64_t>::max();
    int64_t height = placer.place(ranges, GreedyFit::BestFit, kept, GreedyOrder::BySize, by_size, cutoff, first);
    std::vector<int64_t>* offsets = &by_size;
    if (!kept.empty()) {
      const int64_t start_height =
          placer.place(ranges, GreedyFit::BestFit, kept, GreedyOrder::ByStart, by_start, std::min(cutoff, height), first);
      if (start_height < height) height = start_height, offsets = &by_start;
    }
    if (any && height >= best.height) return false;
    any = true;
    best.height = height;
    best.offsets.swap(*offsets);
    return true;
  };
  run(keep);
  std::vector<int64_t> tie_offsets;
  for (const Tie& t : ties) tie_offsets.push_back(t.offset);
  std::sort(tie_offsets.begin(), tie_offsets.end());
  tie_offsets.erase(std::unique(tie_offsets.begin(), tie_offsets.end()), tie_offsets.end());
  for (size_t k = 0; k < tie_offsets.size(); ++k) {  // keep the ties of offset below tie_offsets[k]
    for (size_t i = 0; i < ties.size(); ++i) keep[i] = ties[i].offset < tie_offsets[k];
    if (run(keep)) best_keep = keep;
  }
  for (bool improved = true; improved;) {
    improved = false;
    for (size_t i = 0; i < ties.size(); ++i) {
      keep = best_keep;
      keep[i] = !keep[i];
      if (run(keep)) best_keep = keep, improved = true;
    }
  }
  // The chains of the ties kept (the promotions keep `best_keep`): a chain is placed as one
  // unit, so a range sharing time with any of its members bears on where it lands.
  std::vector<int> chain_of(ranges.size(), -1);
  std::vector<int64_t> chain_span;
  if (promote && best.height > lower) {
    kept.clear();
    for (size_t k = 0; k < ties.size(); ++k) {
      if (best_keep[k]) kept.push_back(ties[k]);
    }
    const auto chains = tie_chains(ranges, kept);
    for (size_t c = 0; c < chains.size(); ++c) {
      int64_t span = 0;
      for (const auto& [i, at] : chains[c]) chain_of[size_t(i)] = int(c), span = std::max(span, at + ranges[size_t(i)].size);
      chain_span.push_back(span);
    }
  }
  const auto bytes = [&](size_t i) { return chain_of[i] >= 0 ? chain_span[size_t(chain_of[i])] : ranges[i].size; };
  const auto same_unit = [&](size_t a, size_t b) { return a == b || (chain_of[a] >= 0 && chain_of[a] == chain_of[b]); };
  for (int round = 0; promote && round < kPromotionRounds && best.height > lower; ++round) {
    size_t top = 0;
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (ranges[i].size > 0 && ranges[i].end > ranges[i].start &&
          best.offsets[i] + ranges[i].size == best.height) {
        top = i;
        break;
      }
    }
    // The topmost range and those sharing time with it, largest first; when none of those
    // lowers the layout, those sharing time with a chain one of them is in, one per chain, the
    // chain's bytes its size: the topmost may sit on a chain that sits on a range it never
    // meets (zoo ds_cnn_kws's cascades on U55-128: a rolling buffer on the staircase chain of
    // the depthwise outputs, which sits on the first rolling buffer; that one placed first,
    // 12,656 -> 12,640 B, as the planner's proposal layout has it). Tried after the first
    // kind, they only lower layouts where those did not.
    std::vector<char> near(ranges.size(), 0), touched(chain_span.size(), 0);
    std::vector<size_t> candidates;
    for (size_t i = 0; i < ranges.size(); ++i) {
      near[i] = ranges[i].size > 0 && (i == top || overlaps_in_time(ranges[i], ranges[top]));
      if (near[i] && std::find(first.begin(), first.end(), i) == first.end()) candidates.push_back(i);
      if (near[i] && chain_of[i] >= 0) touched[size_t(chain_of[i])] = 1;
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](size_t a, size_t b) { return ranges[a].size > ranges[b].size; });
    if (candidates.size() > kPromotionCandidates) candidates.resize(kPromotionCandidates);
    std::vector<char> reached(ranges.size(), 0);
    for (size_t m = 0; m < ranges.size(); ++m) {
      if (chain_of[m] < 0 || !touched[size_t(chain_of[m])]) continue;
      for (size_t j = 0; j < ranges.size(); ++j) {
        if (!near[j] && ranges[j].size > 0 && overlaps_in_time(ranges[j], ranges[m])) reached[j] = 1;
      }
    }
    std::vector<size_t> further;
    for (size_t i = 0; i < ranges.size(); ++i) {
      const auto unit = [&](size_t j) { return same_unit(i, j); };
      if (!reached[i] || std::any_of(first.begin(), first.end(), unit) ||
          std::any_of(candidates.begin(), candidates.end(), unit) || std::any_of(further.begin(), further.end(), unit)) {
        continue;
      }
      further.push_back(i);
    }
    std::stable_sort(further.begin(), further.end(), [&](size_t a, size_t b) { return bytes(a) > bytes(b); });
    if (further.size() > kPromotionCandidates) further.resize(kPromotionCandidates);
    candidates.insert(candidates.end(), further.begin(), further.end());
    bool promoted = false;
    for (size_t c : candidates) {
      first.push_back(c);
      if (run(best_keep)) {
        promoted = true;
        break;
      }
      first.pop_back();
    }
    if (!promoted) break;
  }
  best.lower_bound = lower;
  best.optimal = best.height == lower;
  best.solver = "greedy-best-fit";
  return best;
}

// Lays out the buffers of one arena; `members` index into `buffers`. With ties, the greedy
// layout places them at their offsets and the exact one apart (it knows no ties); the lower
// one is kept, and the lower bound is the one with ties.
Allocation allocate_members(const std::vector<ArenaBuffer>& buffers, const std::vector<size_t>& members,
                            const MemoryConfig& config, const std::vector<Tie>& all_ties) {
  std::vector<LiveRange> ranges;
  for (size_t i : members) ranges.push_back(buffers[i].range);
  const std::vector<Tie> ties = member_ties(all_ties, members, buffers.size());
  if (!config.exact) return tied_greedy(ranges, ties);
  const int64_t lower = peak_live_bytes(ranges, ties);
  ExactOptions options;
  options.time_limit_s = config.time_limit_s;
  options.node_limit = config.node_limit;
  options.good_enough_bytes = lower / kGoodEnoughDivisor;
  if (ties.empty()) return exact_allocate(ranges, options);
  Allocation tied = tied_greedy(ranges, ties);
  // The exact search places every range apart: only worth running below the greedy's height,
  // and never to the clock (it cannot reach a bound that counts the ties' shared bytes, and a
  // search ended by time would make the layout depend on the machine).
  const int64_t apart_lower = peak_live_bytes(ranges);
  if (tied.height <= lower + options.good_enough_bytes || apart_lower >= tied.height) return tied;
  options.good_enough_bytes = apart_lower / kGoodEnoughDivisor;
  options.node_limit = kFitCheckNodes;
  Allocation apart = exact_allocate(ranges, options);
  Allocation& best = apart.height < tied.height ? apart : tied;
  best.lower_bound = lower;
  best.optimal = best.height == lower;
  return best;
}

// Linear layout for buffers alive for the whole run (persistent) or never written (flash).
int64_t lay_out_linearly(const std::vector<ArenaBuffer>& buffers, Arena which, ArenaLayout& layout) {
  int64_t cursor = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (layout.arena[i] != which) continue;
    cursor = align_up(cursor, buffers[i].range.alignment);
    layout.offset[i] = cursor;
    cursor += buffers[i].range.size;
  }
  return cursor;
}

}  // namespace

ArenaLayout layout_arenas(const std::vector<ArenaBuffer>& buffers, const MemoryConfig& config,
                          const std::vector<Tie>& ties) {
  std::vector<LiveRange> all;
  for (const ArenaBuffer& b : buffers) all.push_back(b.range);
  validate(all);
  validate(ties, all);
  ArenaLayout layout;
  layout.arena.assign(buffers.size(), Arena::Fast);
  layout.offset.assign(buffers.size(), 0);
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].slow_only && (buffers[i].constant || buffers[i].persistent)) {
      throw InvalidArgument("buffer " + std::to_string(i) + " cannot be both slow-only and persistent or constant");
    }
    if (buffers[i].constant) layout.arena[i] = Arena::Flash;
    else if (buffers[i].persistent) layout.arena[i] = Arena::Persistent;
    else if (buffers[i].slow_only) layout.arena[i] = Arena::Slow;
  }
  const double extra_per_byte = config.slow_cycles_per_byte - config.fast_cycles_per_byte;
  const auto members_of = [&](Arena which) {
    std::vector<size_t> members;
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (layout.arena[i] == which) members.push_back(i);
    }
    return members;
  };
  if (config.fast_capacity == 0) {
    // No byte fits: the rounds below would evict every evictable buffer with bytes, the
    // cheapest per byte first (ties by index), a layout each (palm detection's 952 buffers on
    // U65-256: 0.8 s). The same evictions in the same order, without the layouts.
    std::vector<size_t> order;
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (layout.arena[i] == Arena::Fast && buffers[i].evictable && buffers[i].range.size > 0) order.push_back(i);
    }
    const auto cost = [&](size_t i) {
      return buffers[i].access_bytes * extra_per_byte / static_cast<double>(buffers[i].range.size);
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost(a) < cost(b); });
    for (size_t i : order) {
      layout.arena[i] = Arena::Slow;
      layout.eviction_cycles += buffers[i].access_bytes * extra_per_byte;
    }
  }
  // Evict until the fast arena fits. Greedy decides who overflows (cheap and a valid witness);
  // the exact allocator then confirms the fit, and keeps evicting only if it cannot.
  while (config.fast_capacity >= 0) {
    const std::vector<size_t> fast = members_of(Arena::Fast);
    std::vector<LiveRange> ranges;
    for (size_t i : fast) ranges.push_back(buffers[i].range);
    // Without promotions: there is a witness per eviction round (palm detection's planner on
    // U65-256 took 16% longer with them); the final layout below promotes.
    const Allocation witness = tied_greedy(ranges, member_ties(ties, fast, buffers.size()), false);
    if (witness.height <= config.fast_capacity) break;
    if (config.exact && witness.lower_bound <= config.fast_capacity) {
      ExactOptions options;
      options.capacity = config.fast_capacity;
      options.minimise = false;
      options.time_limit_s = config.time_limit_s;
      options.node_limit = kFitCheckNodes;
      try {
        exact_allocate(ranges, options);
        break;
      } catch (const BudgetError&) {
        // no fit found: evict one more
      }
    }
    // Candidates: evictable buffers sharing time with a buffer that pokes above capacity. Those
    // are few: listed first, so that each candidate is checked against them only (a round was
    // quadratic in the fast buffers; MobileNetV2-224's least-SRAM compile on U65-256 evicts 10
    // to 24 buffers, a round each, from layouts of about 120).
    std::vector<size_t> over;
    for (size_t o = 0; o < fast.size(); ++o) {
      if (witness.offsets[o] + ranges[o].size > config.fast_capacity) over.push_back(o);
    }
    double best_cost = std::numeric_limits<double>::infinity();
    size_t victim = buffers.size();
    for (size_t a = 0; a < fast.size(); ++a) {
      const ArenaBuffer& cand = buffers[fast[a]];
      if (!cand.evictable || cand.range.size == 0) continue;
      const bool at_overflow = std::any_of(over.begin(), over.end(), [&](size_t o) {
        return o == a || overlaps_in_time(cand.range, ranges[o]);
      });
      if (!at_overflow) continue;
      const double cost = cand.access_bytes * extra_per_byte / static_cast<double>(cand.range.size);
      if (cost < best_cost) {
        best_cost = cost;
        victim = fast[a];
      }
    }
    if (victim == buffers.size()) {
      throw BudgetError("the on-chip buffers that cannot be evicted need " + std::to_string(witness.lower_bound) +
                        " B or more of fast memory, over its capacity of " + std::to_string(config.fast_capacity) +
                        " B; raise the fast capacity to at least that");
    }
    layout.arena[victim] = Arena::Slow;
    layout.eviction_cycles += buffers[victim].access_bytes * extra_per_byte;
  }
  for (Arena which : {Arena::Fast, Arena::Slow}) {
    const std::vector<size_t> members = members_of(which);
    const Allocation alloc = allocate_members(buffers, members, config, ties);
    for (size_t k = 0; k < members.size(); ++k) layout.offset[members[k]] = alloc.offsets[k];
    (which == Arena::Fast ? layout.fast_size : layout.slow_size) = alloc.height;
    (which == Arena::Fast ? layout.fast_lower_bound : layout.slow_lower_bound) = alloc.lower_bound;
  }
  if (config.fast_capacity >= 0 && layout.fast_size > config.fast_capacity) {
    // The final minimising search ran out of time above a fit the feasibility search had found.
    const std::vector<size_t> fast = members_of(Arena::Fast);
    std::vector<LiveRange> ranges;
    for (size_t i : fast) ranges.push_back(buffers[i].range);
    ExactOptions options;
    options.capacity = config.fast_capacity;
    options.minimise = false;
    options.time_limit_s = config.time_limit_s;
    options.node_limit = config.node_limit;
    const Allocation alloc = exact_allocate(ranges, options);
    for (size_t k = 0; k < fast.size(); ++k) layout.offset[fast[k]] = alloc.offsets[k];
    layout.fast_size = alloc.height;
  }
  if (config.slow_capacity >= 0 && layout.slow_size > config.slow_capacity) {
    throw BudgetError("the slow scratch arena needs " + std::to_string(layout.slow_size) +
                      " B, over its capacity of " + std::to_string(config.slow_capacity) + " B");
  }
  layout.persistent_size = lay_out_linearly(buffers, Arena::Persistent, layout);
  layout.flash_size = lay_out_linearly(buffers, Arena::Flash, layout);
  return layout;
}

}  // namespace cascader
