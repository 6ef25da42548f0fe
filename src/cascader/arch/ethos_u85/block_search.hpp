// Ethos-U85 block configs: the OFM micro-block an operation runs with, and the OFM block the
// U85 cycle model (performance.hpp) finds fastest among those its internal RAMs hold.
//
// Facts from the hardware (as Vela 5.2's Ethos-U85 architecture states them):
//  - each array size has two or three OFM micro-blocks, each valid for some operations at
//    some IFM precisions (accelerator.hpp lists them; the table is in block_search.cpp); a
//    convolution on the 1x1x16 (U85-128) or 1x2x16 (U85-256) micro-block must be a 1x1
//    depth-first one;
//  - the micro-block is the valid one that wastes the fewest OFM elements when the OFM is
//    rounded up to it (the first in the accelerator's order on a tie), as Vela picks it;
//  - OFM blocks are multiples of the micro-block in H and W and of 16 channels (or of a deeper
//    micro-block), at most 128 x 128 x 1024; the accumulators of a block fit the accumulator
//    RAM (32 bits each, 64 for 48-bit accumulators) and its IFM block (ifm_block()) the IFM
//    buffer, unless the whole IFM does; an elementwise block's rows fit the output buffer.
// The search costs every such block on a grid of tilings of each axis (the axis cut into
// 1, 2, 3... nearly equal parts, rounded up to the granule; for an elementwise operation Vela
// 5.2's own block too) and both traversals of a convolution, and keeps the fastest (the larger
// block on a tie); where none of them fits, blocks doubling from the granule. An elementwise
// block may be wider than the OFM (Vela's is, up to the output buffer's row): the search also
// costs Vela's block at its own width and each grid height and depth at the widest width the
// buffers hold, and takes one of those only where it is faster (the cycle model spreads a
// block's memory latency over its whole volume), a tie keeping the block within the OFM.
// Complexity: O(tilings^3 x estimate), cached by the caller per operation and target.
#pragma once

#include <optional>

#include "cascader/arch/arch_config.hpp"
#include "cascader/perf/cycle_model.hpp"
#include "cascader/perf/npu_op.hpp"

namespace cascader::ethos_u85 {

// The OFM micro-block of an operation of `type` with `ifm_bits` input, `ofm` output and (for a
// convolution) a 1x1 depth-first kernel or not. Throws InvalidArgument when no micro-block of
// `a` runs it.
BlockShape micro_block(const AcceleratorConfig& a, NpuOpType type, int ifm_bits, const Shape4& ofm,
                       bool depth_first_1x1);

// ACC_FORMAT's micro-block field for a micro-block (ofm_micro_block's inverse).
int micro_block_field(const BlockShape& ublock);

// `ofm_block` as a block config for `op` (its traversal op.traversal), if it is a multiple of
// the micro-block within the maximum block and fits the internal RAMs; nullopt otherwise.
std::optional<BlockConfig> try_block_config(const NpuOp& op, const AcceleratorConfig& a, const BlockShape& ofm_block);

// `op`, a resize (an output-unit pass, NpuOpType::Maximum with no IFM2, its IFM the extent the
// resize reads), described as the U85 runs one (U85Op::resize) with the block Vela 5.2 gives
// it: one row of 16 channels, as wide (in micro-block widths, at most 128) as keeps the IFM
// columns that row reads in a chaining-buffer slot, ((bricks - 2) n + 1) / d with the
// horizontal scale n / d of RESIZE_X. Throws InvalidArgument for a scale below 1/1 parts.
NpuOp resize_description(const NpuOp& op, const AcceleratorConfig& a, int scale_n, int scale_d);

// `op` with its U85 description (op.u85: micro-block, IFM block, accumulator) and, unless set,
// its block config chosen by the search (cached in `cache` by the whole operation and target).
NpuOp with_block_config(const NpuOp& op, const ArchConfig& arch, BlockConfigCache& cache);

}  // namespace cascader::ethos_u85
