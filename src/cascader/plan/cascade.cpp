#include "cascader/plan/cascade.hpp"

#include <algorithm>
#include <array>
#include <tuple>
#include <sstream>

#include "cascader/common/error.hpp"
#include "cascader/memory/staircase.hpp"

namespace cascader {

namespace {

constexpr int H = 1, W = 2;  // the striped axes
constexpr int C = 3;         // the sliced axis of a depth-sliced cascade
constexpr int64_t kSliceGranule = 16;  // channels: a brick's depth, so every slice starts on one

Box region_box(const PlanTensor& t, int64_t begin, int64_t end, int64_t column_begin, int64_t column_end) {
  Box b;
  b.extent = t.shape;
  b.offset[H] = begin;
  b.extent[H] = end - begin;
  b.offset[W] = column_begin;
  b.extent[W] = column_end - column_begin;
  return b;
}

Box region_box(const PlanTensor& t, const RowsColumns& r) {
  return region_box(t, r.begin, r.end, r.column_begin, r.column_end);
}

bool is_window(NpuOpType t) {
  return t == NpuOpType::Conv2D || t == NpuOpType::DepthwiseConv2D || t == NpuOpType::MaxPool ||
         t == NpuOpType::AvgPool;
}

}  // namespace

namespace {

// Rows and columns of a tensor, as a union accumulates them (empty until something is added).
struct Extent {
  int64_t begin = INT64_MAX, end = INT64_MIN, column_begin = INT64_MAX, column_end = INT64_MIN;
  bool empty() const { return begin >= end; }
};

// plan_cascade's steady state. After the first stripes, and until the bottom edge, a cascade's
// stripe is usually the previous one moved down: every part computes the same number of rows,
// each tensor's rows shifted by its own amount (the sink's by the stripe height, an input by its
// propagator's scale times its reader's). Nothing in a stripe's simulation depends on where it
// is except the cropping at the tensors' edges, so once two stripes differ by such a shift and
// nothing is cropped, the stripes after them repeat it up to where a read would reach an edge.
class SteadyState {
 public:
  // Forgets the previous stripe: a new band of a cascade of `parts` parts whose internal
  // tensors `internal` flags (the caller keeps it alive while this is used). The vectors keep
  // their memory from one cascade to the next.
  void reset(int parts, const std::vector<char>& internal) {
    cost.assign(size_t(parts), 0.0);
    ran.assign(size_t(parts), 0);
    shift_.assign(size_t(parts), 0);
    // Not cleared: every entry is_shifted reads it wrote first, for this stripe.
    if (tensor_shift_.size() < internal.size()) tensor_shift_.resize(internal.size());
    internal_ = &internal;
    have_previous_ = false;
  }

  std::vector<double> cost;  // this stripe's cycles per part (when it ran)
  std::vector<char> ran;     // whether each part ran in this stripe

  // Rows part `first + k`'s output moves per repeated stripe (valid after repeats() > 0).
  int64_t part_shift(int k) const { return shift_[size_t(k)]; }

  // After stripe `s` is simulated: how many of the next stripes are stripe `s` shifted again
  // (0 when that is not proven). Remembers stripe `s` for the next call.
  int64_t repeats(const PlanGraph& graph, int first, int last, int s, int64_t stripe_height, int64_t height,
                  const std::vector<Extent>& computed, const std::vector<int>& internal_tensors,
                  const std::vector<int64_t>& done, const std::vector<int64_t>& first_read,
                  const std::vector<std::vector<int64_t>>& last_read) {
    const bool shifted = have_previous_ && is_shifted(graph, first, last, stripe_height, computed, internal_tensors,
                                                      done, first_read, last_read);
    // The snapshot keeps the internal tensors' rows only, in the order of `internal_tensors`
    // (copying whole per-tensor vectors every stripe cost the DP a tenth of its time).
    previous_computed_ = computed;
    previous_cost_ = cost;
    previous_done_.resize(internal_tensors.size());
    previous_first_read_.resize(internal_tensors.size());
    for (size_t j = 0; j < internal_tensors.size(); ++j) {
      previous_done_[j] = done[size_t(internal_tensors[j])];
      previous_first_read_[j] = first_read[size_t(internal_tensors[j])];
    }
    previous_last_read_ = last_read;
    have_previous_ = true;
    if (!shifted) return 0;
    // Stripes s + 1 .. s + m must be whole, and every region they read inside its tensor.
    int64_t m = height / stripe_height - 1 - s;
    for (int k = first; k < last && m > 0; ++k) {
      const Part& p = graph.parts[size_t(k)];
      const Extent& r = computed[size_t(k - first)];
      const PlanTensor& out = graph.tensors[size_t(p.output)];
      for (size_t i = 0; i < p.inputs.size(); ++i) {
        const Propagator& q = p.propagators[i];
        const Box want = q.propagate(region_box(out, r.begin, r.end, r.column_begin, r.column_end));
        // The rows it may read: the tensor's, or a box's (AxisMap::lo, hi).
        const int64_t rows = std::min(graph.tensors[size_t(p.inputs[i])].shape[H], q.axes[H].hi);
        const int64_t end = want.offset[H] + want.extent[H];
        if (want.offset[H] < std::max<int64_t>(0, q.axes[H].lo) || end > rows) return 0;
        const int64_t step = q.axes[H].scale * shift_[size_t(k - first)];
        if (step > 0) m = std::min(m, (rows - end) / step);
      }
    }
    return std::max<int64_t>(m, 0);
  }

  // Moves the simulation's state `m` stripes on (see repeats).
  void advance(int64_t m, std::vector<int64_t>& done, std::vector<std::vector<int64_t>>& last_read,
               const PlanGraph& graph, const std::vector<int>& internal_tensors, int first, int last) {
    for (size_t j = 0; j < internal_tensors.size(); ++j) {
      const int t = internal_tensors[j];
      done[size_t(t)] += m * tensor_shift_[size_t(t)];
      previous_done_[j] += m * tensor_shift_[size_t(t)];
      previous_first_read_[j] += m * tensor_shift_[size_t(t)];
    }
    for (int k = first; k < last; ++k) {
      const Part& p = graph.parts[size_t(k)];
      Extent& r = previous_computed_[size_t(k - first)];
      r.begin += m * shift_[size_t(k - first)];
      r.end += m * shift_[size_t(k - first)];
      for (size_t i = 0; i < p.inputs.size(); ++i) {
        const int t = p.inputs[i];
        if (!is_internal(t)) continue;
        last_read[size_t(k - first)][i] += m * tensor_shift_[size_t(t)];
        previous_last_read_[size_t(k - first)][i] += m * tensor_shift_[size_t(t)];
      }
    }
  }

 private:
  bool is_internal(int t) const { return size_t(t) < internal_->size() && (*internal_)[size_t(t)]; }

