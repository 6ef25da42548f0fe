// Proposals: the whole graph as a sequence of cascades, and the Pareto set of them.
//
// A proposal cuts the parts (in execution order) into consecutive cascades, each with a
// stripe height. Every tensor that crosses a cut is a whole buffer, so while a cascade runs
// the SRAM in use is its rolling buffers plus every whole tensor live across it (its inputs,
// its output, and the skips that pass it). That depends on the cascade alone, which makes the
// dynamic programme over cut positions exact for this memory model: the Pareto set of
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
  size_t max_proposals = 48;  // frontier points kept per prefix (thinned, ends and knees kept)
};

struct Proposal {
  std::vector<CascadePlan> cascades;
  int64_t memory = 0;  // peak of rolling buffers + live whole tensors
  double cycles = 0;
  std::string repr() const;
};

// Peak SRAM while parts [first, last) run as `plan`: its buffers plus the whole tensors live.
int64_t cascade_memory(const PlanGraph& graph, const PlanGraph::Uses& uses, const CascadePlan& plan);

// The Pareto set of proposals, by increasing memory. Throws InvalidArgument on a bad graph.
std::vector<Proposal> generate_proposals(const PlanGraph& graph, const ArchConfig& arch,
                                         const ProposalOptions& options = {});

}  // namespace cascader
