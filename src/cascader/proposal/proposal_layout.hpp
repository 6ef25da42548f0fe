// A proposal's memory as the exact allocator lays it out: the real SRAM the planner scores its
// surviving proposals with (cascader.planner), of which Proposal::memory is a lower bound.
//
// The proposal's schedule is the uncascaded one's (the planner's graph has one tensor per
// buffer of it, in the same order, and part k is its step k + 1, between the inputs and outputs
// pseudo steps) with each cascade made one step: the cascade's internal tensors become rolling
// buffers written in that step alone, beside its weight buffer. The uncascaded schedule's
// in-place aliases hold only where their operation still runs alone (inside a cascade other
// parts may still read rows of the operand it overwrites), and each cascade's sink may sit
// over the input it consumes (a staircase tie), as the planner counted it, where no in-place
// alias already joins the two and no range would be in two staircases on the same side.
//
// The layout takes each cascade as one step, so a chained staircase or an in-place operation
// inside a cascade comes out otherwise than the compile's stripe-by-stripe layout: this is a
// score, not the binary's SRAM (cascader.planner.laid_out gives that).
// O(buffers + the parts' operands) plus the layout.
#pragma once

#include <cstdint>
#include <vector>

#include "cascader/graph/plan_graph.hpp"
#include "cascader/memory/arena_layout.hpp"
#include "cascader/memory/buffer_schedule.hpp"
#include "cascader/plan/cascade.hpp"
#include "cascader/proposal/proposal.hpp"

namespace cascader {

// Throws InvalidArgument when `uncascaded` does not have the graph's parts as its steps.
// Without `named`, its buffers have no names (a layout does not read them).
BufferSchedule proposal_schedule(const PlanGraph& graph, const std::vector<CascadePlan>& cascades,
                                 const BufferSchedule& uncascaded, bool named = true);

// The fast arena's size when that schedule is laid out under `config` (the SRAM: in a shared
// memory the one scratch arena).
int64_t proposal_sram(const PlanGraph& graph, const std::vector<CascadePlan>& cascades,
                      const BufferSchedule& uncascaded, const MemoryConfig& config);

// proposal_sram of each proposal, laid out on every core.
std::vector<int64_t> proposal_srams(const PlanGraph& graph, const std::vector<const Proposal*>& proposals,
                                    const BufferSchedule& uncascaded, const MemoryConfig& config);

}  // namespace cascader
