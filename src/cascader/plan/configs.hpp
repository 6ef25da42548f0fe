// A cascade plan described per axis and per tensor: the StripeConfig and TensorConfig of the
// cascading literature (TVM's Ethos-U cascader, RFC apache/tvm-rfcs#37), derived from a
// CascadePlan, so that a researcher can read a plan in those terms.
//
// The planner itself works on CascadePlan (stripe height, column bands, rolling buffers); these
// views add nothing to it and cannot disagree with it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cascader/graph/plan_graph.hpp"
#include "cascader/plan/cascade.hpp"

namespace cascader {

// How the cascade's sink (its last part's output) is cut into stripes, along H then W.
// Stripes do not overlap at the sink (strides equal the stripe shape) and start at row and
// column 0. Rows are the inner loop, column bands the outer one (`order`: 1 = innermost). The
// last stripe along an axis is `edge` long when the extent is not a multiple of the shape.
struct StripeConfig {
  std::array<int64_t, 2> shape{0, 0};    // rows, columns of a full stripe
  std::array<int64_t, 2> extent{0, 0};   // the sink's rows, columns
  std::array<int64_t, 2> strides{0, 0};
  std::array<int, 2> count{0, 0};        // stripes along H, W
  std::array<int, 2> order{1, 2};
  std::array<int64_t, 2> offset{0, 0};
  std::array<int64_t, 2> edge{0, 0};     // rows of the last stripe, columns of the last band
  std::string repr() const;
};

// One tensor a cascade touches. Interior tensors (written and read only inside it) live in a
// rolling buffer of `rows` x `columns` (their home region: a modulo window along H); boundary
// tensors (the cascade's inputs and its sink) are whole buffers, which the proposal DP counts.
// Recompute buffers (rows computed again by every stripe that needs them, instead of kept)
// are not a mode this planner has.
struct TensorConfig {
  enum class Mode { Whole, Rolling };
  int tensor = -1;
  std::string name;
  Mode mode = Mode::Whole;
  bool boundary = true;
  int64_t rows = 0, columns = 0;  // the region held: the tensor's whole H x W when Whole
  int64_t bytes = 0;              // as the planner counts it
  std::string repr() const;
};

StripeConfig stripe_config(const PlanGraph& graph, const CascadePlan& plan);
// The cascade's tensors: its inputs from outside (in order of first use), its interior tensors,
// then its sink.
std::vector<TensorConfig> tensor_configs(const PlanGraph& graph, const CascadePlan& plan);

}  // namespace cascader
