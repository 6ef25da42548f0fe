#include "cascader/proposal/proposal.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <tuple>

#include "cascader/common/error.hpp"
#include "cascader/common/parallel.hpp"
#include "cascader/plan/pareto.hpp"

namespace cascader {

std::string Proposal::repr() const {
  int cascaded = 0;
  for (const CascadePlan& c : cascades) cascaded += c.last - c.first > 1 && (c.stripes > 1 || c.depth_slices > 1);
  std::ostringstream s;
  s << "Proposal(" << cascades.size() << " groups, " << cascaded << " cascaded; " << memory << " B, "
    << static_cast<int64_t>(cycles) << " cycles)";
  return s.str();
}

int64_t shared_tensor_bytes(const PlanGraph& graph, const PlanGraph::Uses& uses, const CascadePlan& plan) {
  const Part& sink = graph.parts[size_t(plan.last - 1)];
  const int64_t out = graph.tensors[size_t(sink.output)].bytes;
  if (plan.staircase_tensor >= 0) {
    const int64_t in = graph.tensors[size_t(plan.staircase_tensor)].bytes;
    return std::max<int64_t>(0, std::min(in, out - plan.staircase_shift));
  }
  // An elementwise operation run alone writes over an operand of its size read for the last
  // time there (schedule.py: _in_place_elementwise), model inputs and outputs aside, and only
  // where TFLM sees both or neither.
  auto io = [&](int t) {
    return std::find(graph.inputs.begin(), graph.inputs.end(), t) != graph.inputs.end() ||
           std::find(graph.outputs.begin(), graph.outputs.end(), t) != graph.outputs.end();
  };
  if (plan.last - plan.first == 1 && is_elementwise(sink.op.type) && !io(sink.output)) {
    for (int t : sink.inputs) {
      const PlanTensor& operand = graph.tensors[size_t(t)];
      if (uses.last[size_t(t)] == plan.first && operand.bytes == out && !io(t) &&
          operand.cpu_visible == graph.tensors[size_t(sink.output)].cpu_visible) {
        return out;
      }
    }
  }
  return 0;
}

int64_t cascade_memory(const PlanGraph& graph, const PlanGraph::Uses& uses, const CascadePlan& plan) {
  // A cascade holds a dozen rolling buffers at most: a linear search beats a hash set here
  // (the DP calls this for every plan it makes).
  auto held = [&](int t) {
    return std::any_of(plan.buffers.begin(), plan.buffers.end(), [t](const RollingBuffer& b) { return b.tensor == t; });
  };
  int64_t bytes = plan.buffer_bytes + plan.weight_buffer_bytes;
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    if (uses.first[t] > plan.last - 1 || uses.last[t] < plan.first || held(int(t))) continue;
    bytes += graph.tensors[t].bytes;
  }
  return bytes - shared_tensor_bytes(graph, uses, plan);
}

int64_t cascade_end_memory(const PlanGraph& graph, const PlanGraph::Uses& uses, const CascadePlan& plan) {
  auto held = [&](int t) {
    return std::any_of(plan.buffers.begin(), plan.buffers.end(), [t](const RollingBuffer& b) { return b.tensor == t; });
  };
  const int k = plan.last - 1;
  int64_t bytes = plan.buffer_bytes + plan.weight_buffer_bytes;
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    if (uses.first[t] > k || uses.last[t] < k || held(int(t))) continue;
    bytes += graph.tensors[t].bytes;
  }
  return bytes - shared_tensor_bytes(graph, uses, plan);
}

