// What an operation gains when its feature maps move from the fast memory to the slow one
// (Dedicated_Sram: the memory planner evicts the buffers that cost the fewest cycles per byte).
//
// The op is costed again with each group of its operands moved, not bytes times a rate: a
// compute-bound op hides slow traffic, and the model re-reads an IFM once per OFM depth block.
// Moving several is not the sum of moving each (the op is as slow as its slowest memory), so
// each operand gets its Shapley share of the joint gains: the shares of operands moved
// together add up to their joint gain. A negative share is 0.
//
// Complexity: 2^n - 1 estimates for n operands in the fast memory (n <= 3).
#pragma once

#include <array>
#include <optional>

#include "cascader/arch/arch_config.hpp"
#include "cascader/perf/npu_op.hpp"

namespace cascader {

// Per operand (IFM, IFM2, OFM): its share of the cycles `op` gains with its operands in `home`
// moved to `slow`, or nullopt when it is absent or not in `home`. Gains are measured from
// `base_cycles` (the op's own cost as the schedule has it).
std::array<std::optional<double>, 3> eviction_shares(const NpuOp& op, const ArchConfig& arch, MemoryArea home,
                                                     MemoryArea slow, double base_cycles);

}  // namespace cascader
