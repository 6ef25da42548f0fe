#include "cascader/sim/command_stream.hpp"

#include <sstream>

#include "cascader/arch/ethos_u85/command_decoder.hpp"
#include "cascader/arch/npu_registers.hpp"
#include "cascader/common/error.hpp"
#include "cascader/sim/register_file.hpp"

namespace cascader::sim {

namespace {

using namespace npu;  // the register map shared with the encoder

using Registers = RegisterFile;

// The U55/U65 register file keeps a cmd1's parameter above its payload: all 48 bits are the
// address (the U65 uses bits 32-47).
constexpr uint64_t kAddressMask = ~uint64_t{0};

std::string hex(uint32_t v) { return hex_word(v); }

[[noreturn]] void fail(size_t offset, const std::string& what) { command_stream_error(offset, what); }

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

NpuOperation block_operation(const Registers& r, OpKind kind, int sub_op, size_t offset) {
  NpuOperation op;
  op.kind = kind;
  op.sub_op = sub_op;
  op.word_offset = offset;

  read_feature_map(r, op.ifm, IFM_REGION, IFM_BASE0, IFM_HEIGHT0_M1, IFM_HEIGHT1_M1, IFM_WIDTH0_M1,
                   IFM_ZERO_POINT, kAddressMask);
  const int ifm_prec = r.u16(IFM_PRECISION);
  op.ifm.dtype = ifm_dtype(ifm_prec, offset);
  op.ifm.layout = layout_of((ifm_prec >> kFormatShift) & 3, offset);
  op.ifm.depth = r.u16(IFM_DEPTH_M1) + 1;
  op.ifm_scale_mode = (ifm_prec >> kScaleModeShift) & 3;
  if (op.ifm_scale_mode == 3) fail(offset, "reserved IFM scale mode 3");
  op.ifm_rounding = rounding_of((ifm_prec >> kRoundingShift) & 3, offset);

  read_feature_map(r, op.ofm, OFM_REGION, OFM_BASE0, OFM_HEIGHT0_M1, OFM_HEIGHT1_M1, OFM_WIDTH0_M1,
                   OFM_ZERO_POINT, kAddressMask);
  const int ofm_prec = r.u16(OFM_PRECISION);
  op.ofm.dtype = ofm_dtype(ofm_prec, offset);
  op.ofm.layout = layout_of((ofm_prec >> kFormatShift) & 3, offset);
  op.global_scale = (ofm_prec >> kOfmScalingShift) & 1;
  op.rounding = rounding_of((ofm_prec >> kRoundingShift) & 3, offset);
  read_geometry(r, op, 3, offset);

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
    read_feature_map(r, op.ifm2, IFM2_REGION, IFM2_BASE0, IFM2_HEIGHT0_M1, IFM2_HEIGHT1_M1,
                     IFM2_WIDTH0_M1, IFM2_ZERO_POINT, kAddressMask);
    const int p2 = r.u16(IFM2_PRECISION);
    op.ifm2.dtype = ifm_dtype(p2, offset);
    op.ifm2.layout = layout_of((p2 >> kFormatShift) & 3, offset);
    op.ifm2.depth = op.broadcast_c ? 1 : op.ofm.depth;
  }
  return op;
}

}  // namespace

void read_feature_map(const RegisterFile& r, FeatureMap& fm, uint32_t region, uint32_t base0, uint32_t height0,
                      uint32_t height1, uint32_t width0, uint32_t zero_point, uint64_t address_mask) {
  fm.region = r.u16(region) & 0x7;
  for (uint32_t i = 0; i < 4; ++i) fm.base[i] = r.r1[base0 + i] & address_mask;
  fm.stride_x = static_cast<int64_t>(r.r1[base0 + 4] & address_mask);
  fm.stride_y = static_cast<int64_t>(r.r1[base0 + 5] & address_mask);
  fm.stride_c = static_cast<int64_t>(r.r1[base0 + 6] & address_mask);
  fm.height0 = r.u16(height0) + 1;
  fm.height1 = r.u16(height1) + 1;
  fm.width0 = r.u16(width0) + 1;
  fm.zero_point = r.s16(zero_point);
}

void read_geometry(const RegisterFile& r, NpuOperation& op, int stride_msb_bits, size_t offset) {
  op.ofm.height = r.u16(OFM_HEIGHT_M1) + 1;
  op.ofm.width = r.u16(OFM_WIDTH_M1) + 1;
  op.ofm.depth = r.u16(OFM_DEPTH_M1) + 1;

  op.padding = {r.u16(IFM_PAD_TOP), r.u16(IFM_PAD_LEFT), r.u16(IFM_PAD_BOTTOM), r.u16(IFM_PAD_RIGHT)};
  op.ifm_upscale = r.u16(IFM_UPSCALE) & 3;
  if (op.ifm_upscale == 3) command_stream_error(offset, "reserved IFM upscale mode 3");

  const int ks = r.u16(KERNEL_STRIDE);
  const int msb = (1 << stride_msb_bits) - 1;
  op.kernel.stride_x = (((ks >> kStrideXLsb) & 1) | (((ks >> kStrideXMsb) & msb) << 1)) + 1;
  op.kernel.stride_y = (((ks >> kStrideYLsb) & 1) | (((ks >> kStrideYMsb) & msb) << 1)) + 1;
  op.kernel.part_kernel_first = (ks >> kPartKernelFirst) & 1;
  op.kernel.dilation_x = ((ks >> kDilationX) & 1) + 1;
  op.kernel.dilation_y = ((ks >> kDilationY) & 1) + 1;
  op.kernel.width = r.u16(KERNEL_WIDTH_M1) + 1;
  op.kernel.height = r.u16(KERNEL_HEIGHT_M1) + 1;
  // Elementwise operations have no kernel or padding; the registers hold an earlier op's.
  if (op.kind == OpKind::Elementwise) {
    op.kernel = Kernel{};
    op.padding = Padding{};
  }
}

