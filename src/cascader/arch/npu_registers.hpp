// The Ethos-U55/U65 command-stream register map: opcodes and the bit fields of the registers
// whose values pack several fields. The decoder (sim/command_stream) and the encoder
// (emit/command_encoder) both use this one table, so the two directions cannot drift apart.
// The map is the hardware's (Arm's ethos_u55_regs / the U65 register spec), not a choice.
//
// A cmd0 word holds a 10-bit opcode in bits 0-9, the payload-size field (0) in bits 14-15 and
// a 16-bit parameter in bits 16-31. A cmd1 word has payload size 1 and is followed by a 32-bit
// payload; its 16-bit parameter carries address bits 32-47 on the U65.
#pragma once

#include <cstdint>

namespace cascader::npu {

// cmd0 opcodes. Operation commands are < 0x100, register writes >= 0x100.
enum Cmd0 : uint32_t {
  OP_STOP = 0x000, OP_IRQ = 0x001, OP_CONV = 0x002, OP_DEPTHWISE = 0x003, OP_POOL = 0x005,
  OP_ELEMENTWISE = 0x006, OP_DMA_START = 0x010, OP_DMA_WAIT = 0x011, OP_KERNEL_WAIT = 0x012,
  OP_PMU_MASK = 0x013,
  IFM_PAD_TOP = 0x100, IFM_PAD_LEFT = 0x101, IFM_PAD_RIGHT = 0x102, IFM_PAD_BOTTOM = 0x103,
  IFM_DEPTH_M1 = 0x104, IFM_PRECISION = 0x105, IFM_UPSCALE = 0x107, IFM_ZERO_POINT = 0x109,
  IFM_WIDTH0_M1 = 0x10A, IFM_HEIGHT0_M1 = 0x10B, IFM_HEIGHT1_M1 = 0x10C, IFM_IB_END = 0x10D,
  IFM_REGION = 0x10F, OFM_WIDTH_M1 = 0x111, OFM_HEIGHT_M1 = 0x112, OFM_DEPTH_M1 = 0x113,
  OFM_PRECISION = 0x114, OFM_BLK_WIDTH_M1 = 0x115, OFM_BLK_HEIGHT_M1 = 0x116,
  OFM_BLK_DEPTH_M1 = 0x117, OFM_ZERO_POINT = 0x118, OFM_WIDTH0_M1 = 0x11A,
  OFM_HEIGHT0_M1 = 0x11B, OFM_HEIGHT1_M1 = 0x11C, OFM_REGION = 0x11F,
  KERNEL_WIDTH_M1 = 0x120, KERNEL_HEIGHT_M1 = 0x121, KERNEL_STRIDE = 0x122,
  PARALLEL_MODE = 0x123, ACC_FORMAT = 0x124, ACTIVATION = 0x125, ACTIVATION_MIN = 0x126,
  ACTIVATION_MAX = 0x127, WEIGHT_REGION = 0x128, SCALE_REGION = 0x129, AB_START = 0x12D,
  BLOCKDEP = 0x12F, DMA0_SRC_REGION = 0x130, DMA0_DST_REGION = 0x131, DMA0_SIZE0 = 0x132,
  DMA0_SIZE1 = 0x133, IFM2_BROADCAST = 0x180, IFM2_SCALAR = 0x181, IFM2_PRECISION = 0x185,
  IFM2_ZERO_POINT = 0x189, IFM2_WIDTH0_M1 = 0x18A, IFM2_HEIGHT0_M1 = 0x18B,
  IFM2_HEIGHT1_M1 = 0x18C, IFM2_IB_START = 0x18D, IFM2_REGION = 0x18F,
};

// cmd1 opcodes, each followed by a 32-bit payload word.
enum Cmd1 : uint32_t {
  IFM_BASE0 = 0x000, IFM_BASE1, IFM_BASE2, IFM_BASE3, IFM_STRIDE_X, IFM_STRIDE_Y, IFM_STRIDE_C,
  OFM_BASE0 = 0x010, OFM_BASE1, OFM_BASE2, OFM_BASE3, OFM_STRIDE_X, OFM_STRIDE_Y, OFM_STRIDE_C,
  WEIGHT_BASE = 0x020, WEIGHT_LENGTH, SCALE_BASE, SCALE_LENGTH, OFM_SCALE, OPA_SCALE, OPB_SCALE,
  DMA0_SRC = 0x030, DMA0_DST, DMA0_LEN, DMA0_SKIP0, DMA0_SKIP1,
  IFM2_BASE0 = 0x080, IFM2_BASE1, IFM2_BASE2, IFM2_BASE3, IFM2_STRIDE_X, IFM2_STRIDE_Y,
  IFM2_STRIDE_C,
  WEIGHT1_BASE = 0x090, WEIGHT1_LENGTH, SCALE1_BASE, SCALE1_LENGTH,
};

// Word layout.
constexpr uint32_t kOpcodeMask = 0x3FF;
constexpr uint32_t kCmd1Flag = 1u << 14;  // payload size 1: a 32-bit word follows
constexpr int kParamShift = 16;

// IFM/IFM2_PRECISION: type code (bit 0 signed, bits 2-3 precision 8/16/32) in bits 0-3, format
// in 6-7, the elementwise operand scale mode in 8-9, the IFM rounding in 14-15.
// OFM_PRECISION: type code (bit 0 signed, bits 1-2 precision) in bits 0-2, format in 6-7, the
// global-scale flag in bit 8, rounding in 14-15.
constexpr int kFormatShift = 6, kScaleModeShift = 8, kOfmScalingShift = 8, kRoundingShift = 14;

// KERNEL_STRIDE: stride-1 splits into an LSB (bit 0 x, bit 1 y) and 3 MSBs (bits 6-8 x, 9-11 y);
// bit 2 the weight order (part-kernel-first), bits 3/4 dilation x/y.
constexpr int kStrideXLsb = 0, kStrideYLsb = 1, kPartKernelFirst = 2, kDilationX = 3, kDilationY = 4;
constexpr int kStrideXMsb = 6, kStrideYMsb = 9;

// ACTIVATION: function in bits 0-11, clip range in bits 12-15.
constexpr int kClipRangeShift = 12;

// IFM2_BROADCAST: broadcast H/W/C in bits 0-2, operand order (reversed) bit 6, scalar bit 7.
constexpr int kReversedOperands = 6, kIfm2Scalar = 7;

// DMA0_SRC/DST_REGION: region (or the SHRAM, internal bit 8) in bits 0-8, stride mode in 9-10.
constexpr uint32_t kDmaRegionMask = 0x1FF;

bool known_cmd0(uint32_t op);
bool known_cmd1(uint32_t op);

}  // namespace cascader::npu
