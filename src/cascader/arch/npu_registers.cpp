#include "cascader/arch/npu_registers.hpp"

namespace cascader::npu {

bool known_cmd0(uint32_t op) {
  switch (op) {
    case OP_STOP: case OP_IRQ: case OP_CONV: case OP_DEPTHWISE: case OP_POOL: case OP_ELEMENTWISE:
    case OP_DMA_START: case OP_DMA_WAIT: case OP_KERNEL_WAIT: case OP_PMU_MASK:
    case IFM_PAD_TOP: case IFM_PAD_LEFT: case IFM_PAD_RIGHT: case IFM_PAD_BOTTOM:
    case IFM_DEPTH_M1: case IFM_PRECISION: case IFM_UPSCALE: case IFM_ZERO_POINT:
    case IFM_WIDTH0_M1: case IFM_HEIGHT0_M1: case IFM_HEIGHT1_M1: case IFM_IB_END: case IFM_REGION:
    case OFM_WIDTH_M1: case OFM_HEIGHT_M1: case OFM_DEPTH_M1: case OFM_PRECISION:
    case OFM_BLK_WIDTH_M1: case OFM_BLK_HEIGHT_M1: case OFM_BLK_DEPTH_M1: case OFM_ZERO_POINT:
    case OFM_WIDTH0_M1: case OFM_HEIGHT0_M1: case OFM_HEIGHT1_M1: case OFM_REGION:
    case KERNEL_WIDTH_M1: case KERNEL_HEIGHT_M1: case KERNEL_STRIDE: case PARALLEL_MODE:
    case ACC_FORMAT: case ACTIVATION: case ACTIVATION_MIN: case ACTIVATION_MAX:
    case WEIGHT_REGION: case SCALE_REGION: case AB_START: case BLOCKDEP:
    case DMA0_SRC_REGION: case DMA0_DST_REGION: case DMA0_SIZE0: case DMA0_SIZE1:
    case IFM2_BROADCAST: case IFM2_SCALAR: case IFM2_PRECISION: case IFM2_ZERO_POINT:
    case IFM2_WIDTH0_M1: case IFM2_HEIGHT0_M1: case IFM2_HEIGHT1_M1: case IFM2_IB_START:
    case IFM2_REGION:
      return true;
    default:
      return false;
  }
}

bool known_cmd1(uint32_t op) {
  return (op <= IFM_STRIDE_C) || (op >= OFM_BASE0 && op <= OFM_STRIDE_C) ||
         (op >= WEIGHT_BASE && op <= OPB_SCALE) || (op >= DMA0_SRC && op <= DMA0_SKIP1) ||
         (op >= IFM2_BASE0 && op <= IFM2_STRIDE_C) || (op >= WEIGHT1_BASE && op <= SCALE1_LENGTH);
}

}  // namespace cascader::npu
