#include "cascader/sim/command_stream.hpp"

#include <sstream>

#include "cascader/arch/npu_registers.hpp"
#include "cascader/common/error.hpp"

namespace cascader::sim {

namespace {

using namespace npu;  // the register map shared with the encoder

std::string hex(uint32_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

[[noreturn]] void fail(size_t offset, const std::string& what) {
  std::ostringstream s;
  s << "command stream word " << offset << ": " << what;
  throw BinaryError(s.str());
}

// The register file: cmd0 parameters (16 bits) and cmd1 payloads (32 bits + 16-bit high
// part, which holds address bits 32-47 on the U65).
struct Registers {
  std::array<uint16_t, 1024> r0{};
  std::array<uint64_t, 1024> r1{};

  int s16(uint32_t op) const { return static_cast<int16_t>(r0[op]); }
  int u16(uint32_t op) const { return r0[op]; }
  uint32_t lo(uint32_t op) const { return static_cast<uint32_t>(r1[op] & 0xFFFFFFFFu); }
  uint32_t hi(uint32_t op) const { return static_cast<uint32_t>(r1[op] >> 32); }
};

DataType ifm_dtype(int precision, size_t offset) {
  switch (precision & 0xF) {
    case 0: return DataType::U8;
    case 1: return DataType::S8;
    case 4: return DataType::U16;
    case 5: return DataType::S16;
    case 9: return DataType::S32;
    default: fail(offset, "reserved IFM precision " + std::to_string(precision & 0xF));
  }
}

DataType ofm_dtype(int precision, size_t offset) {
  switch (precision & 0x7) {
    case 0: return DataType::U8;
    case 1: return DataType::S8;
    case 2: return DataType::U16;
    case 3: return DataType::S16;
    case 5: return DataType::S32;
    default: fail(offset, "reserved OFM precision " + std::to_string(precision & 0x7));
  }
}

Layout layout_of(int format, size_t offset) {
  if (format > 1) fail(offset, "reserved feature map format " + std::to_string(format));
  return format == 1 ? Layout::NHCWB16 : Layout::NHWC;
}

Rounding rounding_of(int mode, size_t offset) {
  if (mode > 2) fail(offset, "reserved rounding mode 3");
  return static_cast<Rounding>(mode);
}

void input_map(const Registers& r, FeatureMap& fm, uint32_t region, uint32_t base0,
               uint32_t h0, uint32_t h1, uint32_t w0, uint32_t zp) {
  fm.region = r.u16(region) & 0x7;
  for (int i = 0; i < 4; ++i) fm.base[i] = r.r1[base0 + i];
  fm.stride_x = static_cast<int64_t>(r.r1[base0 + 4]);
  fm.stride_y = static_cast<int64_t>(r.r1[base0 + 5]);
  fm.stride_c = static_cast<int64_t>(r.r1[base0 + 6]);
  fm.height0 = r.u16(h0) + 1;
  fm.height1 = r.u16(h1) + 1;
  fm.width0 = r.u16(w0) + 1;
  fm.zero_point = r.s16(zp);
}

NpuOperation block_operation(const Registers& r, OpKind kind, int sub_op, size_t offset) {
  NpuOperation op;
  op.kind = kind;
  op.sub_op = sub_op;
  op.word_offset = offset;

  input_map(r, op.ifm, IFM_REGION, IFM_BASE0, IFM_HEIGHT0_M1, IFM_HEIGHT1_M1, IFM_WIDTH0_M1,
            IFM_ZERO_POINT);
  const int ifm_prec = r.u16(IFM_PRECISION);
  op.ifm.dtype = ifm_dtype(ifm_prec, offset);
  op.ifm.layout = layout_of((ifm_prec >> kFormatShift) & 3, offset);
  op.ifm.depth = r.u16(IFM_DEPTH_M1) + 1;
  op.ifm_scale_mode = (ifm_prec >> kScaleModeShift) & 3;
  if (op.ifm_scale_mode == 3) fail(offset, "reserved IFM scale mode 3");
  op.ifm_rounding = rounding_of((ifm_prec >> kRoundingShift) & 3, offset);

  input_map(r, op.ofm, OFM_REGION, OFM_BASE0, OFM_HEIGHT0_M1, OFM_HEIGHT1_M1, OFM_WIDTH0_M1,
            OFM_ZERO_POINT);
  const int ofm_prec = r.u16(OFM_PRECISION);
  op.ofm.dtype = ofm_dtype(ofm_prec, offset);
  op.ofm.layout = layout_of((ofm_prec >> kFormatShift) & 3, offset);
  op.global_scale = (ofm_prec >> kOfmScalingShift) & 1;
  op.rounding = rounding_of((ofm_prec >> kRoundingShift) & 3, offset);
  op.ofm.height = r.u16(OFM_HEIGHT_M1) + 1;
  op.ofm.width = r.u16(OFM_WIDTH_M1) + 1;
  op.ofm.depth = r.u16(OFM_DEPTH_M1) + 1;

  op.padding = {r.u16(IFM_PAD_TOP), r.u16(IFM_PAD_LEFT), r.u16(IFM_PAD_BOTTOM), r.u16(IFM_PAD_RIGHT)};
  op.ifm_upscale = r.u16(IFM_UPSCALE) & 3;
  if (op.ifm_upscale == 3) fail(offset, "reserved IFM upscale mode 3");

  const int ks = r.u16(KERNEL_STRIDE);
  op.kernel.stride_x = (((ks >> kStrideXLsb) & 1) | (((ks >> kStrideXMsb) & 7) << 1)) + 1;
  op.kernel.stride_y = (((ks >> kStrideYLsb) & 1) | (((ks >> kStrideYMsb) & 7) << 1)) + 1;
  op.kernel.part_kernel_first = (ks >> kPartKernelFirst) & 1;
  op.kernel.dilation_x = ((ks >> kDilationX) & 1) + 1;
  op.kernel.dilation_y = ((ks >> kDilationY) & 1) + 1;
  op.kernel.width = r.u16(KERNEL_WIDTH_M1) + 1;
  op.kernel.height = r.u16(KERNEL_HEIGHT_M1) + 1;
  // Elementwise operations have no kernel or padding; the registers hold an earlier op's.
  if (kind == OpKind::Elementwise) {
    op.kernel = Kernel{};
    op.padding = Padding{};
  }

  // Only convolutions read weight and scale streams; elsewhere the registers are stale.
  if (kind == OpKind::Conv || kind == OpKind::Depthwise) {
    op.weights = {r.u16(WEIGHT_REGION) & 0x7, r.r1[WEIGHT_BASE], r.lo(WEIGHT_LENGTH)};
    op.scales = {r.u16(SCALE_REGION) & 0x7, r.r1[SCALE_BASE], r.lo(SCALE_LENGTH)};
  }

  const int act = r.u16(ACTIVATION);
  op.activation.function = act & 0xFFF;
  op.activation.clip_range = (act >> kClipRangeShift) & 0xF;
  op.activation.min = r.s16(ACTIVATION_MIN);
  op.activation.max = r.s16(ACTIVATION_MAX);
  const int f = op.activation.function;
  if (!(f == 0 || f == 3 || f == 4 || (f >= 16 && f <= 23))) {
    fail(offset, "reserved activation function " + std::to_string(f));
  }

  op.ofm_scale = r.lo(OFM_SCALE);
  op.ofm_shift = r.hi(OFM_SCALE) & 0x3F;
  if (kind == OpKind::Elementwise) {  // only the elementwise unit scales its operands
    op.opa_scale = r.lo(OPA_SCALE);
    op.opa_shift = r.hi(OPA_SCALE) & 0x3F;
    op.opb_scale = r.lo(OPB_SCALE);
  }
  op.acc_format = r.u16(ACC_FORMAT) & 3;
  op.parallel_mode = r.u16(PARALLEL_MODE);
  if (kind == OpKind::Conv || kind == OpKind::Depthwise) {
    op.weights1 = {r.u16(WEIGHT_REGION) & 0x7, r.r1[WEIGHT1_BASE], r.lo(WEIGHT1_LENGTH)};
    op.scales1 = {r.u16(SCALE_REGION) & 0x7, r.r1[SCALE1_BASE], r.lo(SCALE1_LENGTH)};
  }
  op.block_width = r.u16(OFM_BLK_WIDTH_M1) + 1;
  op.block_height = r.u16(OFM_BLK_HEIGHT_M1) + 1;
  op.block_depth = r.u16(OFM_BLK_DEPTH_M1) + 1;

  if (op.has_ifm2()) {
    const int bc = r.u16(IFM2_BROADCAST);
    op.broadcast_h = bc & 1;
    op.broadcast_w = (bc >> 1) & 1;
    op.broadcast_c = (bc >> 2) & 1;
    op.reversed_operands = (bc >> kReversedOperands) & 1;
    op.ifm2_is_scalar = (bc >> kIfm2Scalar) & 1;
    op.ifm2_scalar = r.s16(IFM2_SCALAR);
    input_map(r, op.ifm2, IFM2_REGION, IFM2_BASE0, IFM2_HEIGHT0_M1, IFM2_HEIGHT1_M1,
              IFM2_WIDTH0_M1, IFM2_ZERO_POINT);
    const int p2 = r.u16(IFM2_PRECISION);
    op.ifm2.dtype = ifm_dtype(p2, offset);
    op.ifm2.layout = layout_of((p2 >> kFormatShift) & 3, offset);
    op.ifm2.depth = op.broadcast_c ? 1 : op.ofm.depth;
  }
  return op;
}

}  // namespace

int element_size(DataType t) {
  switch (t) {
    case DataType::U8: case DataType::S8: return 1;
    case DataType::U16: case DataType::S16: return 2;
    case DataType::S32: return 4;
  }
  return 1;
}

bool is_signed(DataType t) { return t == DataType::S8 || t == DataType::S16 || t == DataType::S32; }

const char* name(DataType t) {
  static const char* names[] = {"uint8", "int8", "uint16", "int16", "int32"};
  return names[static_cast<int>(t)];
}

const char* name(OpKind k) {
  static const char* names[] = {"conv", "depthwise", "pool", "elementwise", "dma"};
  return names[static_cast<int>(k)];
}

const char* name(PoolMode m) {
  static const char* names[] = {"MAX", "AVERAGE", "REDUCE_SUM"};
  return names[static_cast<int>(m)];
}

const char* name(ElementwiseMode m) {
  static const char* names[] = {"MUL", "ADD", "SUB", "MIN", "MAX", "LRELU", "ABS", "CLZ", "SHR", "SHL"};
  return names[static_cast<int>(m)];
}

bool NpuOperation::has_ifm2() const {
  if (kind != OpKind::Elementwise) return false;
  const auto m = static_cast<ElementwiseMode>(sub_op);
  return !(m == ElementwiseMode::Abs || m == ElementwiseMode::LRelu || m == ElementwiseMode::Clz);
}

uint64_t FeatureMap::address(int y, int x, int c) const {
  int tile = 0;
  if (x >= width0) {
    x -= width0;
    if (y >= height1) {
      y -= height1;
      tile = 3;
    } else {
      tile = 1;
    }
  } else if (y >= height0) {
    y -= height0;
    tile = 2;
  }
  const int64_t es = element_size(dtype);
  int64_t offset;
  if (layout == Layout::NHWC) {
    offset = y * stride_y + x * stride_x + c * es;
  } else {
    offset = y * stride_y + x * stride_x + (c / 16) * stride_c + (c % 16) * es;
  }
  return base[tile] + static_cast<uint64_t>(offset);
}

CommandStream decode_command_stream(const uint32_t* words, size_t count) {
  CommandStream cs;
  cs.words = count;
  Registers r;
  bool stopped = false;
  size_t i = 0;
  while (i < count) {
    const size_t offset = i;
    const uint32_t w = words[i++];
    const uint32_t code = w & 0xFFFF;
    const uint32_t param = w >> 16;
    const uint32_t mode = (code >> 14) & 3;
    const uint32_t op = code & kOpcodeMask;
    if ((code >> 10) & 0xF) fail(offset, "reserved bits set in command word " + hex(w));
    if (mode == 1) {
      if (!known_cmd1(op)) fail(offset, "unknown cmd1 opcode " + hex(op));
      if (i >= count) fail(offset, "truncated cmd1: payload word missing");
      r.r1[op] = (static_cast<uint64_t>(param) << 32) | words[i++];
      continue;
    }
    if (mode != 0) fail(offset, "reserved payload size " + std::to_string(mode));
    if (!known_cmd0(op)) fail(offset, "unknown cmd0 opcode " + hex(op));
    if (op >= 0x100) {
      r.r0[op] = static_cast<uint16_t>(param);
      continue;
    }
    switch (op) {
      case OP_STOP:
        stopped = true;
        break;
      case OP_CONV:
        cs.operations.push_back(block_operation(r, OpKind::Conv, 0, offset));
        break;
      case OP_DEPTHWISE:
        cs.operations.push_back(block_operation(r, OpKind::Depthwise, 0, offset));
        break;
      case OP_POOL:
        if (param > 2) fail(offset, "reserved pooling mode " + std::to_string(param));
        cs.operations.push_back(block_operation(r, OpKind::Pool, static_cast<int>(param), offset));
        break;
      case OP_ELEMENTWISE:
        if (param > 9) fail(offset, "reserved elementwise mode " + std::to_string(param));
        cs.operations.push_back(block_operation(r, OpKind::Elementwise, static_cast<int>(param), offset));
        break;
      case OP_DMA_START: {
        NpuOperation dma;
        dma.kind = OpKind::Dma;
        dma.word_offset = offset;
        const int src = r.u16(DMA0_SRC_REGION), dst = r.u16(DMA0_DST_REGION);
        if (((src >> 9) & 3) != 0 || ((dst >> 9) & 3) != 0) {
          // Vela 5.2 programs 2-D/3-D DMAs only for GATHER/SCATTER, which it maps on Ethos-U85 alone.
          fail(offset, "DMA stride modes other than 1-D are not supported (no U55/U65 binary of Vela 5.2 uses them)");
        }
        dma.dma_src = {static_cast<int>(src & kDmaRegionMask), r.r1[DMA0_SRC], r.r1[DMA0_LEN]};
        dma.dma_dst = {static_cast<int>(dst & kDmaRegionMask), r.r1[DMA0_DST], r.r1[DMA0_LEN]};
        cs.operations.push_back(dma);
        break;
      }
      default:  // waits, IRQ and PMU masks order work; they do not change results
        break;
    }
    if (stopped) break;
  }
  if (!stopped) fail(i, "command stream ends without NPU_OP_STOP");
  cs.words = i;
  return cs;
}

}  // namespace cascader::sim