namespace {

constexpr int kMaxBandedStripeHeight = 1;

struct Variant {
  int stripe_height;
  bool buffer_weights;
  int column_bands;
  int depth_slices = 1;  // > 1: a depth-sliced cascade (plan_depth_cascade), every part whole in H and W
};

// Every stripe height and column banding with the weights read where they live; a part run
// alone may also copy them into SRAM first (as the scheduler chose), and a cascade of row
// stripes may keep its parts' weights in SRAM across its stripes instead of re-reading them
// from flash for every stripe.
std::vector<Variant> variants(const std::vector<int>& heights, const std::vector<int>& bands, bool alone) {
  std::vector<Variant> out;
  for (int h : heights) {
    if (alone) {
      out.push_back(Variant{h, false, 1});
      // Its weights copied into SRAM first, whatever its height: an operation of one output row
      // (a fully connected layer, an LSTM gate) is the one whose weights dominate its cost
      // (zoo fc_autoencoder on U65-256: 60,307 cycles reading them from DRAM, 42,640 buffered).
      out.push_back(Variant{h, true, 1});
      continue;
    }
    // Column bands are for the least memory, which one-row stripes give anyway: banding taller
    // stripes changed no least SRAM on the shared models (MobileNetV2-224, movenet, person
    // detection, VWW) and took the DP from 48 to 108 ms on MobileNetV2-224.
    for (int b : bands) {
      if (b == 1 || h <= kMaxBandedStripeHeight) out.push_back(Variant{h, false, b});
    }
    // Weights kept across stripes: for the faster end, so not with one-row stripes (those are
    // for the least memory, where the buffers' bytes count most; dropping them kept
    // MobileNetV2-224's frontier and took its DP from 58 to 53 ms).
    if (h > 1) out.push_back(Variant{h, true, 1});
  }
  return out;
}

struct Partial {
  int64_t memory = 0;
  double cycles = 0;
  int from = -1;     // prefix end this one extends (-1: the empty prefix)
  int parent = -1;   // index in the frontier at `from`
  int plan = -1;     // index into the plans table
};

// Adds extension `q` to a prefix's frontier `stair` (memory rising, cycles falling). An arrival
// that one already there weakly dominates is dropped, so of equal points the first stays, and
// it drops those it dominates: the set, and the order, pareto_frontier gives over all arrivals.
// Kept this way the DP neither stores nor sorts the dominated ones (MobileNetV2-224: 3,070 of
// 117,859 extensions survive; sorting them all was half of the DP's own instructions).
void add_to_frontier(std::vector<Partial>& stair, const Partial& q) {
  auto pos = std::upper_bound(stair.begin(), stair.end(), q.memory,
                              [](int64_t memory, const Partial& s) { return memory < s.memory; });
  if (pos != stair.begin() && std::prev(pos)->cycles <= q.cycles) return;
  // An entry of the same memory has more cycles (or it would have dominated q): q replaces it,
  // and the entries after q's place that are no faster than q.
  auto first = pos != stair.begin() && std::prev(pos)->memory == q.memory ? std::prev(pos) : pos;
  auto last = pos;
  while (last != stair.end() && last->cycles >= q.cycles) ++last;
  if (first == last) {
    stair.insert(first, q);
  } else {
    *first = q;
    stair.erase(first + 1, last);
  }
}

}  // namespace

