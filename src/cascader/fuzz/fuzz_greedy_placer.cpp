// Differential test of GreedyPlacer's cutoff (memory/greedy_allocator.hpp), built with
// AddressSanitizer and UBSan (tests/test_sanitizers.py builds and runs it).
//
//   fuzz_greedy_placer CASES SEED
//
// Each case draws ranges (some empty, mixed alignments) and chains of ties between them, lays
// them out with one placer without a cutoff, then again with cutoffs around and far from that
// height, with a random fit and order. A layout lower than its cutoff must come out
// exactly as without one (offsets and height); any other must report a height of at least the
// cutoff. The height without a cutoff must be the layout's allocation_height. Then the same
// ranges go through the kept placer with other ties (a subset, as an arena layout tries them)
// and both orders: each layout must be the one a new placer makes (the placer keeps the order
// of the ranges without ties from one call to the next). Exits 1 on the first disagreement,
// printing it; prints "ok CASES" otherwise.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <vector>

#include "cascader/fuzz/driver_args.hpp"
#include "cascader/memory/allocation.hpp"
#include "cascader/memory/greedy_allocator.hpp"
#include "cascader/memory/staircase.hpp"

namespace {

using cascader::GreedyFit;
using cascader::GreedyOrder;
using cascader::LiveRange;
using cascader::Tie;

std::vector<LiveRange> random_ranges(std::mt19937_64& rng) {
  const int n = 1 + int(rng() % 160);
  const int64_t alignments[] = {1, 16, 64};
  std::vector<LiveRange> ranges(static_cast<size_t>(n));
  for (LiveRange& r : ranges) {
    r.start = int64_t(rng() % 60);
    r.end = r.start + int64_t(rng() % 12);                        // some empty
    r.size = rng() % 10 == 0 ? 0 : 1 + int64_t(rng() % 4000);     // some of no size
    r.alignment = alignments[rng() % 3];
  }
  return ranges;
}

// Chains of ties over a random order of the ranges: each range is the lower and the upper of
// one tie at most, offsets are multiples of 64 (so of every alignment), and none closes a cycle.
std::vector<Tie> random_ties(std::mt19937_64& rng, size_t n) {
  std::vector<int> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = int(k);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<Tie> ties;
  for (size_t k = 0; k + 1 < n; ++k) {
    if (rng() % 3 == 0) ties.push_back(Tie{order[k], order[k + 1], 64 * int64_t(rng() % 40)});
  }
  return ties;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<cascader::fuzz::DriverArgs> args = cascader::fuzz::driver_args(argc, argv);
  if (!args) return 2;
  const long cases = args->cases;
  std::mt19937_64& rng = args->rng;
  cascader::GreedyPlacer placer;  // one for every case: its kept memory is part of what is tested
  std::vector<int64_t> full, cut;
  for (long c = 0; c < cases; ++c) {
    const std::vector<LiveRange> ranges = random_ranges(rng);
    const std::vector<Tie> ties = rng() % 2 ? random_ties(rng, ranges.size()) : std::vector<Tie>{};
    cascader::validate(ranges);
    cascader::validate(ties, ranges);
    const GreedyFit fit = rng() % 2 ? GreedyFit::BestFit : GreedyFit::FirstFit;
    const GreedyOrder order = rng() % 2 ? GreedyOrder::BySize : GreedyOrder::ByStart;
    const int64_t height = placer.place(ranges, fit, ties, order, full);
    if (height != cascader::allocation_height(ranges, full)) {
      std::printf("case %ld: height %lld, but the layout's is %lld\n", c, (long long)height,
                  (long long)cascader::allocation_height(ranges, full));
      return 1;
    }
    for (int64_t cutoff : {height + 1, height, height - 1, int64_t(1), int64_t(rng() % uint64_t(2 * height + 2))}) {
      const int64_t got = placer.place(ranges, fit, ties, order, cut, cutoff);
      if (height < cutoff ? got != height || cut != full : got < cutoff) {
        std::printf("case %ld: cutoff %lld gave height %lld; without it %lld\n", c, (long long)cutoff,
                    (long long)got, (long long)height);
        return 1;
      }
    }
    for (int round = 0; round < 3; ++round) {
      std::vector<Tie> some;
      for (const Tie& t : ties) if (rng() % 2) some.push_back(t);
      const GreedyOrder other = rng() % 2 ? GreedyOrder::BySize : GreedyOrder::ByStart;
      std::vector<int64_t> fresh;
      const int64_t kept_height = placer.place(ranges, fit, some, other, cut);
      const int64_t fresh_height = cascader::GreedyPlacer().place(ranges, fit, some, other, fresh);
      if (kept_height != fresh_height || cut != fresh) {
        std::printf("case %ld: the kept placer gave height %lld with %zu ties, a new one %lld\n", c,
                    (long long)kept_height, some.size(), (long long)fresh_height);
        return 1;
      }
    }
  }
  std::printf("ok %ld\n", cases);
  return 0;
}
