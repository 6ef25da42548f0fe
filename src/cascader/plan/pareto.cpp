#include "cascader/plan/pareto.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace cascader {

std::vector<size_t> pareto_frontier(const std::vector<CostPoint>& points) {
  std::vector<size_t> order(points.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return points[a].memory != points[b].memory ? points[a].memory < points[b].memory
                                                : points[a].cycles < points[b].cycles;
  });
  std::vector<size_t> front;
  for (size_t i : order) {
    if (front.empty() || points[i].cycles < points[front.back()].cycles) front.push_back(i);
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