std::vector<Proposal> generate_proposals(const PlanGraph& graph, const ArchConfig& arch,
                                         const ProposalOptions& options) {
  graph.validate();
  if (options.max_cascade_parts < 1 || options.max_proposals < 2 || options.column_bands.empty() ||
      *std::min_element(options.column_bands.begin(), options.column_bands.end()) < 1 ||
      std::any_of(options.depth_slices.begin(), options.depth_slices.end(), [](int d) { return d < 1; })) {
    throw InvalidArgument(
        "generate_proposals: max_cascade_parts must be >= 1, max_proposals >= 2, column_bands and depth_slices "
        "positive");
  }
  const int n = int(graph.parts.size());
  if (n == 0) return {Proposal{}};
  const PlanGraph::Uses uses = graph.uses();
  // Every cascade the DP may extend a prefix by, in the order it does: planned first, on
  // every core (each cascade's plan depends on the graph alone), then taken in that order.
  struct Candidate {
    int first, last;
    Variant variant;
  };
  std::vector<Candidate> candidates;
  // Cascades of several parts that end at the same part with the same variant are planned
  // together (plan_cascades: one simulation for every first part); a part alone is its own
  // group. A group's candidates have consecutive first parts, in the order of `members`.
  struct Group {
    int first_lo, first_hi, last;
    Variant variant;
    std::vector<size_t> members;
  };
  std::vector<Group> groups;
  std::vector<std::vector<int>> group_of(size_t(n) + 1);  // per last part and variant
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j <= std::min(n, i + options.max_cascade_parts); ++j) {
      const int64_t height = graph.tensors[size_t(graph.parts[size_t(j - 1)].output)].shape[1];
      std::vector<int> heights{int(height)};
      if (j - i > 1) {
        for (int h : options.stripe_heights) {
          if (h >= 1 && h < height) heights.push_back(h);
        }
      }
      const std::vector<Variant> vs = variants(heights, options.column_bands, j - i == 1);
      std::vector<int>& slots = group_of[size_t(j)];
      if (j - i > 1) slots.resize(vs.size(), -1);
      for (size_t v = 0; v < vs.size(); ++v) {
        candidates.push_back({i, j, vs[v]});
        const bool joins = j - i > 1 && slots[v] >= 0;
        if (!joins) {
          if (j - i > 1) slots[v] = int(groups.size());
          groups.push_back(Group{i, i, j, vs[v], {}});
        }
        Group& g = groups[joins ? size_t(slots[v]) : groups.size() - 1];
        g.first_hi = i;
        g.members.push_back(candidates.size() - 1);
      }
      // Depth-sliced cascades: each its own group (no simulation to share), and only where the
      // graph allows one (most ranges have a convolution reading an internal tensor).
      if (j - i > 1 && !options.depth_slices.empty() && depth_sliceable(graph, uses, i, j)) {
        for (int d : options.depth_slices) {
          if (d < 2) continue;
          candidates.push_back({i, j, Variant{int(height), false, 1, d}});
          groups.push_back(Group{i, i, j, candidates.back().variant, {candidates.size() - 1}});
        }
      }
    }
  }
  struct Planned {
    std::optional<CascadePlan> plan;
    int64_t memory = 0, end_memory = 0;  // cascade_memory, cascade_end_memory
  };
  std::vector<Planned> planned(candidates.size());
  // Neighbouring cascades share most of their stripe costs: a cost cache per worker, and blocks
  // of a sixth of the groups, so that each worker's cache sees few parts (two workers on
  // MobileNetV2-224: 8.1-9.0 ms; blocks of an eighth, 10.1 ms; blocks of 64 single cascades,
  // before groups, had every worker's cache see every part).
  const size_t block = std::max<size_t>(8, groups.size() / 6);
  // (Their block configs are the graph's: a stripe shape's block is chosen once, not per worker.)
  std::vector<std::unique_ptr<StripeCoster>> costers;
  for (size_t w = 0; w < worker_count(groups.size(), block); ++w) {
    costers.push_back(std::make_unique<StripeCoster>(graph, arch));
  }
  parallel_blocks(groups.size(), block, [&](size_t worker, size_t begin, size_t end) {
    for (size_t g = begin; g < end; ++g) {
      const Group& group = groups[g];
      std::vector<std::optional<CascadePlan>> plans =
          group.variant.depth_slices > 1
              ? std::vector<std::optional<CascadePlan>>{plan_depth_cascade(
                    graph, uses, group.first_lo, group.last, group.variant.depth_slices, *costers[worker])}
              : plan_cascades(graph, uses, group.first_lo, group.first_hi, group.last, group.variant.stripe_height,
                              *costers[worker], group.variant.buffer_weights, group.variant.column_bands);
      for (size_t k = 0; k < plans.size(); ++k) {
        Planned& out = planned[group.members[k]];
        out.plan = std::move(plans[k]);
        if (!out.plan) continue;
        out.memory = cascade_memory(graph, uses, *out.plan);
        out.end_memory = cascade_end_memory(graph, uses, *out.plan);
      }
    }
  });
  std::vector<CascadePlan> plans;
  std::vector<int64_t> plan_memory, end_memory;
  std::vector<std::vector<Partial>> front(size_t(n) + 1);
  front[0].push_back(Partial{});
  size_t c = 0;
  for (int i = 0; i < n; ++i) {
    for (; c < candidates.size() && candidates[c].first == i; ++c) {
      if (front[size_t(i)].empty() || !planned[c].plan) continue;
      const int j = candidates[c].last;
      const int id = int(plans.size());
      plan_memory.push_back(planned[c].memory);
      end_memory.push_back(planned[c].end_memory);
      plans.push_back(std::move(*planned[c].plan));
      const int64_t prefetch = plans.back().weight_buffer_bytes;
      // front[i] is a frontier: memory rising, cycles falling. Without a prefetch, every base
      // within the cascade's own memory extends to that same memory, so only the fastest of them
      // (the last) and any extension exactly as fast can make the next frontier: the others are
      // dominated, and sorting them out was a fifth of the planner.
      int first_base = 0;
      if (prefetch == 0) {
        const std::vector<Partial>& bases = front[size_t(i)];
        int last = 0;
        while (last + 1 < int(bases.size()) && bases[size_t(last) + 1].memory <= plan_memory.back()) ++last;
        const double fastest = bases[size_t(last)].cycles + plans.back().cycles;
        first_base = last;
        while (first_base > 0 && bases[size_t(first_base) - 1].cycles + plans.back().cycles == fastest) --first_base;
      }
      for (int p = first_base; p < int(front[size_t(i)].size()); ++p) {
        const Partial& base = front[size_t(i)][size_t(p)];
        int64_t memory = std::max(base.memory, plan_memory.back());
        // The weight buffer is filled while the operation before the cascade runs.
        if (prefetch > 0 && base.plan >= 0) memory = std::max(memory, end_memory[size_t(base.plan)] + prefetch);
        add_to_frontier(front[size_t(j)], Partial{memory, base.cycles + plans.back().cycles, i, p, id});
      }
    }
    // Thin every frontier the moment it is final (all its extensions came from earlier i).
    auto& next = front[size_t(i) + 1];
    std::vector<CostPoint> points;
    points.reserve(next.size());
    for (const Partial& q : next) points.push_back(CostPoint{q.memory, q.cycles});
    std::vector<size_t> all(next.size());
    std::iota(all.begin(), all.end(), size_t{0});
    std::vector<Partial> kept;
    for (size_t k : thin_frontier(points, all, options.max_proposals)) kept.push_back(next[k]);
    next = std::move(kept);
  }
  std::vector<Proposal> out;
  for (const Partial& end : front[size_t(n)]) {
    Proposal prop;
    prop.memory = end.memory;
    prop.cycles = end.cycles;
    for (const Partial* q = &end; q->from >= 0; q = &front[size_t(q->from)][size_t(q->parent)]) {
      prop.cascades.push_back(plans[size_t(q->plan)]);
    }
    std::reverse(prop.cascades.begin(), prop.cascades.end());
    out.push_back(std::move(prop));
  }
  return out;
}

