#include "cascader/perf/eviction_shares.hpp"

#include <bitset>
#include <vector>

#include "cascader/perf/cycle_model.hpp"

namespace cascader {

namespace {

FeatureMap* operand(NpuOp& op, int k) {
  if (k == 0) return &op.ifm;
  if (k == 1) return op.ifm2 ? &*op.ifm2 : nullptr;
  return &op.ofm;
}

double factorial(int n) {
  double f = 1;
  for (int k = 2; k <= n; ++k) f *= k;
  return f;
}

}  // namespace

std::array<std::optional<double>, 3> eviction_shares(const NpuOp& op, const ArchConfig& arch, MemoryArea home,
                                                     MemoryArea slow, double base_cycles) {
  NpuOp moved = op;
  std::vector<int> players;  // operand numbers in the fast memory, in IFM, IFM2, OFM order
  for (int k = 0; k < 3; ++k) {
    const FeatureMap* f = operand(moved, k);
    if (f != nullptr && f->memory == home) players.push_back(k);
  }
  const int n = static_cast<int>(players.size());
  // gain[mask]: cycles gained with the players whose bits are set in the slow memory.
  std::array<double, 8> gain{};
  for (int mask = 1; mask < (1 << n); ++mask) {
    for (int p = 0; p < n; ++p) operand(moved, players[static_cast<size_t>(p)])->memory = (mask >> p & 1) ? slow : home;
    gain[static_cast<size_t>(mask)] = estimate(moved, arch).total_cycles - base_cycles;
  }
  std::array<std::optional<double>, 3> shares;
  for (int p = 0; p < n; ++p) {
    // Coalitions of the others by size, each size in lexicographic order: a fixed order of the
    // additions, so that a share is the same to the last bit on every build (the layout ranks
    // evictions by them).
    std::vector<int> others;
    for (int q = 0; q < n; ++q) {
      if (q != p) others.push_back(q);
    }
    double share = 0.0;
    const int m = static_cast<int>(others.size());
    for (int size = 0; size < n; ++size) {
      const double weight = factorial(size) * factorial(n - size - 1) / factorial(n);
      for (int subset = 0; subset < (1 << m); ++subset) {
        if (static_cast<int>(std::bitset<3>(static_cast<unsigned>(subset)).count()) != size) continue;
        int group = 0;
        for (int j = 0; j < m; ++j) {
          if (subset >> j & 1) group |= 1 << others[static_cast<size_t>(j)];
        }
        share += weight * (gain[static_cast<size_t>(group | 1 << p)] - gain[static_cast<size_t>(group)]);
      }
    }
    shares[static_cast<size_t>(players[static_cast<size_t>(p)])] = share > 0.0 ? share : 0.0;
  }
  return shares;
}

}  // namespace cascader
