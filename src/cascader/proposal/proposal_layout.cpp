#include "cascader/proposal/proposal_layout.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "cascader/common/error.hpp"
#include "cascader/common/parallel.hpp"
#include "cascader/memory/schedule_layout.hpp"

namespace cascader {

namespace {

// `b` without its name: what a layout reads of it (proposal_sram's schedules are laid out once
// and dropped; copying every buffer's name, and naming each rolling buffer, allocated for
// nothing).
ScheduledBuffer unnamed(const ScheduledBuffer& b) {
  // Every field but the name is copied: a field added to ScheduledBuffer must be added here.
  struct Fields {
    std::string name;
    BufferKind kind;
    int64_t size, alignment;
    bool persistent;
    double access_bytes;
    bool constant, cpu_visible;
  };
  static_assert(sizeof(Fields) == sizeof(ScheduledBuffer), "unnamed() copies every field of ScheduledBuffer");
  ScheduledBuffer out;
  out.kind = b.kind;
  out.size = b.size;
  out.alignment = b.alignment;
  out.persistent = b.persistent;
  out.access_bytes = b.access_bytes;
  out.constant = b.constant;
  out.cpu_visible = b.cpu_visible;
  return out;
}

}  // namespace

BufferSchedule proposal_schedule(const PlanGraph& graph, const std::vector<CascadePlan>& cascades,
                                 const BufferSchedule& uncascaded, bool named) {
  const size_t n = uncascaded.buffers.size();
  if (uncascaded.steps.size() != graph.parts.size() + 2) {
    throw InvalidArgument("the uncascaded schedule has " + std::to_string(uncascaded.steps.size()) +
                          " steps; the graph's " + std::to_string(graph.parts.size()) +
                          " parts need one each, between the inputs and outputs steps");
  }
  // Rolled tensors get no whole buffer; the rest keep theirs, renumbered in order.
  std::vector<int> position(n, 0);
  for (const CascadePlan& c : cascades) {
    for (const RollingBuffer& b : c.buffers) {
      if (b.tensor >= 0 && size_t(b.tensor) < n) position[size_t(b.tensor)] = -1;
    }
  }
  BufferSchedule out;
  for (size_t b = 0; b < n; ++b) {
    if (position[b] < 0) continue;
    position[b] = int(out.buffers.size());
    out.buffers.push_back(named ? uncascaded.buffers[b] : unnamed(uncascaded.buffers[b]));
  }
  // Tensors beyond the uncascaded buffers (a CPU part's empty output) and rolled ones drop out.
  const auto kept = [&](int t) { return t >= 0 && size_t(t) < n && position[size_t(t)] >= 0; };
  const auto renumbered = [&](const std::vector<int>& ids) {
    std::vector<int> out_ids;
    for (int t : ids) {
      if (kept(t)) out_ids.push_back(position[size_t(t)]);
    }
    std::sort(out_ids.begin(), out_ids.end());
    out_ids.erase(std::unique(out_ids.begin(), out_ids.end()), out_ids.end());
    return out_ids;
  };
  out.steps.push_back({{}, renumbered(uncascaded.steps.front().writes)});
  for (const CascadePlan& c : cascades) {
    if (c.first < 0 || c.last > int(graph.parts.size()) || c.first >= c.last) {
      throw InvalidArgument("a cascade of parts [" + std::to_string(c.first) + ", " + std::to_string(c.last) +
                            ") in a graph of " + std::to_string(graph.parts.size()));
    }
    std::unordered_set<int> held;
    for (const RollingBuffer& b : c.buffers) {
      if (b.tensor < 0 || size_t(b.tensor) >= graph.tensors.size()) {
        throw InvalidArgument("a rolling buffer of tensor " + std::to_string(b.tensor) + " in a graph of " +
                              std::to_string(graph.tensors.size()) + " tensors");
      }
      held.insert(b.tensor);
    }
    std::vector<int> reads, writes;
    for (int k = c.first; k < c.last; ++k) {
      const Part& part = graph.parts[size_t(k)];
      for (int t : part.inputs) {
        if (!held.count(t)) reads.push_back(t);
      }
      // Copies of broadcast constants are no part's tensor: read at the part's step.
      for (int t : uncascaded.steps[size_t(k) + 1].reads) {
        if (t >= 0 && size_t(t) < n && uncascaded.buffers[size_t(t)].kind == BufferKind::Copy) reads.push_back(t);
      }
      if (!held.count(part.output)) writes.push_back(part.output);
    }
    Step step{renumbered(reads), renumbered(writes)};
    for (const RollingBuffer& b : c.buffers) {
      ScheduledBuffer rolling;
      if (named) {
        rolling.name = graph.tensors[size_t(b.tensor)].name + " (rolling, " + std::to_string(b.rows) + "x" +
                       std::to_string(b.columns) + ")";
      }
      rolling.size = b.bytes;
      step.writes.push_back(int(out.buffers.size()));
      out.buffers.push_back(std::move(rolling));
    }
    if (c.weight_buffer_bytes) {
      ScheduledBuffer weights;
      if (named) weights.name = "cascade " + std::to_string(c.first) + ".." + std::to_string(c.last - 1) + " weights";
      weights.kind = BufferKind::Weights;
      weights.size = c.weight_buffer_bytes;
      // The DMA fills it under the operation before (a Weights buffer starts a step early); a
      // double buffer's second slot fills under the cascade itself, live there only (as
      // schedule.memory_schedule lays it out).
      ScheduledBuffer later;
      later.name = weights.name + " (second slot)";
      later.kind = BufferKind::Copy;
      later.size = c.weight_second_slot_bytes;
      for (ScheduledBuffer* b : {&weights, &later}) {
        if (b->size == 0) continue;
        step.writes.push_back(int(out.buffers.size()));
        out.buffers.push_back(std::move(*b));
      }
    }
    out.steps.push_back(std::move(step));
  }
  out.steps.push_back({renumbered(uncascaded.steps.back().reads), {}});

  std::unordered_set<int> alone;  // the first part of each one-part cascade
  for (const CascadePlan& c : cascades) {
    if (c.last - c.first == 1) alone.insert(c.first);
  }
  std::unordered_map<int, int> writer;  // tensor -> the last part writing it
  for (size_t k = 0; k < graph.parts.size(); ++k) writer[graph.parts[k].output] = int(k);
  std::unordered_map<int, int> joined;  // renumbered buffer -> the buffer its in-place alias uses
  std::vector<Alias> kept_staircases;   // a lone operation's OFM written over its IFM (a tie, no join)
  for (const Alias& a : uncascaded.aliases) {
    if (!kept(a.buffer) || !kept(a.target)) continue;
    const auto w = writer.find(a.buffer);
    if (w == writer.end() || !alone.count(w->second)) continue;
    Alias renamed = a;
    renamed.buffer = position[size_t(a.buffer)];
    renamed.target = position[size_t(a.target)];
    out.aliases.push_back(renamed);
    if (renamed.kind == AliasKind::Staircase) {
      kept_staircases.push_back(renamed);
    } else {
      joined[renamed.buffer] = renamed.target;
    }
  }
  const auto group = [&](int b) {
    for (auto it = joined.find(b); it != joined.end(); it = joined.find(b)) b = it->second;
    return b;
  };
  // A range is the sink of one staircase and the source of one: the kept ones count too (a
  // cascade's output written over the model input that a lone PRELU's OFM is also written
  // over tied that input twice, random network uint8 seed 1594 on U55-128).
  std::unordered_set<int> lowers, uppers;
  for (const Alias& a : kept_staircases) {
    lowers.insert(group(a.buffer));
    uppers.insert(group(a.target));
  }
  for (const CascadePlan& c : cascades) {
    const int sink = graph.parts[size_t(c.last - 1)].output, source = c.staircase_tensor;
    if (source < 0 || !kept(sink) || !kept(source)) continue;
    const int low = group(position[size_t(sink)]), up = group(position[size_t(source)]);
    if (low == up || lowers.count(low) || uppers.count(up)) continue;
    Alias staircase;
    staircase.buffer = position[size_t(sink)];
    staircase.target = position[size_t(source)];
    staircase.kind = AliasKind::Staircase;
    staircase.shift = c.staircase_shift;
    out.aliases.push_back(staircase);
    lowers.insert(low);
    uppers.insert(up);
  }
  return out;
}

int64_t proposal_sram(const PlanGraph& graph, const std::vector<CascadePlan>& cascades,
                      const BufferSchedule& uncascaded, const MemoryConfig& config) {
  try {
    return layout_schedule(proposal_schedule(graph, cascades, uncascaded, false), config).arenas.fast_size;
  } catch (const std::exception&) {  // again with the names its message may quote
    return layout_schedule(proposal_schedule(graph, cascades, uncascaded), config).arenas.fast_size;
  }
}

std::vector<int64_t> proposal_srams(const PlanGraph& graph, const std::vector<const Proposal*>& proposals,
                                    const BufferSchedule& uncascaded, const MemoryConfig& config) {
  for (const Proposal* p : proposals) {
    if (p == nullptr) throw InvalidArgument("proposal_srams: a proposal is missing (None)");
  }
  std::vector<int64_t> out(proposals.size());
  parallel_blocks(proposals.size(), 4, [&](size_t, size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) out[k] = proposal_sram(graph, proposals[k]->cascades, uncascaded, config);
  });
  return out;
}