  // Whether this stripe is the previous one shifted: every part ran in both, as many rows and
  // the same columns and cycles, and every internal tensor's rows (written, first read, each
  // reader's last read) moved by one amount that agrees with every propagator reading it.
  bool is_shifted(const PlanGraph& graph, int first, int last, int64_t stripe_height,
                  const std::vector<Extent>& computed, const std::vector<int>& internal_tensors,
                  const std::vector<int64_t>& done, const std::vector<int64_t>& first_read,
                  const std::vector<std::vector<int64_t>>& last_read) {
    for (int k = first; k < last; ++k) {
      const Extent& r = computed[size_t(k - first)];
      const Extent& q = previous_computed_[size_t(k - first)];
      if (r.empty() || q.empty() || r.column_begin != q.column_begin || r.column_end != q.column_end) return false;
      const int64_t shift = r.begin - q.begin;
      if (shift <= 0 || r.end - q.end != shift || cost[size_t(k - first)] != previous_cost_[size_t(k - first)]) {
        return false;
      }
      shift_[size_t(k - first)] = shift;
      tensor_shift_[size_t(graph.parts[size_t(k)].output)] = shift;
    }
    if (shift_[size_t(last - 1 - first)] != stripe_height) return false;
    for (int k = first; k < last; ++k) {
      const Part& p = graph.parts[size_t(k)];
      for (size_t i = 0; i < p.inputs.size(); ++i) {
        const int t = p.inputs[i];
        if (!is_internal(t)) continue;
        const int64_t shift = tensor_shift_[size_t(t)];
        if (p.propagators[i].axes[H].scale * shift_[size_t(k - first)] != shift ||
            last_read[size_t(k - first)][i] - previous_last_read_[size_t(k - first)][i] != shift) {
          return false;
        }
      }
    }
    for (size_t j = 0; j < internal_tensors.size(); ++j) {
      const int t = internal_tensors[j];
      const int64_t shift = tensor_shift_[size_t(t)];
      if (done[size_t(t)] - previous_done_[j] != shift) return false;
      const bool read = first_read[size_t(t)] != INT64_MAX, was_read = previous_first_read_[j] != INT64_MAX;
      if (read != was_read || (read && first_read[size_t(t)] - previous_first_read_[j] != shift)) return false;
    }
    return true;
  }