NpuOperation read_dma(const RegisterFile& r, size_t offset, uint64_t address_mask) {
  NpuOperation dma;
  dma.kind = OpKind::Dma;
  dma.word_offset = offset;
  const uint64_t length = r.r1[DMA0_LEN] & address_mask;
  dma.dma_src = {static_cast<int>(r.u16(DMA0_SRC_REGION) & kDmaRegionMask), r.r1[DMA0_SRC] & address_mask, length};
  dma.dma_dst = {static_cast<int>(r.u16(DMA0_DST_REGION) & kDmaRegionMask), r.r1[DMA0_DST] & address_mask, length};
  return dma;
}

void command_stream_error(size_t offset, const std::string& what) {
  std::ostringstream s;
  s << "command stream word " << offset << ": " << what;
  throw BinaryError(s.str());
}

std::string hex_word(uint32_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

int element_size(DataType t) {
  switch (t) {
    case DataType::U8: case DataType::S8: return 1;
    case DataType::U16: case DataType::S16: return 2;
    case DataType::S32: return 4;
    case DataType::S64: return 8;
  }
  return 1;
}

bool is_signed(DataType t) {
  return t == DataType::S8 || t == DataType::S16 || t == DataType::S32 || t == DataType::S64;
}

const char* name(DataType t) {
  static const char* names[] = {"uint8", "int8", "uint16", "int16", "int32", "int64"};
  return names[static_cast<int>(t)];
}

const char* name(OpKind k) {
  static const char* names[] = {"conv", "depthwise", "pool", "elementwise", "dma", "resize"};
  return names[static_cast<int>(k)];
}

const char* name(PoolMode m) {
  switch (m) {
    case PoolMode::Max: return "MAX";
    case PoolMode::Average: return "AVERAGE";
    case PoolMode::ReduceSum: return "REDUCE_SUM";
    case PoolMode::Sum: return "SUM";
    case PoolMode::None: return "NONE";
    case PoolMode::Min: return "MIN";
    case PoolMode::ArgmaxX: return "ARGMAX_X";
    case PoolMode::ArgmaxY: return "ARGMAX_Y";
  }
  return "?";
}

const char* name(ElementwiseMode m) {
  switch (m) {
    case ElementwiseMode::Mul: return "MUL";
    case ElementwiseMode::Add: return "ADD";
    case ElementwiseMode::Sub: return "SUB";
    case ElementwiseMode::Min: return "MIN";
    case ElementwiseMode::Max: return "MAX";
    case ElementwiseMode::LRelu: return "LRELU";
    case ElementwiseMode::Abs: return "ABS";
    case ElementwiseMode::Clz: return "CLZ";
    case ElementwiseMode::Shr: return "SHR";
    case ElementwiseMode::Shl: return "SHL";
    case ElementwiseMode::Lsr: return "LSR";
    case ElementwiseMode::Div: return "DIV";
    case ElementwiseMode::CmpEq: return "CMP_EQ";
    case ElementwiseMode::CmpNe: return "CMP_NE";
    case ElementwiseMode::CmpGe: return "CMP_GE";
    case ElementwiseMode::CmpGt: return "CMP_GT";
    case ElementwiseMode::And: return "AND";
    case ElementwiseMode::Or: return "OR";
    case ElementwiseMode::Xor: return "XOR";
    case ElementwiseMode::Not: return "NOT";
    case ElementwiseMode::AndNot: return "AND_NOT";
  }
  return "?";
}

bool NpuOperation::has_ifm2() const {
  if (kind != OpKind::Elementwise) return false;
  const auto m = static_cast<ElementwiseMode>(sub_op);
  return !(m == ElementwiseMode::Abs || m == ElementwiseMode::LRelu || m == ElementwiseMode::Clz ||
           m == ElementwiseMode::Not);
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

CommandStream decode_command_stream(const uint32_t* words, size_t count, Product product) {
  if (product == Product::EthosU85) return ethos_u85::decode_command_stream(words, count);
  CommandStream cs;
  Registers r;
  cs.words = replay_command_stream(words, count, r, known_cmd0, known_cmd1, [&](uint32_t op, uint32_t param, size_t offset) {
    switch (op) {
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
      case OP_DMA_START:
        if (((r.u16(DMA0_SRC_REGION) >> 9) & 3) != 0 || ((r.u16(DMA0_DST_REGION) >> 9) & 3) != 0) {
          // Vela 5.2 programs 2-D/3-D DMAs only for GATHER/SCATTER, which it maps on Ethos-U85 alone.
          fail(offset, "DMA stride modes other than 1-D are not supported (no U55/U65 binary of Vela 5.2 uses them)");
        }
        cs.operations.push_back(read_dma(r, offset, kAddressMask));
        break;
      default:  // waits, IRQ and PMU masks order work; they do not change results
        break;
    }
  });
  return cs;
}

size_t replay_command_stream(const uint32_t* words, size_t count, RegisterFile& r, bool (*known_cmd0)(uint32_t),
                             bool (*known_cmd1)(uint32_t),
                             const std::function<void(uint32_t opcode, uint32_t param, size_t offset)>& command) {
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
    if (op == OP_STOP) return i;
    command(op, param, offset);
  }
  fail(i, "command stream ends without NPU_OP_STOP");
}

}  // namespace cascader::sim
