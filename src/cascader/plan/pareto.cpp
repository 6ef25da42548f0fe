#include "cascader/plan/pareto.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "cascader/common/error.hpp"

namespace cascader {

std::vector<size_t> pareto_frontier(const std::vector<CostPoint>& points) {
  // The points themselves are sorted, by value rather than through indices into them, with their
  // index as the last key (so the first of equal points leads, as a stable sort would keep it).
  // NaN cycles would break the sort's ordering: refused.
  struct Keyed {
    int64_t memory;
    double cycles;
    size_t index;
  };
  std::vector<Keyed> order(points.size());
  for (size_t k = 0; k < points.size(); ++k) {
    if (std::isnan(points[k].cycles)) throw InvalidArgument("pareto_frontier: a point's cycles are NaN");
    order[k] = Keyed{points[k].memory, points[k].cycles, k};
  }
  std::sort(order.begin(), order.end(), [](const Keyed& a, const Keyed& b) {
    if (a.memory != b.memory) return a.memory < b.memory;
    if (a.cycles != b.cycles) return a.cycles < b.cycles;
    return a.index < b.index;
  });
  std::vector<size_t> front;
  double best = INFINITY;
  for (const Keyed& q : order) {
    if (front.empty() || q.cycles < best) {
      front.push_back(q.index);
      best = q.cycles;
    }
  }
  return front;
}

std::vector<size_t> thin_frontier(const std::vector<CostPoint>& points, const std::vector<size_t>& front, size_t keep) {
  if (front.size() <= keep || keep < 2) {
    return keep < 2 && !front.empty() ? std::vector<size_t>{front.front()} : front;
  }
  const size_t n = front.size();
  auto x = [&](size_t k) { return std::log(double(std::max<int64_t>(points[front[k]].memory, 1))); };
  auto y = [&](size_t k) { return std::log(std::max(points[front[k]].cycles, 1.0)); };
  std::vector<size_t> prev(n), next(n);
  std::vector<double> area(n, INFINITY);
  for (size_t k = 0; k < n; ++k) prev[k] = k - 1, next[k] = k + 1;
  auto triangle = [&](size_t k) {
    const size_t a = prev[k], c = next[k];
    return std::fabs((x(a) - x(k)) * (y(c) - y(k)) - (x(c) - x(k)) * (y(a) - y(k))) / 2;
  };
  std::set<std::pair<double, size_t>> queue;
  for (size_t k = 1; k + 1 < n; ++k) queue.emplace(area[k] = triangle(k), k);
  std::vector<bool> removed(n, false);
  for (size_t left = n; left > keep && !queue.empty(); --left) {
    const size_t k = queue.begin()->second;
    queue.erase(queue.begin());
    removed[k] = true;
    const size_t a = prev[k], c = next[k];
    next[a] = c;
    prev[c] = a;
    for (size_t j : {a, c}) {
      if (j == 0 || j == n - 1) continue;
      queue.erase({area[j], j});
      queue.emplace(area[j] = triangle(j), j);
    }
  }
  std::vector<size_t> out;
  for (size_t k = 0; k < n; ++k) {
    if (!removed[k]) out.push_back(front[k]);
  }
  return out;
}

}  // namespace cascader
