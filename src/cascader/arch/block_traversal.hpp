// The order in which the NPU computes an operation's OFM blocks, and the IFM (and IFM2) each
// block reads: what decides whether an OFM may be written over its own IFM.
//
// Facts, each with its public source (facts only; the code is ours):
//  - One operation is a sequence of jobs, one per OFM block (OFM_BLK_HEIGHT/WIDTH/DEPTH), in
//    raster order with depth innermost, then width, then height: block i has
//    z = (i % Dz) * bd, x = ((i / Dz) % Dx) * bw, y = (i / (Dz * Dx)) * bh, with Dz, Dx the
//    block counts along depth and width. Source: Vela 5.2 register_command_stream_util.py
//    (get_offset_block_coords, used by calc_blockdep) and Regor's Ethos-U55 register
//    command-stream generator (EthosU55RCSGenerator::GetJobs, CalcBlockDep), which model the
//    hardware's job order to compute the BLOCKDEP register from the TRM's pipeline.
//  - The IFM a job reads is ((ofm block - 1) * stride + dilated kernel) per axis, starting at
//    ofm block origin * stride - padding. Source: Regor CalcIFMJobShape / RequiredInputSize and
//    Vela get_ifm_block_size; the kernel's 8x8 sub-kernel decomposition splits a job into
//    passes over the same input, so it does not widen the footprint. We clip the window to the
//    IFM (padding is generated, not read) and do not round it up to the IFM micro-block: the
//    rounding is a SHRAM allocation granule, and the extra elements it would fetch never reach
//    an output (the brute-force test in tests/test_in_place.py checks the footprint this way).
//    The window is a box: with a stride above the kernel size, or dilation, it includes rows
//    and columns no output uses, which only makes the hazard check conservative there.
//  - Convolution and REDUCE_SUM read every IFM channel for each OFM block (the IFM depth is
//    walked in IFM-block passes inside the job); depthwise, pooling and elementwise jobs read
//    the OFM block's own channels. Source: Vela get_ifm_ofm_block_depth / arch
//    calc_ifm_block_depth (a depthwise, pooling or elementwise IFM block depth is the OFM
//    block depth). Elementwise IFM/IFM2 jobs have the OFM block's extent; a broadcast axis of
//    IFM2 reads its single element (IFM2_BROADCAST), a scalar IFM2 reads no memory.
//  - IFM_UPSCALE (transpose convolution) doubles the IFM in H and W before the kernel: the
//    footprint in upscaled coordinates maps to source rows/columns u / 2.
//
// What makes this a safety rule (the hazard check builds on it, sim/in_place_hazard.hpp): jobs
// are fetched in order and a job's IFM is in the SHRAM before its OFM block is written, so a
// job can only be hurt by bytes an *earlier* job wrote; a later job's writes always come after
// this job's reads.
//
// Complexity: O(number of blocks).
#pragma once

#include <vector>

#include "cascader/arch/geometry.hpp"

namespace cascader {

enum class TraversalOp { Convolution, Depthwise, Pooling, ReduceSum, Elementwise };

// A half-open box [y0, y1) x [x0, x1) x [c0, c1) of feature-map coordinates.
struct FeatureBox {
  int y0 = 0, y1 = 0, x0 = 0, x1 = 0, c0 = 0, c1 = 0;
  bool empty() const { return y0 >= y1 || x0 >= x1 || c0 >= c1; }
};

struct TraversalShape {
  TraversalOp op = TraversalOp::Convolution;
  int ofm_height = 1, ofm_width = 1, ofm_depth = 1;
  // The IFM extent the kernel walks (upscaled when upscale == 2); its depth for convolution
  // and REDUCE_SUM (depthwise, pooling and elementwise read the OFM block's channels).
  int ifm_height = 1, ifm_width = 1, ifm_depth = 1;
  int block_height = 1, block_width = 1, block_depth = 1;
  Kernel kernel;  // undilated size, stride, dilation
  int pad_top = 0, pad_left = 0;
  int upscale = 1;  // 1 or 2
  bool has_ifm2 = false, ifm2_scalar = false;
  bool broadcast_h = false, broadcast_w = false, broadcast_c = false;
};

// One job: the OFM block it writes, and the IFM / IFM2 elements it reads (source coordinates;
// empty when it reads none, e.g. a block entirely in the padding or a scalar IFM2).
struct TraversalBlock {
  FeatureBox ofm, ifm, ifm2;
};

// The IFM extent along one axis that the registers imply (they give only the OFM shape):
// (ofm - 1) * stride + dilated kernel - padding.
int input_extent(int ofm, int stride, int dilated_kernel, int pad_before, int pad_after);

// Jobs in the NPU's order. Throws InvalidArgument for non-positive shapes or blocks, or an
// upscale other than 1 or 2.
std::vector<TraversalBlock> block_traversal(const TraversalShape& shape);

}  // namespace cascader
