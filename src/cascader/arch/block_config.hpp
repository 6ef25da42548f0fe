// OFM block configs: the unit of work the NPU computes between SHRAM refills, and the SHRAM
// layout that goes with it.
//
// Rules (facts taken from Vela's block-config search for Ethos-U55/U65 -- architecture_allocator.py
// and its C++ successor in Vela 5.x -- written in our own code):
//  - OFM block H, W, C are multiples of the OFM micro-block, at most 32 x 64 x 128, and C
//    steps in 16s while it is below the OFM depth.
//  - The IFM block feeding it is ((ofm - 1) * stride + min(dilated kernel, 8)) per axis,
//    rounded up to the micro-block; its depth is 32 (int8 depth-first), 16 (part-kernel-first
//    or int16), or the OFM block depth for depthwise, pooling and elementwise.
//  - SHRAM: 2 reserved output banks, then the IFM buffers, then the accumulators, then the LUT
//    (1 bank per KiB of table, at least the reserved top banks). IFM and accumulators are double-buffered and rounded
//    to a per-element-kind bank granule; elementwise ops split the IFM space between IFM and IFM2.
//  - Choice: the lowest (IFM fetch + weight fetch) per OFM element (single precision, as Vela);
//    ties go to small (<= 4x4) blocks that cover more of the IFM. Halved cost when the whole IFM
//    fits in two IFM buffers. Part-kernel-first when its MAC utilisation is at least depth-first's.
//
// Complexity: enumerate/choose visit (H/uh) * (W/uw) * (C/uc) candidates, at most 32*64*16 =
// 32768 on U55-32 and 16*32*16 = 8192 on U55-256, each O(1). The cycle model caches the choice.
#pragma once

#include <optional>
#include <vector>

#include "cascader/arch/accelerator.hpp"
#include "cascader/arch/geometry.hpp"

namespace cascader {

// The NPU engine an op runs on (register NPU_OP_* groups).
enum class NpuBlockType { ConvolutionMxN = 0, ConvolutionDepthWise, VectorProduct, Pooling, ElementWise, ReduceSum };

// Order in which the DPU walks kernel and IFM depth.
enum class Traversal { Auto = 0, DepthFirst, PartKernelFirst };

struct ShramLayout {
  int ifm_start = 0, ifm_end = 0, ifm2_start = 0, acc_start = 0, lut_start = 0;  // in banks
};

struct BlockConfig {
  BlockShape ofm_block;
  BlockShape ifm_block;
  ShramElement accumulator = ShramElement::Acc32;
  bool part_kernel_first = false;
  ShramLayout layout;
};

// What the block config depends on; also the key of the cycle model's cache.
struct BlockQuery {
  NpuBlockType block_type = NpuBlockType::ConvolutionMxN;
  Shape4 ifm, ofm;
  std::optional<Shape4> ifm2;
  bool ifm2_scalar = false;  // elementwise with a scalar second operand: no IFM2 buffer
  int ifm_bits = 8;
  Kernel kernel;
  int lut_bytes = 0;         // activation table copied into SHRAM (0: none)
  bool rescaled = true;      // 16-bit ops with rescaling need 40-bit accumulators
  Traversal traversal = Traversal::Auto;
  // A fixed OFM block depth (0: searched). The stripes of one operation share its weight
  // stream, which is encoded for one block depth: only their height and width may differ.
  int block_depth = 0;
  // 2: the NPU repeats each IFM element (nearest-neighbour resize, transposed convolution's
  // zeros); the IFM block then holds half the walked rows and columns.
  int ifm_upscale = 1;
  bool operator==(const BlockQuery& o) const;
};

// The traversal Vela would pick: part-kernel-first when its DPU utilisation is not lower.
bool prefers_part_kernel_first(const Shape4& ifm, int ifm_bits, const Kernel& kernel);

// Checks one OFM block; nullopt if it breaks the micro-block/maximum rules or does not fit SHRAM.
std::optional<BlockConfig> try_block_config(const AcceleratorConfig& arch, const BlockQuery& q,
                                            const BlockShape& ofm_block);

// Every valid block config for the op (in search order).
std::vector<BlockConfig> enumerate_block_configs(const AcceleratorConfig& arch, const BlockQuery& q);

// The cheapest valid block config; throws InvalidArgument if none fits (e.g. IFM too deep in int32).
BlockConfig choose_block_config(const AcceleratorConfig& arch, const BlockQuery& q);

}  // namespace cascader
