// Differential test of common/flat_map.hpp against std::unordered_map, built with
// AddressSanitizer and UBSan (tests/test_sanitizers.py builds and runs it).
//
//   fuzz_flat_map CASES SEED
//
// Each case inserts a random number of keys (from a small range, so that many lookups hit,
// and with a deliberately poor hash, so that probes collide and wrap) and looks up random
// keys after every insert: the two maps must agree on every lookup and on the size. Exits 1
// on the first disagreement, printing it; prints "ok CASES" otherwise.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <tuple>
#include <unordered_map>

#include "cascader/common/flat_map.hpp"
#include "cascader/fuzz/driver_args.hpp"

namespace {

using Key = std::tuple<int, int64_t>;

struct PoorHash {  // many keys share a hash: the probing, not the hash, must keep them apart
  size_t operator()(const Key& k) const { return size_t(std::get<0>(k) % 7); }
};

struct StdHash {
  size_t operator()(const Key& k) const { return std::hash<int64_t>{}(std::get<0>(k) * 1000003 + std::get<1>(k)); }
};

}  // namespace

int main(int argc, char** argv) {
  std::optional<cascader::fuzz::DriverArgs> args = cascader::fuzz::driver_args(argc, argv);
  if (!args) return 2;
  const long cases = args->cases;
  std::mt19937_64& rng = args->rng;
  for (long c = 0; c < cases; ++c) {
    cascader::FlatMap<Key, double, PoorHash> flat;
    std::unordered_map<Key, double, StdHash> reference;
    const int range = 1 + int(rng() % 400);
    const int inserts = int(rng() % 1000);
    for (int i = 0; i < inserts; ++i) {
      const Key key{int(rng() % range), int64_t(rng() % 3) - 1};
      const double value = double(rng() % 1000000) / 7;
      if (flat.find(key) == nullptr) {
        if (reference.count(key)) {
          std::printf("case %ld: a stored key is not found\n", c);
          return 1;
        }
        if (flat.insert(key, value) != value) {
          std::printf("case %ld: insert returned another value\n", c);
          return 1;
        }
        reference.emplace(key, value);
      }
      const Key probe{int(rng() % (range + 5)), int64_t(rng() % 3) - 1};
      const double* got = flat.find(probe);
      const auto want = reference.find(probe);
      if ((got == nullptr) != (want == reference.end()) || (got != nullptr && *got != want->second)) {
        std::printf("case %ld: lookup disagrees\n", c);
        return 1;
      }
    }
    if (flat.size() != reference.size()) {
      std::printf("case %ld: %zu entries, expected %zu\n", c, flat.size(), reference.size());
      return 1;
    }
  }
  std::printf("ok %ld\n", cases);
  return 0;
}
