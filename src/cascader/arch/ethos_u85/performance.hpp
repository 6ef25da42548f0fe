// The Ethos-U85 cycle model: the U85's part of the one cost model (perf/cycle_model.hpp
// dispatches to it for U85 operations; the estimator and the planner see one interface).
//
// The formulas are those of Vela 5.2's U85 performance model, so that figures compare 1:1:
//  - MAC operations: per OFM block, MAC cycles (micro-blocks x kernel steps per sub-kernel of
//    at most 8x8, by traversal, against the weight decoders' rate; a small-block accumulator
//    delay; the IFM depth in IFM blocks) against output-unit cycles (elements x the summed
//    output cycles of the chain's operations, at least the bias fetch), both at least a quarter
//    of the block's command work; the slower stage paid per block over a fractional block count,
//    the first IFM block's fetch and the last OFM block's write once;
//  - elementwise and resize: output-unit cycles per element, or command issue;
//  - memory: bytes per memory (IFM refetch per OFM block and sub-kernel, weights and scales per
//    OFM block position, the OFM once), burst-scaled, over each AXI channel's bandwidth (its
//    outstanding transactions and read buffers) and the memory's;
//  - weight buffering and LUT loads as DMAs the previous operation's slack hides.
//  - total = max(NPU cycles, each memory's access cycles).
// Complexity: O(sub-kernels) per operation.
#pragma once

#include <vector>

#include "cascader/arch/arch_config.hpp"
#include "cascader/perf/cycle_model.hpp"
#include "cascader/perf/npu_op.hpp"

namespace cascader::ethos_u85 {

// The IFM block the U85 allocates for an OFM block: the input the kernel (at most 8x8 of it)
// needs, rounded to the IFM allocation unit of the micro-block, the IFM precision and depth.
BlockShape ifm_block(const AcceleratorConfig& a, const BlockShape& ofm_block, const BlockShape& ofm_ublock,
                     const Kernel& kernel, int ifm_bits, int ifm_block_depth, int upscale);

// Costs one operation (op.u85 set, op.block_config the binary's OFM block). Throws
// InvalidArgument for an operation the model does not describe.
CostRecord estimate(const NpuOp& op, const ArchConfig& arch);

// `next` as a link of a chain (U85Op::chain): it reads the chaining buffer as its IFM or IFM2
// (`ifm2_chained`), its other operand, if it has one and `other_in_memory`, from memory; it
// writes the chaining buffer on (`writes_chain`) or memory; `lut`: a table activation.
U85Chained chain_link(const NpuOp& next, bool ifm2_chained, bool other_in_memory, bool writes_chain, bool lut);

// `first` (described: op.u85 and its block config set, perhaps a chain already) with `next`
// chained after it: the OFM of the chain's last operation stays in the chaining buffer, and the
// chain is costed as one operation ending in `next`'s OFM, as the estimator costs such a chain
// read from a command stream.
void chain_into(NpuOp& first, const NpuOp& next, bool ifm2_chained);

// `first` with the block config the U85 block search gives it (or the one it has), then
// `chain_into` each of `next` in turn (`ifm2_chained[i]`: `next[i]` reads the chaining buffer as
// its IFM2): the chain as the cycle model costs it (the planner's question before it chains).
NpuOp chained(const NpuOp& first, const std::vector<NpuOp>& next, const std::vector<bool>& ifm2_chained,
              const ArchConfig& arch);

}  // namespace cascader::ethos_u85
