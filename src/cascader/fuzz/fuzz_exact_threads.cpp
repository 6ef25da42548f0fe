// Differential test of the exact allocator's threads (memory/exact_allocator.cpp), built with
// AddressSanitizer and UBSan (tests/test_sanitizers.py builds and runs it).
//
//   fuzz_exact_threads CASES SEED
//
// Each case draws ranges (mixed alignments) and decides them at their peak live bytes, or a
// little above, under a node limit, once on one thread and once on two (CASCADER_NUM_THREADS).
// From its second round the search runs a round's strategies in parallel, and must still give
// what one thread gives: the same outcome, node count and offsets, or the same error. Exits 1
// on the first disagreement, printing it; prints "ok CASES ROUNDS" otherwise, ROUNDS counting
// the cases whose search went past its first round (where the threads are used).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cascader/common/error.hpp"
#include "cascader/fuzz/driver_args.hpp"
#include "cascader/memory/allocation.hpp"
#include "cascader/memory/exact_allocator.hpp"
#include "cascader/memory/live_range.hpp"

namespace {

using cascader::LiveRange;

std::vector<LiveRange> random_ranges(std::mt19937_64& rng) {
  const int n = 20 + int(rng() % 60);
  const int64_t alignments[] = {1, 1, 16};
  std::vector<LiveRange> ranges(static_cast<size_t>(n));
  for (LiveRange& r : ranges) {
    r.start = int64_t(rng() % 40);
    r.end = r.start + 1 + int64_t(rng() % 10);
    r.size = 1 + int64_t(rng() % 64) * 16;
    r.alignment = alignments[rng() % 3];
  }
  return ranges;
}

// The allocation's offsets and nodes, or the error's message.
struct Result {
  std::string error;
  std::vector<int64_t> offsets;
  int64_t nodes = 0;
  bool operator!=(const Result& o) const { return error != o.error || offsets != o.offsets || nodes != o.nodes; }
};

Result decide(const std::vector<LiveRange>& ranges, const cascader::ExactOptions& options, const char* threads) {
  setenv("CASCADER_NUM_THREADS", threads, 1);
  Result out;
  try {
    const cascader::Allocation a = cascader::exact_allocate(ranges, options);
    out.offsets = a.offsets;
    out.nodes = a.nodes;
  } catch (const cascader::BudgetError& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<cascader::fuzz::DriverArgs> args = cascader::fuzz::driver_args(argc, argv);
  if (!args) return 2;
  const long cases = args->cases;
  std::mt19937_64& rng = args->rng;
  long past_first_round = 0;
  for (long c = 0; c < cases; ++c) {
    const std::vector<LiveRange> ranges = random_ranges(rng);
    cascader::ExactOptions options;
    options.capacity = cascader::peak_live_bytes(ranges) + int64_t(rng() % 3) * 16;
    options.minimise = rng() % 4 == 0;
    options.node_limit = 5'000 + int64_t(rng() % 60'000);
    options.time_limit_s = 600.0;  // the node limit ends every search: the result is defined
    const Result one = decide(ranges, options, "1");
    const Result two = decide(ranges, options, "2");
    if (one != two) {
      std::printf("case %ld: one thread gave %lld nodes%s%s, two gave %lld nodes%s%s\n", c, (long long)one.nodes,
                  one.error.empty() ? "" : ", error: ", one.error.c_str(), (long long)two.nodes,
                  two.error.empty() ? "" : ", error: ", two.error.c_str());
      return 1;
    }
    if (one.error.empty()) cascader::check_allocation(ranges, one.offsets);
    // The first round runs five strategies with 4 * max(64, n) nodes each (and one more node).
    const int64_t first_round = 5 * (4 * std::max<int64_t>(64, int64_t(ranges.size())) + 1);
    if (!one.error.empty() || one.nodes > first_round) ++past_first_round;
  }
  std::printf("ok %ld %ld\n", cases, past_first_round);
  return 0;
}