  bool have_previous_ = false;
  std::vector<Extent> previous_computed_;
  std::vector<double> previous_cost_;
  std::vector<int64_t> previous_done_, previous_first_read_;  // per internal tensor, in order
  std::vector<std::vector<int64_t>> previous_last_read_;
  std::vector<int64_t> shift_;         // per part of the cascade: rows its output moved
  std::vector<int64_t> tensor_shift_;  // per tensor: rows it moved (internal ones and the sink)
  const std::vector<char>* internal_ = nullptr;
};

// Padding (top, left, bottom, right) where the region an operation wants of its input reaches
// past the input's edges: `got` is `want` cropped to the input. The NPU reads the bottom and
// right padding only as far as its windows reach, so those are never negative.
Padding edge_padding(const Box& want, const Box& got) {
  Padding pad;
  pad.top = int(got.offset[H] - want.offset[H]);
  pad.left = int(got.offset[W] - want.offset[W]);
  pad.bottom = int(std::max<int64_t>((want.offset[H] + want.extent[H]) - (got.offset[H] + got.extent[H]), 0));
  pad.right = int(std::max<int64_t>((want.offset[W] + want.extent[W]) - (got.offset[W] + got.extent[W]), 0));
  return pad;
}

// The padding of an upscaling operation's stripe, counted in the upscaled input: `got` (the
// stored rows and columns it reads, cropped to `shape`) starts at its first stored row's place
// there, and the upscaled input ends at the stored ones' end. The zero rows a transposed
// convolution's window starts on are padding.
Padding upscaled_padding(const Propagator& p, const Box& out, const Box& got, const std::array<int64_t, 4>& shape) {
  Box want = p.upscaled(out), placed = got;
  for (int i : {H, W}) {
    const int64_t d = p.axes[size_t(i)].divisor;
    placed.offset[size_t(i)] = got.offset[size_t(i)] * d;
    placed.extent[size_t(i)] = std::max<int64_t>(std::min(want.offset[size_t(i)] + want.extent[size_t(i)],
                                                          shape[size_t(i)] * d) - placed.offset[size_t(i)], 0);
  }
  return edge_padding(want, placed);
}

}  // namespace

StripeInputs stripe_inputs(const PlanGraph& graph, int k, const RowsColumns& out, int inputs) {
  const Part& p = graph.parts[size_t(k)];
  const PlanTensor& o = graph.tensors[size_t(p.output)];
  StripeInputs in;
  in.count = std::min(int(p.inputs.size()), inputs);
  for (int i = 0; i < in.count; ++i) {
    const Propagator& q = p.propagators[size_t(i)];
    const auto& shape = graph.tensors[size_t(p.inputs[size_t(i)])].shape;
    const Box want = q.propagate(region_box(o, out));
    const Box got = q.readable(want, shape);
    in.regions[size_t(i)] = RowsColumns{got.offset[H], got.offset[H] + got.extent[H], got.offset[W],
                                        got.offset[W] + got.extent[W]};
    if (i + p.first_operand == 0) {  // the IFM's padding
      in.padding = q.upscales() ? upscaled_padding(q, region_box(o, out), got, shape) : edge_padding(want, got);
    }
  }
  return in;
}

std::string CascadePlan::repr() const {
  std::ostringstream s;
  s << "CascadePlan(parts " << first << ".." << last - 1 << ": ";
  if (last - first == 1 || stripes == 1) {
    s << "whole";
  } else {
    s << stripes << " stripes of " << stripe_height << " rows";
    if (column_bands > 1) s << " x " << column_bands << " column bands";
  }
  if (depth_slices > 1) s << ", " << depth_slices << " depth slices of " << slice_depth << " channels";
  s << ", " << buffer_bytes << " B rolling";
  if (staircase_tensor >= 0) s << ", over tensor " << staircase_tensor << " " << staircase_shift << " B below";
  if (buffered_weights) s << ", " << weight_buffer_bytes << " B of weights buffered";
  s << ", " << static_cast<int64_t>(cycles) << " cycles)";
  return s.str();
}

size_t StripeCoster::KeyHash::operator()(const Key& k) const {
  // The DP looks up every (part, region) it evaluates: a hash keeps that off its profile.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(uint64_t(std::get<0>(k)));
  mix(uint64_t(std::get<1>(k)));
  mix(uint64_t(std::get<2>(k)));
  mix(uint64_t(std::get<3>(k)));
  mix(uint64_t(std::get<4>(k)));
  mix(uint64_t(std::get<5>(k)));
  mix(uint64_t(std::get<6>(k)));
  mix(uint64_t(std::get<7>(k)));
  return size_t(h);
}

double StripeCoster::cost(int k, int64_t begin, int64_t end, Weights weights, int64_t column_begin,
                          int64_t column_end) {
  const Part& p = graph_.parts[size_t(k)];
  const PlanTensor& out = graph_.tensors[size_t(p.output)];
  if (column_end < 0) column_end = out.shape[W];
  if (p.weight_stream_bytes() == 0) weights = Weights::InPlace;
  // The operation is copied and costed only on a cache miss: most lookups hit.
  auto costed = [&](const Key& key, auto&& adjust) {
    if (const double* hit = cache_.find(key)) return *hit;
    NpuOp op = p.op;
    if (weights == Weights::CopiedIn) op.weight_buffer_memory = graph_.weight_buffer_memory;
    if (weights == Weights::Buffered) op.weight_memory = graph_.weight_buffer_memory;
    adjust(op);
    return cache_.insert(key, estimate(op, arch_, blocks_).total_cycles);
  };
  if (begin == 0 && end == out.shape[H] && column_begin == 0 && column_end == out.shape[W]) {
    if (weights == Weights::InPlace && p.whole_cycles >= 0) return p.whole_cycles;
    return costed(Key{k, end, column_end, -1, -1, -1, -1, int(weights)}, [](NpuOp&) {});
  }
  // The cost needs the regions of the operands the operation has (an input beyond them, e.g.
  // a constant, has no feature map to size).
  // As stripe_inputs, for the operands the operation has (an input beyond them, e.g. a
  // constant, has no feature map to size), inline: this is the DP's innermost loop.
  Padding pad;
  std::array<std::pair<int, int>, 2> input_hw{};  // the inputs' regions, height and width
  const size_t operands = p.op.ifm2 ? 2 : 1, first = size_t(p.first_operand);
  const size_t inputs = std::min<size_t>(p.inputs.size(), operands > first ? operands - first : 0);
  for (size_t i = 0; i < inputs; ++i) {
    const PlanTensor& in = graph_.tensors[size_t(p.inputs[i])];
    const Propagator& q = p.propagators[i];
    const Box region = region_box(out, begin, end, column_begin, column_end);
    const Box want = q.propagate(region);
    const Box got = q.readable(want, in.shape);
    input_hw[i] = {int(std::max<int64_t>((got.extent[H] - 1) / q.axes[H].step + 1, 1)),
                   int(std::max<int64_t>((got.extent[W] - 1) / q.axes[W].step + 1, 1))};
    if (q.upscales()) {
      // An upscaled IFM is described by the extent the operation walks over in the upscaled
      // input, its padding apart, as cascader.schedule describes it.
      const Padding up = upscaled_padding(q, region, got, in.shape);
      const Box walked = q.upscaled(region);
      input_hw[i] = {int(std::max<int64_t>(walked.extent[H] - up.top - up.bottom, 1)),
                     int(std::max<int64_t>(walked.extent[W] - up.left - up.right, 1))};
      if (i + first == 0) pad = up;
    } else if (q.permutes()) {
      // A transpose's copy reads its input in its output's shape (the IFM a permuted view).
      input_hw[i] = {int(end - begin), int(column_end - column_begin)};
    } else if (i + first == 0) {
      pad = edge_padding(want, got);
    }
  }
  const Key key{k, end - begin, column_end - column_begin, pad.top, pad.bottom, pad.left, pad.right, int(weights)};
  return costed(key, [&](NpuOp& op) {
    op.ofm.shape.h = int(end - begin);
    op.ofm.shape.w = int(column_end - column_begin);
    for (size_t i = 0; i < inputs; ++i) {
      FeatureMap& fm = i + first == 0 ? op.ifm : *op.ifm2;
      std::tie(fm.shape.h, fm.shape.w) = input_hw[i];
    }
    // A constant operand as tall and wide as the OFM (a channel pad's border, a 1x1 resize's
    // zeros) is read region for region: a stripe reads its own rows and columns of it.
    for (size_t slot = 0; slot < operands; ++slot) {
      if (slot >= first && slot < first + inputs) continue;
      FeatureMap& fm = slot == 0 ? op.ifm : *op.ifm2;
      if (fm.shape.h == p.op.ofm.shape.h && fm.shape.w == p.op.ofm.shape.w) {
        fm.shape.h = op.ofm.shape.h;
        fm.shape.w = op.ofm.shape.w;
      }
    }
    if (is_window(op.type)) op.padding = pad;
  });
}

double StripeCoster::cost_channels(int k, int64_t channels) {
  const Part& p = graph_.parts[size_t(k)];
  const PlanTensor& out = graph_.tensors[size_t(p.output)];
  const int64_t depth = std::max<int64_t>(out.shape[C], 1);
  // Keyed apart from cost()'s regions: a negative row count names a channel slice.
  const Key key{k, -channels, 0, 0, 0, 0, 0, int(Weights::InPlace)};
  if (const double* hit = cache_.find(key)) return *hit;
  NpuOp op = p.op;
  op.ofm.shape.c = int(channels);
  const size_t operands = p.op.ifm2 ? 2 : 1, first = size_t(p.first_operand);
  const size_t inputs = std::min<size_t>(p.inputs.size(), operands > first ? operands - first : 0);
  for (size_t i = 0; i < inputs; ++i) {
    if (!channel_local(p.propagators[i])) continue;
    FeatureMap& fm = i + first == 0 ? op.ifm : *op.ifm2;
    fm.shape.c = int(channels);
  }
  // Streams are per output channel: a slice's share of them, rounded up.
  op.weight_bytes = (p.op.weight_bytes * channels + depth - 1) / depth;
  op.scale_bytes = (p.op.scale_bytes * channels + depth - 1) / depth;
  return cache_.insert(key, estimate(op, arch_, blocks_).total_cycles);
}

bool channel_local(const Propagator& p) {
  const AxisMap& m = p.axes[size_t(C)];
  return m.scale == 1 && m.extent_bias == 0 && m.offset_bias == 0 && m.divisor == 1;
}

bool depth_sliceable(const PlanGraph& graph, const PlanGraph::Uses& uses, int first, int last) {
  if (last - first < 2) return false;
  // The first part reads every channel of an input (a convolution's weights and full-width
  // rows): a cascade of channel-by-channel parts only stripes as well by rows and columns,
  // and sliced ties them in the planner's bound while laying out in more (zoo transformer_block's
  // elementwise chains: 4,688 B against 4,624).
  const Part& head = graph.parts[size_t(first)];
  if (std::all_of(head.propagators.begin(), head.propagators.end(), channel_local)) return false;
  const Part& sink_part = graph.parts[size_t(last - 1)];
  const int64_t depth = graph.tensors[size_t(sink_part.output)].shape[C];
  if (depth <= kSliceGranule || uses.producers[size_t(sink_part.output)].size() != 1) return false;
  for (int k = first; k < last; ++k) {
    const Part& p = graph.parts[size_t(k)];
    if (!p.channel_sliceable) return false;
    if (k == last - 1) break;
    const int t = p.output;
    const PlanTensor& tensor = graph.tensors[size_t(t)];
    const auto& cons = uses.consumers[size_t(t)];
    if (!tensor.cascadable || uses.producers[size_t(t)].size() != 1 || tensor.shape[C] != depth ||
        uses.last[size_t(t)] >= last || std::any_of(cons.begin(), cons.end(), [&](int c) { return c <= k || c >= last; })) {
      return false;
    }
  }
  // The internal tensors are the outputs of parts first .. last - 2 (each written once).
  for (int k = first + 1; k < last; ++k) {
    const Part& p = graph.parts[size_t(k)];
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const auto& prod = uses.producers[size_t(p.inputs[i])];
      const bool internal = !prod.empty() && prod.front() >= first && prod.front() < last - 1;
      if (internal && !channel_local(p.propagators[i])) return false;
    }
  }
  return true;
}

