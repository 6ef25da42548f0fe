#include "cascader/graph/plan_graph.hpp"

#include <algorithm>
#include <sstream>
#include <string>

#include "cascader/common/error.hpp"
#include "cascader/perf/cycle_model.hpp"

namespace cascader {

std::string PlanTensor::repr() const {
  std::ostringstream s;
  s << "PlanTensor(" << name << ": " << shape[0] << "x" << shape[1] << "x" << shape[2] << "x" << shape[3] << ", "
    << bytes << " B" << (cascadable ? "" : ", not cascadable") << ")";
  return s.str();
}

std::string Part::repr() const {
  std::ostringstream s;
  s << "Part(" << name << ": inputs [";
  for (size_t i = 0; i < inputs.size(); ++i) s << (i ? ", " : "") << inputs[i];
  s << "] -> " << output << (stripable ? "" : ", not stripable");
  if (weight_stream_bytes()) s << ", " << weight_stream_bytes() << " B of weights";
  s << ")";
  return s.str();
}

PlanGraph::PlanGraph() : block_configs(std::make_shared<BlockConfigCache>()) {}

int PlanGraph::add_tensor(PlanTensor t) {
  if (std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 1; }) || t.bytes < 0) {
    throw InvalidArgument("tensor " + t.name + ": dimensions must be >= 1 and bytes >= 0");
  }
  tensors.push_back(std::move(t));
  return int(tensors.size()) - 1;
}

int PlanGraph::add_part(Part p) {
  const int n = int(tensors.size());
  auto bad = [n](int t) { return t < 0 || t >= n; };
  if (bad(p.output) || std::any_of(p.inputs.begin(), p.inputs.end(), bad)) {
    throw InvalidArgument("part " + p.name + ": a tensor index is out of range");
  }
  if (p.propagators.size() != p.inputs.size()) {
    throw InvalidArgument("part " + p.name + ": one propagator per input is needed");
  }
  parts.push_back(std::move(p));
  return int(parts.size()) - 1;
}

void PlanGraph::validate() const {
  const int n = int(tensors.size());
  for (int t : inputs) {
    if (t < 0 || t >= n) throw InvalidArgument("a graph input index is out of range");
  }
  for (int t : outputs) {
    if (t < 0 || t >= n) throw InvalidArgument("a graph output index is out of range");
  }
  for (const Part& p : parts) {
    // A CPU part reads any number of inputs from operand 0; an IFM2 alone is one input.
    if (p.first_operand != 0 && (p.first_operand != 1 || p.inputs.size() > 1)) {
      throw InvalidArgument("part " + p.name + ": first_operand " + std::to_string(p.first_operand) + " with " +
                            std::to_string(p.inputs.size()) + " inputs (1: one input, the IFM2)");
    }
    if (!p.stripable) continue;  // runs whole: its op may view its output in another shape
    const auto& out = tensors[size_t(p.output)].shape;
    // A part may write a slice of its output's channels (a concatenation's input, a pad's copy).
    if (p.op.ofm.shape.h != out[1] || p.op.ofm.shape.w != out[2] || p.op.ofm.shape.c > out[3]) {
      throw InvalidArgument("part " + p.name +
                            ": its op's OFM shape is not its output tensor's (or a channel slice of it)");
    }
  }
}

PlanGraph::Uses PlanGraph::uses() const {
  Uses u;
  const size_t n = tensors.size();
  u.producers.assign(n, {});
  u.consumers.assign(n, {});
  for (int k = 0; k < int(parts.size()); ++k) {
    u.producers[size_t(parts[size_t(k)].output)].push_back(k);
    for (int t : parts[size_t(k)].inputs) u.consumers[size_t(t)].push_back(k);
  }
  const int end = int(parts.size());
  u.first.assign(n, end);
  u.last.assign(n, -1);
  for (size_t t = 0; t < n; ++t) {
    for (int k : u.producers[t]) u.first[t] = std::min(u.first[t], k), u.last[t] = std::max(u.last[t], k);
    for (int k : u.consumers[t]) u.first[t] = std::min(u.first[t], k), u.last[t] = std::max(u.last[t], k);
  }
  for (int t : inputs) u.first[size_t(t)] = 0;
  for (int t : outputs) u.last[size_t(t)] = end - 1;
  return u;
}

}  // namespace cascader
