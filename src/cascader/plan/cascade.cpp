#include "cascader/plan/cascade.hpp"

#include <algorithm>
#include <unordered_map>

#include "cascader/common/error.hpp"

namespace cascader {

namespace {

constexpr int H = 1;  // the striped axis

Box rows_box(const PlanTensor& t, int64_t begin, int64_t end) {
  Box b;
  b.extent = t.shape;
  b.offset[H] = begin;
  b.extent[H] = end - begin;
  return b;
}

}  // namespace

double StripeCoster::cost(int k, int64_t begin, int64_t end, Weights weights) {
  const Part& p = graph_.parts[size_t(k)];
  const PlanTensor& out = graph_.tensors[size_t(p.output)];
  NpuOp op = p.op;
  if (p.weight_stream_bytes() == 0) weights = Weights::InPlace;
  if (weights == Weights::CopiedIn) op.weight_buffer_memory = graph_.weight_buffer_memory;
  if (weights == Weights::Buffered) op.weight_memory = graph_.weight_buffer_memory;
  if (begin == 0 && end == out.shape[H]) {
    const auto key = std::make_tuple(k, end, int64_t(-1), int64_t(-1), int(weights));
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    return cache_[key] = estimate(op, arch_, blocks_).total_cycles;
  }
  op.ofm.shape.h = int(end - begin);
  int64_t pad_top = 0, pad_bottom = 0;
  for (size_t i = 0; i < p.inputs.size() && i < 2; ++i) {
    if (i == 1 && !op.ifm2) break;
    const PlanTensor& in = graph_.tensors[size_t(p.inputs[i])];
    const Box want = p.propagators[i].propagate(rows_box(out, begin, end));
    const Box got = want.cropped(in.shape);
    FeatureMap& fm = i == 0 ? op.ifm : *op.ifm2;
    fm.shape.h = int(std::max<int64_t>(got.extent[H], 1));
    if (i == 0) {
      pad_top = got.offset[H] - want.offset[H];
      pad_bottom = (want.offset[H] + want.extent[H]) - (got.offset[H] + got.extent[H]);
    }
  }
  if (op.type == NpuOpType::Conv2D || op.type == NpuOpType::DepthwiseConv2D || op.type == NpuOpType::MaxPool ||
      op.type == NpuOpType::AvgPool) {
    op.padding.top = int(pad_top);
    op.padding.bottom = int(pad_bottom);
  }
  const auto key = std::make_tuple(k, end - begin, pad_top, pad_bottom, int(weights));
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  return cache_[key] = estimate(op, arch_, blocks_).total_cycles;
}

std::optional<CascadePlan> plan_cascade(const PlanGraph& graph, const PlanGraph::Uses& uses, int first, int last,
                                        int stripe_height, StripeCoster& coster, bool buffer_weights,
                                        bool record_runs) {
  if (first < 0 || last > int(graph.parts.size()) || first >= last || stripe_height < 1) {
    throw InvalidArgument("plan_cascade: parts [first, last) must be a non-empty range and stripe_height >= 1");
  }
  int64_t weight_bytes = 0;
  for (int k = first; k < last; ++k) weight_bytes += (graph.parts[size_t(k)].weight_stream_bytes() + 15) / 16 * 16;
  if (buffer_weights && weight_bytes == 0) return std::nullopt;
  using Weights = StripeCoster::Weights;
  std::vector<bool> copied(graph.parts.size(), false);
  // The first run of a part copies its weights in; later stripes read the buffer.
  auto weights_for = [&](int k) {
    if (!buffer_weights) return Weights::InPlace;
    if (copied[size_t(k)]) return Weights::Buffered;
    copied[size_t(k)] = true;
    return Weights::CopiedIn;
  };
  const Part& sink_part = graph.parts[size_t(last - 1)];
  const PlanTensor& sink = graph.tensors[size_t(sink_part.output)];
  const int64_t height = sink.shape[H];
  CascadePlan plan;
  plan.first = first;
  plan.last = last;
  plan.stripe_height = int(std::min<int64_t>(stripe_height, height));
  plan.stripes = int((height + plan.stripe_height - 1) / plan.stripe_height);
  plan.buffered_weights = buffer_weights;
  plan.weight_buffer_bytes = buffer_weights ? weight_bytes : 0;
  if (last - first == 1 || plan.stripes == 1) {
    // Parts run whole one after another: internal tensors are whole buffers.
    for (int k = first; k < last; ++k) {
      const int64_t rows = graph.tensors[size_t(graph.parts[size_t(k)].output)].shape[H];
      plan.cycles += coster.cost(k, 0, rows, weights_for(k));
      ++plan.operations;
      if (record_runs) plan.runs.push_back(StripeRun{k, 0, rows});
    }
    for (int k = first; k + 1 < last; ++k) {
      const int t = graph.parts[size_t(k)].output;
      if (uses.last[size_t(t)] < last) {
        plan.buffers.emplace_back(t, graph.tensors[size_t(t)].shape[H]);
        plan.buffer_bytes += graph.tensors[size_t(t)].bytes;
      }
    }
    // A tensor that escapes is whole anyway; only the ones that die inside count here.
    return plan;
  }
  // Internal tensors: produced by exactly one part in the cascade, read only inside it.
  std::unordered_map<int, int> internal;  // tensor -> its producer position
  for (int k = first; k < last; ++k) {
    const Part& p = graph.parts[size_t(k)];
    if (!p.stripable) return std::nullopt;
    if (k == last - 1) break;
    const int t = p.output;
    const auto& prod = uses.producers[size_t(t)];
    const auto& cons = uses.consumers[size_t(t)];
    const bool escapes = uses.last[size_t(t)] >= last ||
                         std::any_of(cons.begin(), cons.end(), [&](int c) { return c < first || c >= last; });
    if (escapes || prod.size() != 1 || !graph.tensors[size_t(t)].cascadable) return std::nullopt;
    internal[t] = k;
  }
  if (uses.producers[size_t(sink_part.output)].size() != 1) return std::nullopt;
  std::unordered_map<int, int64_t> done;  // rows [0, done) of each internal tensor computed
  std::unordered_map<int, int64_t> rows_held;
  std::vector<std::pair<int64_t, int64_t>> need(graph.tensors.size(), {0, 0});
  for (int s = 0; s < plan.stripes; ++s) {
    const int64_t b0 = int64_t(s) * plan.stripe_height, b1 = std::min(height, b0 + plan.stripe_height);
    for (auto& [t, _] : internal) need[size_t(t)] = {INT64_MAX, INT64_MIN};
    need[size_t(sink_part.output)] = {b0, b1};
    // Backwards: the rows each internal tensor must hold for this stripe.
    for (int k = last - 1; k >= first; --k) {
      const Part& p = graph.parts[size_t(k)];
      const auto [a, b] = need[size_t(p.output)];
      if (a >= b) continue;
      const PlanTensor& out = graph.tensors[size_t(p.output)];
      for (size_t i = 0; i < p.inputs.size(); ++i) {
        const int t = p.inputs[i];
        if (!internal.count(t)) continue;
        const Box r = p.propagators[i].propagate(rows_box(out, a, b)).cropped(graph.tensors[size_t(t)].shape);
        auto& [lo, hi] = need[size_t(t)];
        lo = std::min(lo, r.offset[H]);
        hi = std::max(hi, r.offset[H] + r.extent[H]);
      }
    }
    // Forwards: compute the rows not yet held; the sink's stripe always.
    for (int k = first; k < last; ++k) {
      const int t = graph.parts[size_t(k)].output;
      auto [a, b] = need[size_t(t)];
      if (k < last - 1) {
        if (a >= b) continue;
        rows_held[t] = std::max(rows_held[t], b - a);
        a = std::max(a, done[t]);
        if (a >= b) continue;
        done[t] = b;
      }
      plan.cycles += coster.cost(k, a, b, weights_for(k));
      ++plan.operations;
      if (record_runs) plan.runs.push_back(StripeRun{k, a, b});
    }
  }
  for (const auto& [t, rows] : rows_held) {
    plan.buffers.emplace_back(t, rows);
    plan.buffer_bytes += rows * graph.tensors[size_t(t)].row_bytes();
  }
  std::sort(plan.buffers.begin(), plan.buffers.end());
  return plan;
}

}  // namespace cascader