std::optional<CascadePlan> plan_depth_cascade(const PlanGraph& graph, const PlanGraph::Uses& uses, int first,
                                              int last, int depth_slices, StripeCoster& coster, bool record_runs) {
  if (first < 0 || last > int(graph.parts.size()) || first >= last || depth_slices < 1) {
    throw InvalidArgument("plan_depth_cascade: parts [first, last) must be a non-empty range and depth_slices >= 1");
  }
  if (depth_slices < 2 || !depth_sliceable(graph, uses, first, last)) return std::nullopt;
  const PlanTensor& sink = graph.tensors[size_t(graph.parts[size_t(last - 1)].output)];
  const int64_t depth = sink.shape[C];
  const int64_t slice = (depth + depth_slices - 1) / depth_slices;
  const int64_t slice_depth = (slice + kSliceGranule - 1) / kSliceGranule * kSliceGranule;
  // Another count of slices of the same depth is that count's cascade, not this one.
  if ((depth + slice_depth - 1) / slice_depth != depth_slices) return std::nullopt;
  // A part whose weights are encoded for a fixed OFM block depth computes whole blocks of it,
  // in the last (shallower) slice too.
  const int64_t last_slice = depth - (depth_slices - 1) * slice_depth;
  for (int k = first; k < last; ++k) {
    const int block = graph.parts[size_t(k)].op.block_depth;
    if (block > 0 && (slice_depth % block != 0 || last_slice % block != 0)) return std::nullopt;
  }
  CascadePlan plan;
  plan.first = first;
  plan.last = last;
  plan.stripe_height = int(sink.shape[H]);
  plan.stripes = 1;
  plan.depth_slices = depth_slices;
  plan.slice_depth = slice_depth;
  for (int s = 0; s < depth_slices; ++s) {
    const int64_t c0 = s * slice_depth, c1 = std::min(depth, c0 + slice_depth);
    for (int k = first; k < last; ++k) {
      try {
        plan.cycles += coster.cost_channels(k, c1 - c0);
      } catch (const InvalidArgument&) {
        return std::nullopt;  // the part has no block config for a slice this deep
      }
      ++plan.operations;
      if (record_runs) {
        const PlanTensor& out = graph.tensors[size_t(graph.parts[size_t(k)].output)];
        const RowsColumns whole{0, out.shape[H], 0, out.shape[W]};
        StripeRun run{k, 0, out.shape[H], 0, out.shape[W], stripe_inputs(graph, k, whole)};
        run.channel_begin = c0;
        run.channel_end = c1;
        plan.runs.push_back(run);
      }
    }
  }
  for (int k = first; k + 1 < last; ++k) {
    const int t = graph.parts[size_t(k)].output;
    const PlanTensor& tensor = graph.tensors[size_t(t)];
    const int64_t elements = std::max<int64_t>(tensor.shape[H] * tensor.shape[W], 1);
    // Bytes per element of the tensor's own layout: a slice of 16-channel multiples takes as
    // many bytes as NHWC or as bricks.
    const int64_t element_bytes = std::max<int64_t>(tensor.bytes / elements / std::max<int64_t>(depth, 1), 1);
    const int64_t bytes = (elements * slice_depth * element_bytes + 15) / 16 * 16;
    RollingBuffer buffer{t, tensor.shape[H], tensor.shape[W], bytes, slice_depth};
    plan.buffers.push_back(buffer);
    plan.buffer_bytes += bytes;
  }
  std::sort(plan.buffers.begin(), plan.buffers.end(),
            [](const RollingBuffer& a, const RollingBuffer& b) { return a.tensor < b.tensor; });
  return plan;
}

