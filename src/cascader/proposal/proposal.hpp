// Proposals: the whole graph as a sequence of cascades, and the Pareto set of them.
//
// A proposal cuts the parts (in execution order) into consecutive cascades, each with a
// stripe height. Every tensor that crosses a cut is a whole buffer, so while a cascade runs
// the SRAM in use is its rolling buffers plus every whole tensor live across it (its inputs,
// its output, and the skips that pass it), less what a staircase shares (its sink written over
// an input it consumes). A cascade's weight buffer is also filled while the operation before
// it runs, beside what that one holds. Both depend on a cascade and the one before it only,
// which makes the dynamic programme over cut positions exact for this memory model: the Pareto set of
// (peak memory, cycles) over prefixes, extended one cascade at a time. The real SRAM of a
// proposal is what the exact allocator lays out for it (cascader.planner scores the
// surviving proposals with it); this peak is its lower bound.
//
// Complexity: O(parts x max_parts x stripe_heights x frontier), each cascade evaluation
// O(stripes x parts in it), costs cached per (part, rows, padding).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cascader/arch/arch_config.hpp"
#include "cascader/graph/plan_graph.hpp"
#include "cascader/plan/cascade.hpp"

namespace cascader {

struct ProposalOptions {
  int max_cascade_parts = 12;
  std::vector<int> stripe_heights{1, 2, 4, 8};  // see cascader.planner.PlanOptions
  std::vector<int> column_bands{1, 2, 4};
  // Depth-sliced cascades (plan_depth_cascade) of these many slices (none: only rows and columns).
  std::vector<int> depth_slices{2, 4, 8};
  size_t max_proposals = 48;  // frontier points kept per prefix (thinned, ends and knees kept)
};

struct Proposal {
  std::vector<CascadePlan> cascades;
  int64_t memory = 0;  // peak of rolling buffers + live whole tensors
  double cycles = 0;
  std::string repr() const;
};

// Bytes two whole tensors of `plan` share while it runs: its sink written over an input it
// consumes (a staircase), or an elementwise operation run alone writing over an operand.
int64_t shared_tensor_bytes(const PlanGraph& graph, const PlanGraph::Uses& uses, const CascadePlan& plan);

// Peak SRAM while parts [first, last) run as `plan`: its buffers plus the whole tensors live.
int64_t cascade_memory(const PlanGraph& graph, const PlanGraph::Uses& uses, const CascadePlan& plan);
// The SRAM in use while its last operation runs (its buffers and the whole tensors live at its
// last part): the next cascade's weight buffer is filled then, beside it.
int64_t cascade_end_memory(const PlanGraph& graph, const PlanGraph::Uses& uses, const CascadePlan& plan);

// The Pareto set of proposals, by increasing memory. Throws InvalidArgument on a bad graph.
std::vector<Proposal> generate_proposals(const PlanGraph& graph, const ArchConfig& arch,
                                         const ProposalOptions& options = {});

// Each of `proposals` that copies weights into SRAM, its cascades reading their weights where
// they live instead (the others are left out). A weight buffer that fits beside the peak is free
// to the memory model above but can fragment the real layout: cascader.planner scores both.
std::vector<Proposal> without_weight_buffers(const PlanGraph& graph, const ArchConfig& arch,
                                             const std::vector<Proposal>& proposals);

}  // namespace cascader
