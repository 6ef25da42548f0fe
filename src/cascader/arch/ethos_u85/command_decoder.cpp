#include "cascader/arch/ethos_u85/command_decoder.hpp"

#include <string>

#include "cascader/arch/ethos_u85/dma.hpp"
#include "cascader/arch/ethos_u85/registers.hpp"
#include "cascader/sim/register_file.hpp"

namespace cascader::ethos_u85 {

bool known_cmd0(uint32_t op) {
  switch (op) {
    case OP_STOP: case OP_IRQ: case OP_CONV: case OP_DEPTHWISE: case OP_POOL: case OP_ELEMENTWISE: case OP_RESIZE:
    case OP_DMA_START: case OP_DMA_WAIT: case OP_KERNEL_WAIT: case OP_PMU_MASK:
    case IFM_PAD_TOP: case IFM_PAD_LEFT: case IFM_PAD_RIGHT: case IFM_PAD_BOTTOM: case IFM_DEPTH_M1:
    case IFM_PRECISION: case IFM_UPSCALE: case IFM_BROADCAST: case IFM_ZERO_POINT: case IFM_WIDTH0_M1:
    case IFM_HEIGHT0_M1: case IFM_HEIGHT1_M1: case IFM_REGION: case OFM_WIDTH_M1: case OFM_HEIGHT_M1:
    case OFM_DEPTH_M1: case OFM_PRECISION: case OFM_BLK_WIDTH_M1: case OFM_BLK_HEIGHT_M1: case OFM_BLK_DEPTH_M1:
    case OFM_ZERO_POINT: case OFM_WIDTH0_M1: case OFM_HEIGHT0_M1: case OFM_HEIGHT1_M1: case OFM_REGION:
    case KERNEL_WIDTH_M1: case KERNEL_HEIGHT_M1: case KERNEL_STRIDE: case ACC_FORMAT: case ACTIVATION:
    case ACTIVATION_MIN: case ACTIVATION_MAX: case WEIGHT_REGION: case SCALE_REGION: case RESIZE_X_SCALE_N_M1:
    case RESIZE_Y_SCALE_N_M1: case RESIZE_X_OFFSET: case RESIZE_Y_OFFSET: case WEIGHT_FORMAT: case BLOCKDEP:
    case DMA0_SRC_REGION: case DMA0_DST_REGION: case DMA0_SIZE0: case DMA0_SIZE1: case DMA0_IDX_REGION:
    case IFM2_BROADCAST: case IFM2_PRECISION: case IFM2_ZERO_POINT: case IFM2_WIDTH0_M1: case IFM2_HEIGHT0_M1:
    case IFM2_HEIGHT1_M1: case IFM2_REGION:
      return true;
    default:
      return false;
  }
}

bool known_cmd1(uint32_t op) {
  return op <= OFM_STRIDE_C ? (op <= IFM_STRIDE_C || op >= OFM_BASE0)
         : (op >= WEIGHT_BASE && op <= OP_SCALAR) || (op >= DMA0_SRC && op <= DMA0_IDX_SKIP1) ||
               (op >= IFM2_BASE0 && op <= IFM2_STRIDE_C) || (op >= WEIGHT1_BASE && op <= RESIZE_Y);
  // OP_BRANCH (a jump within the stream) is left out: Vela 5.2 does not emit it, and a replay
  // that does not follow it would read the wrong registers.
}

namespace {

using sim::DataType;
using sim::Layout;
using sim::NpuOperation;
using sim::OpKind;
using Registers = sim::RegisterFile;

[[noreturn]] void fail(size_t offset, const std::string& what) { sim::command_stream_error(offset, what); }

// Signedness and 8/16/32/64-bit precision to a data type; unsigned 32/64-bit maps have no
// counterpart in the decoded operation.
DataType dtype_of(int is_signed, int precision, const char* map, size_t offset) {
  switch (precision) {
    case 0: return is_signed ? DataType::S8 : DataType::U8;
    case 1: return is_signed ? DataType::S16 : DataType::U16;
    case 2: if (is_signed) return DataType::S32; break;
    case 3: if (is_signed) return DataType::S64; break;
    default: break;
  }
  fail(offset, std::string(map) + " precision " + std::to_string(8 << precision) + "-bit " +
                   (is_signed ? "signed" : "unsigned") + " is not decoded");
}

Layout layout_of(int format, size_t offset) {
  if (format > 1) fail(offset, "reserved feature map format " + std::to_string(format));
  return format == 1 ? Layout::NHCWB16 : Layout::NHWC;
}

// Addresses and strides are 40 bits: the payload and the parameter's low 8 bits.
constexpr uint64_t kAddressMask = 0xFFFFFFFFFFull;

void feature_map(const Registers& r, sim::FeatureMap& fm, uint32_t region, uint32_t base0, uint32_t h0, uint32_t h1,
                 uint32_t w0, uint32_t zp) {
  sim::read_feature_map(r, fm, region, base0, h0, h1, w0, zp, kAddressMask);
}

sim::AddressRange stream(const Registers& r, uint32_t region, uint32_t base, uint32_t length) {
  return {r.u16(region) & 0x7, r.r1[base] & kAddressMask, r.r1[length] & kAddressMask};
}

NpuOperation block_operation(const Registers& r, OpKind kind, int sub_op, uint32_t param, size_t offset) {
  NpuOperation op;
  op.kind = kind;
  op.sub_op = sub_op;
  op.word_offset = offset;
  auto& u = op.u85;

  feature_map(r, op.ifm, IFM_REGION, IFM_BASE0, IFM_HEIGHT0_M1, IFM_HEIGHT1_M1, IFM_WIDTH0_M1, IFM_ZERO_POINT);
  const int ip = r.u16(IFM_PRECISION);
  op.ifm.dtype = dtype_of(ip & 1, (ip >> kIfmPrecisionShift) & 3, "IFM", offset);
  op.ifm.layout = layout_of((ip >> kFormatShift) & 3, offset);
  op.ifm.depth = r.u16(IFM_DEPTH_M1) + 1;
  u.ifm_storage = (ip >> kStorageShift) & 3;

  feature_map(r, op.ofm, OFM_REGION, OFM_BASE0, OFM_HEIGHT0_M1, OFM_HEIGHT1_M1, OFM_WIDTH0_M1, OFM_ZERO_POINT);
  const int opr = r.u16(OFM_PRECISION);
  op.ofm.dtype = dtype_of(opr & 1, (opr >> kOfmPrecisionShift) & 3, "OFM", offset);
  op.ofm.layout = layout_of((opr >> kFormatShift) & 3, offset);
  op.global_scale = (opr >> kOfmScaleMode) & 1;
  u.ofm_reverse = (opr >> kReverseShift) & 3;
  u.ofm_transpose = (opr >> kTransposeShift) & 7;
  u.ofm_storage = (opr >> kStorageShift) & 3;
  sim::read_geometry(r, op, 1, offset);  // the U85's stride MSB is one bit (strides up to 4)

  if (kind == OpKind::Conv || kind == OpKind::Depthwise) {
    u.weights_ifm2 = kind == OpKind::Conv && (param & 1);
    u.weight_streams = {stream(r, WEIGHT_REGION, WEIGHT_BASE, WEIGHT_LENGTH),
                        stream(r, WEIGHT_REGION, WEIGHT1_BASE, WEIGHT1_LENGTH),
                        stream(r, WEIGHT_REGION, WEIGHT2_BASE, WEIGHT2_LENGTH),
                        stream(r, WEIGHT_REGION, WEIGHT3_BASE, WEIGHT3_LENGTH)};
    op.weights = u.weight_streams[0];
    op.weights1 = u.weight_streams[1];
    op.scales = stream(r, SCALE_REGION, SCALE_BASE, SCALE_LENGTH);
    const int wf = r.u16(WEIGHT_FORMAT);
    u.weight_format = wf & 1;
    u.weight_sparsity = (wf >> kWeightSparsity) & 1;
  }

  const int act = r.u16(ACTIVATION);
  op.activation.function = act & 0x1F;
  u.activation_table = (act >> kTableShift) & 7;
  op.activation.clip_range = (act >> kClipRange) & 1;
  op.activation.min = r.s16(ACTIVATION_MIN);
  op.activation.max = r.s16(ACTIVATION_MAX);
  const int f = op.activation.function;
  if (!(f <= 1 || f == 4 || f == 5 || f == 7 || (f >= 8 && f <= 11))) {
    fail(offset, "reserved activation function " + std::to_string(f));
  }

  op.ofm_scale = r.lo(OFM_SCALE) & 0x7FFFFFFFu;
  op.ofm_shift = r.hi(OFM_SCALE) & 0x3F;
  u.ofm_double_round = (r.hi(OFM_SCALE) >> kDoubleRoundShift) & 0x1F;
  u.ofm_round_mode = (r.hi(OFM_SCALE) >> kRoundModeShift) & 7;
  if (u.ofm_round_mode > 5) fail(offset, "reserved OFM rounding mode " + std::to_string(u.ofm_round_mode));
  if (kind == OpKind::Elementwise) {  // only the elementwise unit scales its operands
    u.ifm_scale = r.lo(IFM_SCALE) & 0x7FFFFFFFu;
    u.ifm_shift = r.hi(IFM_SCALE) & 0x3F;
    u.ifm_round_mode = (r.hi(IFM_SCALE) >> kRoundModeShift) & 1;
    u.ifm_double_round = (r.hi(IFM_SCALE) >> kDoubleRoundShift) & 0x1F;
    u.ifm2_double_round = (r.hi(IFM2_SCALE) >> kDoubleRoundShift) & 0x1F;
    u.ifm2_scale = r.lo(IFM2_SCALE) & 0x7FFFFFFFu;
    u.ifm2_shift = r.hi(IFM2_SCALE) & 0x3F;
    u.ifm2_round_mode = (r.hi(IFM2_SCALE) >> kRoundModeShift) & 1;
    op.opa_scale = u.ifm_scale;
    op.opa_shift = u.ifm_shift;
    op.opb_scale = u.ifm2_scale;
  }
  const int acc = r.u16(ACC_FORMAT);
  op.acc_format = acc & 3;
  u.acc_input = (acc >> kAccInputShift) & 3;
  u.acc_output = (acc >> kAccOutput) & 1;
  u.microblock = (acc >> kMicroblockShift) & 7;
  if (op.acc_format > 1) fail(offset, "reserved accumulator format " + std::to_string(op.acc_format));
  if (u.acc_input > 2) fail(offset, "reserved accumulator input 3");
  if (u.microblock > 5) fail(offset, "reserved micro-block " + std::to_string(u.microblock));
  op.block_width = r.u16(OFM_BLK_WIDTH_M1) + 1;
  op.block_height = r.u16(OFM_BLK_HEIGHT_M1) + 1;
  op.block_depth = r.u16(OFM_BLK_DEPTH_M1) + 1;

  u.ifm_broadcast_mode = r.u16(IFM_BROADCAST) & 0xF;
  u.op_scalar = r.lo(OP_SCALAR);
  if (op.has_ifm2() || u.weights_ifm2 || u.acc_input == kAccInputIfm2) {
    const int bc = r.u16(IFM2_BROADCAST) & 0xF;
    u.broadcast_mode = bc;
    op.ifm2_is_scalar = bc == kBroadcastScalar;
    if (!op.ifm2_is_scalar) {
      op.broadcast_h = bc & 1;
      op.broadcast_w = (bc >> 1) & 1;
      op.broadcast_c = (bc >> 2) & 1;
    }
    op.ifm2_scalar = static_cast<int>(static_cast<int32_t>(u.op_scalar));
    feature_map(r, op.ifm2, IFM2_REGION, IFM2_BASE0, IFM2_HEIGHT0_M1, IFM2_HEIGHT1_M1, IFM2_WIDTH0_M1,
                IFM2_ZERO_POINT);
    const int p2 = r.u16(IFM2_PRECISION);
    op.ifm2.dtype = dtype_of(p2 & 1, (p2 >> kIfmPrecisionShift) & 3, "IFM2", offset);
    op.ifm2.layout = layout_of((p2 >> kFormatShift) & 3, offset);
    op.ifm2.depth = op.broadcast_c ? 1 : op.ofm.depth;
    u.ifm2_storage = (p2 >> kStorageShift) & 3;
  }
  if (kind == OpKind::Resize) {
    u.resize_mode = static_cast<int>(param & 3);
    // The step's integer part (parameter bits 0-3) and remainder (payload bits 0-10) give d.
    auto axis = [&](uint32_t scale_n_m1, uint32_t step, uint32_t offset) {
      sim::NpuOperation::U85Fields::ResizeAxis a;
      a.n = r.u16(scale_n_m1) + 1;
      a.d = static_cast<int>(r.hi(step) & 0xF) * a.n + static_cast<int>(r.lo(step) & 0x7FF);
      a.offset = static_cast<int16_t>(r.u16(offset) << 4) >> 4;  // 12-bit signed
      return a;
    };
    u.resize_x = axis(RESIZE_X_SCALE_N_M1, RESIZE_X, RESIZE_X_OFFSET);
    u.resize_y = axis(RESIZE_Y_SCALE_N_M1, RESIZE_Y, RESIZE_Y_OFFSET);
  }
  return op;
}

}  // namespace

sim::CommandStream decode_command_stream(const uint32_t* words, size_t count) {
  sim::CommandStream cs;
  cs.product = Product::EthosU85;
  Registers r;
  cs.words = sim::replay_command_stream(words, count, r, known_cmd0, known_cmd1, [&](uint32_t op, uint32_t param,
                                                                                    size_t offset) {
    switch (op) {
      case OP_CONV:
        cs.operations.push_back(block_operation(r, OpKind::Conv, 0, param, offset));
        break;
      case OP_DEPTHWISE:
        cs.operations.push_back(block_operation(r, OpKind::Depthwise, 0, param, offset));
        break;
      case OP_POOL:
        if ((param & 7) != param) fail(offset, "reserved pooling mode " + std::to_string(param));
        cs.operations.push_back(block_operation(r, OpKind::Pool, static_cast<int>(param), param, offset));
        break;
      case OP_ELEMENTWISE: {
        const uint32_t m = param & 0x3F;
        const bool known = m <= 11 || (m >= 16 && m <= 19) || (m >= 33 && m <= 36) || m == 42;
        if (!known || m != param) fail(offset, "reserved elementwise mode " + std::to_string(param));
        cs.operations.push_back(block_operation(r, OpKind::Elementwise, static_cast<int>(m), param, offset));
        break;
      }
      case OP_RESIZE:
        if (param > 2) fail(offset, "reserved resize mode " + std::to_string(param));
        cs.operations.push_back(block_operation(r, OpKind::Resize, static_cast<int>(param), param, offset));
        break;
      case OP_DMA_START:
        cs.operations.push_back(read_dma(r, offset));
        break;
      default:  // waits, IRQ and PMU masks order work; they do not change results
        break;
    }
  });
  return cs;
}

}  // namespace cascader::ethos_u85
