#include "cascader/plan/configs.hpp"

#include <algorithm>
#include <sstream>

#include "cascader/common/error.hpp"

namespace cascader {

namespace {

constexpr int H = 1, W = 2;

void check(const PlanGraph& graph, const CascadePlan& plan) {
  if (plan.first < 0 || plan.last > int(graph.parts.size()) || plan.first >= plan.last) {
    throw InvalidArgument("the cascade plan's parts are not in this graph");
  }
}

}  // namespace

std::string StripeConfig::repr() const {
  std::ostringstream s;
  s << "StripeConfig(shape " << shape[0] << "x" << shape[1] << " of " << extent[0] << "x" << extent[1] << ", "
    << count[0] << "x" << count[1] << " stripes";
  if (edge[0] != shape[0] || edge[1] != shape[1]) s << ", last " << edge[0] << "x" << edge[1];
  s << ")";
  return s.str();
}

std::string TensorConfig::repr() const {
  std::ostringstream s;
  s << "TensorConfig(" << name << ": " << (boundary ? "boundary" : "interior") << ", "
    << (mode == Mode::Rolling ? "rolling " : "whole ") << rows << "x" << columns << ", " << bytes << " B)";
  return s.str();
}

StripeConfig stripe_config(const PlanGraph& graph, const CascadePlan& plan) {
  check(graph, plan);
  const PlanTensor& sink = graph.tensors[size_t(graph.parts[size_t(plan.last - 1)].output)];
  StripeConfig c;
  c.extent = {sink.shape[H], sink.shape[W]};
  const int64_t rows = plan.stripes > 1 ? plan.stripe_height : c.extent[0];
  const int64_t columns = (c.extent[1] + plan.column_bands - 1) / plan.column_bands;
  c.shape = {rows, columns};
  c.strides = c.shape;
  c.count = {int((c.extent[0] + rows - 1) / rows), int((c.extent[1] + columns - 1) / columns)};
  c.edge = {c.extent[0] - (c.count[0] - 1) * rows, c.extent[1] - (c.count[1] - 1) * columns};
  return c;
}

std::vector<TensorConfig> tensor_configs(const PlanGraph& graph, const CascadePlan& plan) {
  check(graph, plan);
  auto whole = [&](int t) {
    const PlanTensor& x = graph.tensors[size_t(t)];
    return TensorConfig{t, x.name, TensorConfig::Mode::Whole, true, x.shape[H], x.shape[W], x.bytes};
  };
  std::vector<int> produced;
  for (int k = plan.first; k < plan.last; ++k) produced.push_back(graph.parts[size_t(k)].output);
  std::vector<TensorConfig> out;
  for (int k = plan.first; k < plan.last; ++k) {
    for (int t : graph.parts[size_t(k)].inputs) {
      const bool inside = std::find(produced.begin(), produced.end(), t) != produced.end();
      const bool listed = std::any_of(out.begin(), out.end(), [t](const TensorConfig& c) { return c.tensor == t; });
      if (!inside && !listed) out.push_back(whole(t));
    }
  }
  const int sink = produced.back();
  for (int t : produced) {
    if (t == sink) continue;
    const auto held = std::find_if(plan.buffers.begin(), plan.buffers.end(),
                                   [t](const RollingBuffer& b) { return b.tensor == t; });
    TensorConfig c = whole(t);
    c.boundary = false;
    // Parts run one after another (one part, or one stripe) hold their tensors whole.
    if (held != plan.buffers.end() && plan.stripes > 1 && plan.last - plan.first > 1) {
      c.mode = TensorConfig::Mode::Rolling;
      c.rows = held->rows;
      c.columns = held->columns;
      c.bytes = held->bytes;
    }
    out.push_back(c);
  }
  out.push_back(whole(sink));
  return out;
}

}  // namespace cascader
