// The Ethos-U85 command-stream register map: opcodes and the bit fields of the registers that
// pack several fields. The word format is the U55's (arch/npu_registers.hpp: 10-bit opcode,
// payload-size bits 14-15, 16-bit parameter; a cmd1 is followed by a 32-bit payload), and most
// opcodes keep their U55 numbers; the U85 adds resize, broadcast of either input, operand
// scales with their own rounding, up to four weight streams, 2-D/3-D and indexed DMA, and
// changes the layout of the precision, stride, activation and accumulator registers. The map
// is the hardware's (Vela 5.2's ethos_u85_interface), not a choice.
#pragma once

#include <cstdint>

namespace cascader::ethos_u85 {

// cmd0 opcodes. Operation commands are < 0x100, register writes >= 0x100.
enum Cmd0 : uint32_t {
  OP_STOP = 0x000, OP_IRQ = 0x001, OP_CONV = 0x002, OP_DEPTHWISE = 0x003, OP_POOL = 0x005,
  OP_ELEMENTWISE = 0x006, OP_RESIZE = 0x007, OP_DMA_START = 0x010, OP_DMA_WAIT = 0x011,
  OP_KERNEL_WAIT = 0x012, OP_PMU_MASK = 0x013,
  IFM_PAD_TOP = 0x100, IFM_PAD_LEFT = 0x101, IFM_PAD_RIGHT = 0x102, IFM_PAD_BOTTOM = 0x103,
  IFM_DEPTH_M1 = 0x104, IFM_PRECISION = 0x105, IFM_UPSCALE = 0x107, IFM_BROADCAST = 0x108,
  IFM_ZERO_POINT = 0x109, IFM_WIDTH0_M1 = 0x10A, IFM_HEIGHT0_M1 = 0x10B, IFM_HEIGHT1_M1 = 0x10C,
  IFM_REGION = 0x10F, OFM_WIDTH_M1 = 0x111, OFM_HEIGHT_M1 = 0x112, OFM_DEPTH_M1 = 0x113,
  OFM_PRECISION = 0x114, OFM_BLK_WIDTH_M1 = 0x115, OFM_BLK_HEIGHT_M1 = 0x116,
  OFM_BLK_DEPTH_M1 = 0x117, OFM_ZERO_POINT = 0x118, OFM_WIDTH0_M1 = 0x11A,
  OFM_HEIGHT0_M1 = 0x11B, OFM_HEIGHT1_M1 = 0x11C, OFM_REGION = 0x11F,
  KERNEL_WIDTH_M1 = 0x120, KERNEL_HEIGHT_M1 = 0x121, KERNEL_STRIDE = 0x122, ACC_FORMAT = 0x124,
  ACTIVATION = 0x125, ACTIVATION_MIN = 0x126, ACTIVATION_MAX = 0x127, WEIGHT_REGION = 0x128,
  SCALE_REGION = 0x129, RESIZE_X_SCALE_N_M1 = 0x12A, RESIZE_Y_SCALE_N_M1 = 0x12B,
  RESIZE_X_OFFSET = 0x12C, RESIZE_Y_OFFSET = 0x12D, WEIGHT_FORMAT = 0x12E, BLOCKDEP = 0x12F,
  DMA0_SRC_REGION = 0x130, DMA0_DST_REGION = 0x131, DMA0_SIZE0 = 0x132, DMA0_SIZE1 = 0x133,
  DMA0_IDX_REGION = 0x134, IFM2_BROADCAST = 0x180, IFM2_PRECISION = 0x185, IFM2_ZERO_POINT = 0x189,
  IFM2_WIDTH0_M1 = 0x18A, IFM2_HEIGHT0_M1 = 0x18B, IFM2_HEIGHT1_M1 = 0x18C, IFM2_REGION = 0x18F,
};

// cmd1 opcodes, each followed by a 32-bit payload word; an address's bits 32-39 are in the
// parameter.
enum Cmd1 : uint32_t {
  IFM_BASE0 = 0x000, IFM_BASE1, IFM_BASE2, IFM_BASE3, IFM_STRIDE_X, IFM_STRIDE_Y, IFM_STRIDE_C,
  OFM_BASE0 = 0x010, OFM_BASE1, OFM_BASE2, OFM_BASE3, OFM_STRIDE_X, OFM_STRIDE_Y, OFM_STRIDE_C,
  WEIGHT_BASE = 0x020, WEIGHT_LENGTH, SCALE_BASE, SCALE_LENGTH, OFM_SCALE, IFM_SCALE, IFM2_SCALE,
  OP_SCALAR,
  DMA0_SRC = 0x030, DMA0_DST, DMA0_LEN, DMA0_SRC_STRIDE0, DMA0_SRC_STRIDE1, DMA0_DST_STRIDE0,
  DMA0_DST_STRIDE1, DMA0_IDX, DMA0_IDX_MAX, DMA0_IDX_SKIP1,
  IFM2_BASE0 = 0x080, IFM2_BASE1, IFM2_BASE2, IFM2_BASE3, IFM2_STRIDE_X, IFM2_STRIDE_Y,
  IFM2_STRIDE_C,
  WEIGHT1_BASE = 0x090, WEIGHT1_LENGTH, WEIGHT2_BASE, WEIGHT2_LENGTH, WEIGHT3_BASE, WEIGHT3_LENGTH,
  RESIZE_X = 0x096, RESIZE_Y,
  OP_BRANCH = 0x100,
};

// Parameter fields (bit offsets within the 16-bit parameter).
// IFM/IFM2_PRECISION: signed bit 0, precision 2-3 (8/16/32/64 bits), format 6-7, storage 14-15.
constexpr int kIfmPrecisionShift = 2, kFormatShift = 6, kStorageShift = 14;
// OFM_PRECISION: signed bit 0, precision 1-2, format 6-7, scale mode 8, reverse 9-10,
// transpose 11-13, storage 14-15.
constexpr int kOfmPrecisionShift = 1, kOfmScaleMode = 8, kReverseShift = 9, kTransposeShift = 11;
// Storage: two tile layouts, chained (the chaining buffer, no memory), none.
enum Storage : int { TILE2X2 = 0, TILE3X1 = 1, CHAINED = 2, NONE = 3 };
// KERNEL_STRIDE keeps the U55's bit positions with a one-bit stride MSB (bit 6 x, 9 y) and adds
// the 4x4 kernel decomposition in bit 5; sim::read_geometry reads it for both.
// ACTIVATION: function 0-4, LUT table 5-7, clip range 12 (1: none, 0: 16-bit).
constexpr int kTableShift = 5, kClipRange = 12;
// ACC_FORMAT: format 0-1 (32/48 bit), input 4-5 (reset, keep, from IFM2), output 6 (1: kept
// output disabled: the accumulators are kept for the next operation), micro-block 8-10.
constexpr int kAccInputShift = 4, kAccOutput = 6, kMicroblockShift = 8;
enum AccInput : int { kAccInputReset = 0, kAccInputKeep = 1, kAccInputIfm2 = 2 };
// The micro-block field's values 0-5: height x width 1x1, 1x2, 1x4, 2x2, 2x4, 4x4 (the depth is
// the accelerator's micro-block of that height and width).
constexpr int kMicroblockHeights[] = {1, 1, 1, 2, 2, 4}, kMicroblockWidths[] = {1, 2, 4, 2, 4, 4};
// WEIGHT_FORMAT: fast weight decode bit 0, sparsity bit 4.
constexpr int kWeightSparsity = 4;
// OFM_SCALE / IFM_SCALE / IFM2_SCALE parameter: shift 0-5, double-round 6-10, rounding 13-15.
constexpr int kDoubleRoundShift = 6, kRoundModeShift = 13;
// DMA0_SRC/DST_REGION: region 0-2 and internal memory 8 (as on the U55), stride mode 9-10,
// indexed 11.
constexpr int kDmaStrideShift = 9, kDmaIndexed = 11;
// IFM(2)_BROADCAST: the mode in bits 0-3: bit 0 H, 1 W, 2 C; 8 a scalar operand (OP_SCALAR).
constexpr int kBroadcastScalar = 8;

bool known_cmd0(uint32_t op);
bool known_cmd1(uint32_t op);

}  // namespace cascader::ethos_u85