std::vector<Proposal> without_weight_buffers(const PlanGraph& graph, const ArchConfig& arch,
                                             const std::vector<Proposal>& proposals) {
  graph.validate();
  const PlanGraph::Uses uses = graph.uses();
  StripeCoster coster(graph, arch);
  // Proposals share most of their cascades: each is planned once.
  using Key = std::tuple<int, int, int, int, int>;  // first, last, stripe height, column bands, depth slices
  std::map<Key, std::optional<std::pair<CascadePlan, int64_t>>> planned;
  std::vector<Proposal> out;
  for (const Proposal& p : proposals) {
    const bool buffers = std::any_of(p.cascades.begin(), p.cascades.end(),
                                     [](const CascadePlan& c) { return c.buffered_weights; });
    if (!buffers) continue;
    Proposal lean;
    bool complete = true;
    for (const CascadePlan& c : p.cascades) {
      const Key key{c.first, c.last, c.stripe_height, c.column_bands, c.depth_slices};
      auto it = planned.find(key);
      if (it == planned.end()) {
        std::optional<CascadePlan> plan =
            c.buffered_weights ? plan_cascade(graph, uses, c.first, c.last, c.stripe_height, coster, false, false,
                                              c.column_bands)
                               : std::optional<CascadePlan>(c);
        std::optional<std::pair<CascadePlan, int64_t>> entry;
        if (plan) entry.emplace(*plan, cascade_memory(graph, uses, *plan));
        it = planned.emplace(key, std::move(entry)).first;
      }
      if (!it->second) {  // no plan without the buffer (the planner makes none such)
        complete = false;
        break;
      }
      lean.cascades.push_back(it->second->first);
      lean.memory = std::max(lean.memory, it->second->second);
      lean.cycles += it->second->first.cycles;
    }
    if (complete) out.push_back(std::move(lean));
  }
  return out;
}

}  // namespace cascader
