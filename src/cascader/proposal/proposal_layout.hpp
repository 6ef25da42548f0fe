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
#include <memory>
#include <utility>
#include <vector>

#include "cascader/common/pending.hpp"
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

// Proposals scored at a time by undominated_srams: enough to keep the cores busy, few enough
// that the ones scored prune the next.
constexpr size_t kScoredAtOnce = 8;

// proposal_sram of the proposals that may be on the SRAM-versus-cycles frontier, -1 for the
// others. With `bounded` (each proposal's `memory` is a lower bound of its SRAM within the 15
// bytes of a 16-byte alignment, as on Shared_Sram), a proposal is not scored when one at most
// as slow takes less SRAM than its bound less 15 bytes (it would lay out above that one): one
// of `settled`, the (cycles, SRAM) of proposals scored already, or one scored here. They are
// scored fastest first (by cycles, then bound), kScoredAtOnce at a time. Without `bounded`
// every proposal is scored.
std::vector<int64_t> undominated_srams(const PlanGraph& graph, const std::vector<const Proposal*>& proposals,
                                       std::vector<std::pair<double, int64_t>> settled, bool bounded,
                                       const BufferSchedule& uncascaded, const MemoryConfig& config);

// undominated_srams queued for the process's background threads (Pending), while the caller
// goes on: `graph`, the proposals and `uncascaded` must outlive the returned work.
std::unique_ptr<Pending<std::vector<int64_t>>> queue_undominated_srams(
    const PlanGraph& graph, std::vector<const Proposal*> proposals, std::vector<std::pair<double, int64_t>> settled,
    bool bounded, const BufferSchedule& uncascaded, const MemoryConfig& config);

}  // namespace cascader