namespace {

// The input of parts [first, last) the sink may be written over: the largest one produced
// before the cascade and read for the last time in it, not a graph output, and not one TFLM
// sees when it sees the sink too (-1: none).
int staircase_source(const PlanGraph& graph, const PlanGraph::Uses& uses, int first, int last,
                     const std::vector<char>& internal) {
  const int sink = graph.parts[size_t(last - 1)].output;
  int best = -1;
  for (int k = first; k < last; ++k) {
    for (int t : graph.parts[size_t(k)].inputs) {
      if (t == sink || internal[size_t(t)] || graph.tensors[size_t(t)].bytes == 0 ||
          (graph.tensors[size_t(t)].cpu_visible && graph.tensors[size_t(sink)].cpu_visible)) {
        continue;
      }
      const auto& cons = uses.consumers[size_t(t)];
      const auto& prod = uses.producers[size_t(t)];
      if (uses.last[size_t(t)] >= last || std::any_of(cons.begin(), cons.end(), [&](int c) { return c >= last; }) ||
          std::any_of(prod.begin(), prod.end(), [&](int p) { return p >= first; }) ||
          std::find(graph.outputs.begin(), graph.outputs.end(), t) != graph.outputs.end()) {
        continue;
      }
      if (best < 0 || graph.tensors[size_t(t)].bytes > graph.tensors[size_t(best)].bytes) best = t;
    }
  }
  return best;
}

int64_t row_bytes(const PlanTensor& t) { return t.bytes / std::max<int64_t>(t.shape[H], 1); }

// A read of a staircase source in a stripe: part `part` reads `tensor` from row `row` on at
// schedule step `step` (see simulate_striped).
struct SourceRead {
  int tensor = 0, part = 0;
  int64_t step = 0, row = 0;
};

// plan_cascade's working memory. The DP plans thousands of cascades per graph, and allocating
// these afresh for each was a sixth of the planner's instructions: each thread keeps one and
// every call resets what it uses (assign and clear keep the capacity).
struct PlanScratch {
  std::vector<char> copied, internal, inside;
  std::vector<int> internal_tensors;  // the outputs of parts first .. last - 2, each once, in that order
  std::vector<int> last_writer;       // per internal tensor: the last of the parts writing it
  std::vector<int> alignment;         // per internal tensor: its writers' largest Part::alignment
  bool repeats = true;                // whether SteadyState may count repeats (no alignment, no divisor)
  std::vector<int> sources;           // per first of the range: its staircase source (-1: none)
  std::vector<char> is_source;        // per tensor: the source of some cascade of the range
  std::vector<SourceRead> source_reads;
  std::vector<ByteAccess> sink_writes, accesses;
  std::vector<std::tuple<int, int, int, int64_t>> stripe_reads;  // this stripe's: tensor, part, input, row
  std::vector<int64_t> done, first_read;
  std::vector<std::pair<int64_t, int64_t>> held;
  std::vector<Extent> need, computed;
  std::vector<std::vector<int64_t>> last_read;
  // Per simulated stripe: each part's cycles and whether it ran (parts in order), and how
  // many times the stripe counts (itself and the repeats after it).
  std::vector<double> stripe_cost;
  std::vector<char> stripe_ran;
  std::vector<int64_t> stripe_times;
  std::vector<StripeRun> runs;
  SteadyState steady;
};

// Not inlined: the caller then holds a plain reference. Inlined, GCC looked the thread-local
// up again (__tls_get_addr) at each use of it in plan_cascade's loops.
[[gnu::noinline]] PlanScratch& plan_scratch() {
  static thread_local PlanScratch scratch;
  return scratch;
}

// The stripes of a cascade whose sink is part `last - 1`: the same for every first part.
struct Striping {
  int stripe_height = 0, stripes = 0;
  int64_t height = 0, width = 0;
};

Striping striping(const PlanGraph& graph, int last, int stripe_height) {
  const PlanTensor& sink = graph.tensors[size_t(graph.parts[size_t(last - 1)].output)];
  Striping s;
  s.height = sink.shape[H];
  s.width = sink.shape[W];
  s.stripe_height = int(std::min<int64_t>(stripe_height, s.height));
  s.stripes = int((s.height + s.stripe_height - 1) / s.stripe_height);
  return s;
}

// A plan's shape before its parts are costed and its buffers sized.
CascadePlan empty_plan(int first, int last, const Striping& striping, int column_bands, bool buffer_weights,
                       int64_t weight_bytes) {
  CascadePlan plan;
  plan.first = first;
  plan.last = last;
  plan.stripe_height = striping.stripe_height;
  plan.stripes = striping.stripes;
  plan.column_bands = column_bands;
  plan.buffered_weights = buffer_weights;
  plan.weight_buffer_bytes = buffer_weights ? weight_bytes : 0;
  return plan;
}

// The cascade [first, last) with every part run whole, one after another (one part, or a
// stripe as tall as the sink): internal tensors are whole buffers.
std::optional<CascadePlan> plan_whole(const PlanGraph& graph, const PlanGraph::Uses& uses, int first, int last,
                                      const Striping& striping, StripeCoster& coster, bool buffer_weights,
                                      int64_t weight_bytes, bool record_runs, int column_bands) {
  using Weights = StripeCoster::Weights;
  if (column_bands > 1) return std::nullopt;  // nothing rolls: bands would only add halo work
  CascadePlan plan = empty_plan(first, last, striping, 1, buffer_weights, weight_bytes);
  const Part& alone = graph.parts[size_t(first)];
  if (last - first == 1 && buffer_weights && alone.buffered_cycles >= 0) {
    const PlanTensor& out = graph.tensors[size_t(alone.output)];
    plan.cycles = alone.buffered_cycles;
    plan.weight_buffer_bytes = alone.buffered_bytes;
    plan.weight_second_slot_bytes = alone.buffered_second_slot_bytes;
    plan.operations = 1;
    if (record_runs) plan.runs.push_back(StripeRun{first, 0, out.shape[H], 0, out.shape[W], stripe_inputs(graph, first, RowsColumns{0, out.shape[H], 0, out.shape[W]})});
    return plan;
  }
  // The first run of a part copies its weights in (a part runs once here).
  for (int k = first; k < last; ++k) {
    const PlanTensor& out = graph.tensors[size_t(graph.parts[size_t(k)].output)];
    plan.cycles += coster.cost(k, 0, out.shape[H], buffer_weights ? Weights::CopiedIn : Weights::InPlace);
    ++plan.operations;
    if (record_runs) plan.runs.push_back(StripeRun{k, 0, out.shape[H], 0, out.shape[W], stripe_inputs(graph, k, RowsColumns{0, out.shape[H], 0, out.shape[W]})});
  }
  for (int k = first; k + 1 < last; ++k) {
    const int t = graph.parts[size_t(k)].output;
    const PlanTensor& tensor = graph.tensors[size_t(t)];
    // A tensor several parts write (a concatenation's slices) is one buffer.
    const bool written_before = std::any_of(plan.buffers.begin(), plan.buffers.end(),
                                            [t](const RollingBuffer& b) { return b.tensor == t; });
    if (uses.last[size_t(t)] < last && !written_before) {
      plan.buffers.push_back(RollingBuffer{t, tensor.shape[H], tensor.shape[W], tensor.bytes});
      plan.buffer_bytes += tensor.bytes;
    }
  }
  // A tensor that escapes is whole anyway; only the ones that die inside count here.
  return plan;
}

// The first part from which parts [first, last) can cascade in stripes, the lowest >= `lo`
// (`last` when not even the sink alone can): every part stripable, and every output but the
// sink's an internal tensor (produced inside the cascade, read only inside it and after it is
// made, cascadable). Each condition is on one part and `last`, so every later first can too,
// but one: a tensor several parts write (channel slices: a concatenation's inputs, a channel
// pad's copy and border) is internal only to a cascade holding all of its writers
// (`splits_writers`).
int lowest_striped_first(const PlanGraph& graph, const PlanGraph::Uses& uses, int lo, int last) {
  if (uses.producers[size_t(graph.parts[size_t(last - 1)].output)].size() != 1) return last;
  int first = last;
  for (int k = last - 1; k >= lo; --k) {
    const Part& p = graph.parts[size_t(k)];
    if (!p.stripable) break;
    if (k < last - 1) {
      const int t = p.output;
      const auto& cons = uses.consumers[size_t(t)];
      const bool escapes = uses.last[size_t(t)] >= last ||
                           std::any_of(cons.begin(), cons.end(), [&](int c) { return c <= k || c >= last; });
      const auto& prod = uses.producers[size_t(t)];
      if (escapes || prod.back() >= last || !graph.tensors[size_t(t)].cascadable) break;
    }
    first = k;
  }
  return first;
}

// Whether cascade [first, last) holds some of a tensor's writers and not the others (its parts
// but the sink write internal tensors: every writer of one must be inside). O(parts).
bool splits_writers(const PlanGraph& graph, const PlanGraph::Uses& uses, int first, int last) {
  for (int k = first; k < last - 1; ++k) {
    if (uses.producers[size_t(graph.parts[size_t(k)].output)].front() < first) return true;
  }
  return false;
}

// Simulates the striped cascade [first, last) (every part able to, see lowest_striped_first)
// into the scratch: each stripe's part cycles, the rows each internal tensor holds, and the
// reads of `s.sources`. Every cascade [i, last), i > first, is in it: a part's stripes
// propagate back from the sink through the parts after it only, so they are the same in the
// shorter cascade, and so are the rows its output holds (its readers all come after it).
void simulate_striped(const PlanGraph& graph, int first, int last, const Striping& striping, int column_bands,
                      int64_t band_width, StripeCoster& coster, bool buffer_weights, bool record_runs,
                      PlanScratch& s) {
  using Weights = StripeCoster::Weights;
  std::vector<char>& copied = s.copied;
  copied.assign(graph.parts.size(), 0);
  // The first run of a part copies its weights in; later stripes read the buffer.
  auto weights_for = [&](int k) {
    if (!buffer_weights) return Weights::InPlace;
    if (copied[size_t(k)]) return Weights::Buffered;
    copied[size_t(k)] = true;
    return Weights::CopiedIn;
  };
  const Part& sink_part = graph.parts[size_t(last - 1)];
  const int64_t height = striping.height, width = striping.width, stripe_height = striping.stripe_height;
  const size_t parts = size_t(last - first);
  std::vector<char>& internal = s.internal;
  std::vector<int>& internal_tensors = s.internal_tensors;
  const bool staircase = std::any_of(s.sources.begin(), s.sources.end(), [](int t) { return t >= 0; });
  const int64_t sink_row = row_bytes(graph.tensors[size_t(sink_part.output)]);
  s.source_reads.clear();
  s.sink_writes.clear();
  s.stripe_cost.clear();
  s.stripe_ran.clear();
  s.stripe_times.clear();
  s.runs.clear();
  auto& stripe_reads = s.stripe_reads;
  std::vector<int64_t>& done = s.done;  // rows [0, done) of each internal tensor, this band
  done.assign(graph.tensors.size(), 0);
  std::vector<std::pair<int64_t, int64_t>>& held = s.held;  // rows, columns
  held.assign(graph.tensors.size(), {0, 0});
  std::vector<Extent>& need = s.need;
  need.assign(graph.tensors.size(), Extent{});
  std::vector<Extent>& computed = s.computed;  // per part: the rows it computes in this stripe
  computed.assign(parts, Extent{});
  std::vector<int64_t>& first_read = s.first_read;
  first_read.assign(graph.tensors.size(), 0);
  std::vector<std::vector<int64_t>>& last_read = s.last_read;  // per part and input: first row of its last read
  last_read.resize(parts);
  for (int band = 0; band < column_bands; ++band) {
    const int64_t c0 = band * band_width, c1 = std::min(width, c0 + band_width);
    for (int t : internal_tensors) done[size_t(t)] = 0;
    for (int k = first; k < last; ++k) last_read[size_t(k - first)].assign(graph.parts[size_t(k)].inputs.size(), 0);
    SteadyState& steady = s.steady;
    steady.reset(last - first, internal);
    for (int stripe = 0; stripe < striping.stripes; ++stripe) {
      const int64_t b0 = int64_t(stripe) * stripe_height, b1 = std::min(height, b0 + stripe_height);
      for (int t : internal_tensors) need[size_t(t)] = Extent{};
      need[size_t(sink_part.output)] = Extent{b0, b1, c0, c1};
      // Backwards: the region of each internal tensor this stripe of this band reads.
      for (int k = last - 1; k >= first; --k) {
        const Part& p = graph.parts[size_t(k)];
        if (k < last - 1 && s.alignment[size_t(p.output)] > 1) {
          // Widened to whole aligned blocks of rows and columns (Part::alignment).
          Extent& n = need[size_t(p.output)];
          const int64_t a = s.alignment[size_t(p.output)];
          const auto& shape = graph.tensors[size_t(p.output)].shape;
          if (n.begin < n.end) {
            n.begin = n.begin / a * a;
            n.end = std::min((n.end + a - 1) / a * a, shape[H]);
            n.column_begin = n.column_begin / a * a;
            n.column_end = std::min((n.column_end + a - 1) / a * a, shape[W]);
          }
        }
        const Extent r = need[size_t(p.output)];
        if (r.begin >= r.end) continue;
        const PlanTensor& out = graph.tensors[size_t(p.output)];
        for (size_t i = 0; i < p.inputs.size(); ++i) {
          const int t = p.inputs[i];
          if (!internal[size_t(t)]) continue;
          const Box in = p.propagators[i].readable(
              p.propagators[i].propagate(region_box(out, r.begin, r.end, r.column_begin, r.column_end)),
              graph.tensors[size_t(t)].shape);
          Extent& n = need[size_t(t)];
          n.begin = std::min(n.begin, in.offset[H]);
          n.end = std::max(n.end, in.offset[H] + in.extent[H]);
          n.column_begin = std::min(n.column_begin, in.offset[W]);
          n.column_end = std::max(n.column_end, in.offset[W] + in.extent[W]);
        }
      }
      // Forwards: compute the rows not yet held; the sink's stripe always.
      for (int k = first; k < last; ++k) {
        const int t = graph.parts[size_t(k)].output;
        Extent r = need[size_t(t)];
        if (k < last - 1) {
          if (r.begin >= r.end) continue;
          auto& columns = held[size_t(t)].second;
          columns = std::max(columns, r.column_end - r.column_begin);
          r.begin = std::max(r.begin, done[size_t(t)]);
          if (r.begin >= r.end) continue;
          // Every writer of a tensor (its channel slices) computes the same rows: the last one
          // marks them done.
          if (s.last_writer[size_t(t)] == k) done[size_t(t)] = r.end;
        }
        computed[size_t(k - first)] = r;
      }
      // A rolling buffer holds, while this stripe runs, the rows from the first one any of its
      // readers still reads (this stripe's read, or for a reader idle in this stripe its last
      // one: reads only move down) to the last row written. Rows a stripe needed but finds
      // already computed are not read again, so this is less than the stripe's whole need.
      for (int t : internal_tensors) first_read[size_t(t)] = INT64_MAX;
      stripe_reads.clear();
      for (int k = first; k < last; ++k) {
        const Part& p = graph.parts[size_t(k)];
        const Extent& r = computed[size_t(k - first)];
        for (size_t i = 0; i < p.inputs.size(); ++i) {
          const int t = p.inputs[i];
          if (staircase && s.is_source[size_t(t)] && r.begin < r.end) {
            const PlanTensor& out = graph.tensors[size_t(p.output)];
            const Box in = p.propagators[i].readable(
                p.propagators[i].propagate(region_box(out, r.begin, r.end, r.column_begin, r.column_end)),
                graph.tensors[size_t(t)].shape);
            stripe_reads.emplace_back(t, k, int(i), in.offset[H]);
          }
          if (!internal[size_t(t)]) continue;
          int64_t& read = last_read[size_t(k - first)][i];
          if (r.begin < r.end) {
            const PlanTensor& out = graph.tensors[size_t(p.output)];
            read = p.propagators[i]
                       .readable(p.propagators[i].propagate(region_box(out, r.begin, r.end, r.column_begin,
                                                                       r.column_end)),
                                 graph.tensors[size_t(t)].shape)
                       .offset[H];
          }
          first_read[size_t(t)] = std::min(first_read[size_t(t)], read);
        }
      }
      for (int t : internal_tensors) {
        if (first_read[size_t(t)] == INT64_MAX) continue;  // never read inside the cascade
        auto& rows = held[size_t(t)].first;
        rows = std::max(rows, done[size_t(t)] - first_read[size_t(t)]);
      }
      for (int k = first; k < last; ++k) {
        Extent& r = computed[size_t(k - first)];
        steady.cost[size_t(k - first)] = 0;
        steady.ran[size_t(k - first)] = 0;
        if (r.begin >= r.end) continue;
        steady.cost[size_t(k - first)] = coster.cost(k, r.begin, r.end, weights_for(k), r.column_begin, r.column_end);
        steady.ran[size_t(k - first)] = 1;
        if (record_runs) {
          const RowsColumns region{r.begin, r.end, r.column_begin, r.column_end};
          s.runs.push_back(StripeRun{k, r.begin, r.end, r.column_begin, r.column_end, stripe_inputs(graph, k, region)});
        }
      }
      s.stripe_cost.insert(s.stripe_cost.end(), steady.cost.begin(), steady.cost.end());
      s.stripe_ran.insert(s.stripe_ran.end(), steady.ran.begin(), steady.ran.end());
      // The steady state: once a stripe is the one before it moved down, with nothing cropped
      // at a tensor's edge, every stripe up to the bottom edge is that same stripe moved down
      // again (every step of the simulation commutes with a shift of all rows by the same
      // per-tensor amounts). Those stripes are counted without simulating them. Runs are
      // recorded in full.
      const bool may_repeat = !record_runs && s.repeats;
      int64_t repeat = may_repeat ? steady.repeats(graph, first, last, stripe, stripe_height, height, computed,
                                                   internal_tensors, done, first_read, last_read)
                                  : 0;
      s.stripe_times.push_back(1 + repeat);
      if (staircase) {
        // Stripe j, this one moved down m times (a repeated stripe reads and writes rows moved
        // by its shifts). Between two recorded stripes of a repeat the required shift is
        // linear in the stripe: its ends bound it.
        auto record = [&](int64_t j, int64_t m) {
          for (const auto& [t, k, i, row] : stripe_reads) {
            const int64_t moved = row + m * graph.parts[size_t(k)].propagators[size_t(i)].axes[H].scale *
                                            steady.part_shift(k - first);
            s.source_reads.push_back(SourceRead{t, k, 2 * j, moved});
          }
          s.sink_writes.push_back(ByteAccess{2 * j + 1, 0, std::min(height, b1 + m * stripe_height) * sink_row});
        };
        record(stripe, 0);
        if (repeat > 0) {
          record(stripe + 1, 1);
          record(stripe + repeat, repeat);
        }
      }
      if (repeat > 0) {
        steady.advance(repeat, done, last_read, graph, internal_tensors, first, last);
        stripe += int(repeat);
      }
      for (Extent& r : computed) r = Extent{};
    }
  }
}

// Cascade [first, last) out of the simulation of [simulated, last) in the scratch.
CascadePlan striped_plan(const PlanGraph& graph, int first, int simulated, int last, const Striping& striping,
                         int column_bands, bool buffer_weights, int64_t weight_bytes, int source, PlanScratch& s) {
  CascadePlan plan = empty_plan(first, last, striping, column_bands, buffer_weights, weight_bytes);
  // Cycles are added stripe by stripe and part by part, repeats included, as the cascade
  // simulated alone adds them: the same sum, bit for bit.
  const size_t parts = size_t(last - simulated), skip = size_t(first - simulated);
  for (size_t e = 0; e < s.stripe_times.size(); ++e) {
    const double* cost = &s.stripe_cost[e * parts];
    const char* ran = &s.stripe_ran[e * parts];
    for (int64_t m = 0; m < s.stripe_times[e]; ++m) {
      for (size_t k = skip; k < parts; ++k) {
        if (!ran[k]) continue;
        plan.cycles += cost[k];
        ++plan.operations;
      }
    }
  }
  // The internal tensors of this cascade are the outputs of its parts but the sink (a tensor
  // several parts write, once).
  for (int k = first; k < last - 1; ++k) {
    const int t = graph.parts[size_t(k)].output;
    const auto& extent = s.held[size_t(t)];
    // Never read inside the cascade, or counted at its last writer.
    if (extent.first == 0 || s.last_writer[size_t(t)] != k) continue;
    const PlanTensor& tensor = graph.tensors[size_t(t)];
    // Bytes per element column of the tensor's own layout (channel padding included): its
    // bytes are that times H x W, rounded up to 16, so the floor is exact once H x W >= 16 and
    // never more otherwise (the proposal's memory stays a lower bound of its layout).
    const int64_t element_bytes = tensor.bytes / std::max<int64_t>(tensor.shape[H] * tensor.shape[W], 1);
    const int64_t bytes = (extent.first * extent.second * element_bytes + 15) / 16 * 16;
    plan.buffers.push_back(RollingBuffer{t, extent.first, extent.second, bytes});
    plan.buffer_bytes += bytes;
  }
  std::sort(plan.buffers.begin(), plan.buffers.end(),
            [](const RollingBuffer& a, const RollingBuffer& b) { return a.tensor < b.tensor; });
  if (source >= 0) {
    // The staircase's accesses in bytes: step 2s the reads of stripe s, 2s + 1 its sink write
    // (the reads of a stripe come before its write; staircase_shift lets the read just before
    // a write overlap it).
    const int64_t source_row = row_bytes(graph.tensors[size_t(source)]);
    s.accesses.clear();
    for (const SourceRead& r : s.source_reads) {
      if (r.tensor == source && r.part >= first) {
        s.accesses.push_back(ByteAccess{r.step, r.row * source_row, (r.row + 1) * source_row});
      }
    }
    if (!s.accesses.empty()) {
      plan.staircase_tensor = source;
      plan.staircase_shift = staircase_shift(s.sink_writes, s.accesses);
    }
  }
  return plan;
}

// plan_cascade for every first in [first_lo, first_hi] (element first - first_lo).
std::vector<std::optional<CascadePlan>> plan_range(const PlanGraph& graph, const PlanGraph::Uses& uses,
                                                   int first_lo, int first_hi, int last, int stripe_height,
                                                   StripeCoster& coster, bool buffer_weights, bool record_runs,
                                                   int column_bands) {
  if (first_lo < 0 || last > int(graph.parts.size()) || first_lo > first_hi || first_hi >= last ||
      stripe_height < 1 || column_bands < 1) {
    throw InvalidArgument(
        "plan_cascade: parts [first, last) must be a non-empty range (plan_cascades: first_lo <= first_hi < last), "
        "stripe_height >= 1 and column_bands >= 1");
  }
  std::vector<std::optional<CascadePlan>> out(size_t(first_hi - first_lo + 1));
  std::vector<int64_t> weight_bytes(size_t(last - first_lo + 1), 0);  // of parts [first_lo + i, last)
  for (int k = last - 1; k >= first_lo; --k) {
    weight_bytes[size_t(k - first_lo)] =
        weight_bytes[size_t(k - first_lo + 1)] + (graph.parts[size_t(k)].weight_stream_bytes() + 15) / 16 * 16;
  }
  // With buffered weights, a cascade needs some, and a part alone buffers only as the
  // scheduler chose (a cascade's buffer saves its re-reads).
  auto may_buffer = [&](int first) {
    return !buffer_weights || (weight_bytes[size_t(first - first_lo)] > 0 &&
                               (last - first > 1 || graph.parts[size_t(first)].bufferable));
  };
  const Striping sink_stripes = striping(graph, last, stripe_height);
  const int striped_hi = sink_stripes.stripes == 1 ? first_lo - 1 : std::min(first_hi, last - 2);
  for (int first = std::max(first_lo, striped_hi + 1); first <= first_hi; ++first) {
    if (!may_buffer(first)) continue;
    out[size_t(first - first_lo)] = plan_whole(graph, uses, first, last, sink_stripes, coster, buffer_weights,
                                               weight_bytes[size_t(first - first_lo)], record_runs, column_bands);
  }
  if (striped_hi < first_lo) return out;
  const int64_t bands = std::min<int64_t>(column_bands, sink_stripes.width);
  const int64_t band_width = (sink_stripes.width + bands - 1) / bands;
  // An aligned sink's stripes and bands start at multiples of its alignment, or it cannot.
  const int64_t sink_alignment = graph.parts[size_t(last - 1)].alignment;
  if (sink_stripes.stripe_height % sink_alignment != 0 || band_width % sink_alignment != 0) return out;
  const int simulated = lowest_striped_first(graph, uses, first_lo, last);  // >= first_lo
  // A later first has no more weights: where the longest may not buffer, none may.
  if (simulated > striped_hi || !may_buffer(simulated)) return out;
  PlanScratch& s = plan_scratch();
  const int banded = int((sink_stripes.width + band_width - 1) / band_width);
  s.internal.assign(graph.tensors.size(), 0);
  s.internal_tensors.clear();
  s.last_writer.resize(graph.tensors.size());
  s.alignment.resize(graph.tensors.size());
  for (int k = simulated; k < last - 1; ++k) {
    const int t = graph.parts[size_t(k)].output;
    if (!s.internal[size_t(t)]) s.internal_tensors.push_back(t), s.alignment[size_t(t)] = 1;
    s.internal[size_t(t)] = true;
    s.last_writer[size_t(t)] = k;
    s.alignment[size_t(t)] = std::max(s.alignment[size_t(t)], graph.parts[size_t(k)].alignment);
  }
  // The steady state's shifts assume every propagator moves its input by a whole multiple of
  // its output's shift: not so across an upscaling part, an aligned one or a transpose (they
  // simulate all).
  s.repeats = true;
  for (int k = simulated; k < last; ++k) {
    const Part& p = graph.parts[size_t(k)];
    s.repeats = s.repeats && p.alignment == 1 &&
               std::all_of(p.propagators.begin(), p.propagators.end(),
                           [](const Propagator& q) {
                             return q.axes[H].divisor == 1 && q.axes[W].divisor == 1 && !q.permutes();
                           });
  }
  // Each cascade's staircase source, from the shortest up (its internal tensors grow by one
  // part each time); the sink may go over one only when the input is read from its top once.
  s.sources.assign(size_t(striped_hi - simulated + 1), -1);
  s.is_source.assign(graph.tensors.size(), 0);
  if (banded == 1) {
    std::vector<char>& inside = s.inside;
    inside.assign(graph.tensors.size(), 0);
    for (int first = last - 2; first >= simulated; --first) {
      inside[size_t(graph.parts[size_t(first)].output)] = true;
      if (first > striped_hi) continue;
      const int source = staircase_source(graph, uses, first, last, inside);
      s.sources[size_t(first - simulated)] = source;
      if (source >= 0) s.is_source[size_t(source)] = true;
    }
  }
  simulate_striped(graph, simulated, last, sink_stripes, banded, band_width, coster, buffer_weights, record_runs, s);
  for (int first = simulated; first <= striped_hi; ++first) {
    if (!may_buffer(first) || splits_writers(graph, uses, first, last)) continue;
    CascadePlan plan = striped_plan(graph, first, simulated, last, sink_stripes, banded, buffer_weights,
                                    weight_bytes[size_t(first - first_lo)], s.sources[size_t(first - simulated)], s);
    if (record_runs) {  // the simulation's runs of this cascade's parts
      for (const StripeRun& run : s.runs) {
        if (run.part >= first) plan.runs.push_back(run);
      }
    }
    out[size_t(first - first_lo)] = std::move(plan);
  }
  return out;
}

}  // namespace

std::optional<CascadePlan> plan_cascade(const PlanGraph& graph, const PlanGraph::Uses& uses, int first, int last,
                                        int stripe_height, StripeCoster& coster, bool buffer_weights,
                                        bool record_runs, int column_bands) {
  return std::move(
      plan_range(graph, uses, first, first, last, stripe_height, coster, buffer_weights, record_runs, column_bands)[0]);
}

std::vector<std::optional<CascadePlan>> plan_cascades(const PlanGraph& graph, const PlanGraph::Uses& uses,
                                                      int first_lo, int first_hi, int last, int stripe_height,
                                                      StripeCoster& coster, bool buffer_weights, int column_bands) {
  return plan_range(graph, uses, first_lo, first_hi, last, stripe_height, coster, buffer_weights, false,
                    column_bands);
}

}  // namespace cascader