std::vector<int64_t> undominated_srams(const PlanGraph& graph, const std::vector<const Proposal*>& proposals,
                                       std::vector<std::pair<double, int64_t>> settled, bool bounded,
                                       const BufferSchedule& uncascaded, const MemoryConfig& config) {
  if (!bounded) return proposal_srams(graph, proposals, uncascaded, config);
  for (const Proposal* p : proposals) {
    if (p == nullptr) throw InvalidArgument("undominated_srams: a proposal is missing (None)");
  }
  std::vector<size_t> order(proposals.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Proposal &x = *proposals[a], &y = *proposals[b];
    return x.cycles != y.cycles ? x.cycles < y.cycles : x.memory < y.memory;
  });
  std::vector<int64_t> out(proposals.size(), -1);
  for (size_t begin = 0; begin < order.size(); begin += kScoredAtOnce) {
    std::vector<size_t> batch;
    std::vector<const Proposal*> scored;
    for (size_t k = begin; k < std::min(order.size(), begin + kScoredAtOnce); ++k) {
      const Proposal& p = *proposals[order[k]];
      const bool dominated = std::any_of(settled.begin(), settled.end(), [&](const std::pair<double, int64_t>& d) {
        return d.first <= p.cycles && d.second < p.memory - 15;
      });
      if (!dominated) {
        batch.push_back(order[k]);
        scored.push_back(&p);
      }
    }
    const std::vector<int64_t> srams = proposal_srams(graph, scored, uncascaded, config);
    for (size_t i = 0; i < batch.size(); ++i) {
      out[batch[i]] = srams[i];
      settled.emplace_back(proposals[batch[i]]->cycles, srams[i]);
    }
  }
  return out;
}

std::unique_ptr<Pending<std::vector<int64_t>>> queue_undominated_srams(
    const PlanGraph& graph, std::vector<const Proposal*> proposals, std::vector<std::pair<double, int64_t>> settled,
    bool bounded, const BufferSchedule& uncascaded, const MemoryConfig& config) {
  return std::make_unique<Pending<std::vector<int64_t>>>(
      [&graph, proposals = std::move(proposals), settled = std::move(settled), bounded, &uncascaded, config] {
        return undominated_srams(graph, proposals, settled, bounded, uncascaded, config);
      });
}

}  // namespace cascader
