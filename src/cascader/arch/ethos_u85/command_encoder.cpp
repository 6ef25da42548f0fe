#include "cascader/arch/ethos_u85/command_encoder.hpp"

#include <string>

#include "cascader/arch/ethos_u85/registers.hpp"
#include "cascader/arch/npu_registers.hpp"

namespace cascader::ethos_u85 {

// The stream around the block operations is written with the U55's opcodes
// (emit::encode_command_stream): the U85 keeps them.
static_assert(OP_STOP == npu::OP_STOP && OP_DMA_START == npu::OP_DMA_START && OP_DMA_WAIT == npu::OP_DMA_WAIT &&
              OP_KERNEL_WAIT == npu::OP_KERNEL_WAIT && DMA0_SRC_REGION == npu::DMA0_SRC_REGION &&
              DMA0_DST_REGION == npu::DMA0_DST_REGION && DMA0_SRC == npu::DMA0_SRC && DMA0_DST == npu::DMA0_DST &&
              DMA0_LEN == npu::DMA0_LEN && BLOCKDEP == npu::BLOCKDEP);

namespace {

using sim::DataType;
using sim::FeatureMap;
using sim::NpuOperation;
using sim::OpKind;
using Writer = emit::RegisterWriter;

constexpr emit::MapRegisters kIfm{IFM_REGION, IFM_BASE0, IFM_HEIGHT0_M1, IFM_HEIGHT1_M1, IFM_WIDTH0_M1, IFM_ZERO_POINT};
constexpr emit::MapRegisters kIfm2{IFM2_REGION, IFM2_BASE0, IFM2_HEIGHT0_M1, IFM2_HEIGHT1_M1, IFM2_WIDTH0_M1,
                                   IFM2_ZERO_POINT};
constexpr emit::MapRegisters kOfm{OFM_REGION, OFM_BASE0, OFM_HEIGHT0_M1, OFM_HEIGHT1_M1, OFM_WIDTH0_M1, OFM_ZERO_POINT};
// Addresses and strides are 40 bits on the U85.
constexpr uint64_t kAddressMax = (uint64_t{1} << 40) - 1;

// Signedness (bit 0) and the precision code (8/16/32/64 bits: 0/1/2/3) of a data type; a
// 64-bit map is an ARGMAX pooling's int64 indices.
int signed_bit(DataType t) { return sim::is_signed(t) ? 1 : 0; }
int precision(DataType t) {
  const int size = sim::element_size(t);
  return size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : 3;
}
int format(const FeatureMap& f) { return f.layout == sim::Layout::NHCWB16 ? 1 : 0; }

void check_storage(Writer& w, int storage, const char* name) { w.check(storage, TILE2X2, NONE, name); }

// A scale register's 48 bits: the multiplier in the payload; shift, double-round and rounding in
// the parameter. The U85's multipliers are 31-bit.
uint64_t scale_register(Writer& w, uint32_t scale, int shift, int double_round, int round_mode, int max_round,
                        const char* name) {
  w.check(scale, 0, 0x7FFFFFFF, name);
  w.check(shift, 0, 63, name);
  w.check(double_round, 0, 31, name);
  w.check(round_mode, 0, max_round, name);
  const uint64_t param = uint64_t(shift) | (uint64_t(double_round) << kDoubleRoundShift) |
                         (uint64_t(round_mode) << kRoundModeShift);
  return (param << 32) | scale;
}

void weight_registers(Writer& w, const NpuOperation& op, const ArchConfig& arch) {
  const auto& u = op.u85;
  const int region = u.weight_streams[0].region;
  if (op.weights.address != u.weight_streams[0].address || op.weights.length != u.weight_streams[0].length ||
      op.weights.region != region) {
    w.fail("weights", "differ from the first weight stream");
  }
  if (op.scales.region != region) w.fail("scales", "and weights must share a region");
  for (size_t s = 1; s < u.weight_streams.size(); ++s) {
    if (u.weight_streams[s].length > 0 && static_cast<int>(s) >= arch.accelerator().weight_decoders) {
      w.fail("weight streams", arch.accelerator().name + " has " + std::to_string(arch.accelerator().weight_decoders) +
                                   " weight decoders");
    }
  }
  w.reg0(WEIGHT_REGION, region, "weight region", 0, 7);
  w.reg0(SCALE_REGION, op.scales.region, "scale region", 0, 7);
  static constexpr uint32_t kBase[] = {WEIGHT_BASE, WEIGHT1_BASE, WEIGHT2_BASE, WEIGHT3_BASE};
  static constexpr uint32_t kLength[] = {WEIGHT_LENGTH, WEIGHT1_LENGTH, WEIGHT2_LENGTH, WEIGHT3_LENGTH};
  for (size_t s = 0; s < u.weight_streams.size(); ++s) {
    w.reg1(kBase[s], u.weight_streams[s].address, "weight stream base", kAddressMax);
    w.reg1(kLength[s], u.weight_streams[s].length, "weight stream length", kAddressMax);
  }
  w.reg1(SCALE_BASE, op.scales.address, "scale base", kAddressMax);
  w.reg1(SCALE_LENGTH, op.scales.length, "scale length", kAddressMax);
  w.check(u.weight_format, 0, 1, "weight format");
  w.check(u.weight_sparsity, 0, 1, "weight sparsity");
  w.reg0(WEIGHT_FORMAT, u.weight_format | (u.weight_sparsity << kWeightSparsity), "weight format", 0, 0xFFFF);
}

void operand_registers(Writer& w, const NpuOperation& op) {
  const auto& u = op.u85;
  const int mode = op.ifm2_is_scalar ? kBroadcastScalar
                                     : int(op.broadcast_h) | (int(op.broadcast_w) << 1) | (int(op.broadcast_c) << 2);
  w.reg0(IFM2_BROADCAST, mode, "IFM2 broadcast", 0, 0xF);
  if (op.ifm2_is_scalar) {
    w.reg1(OP_SCALAR, static_cast<uint32_t>(op.ifm2_scalar), "scalar");
  } else {
    emit::write_feature_map(w, op.ifm2, kIfm2);
  }
  w.reg0(IFM2_ZERO_POINT, op.ifm2.zero_point, "IFM2 zero point", -32768, 65535);
  check_storage(w, u.ifm2_storage, "IFM2 storage");
  w.reg0(IFM2_PRECISION,
         signed_bit(op.ifm2.dtype) | (precision(op.ifm2.dtype) << kIfmPrecisionShift) |
             (format(op.ifm2) << kFormatShift) | (u.ifm2_storage << kStorageShift),
         "IFM2 precision", 0, 0xFFFF);
  w.reg1(IFM2_SCALE,
         scale_register(w, u.ifm2_scale, u.ifm2_shift, u.ifm2_double_round, u.ifm2_round_mode, 1, "IFM2 scale"),
         "IFM2 scale");
}

uint32_t operation_command(Writer& w, const NpuOperation& op, int& param) {
  param = 0;
  switch (op.kind) {
    case OpKind::Conv: param = op.u85.weights_ifm2 ? 1 : 0; return OP_CONV;
    case OpKind::Depthwise: return OP_DEPTHWISE;
    case OpKind::Pool: param = op.sub_op; return OP_POOL;
    case OpKind::Elementwise: param = op.sub_op; return OP_ELEMENTWISE;
    case OpKind::Resize: param = op.u85.resize_mode; return OP_RESIZE;
    case OpKind::Dma: break;
  }
  w.fail("operation", std::string(sim::name(op.kind)) + " is not encoded for the Ethos-U85 yet");
}

// RESIZE_X/Y's scale (n), step (d: its integer part in the parameter, its remainder in the
// payload) and offset (12-bit signed) of one axis.
void resize_axis(Writer& w, const sim::NpuOperation::U85Fields::ResizeAxis& a, uint32_t scale_n_m1, uint32_t step,
                 uint32_t offset, const char* name) {
  w.check(a.n, 1, 2048, name);
  w.check(a.d, 1, 16 * a.n - 1, name);
  w.reg0(scale_n_m1, a.n - 1, name, 0, 2047);
  w.reg1(step, (uint64_t(a.d / a.n) << 32) | uint64_t(a.d % a.n), name);
  w.reg0(offset, a.offset, name, -2048, 2047);
}

}  // namespace

std::optional<std::pair<uint64_t, uint64_t>> lut_bytes(const NpuOperation& op) {
  uint64_t size = 0;
  switch (op.activation.function) {
    case 1: case 4: size = 256; break;  // LUT_U8_U8, LUT_S8_S8
    case 5: size = 512; break;          // LUT_S8_S16
    case 7: size = 1024; break;         // LUT_S8_S32
    case 8: case 9: size = 2048; break; // the 16-bit input tables
    case 10: case 11: size = 2048; break;  // TANH, SIGMOID: interpolated tables too (activation_table.hpp)
    default: return std::nullopt;       // no table
  }
  const uint64_t at = uint64_t(op.u85.activation_table) * size;
  return std::make_pair(at, at + size);
}

void encode_dma(Writer& w, const NpuOperation& op) {
  const auto& m = op.u85.dma;
  w.check(m.stride_mode, 0, 2, "DMA stride mode");
  if (m.src_indexed && m.dst_indexed) w.fail("DMA", "is indexed on both its source and its destination");
  const auto region = [&](int r, const char* name) {
    w.check(r, 0, static_cast<int64_t>(npu::kDmaRegionMask), name);
    return static_cast<int64_t>(r);
  };
  // The stride mode is the source region's field; each side has its own index bit.
  w.reg0(DMA0_SRC_REGION,
         region(op.dma_src.region, "DMA source region") | int64_t{m.stride_mode} << kDmaStrideShift |
             int64_t{m.src_indexed} << kDmaIndexed,
         "DMA source region", 0, 0xFFFF);
  w.reg0(DMA0_DST_REGION, region(op.dma_dst.region, "DMA destination region") | int64_t{m.dst_indexed} << kDmaIndexed,
         "DMA destination region", 0, 0xFFFF);
  w.reg1(DMA0_SRC, op.dma_src.address, "DMA source", kAddressMax);
  w.reg1(DMA0_DST, op.dma_dst.address, "DMA destination", kAddressMax);
  w.reg1(DMA0_LEN, m.length, "DMA row length", kAddressMax);
  const bool indexed = m.src_indexed || m.dst_indexed;
  if (m.stride_mode >= 1) w.reg0(DMA0_SIZE0, m.size0, "DMA size 0", 1, 0xFFFF);
  if (m.stride_mode >= 1 || m.src_indexed) w.reg1(DMA0_SRC_STRIDE0, m.src_stride0, "DMA source stride 0", kAddressMax);
  if (m.stride_mode >= 1 || m.dst_indexed) w.reg1(DMA0_DST_STRIDE0, m.dst_stride0, "DMA destination stride 0", kAddressMax);
  if (m.stride_mode == 2) {
    w.reg0(DMA0_SIZE1, m.size1, "DMA size 1", 1, 0xFFFF);
    w.reg1(DMA0_SRC_STRIDE1, m.src_stride1, "DMA source stride 1", kAddressMax);
    w.reg1(DMA0_DST_STRIDE1, m.dst_stride1, "DMA destination stride 1", kAddressMax);
  }
  if (indexed) {
    w.reg0(DMA0_IDX_REGION, region(m.index.region, "DMA index region"), "DMA index region", 0,
           static_cast<int64_t>(npu::kDmaRegionMask));
    w.reg1(DMA0_IDX_MAX, static_cast<uint64_t>(m.index_max), "DMA index maximum", 0xFFFFFFFFu);
    w.reg1(DMA0_IDX, m.index.address, "DMA index address", kAddressMax);
    if (m.stride_mode == 2) w.reg1(DMA0_IDX_SKIP1, static_cast<uint64_t>(m.index_skip1), "DMA index skip", 0xFFFFFFFFu);
  }
}

void encode_block_operation(Writer& w, const NpuOperation& op, const ArchConfig& arch) {
  const auto& u = op.u85;
  const bool elementwise = op.kind == OpKind::Elementwise;
  const bool convolution = op.kind == OpKind::Conv || op.kind == OpKind::Depthwise;
  int param = 0;
  const uint32_t command = operation_command(w, op, param);
  // Fields with no U85 register: refused rather than dropped.
  if (op.ifm_scale_mode != 0) w.fail("IFM scale mode", "has no Ethos-U85 register (the operand scales do its work)");
  if (op.rounding != sim::Rounding::TFL || op.ifm_rounding != sim::Rounding::TFL) {
    w.fail("rounding", "is OFM_SCALE's round mode on the Ethos-U85 (u85.ofm_round_mode)");
  }
  if (op.reversed_operands) w.fail("reversed operands", "have no Ethos-U85 register");
  if (op.parallel_mode != 0) w.fail("parallel mode", "has no Ethos-U85 register (its weight decoders share a core)");

  emit::write_feature_map(w, op.ifm, kIfm);
  w.reg0(IFM_DEPTH_M1, op.ifm.depth - 1, "IFM depth", 0, 0xFFFF);
  check_storage(w, u.ifm_storage, "IFM storage");
  w.reg0(IFM_PRECISION,
         signed_bit(op.ifm.dtype) | (precision(op.ifm.dtype) << kIfmPrecisionShift) | (format(op.ifm) << kFormatShift) |
             (u.ifm_storage << kStorageShift),
         "IFM precision", 0, 0xFFFF);
  w.reg0(IFM_UPSCALE, op.ifm_upscale, "IFM upscale", 0, 2);
  w.reg0(IFM_BROADCAST, u.ifm_broadcast_mode, "IFM broadcast", 0, 0xF);

  emit::write_feature_map(w, op.ofm, kOfm);
  w.reg0(OFM_WIDTH_M1, op.ofm.width - 1, "OFM width", 0, 0xFFFF);
  w.reg0(OFM_HEIGHT_M1, op.ofm.height - 1, "OFM height", 0, 0xFFFF);
  w.reg0(OFM_DEPTH_M1, op.ofm.depth - 1, "OFM depth", 0, 0xFFFF);
  check_storage(w, u.ofm_storage, "OFM storage");
  w.check(u.ofm_reverse, 0, 3, "OFM reverse");
  w.check(u.ofm_transpose, 0, 7, "OFM transpose");
  w.reg0(OFM_PRECISION,
         signed_bit(op.ofm.dtype) | (precision(op.ofm.dtype) << kOfmPrecisionShift) | (format(op.ofm) << kFormatShift) |
             (int(op.global_scale) << kOfmScaleMode) | (u.ofm_reverse << kReverseShift) |
             (u.ofm_transpose << kTransposeShift) | (u.ofm_storage << kStorageShift),
         "OFM precision", 0, 0xFFFF);
  const BlockShape& most = arch.accelerator().ofm_block_max;
  w.reg0(OFM_BLK_WIDTH_M1, op.block_width - 1, "block width", 0, most.width - 1);
  w.reg0(OFM_BLK_HEIGHT_M1, op.block_height - 1, "block height", 0, most.height - 1);
  w.reg0(OFM_BLK_DEPTH_M1, op.block_depth - 1, "block depth", 0, most.depth - 1);

  if (!elementwise) {
    w.reg0(IFM_PAD_TOP, op.padding.top, "padding top", 0, 127);
    w.reg0(IFM_PAD_LEFT, op.padding.left, "padding left", 0, 127);
    w.reg0(IFM_PAD_BOTTOM, op.padding.bottom, "padding bottom", 0, 127);
    w.reg0(IFM_PAD_RIGHT, op.padding.right, "padding right", 0, 127);
    const sim::Kernel& k = op.kernel;
    w.reg0(KERNEL_WIDTH_M1, k.width - 1, "kernel width", 0, 0xFFFF);
    w.reg0(KERNEL_HEIGHT_M1, k.height - 1, "kernel height", 0, 0xFFFF);
    w.check(k.stride_x, 1, 4, "stride x");  // the U85's stride MSB is one bit
    w.check(k.stride_y, 1, 4, "stride y");
    w.check(k.dilation_x, 1, 2, "dilation x");
    w.check(k.dilation_y, 1, 2, "dilation y");
    const int sx = k.stride_x - 1, sy = k.stride_y - 1;
    w.reg0(KERNEL_STRIDE,
           ((sx & 1) << npu::kStrideXLsb) | ((sy & 1) << npu::kStrideYLsb) |
               (int(k.part_kernel_first) << npu::kPartKernelFirst) | ((k.dilation_x - 1) << npu::kDilationX) |
               ((k.dilation_y - 1) << npu::kDilationY) | ((sx >> 1) << npu::kStrideXMsb) |
               ((sy >> 1) << npu::kStrideYMsb),
           "kernel stride", 0, 0xFFFF);
  }

  w.check(op.acc_format, 0, 1, "accumulator format");
  w.check(u.acc_input, 0, 2, "accumulator input");
  w.check(u.acc_output, 0, 1, "accumulator output");
  w.check(u.microblock, 0, 5, "micro-block");
  w.reg0(ACC_FORMAT,
         op.acc_format | (u.acc_input << kAccInputShift) | (u.acc_output << kAccOutput) |
             (u.microblock << kMicroblockShift),
         "accumulator format", 0, 0xFFFF);
  w.check(op.activation.function, 0, 31, "activation function");
  w.check(u.activation_table, 0, 7, "activation table");
  w.check(op.activation.clip_range, 0, 1, "activation clip range");
  w.reg0(ACTIVATION,
         op.activation.function | (u.activation_table << kTableShift) | (op.activation.clip_range << kClipRange),
         "activation", 0, 0xFFFF);
  w.reg0(ACTIVATION_MIN, op.activation.min, "activation min", -32768, 32767);
  w.reg0(ACTIVATION_MAX, op.activation.max, "activation max", -32768, 32767);

  if (convolution) weight_registers(w, op, arch);
  if (op.kind == OpKind::Resize) {
    w.check(u.resize_mode, 0, 2, "resize mode");
    resize_axis(w, u.resize_x, RESIZE_X_SCALE_N_M1, RESIZE_X, RESIZE_X_OFFSET, "resize x");
    resize_axis(w, u.resize_y, RESIZE_Y_SCALE_N_M1, RESIZE_Y, RESIZE_Y_OFFSET, "resize y");
  }

  w.reg1(OFM_SCALE,
         scale_register(w, op.ofm_scale, op.ofm_shift, u.ofm_double_round, u.ofm_round_mode, 5, "OFM scale"),
         "OFM scale");
  if (elementwise) {
    w.reg1(IFM_SCALE, scale_register(w, u.ifm_scale, u.ifm_shift, u.ifm_double_round, u.ifm_round_mode, 1, "IFM scale"),
           "IFM scale");
  }
  if (op.has_ifm2() || u.weights_ifm2) {
    operand_registers(w, op);  // a matrix product's weights: IFM2
  } else if (elementwise && static_cast<sim::ElementwiseMode>(op.sub_op) == sim::ElementwiseMode::LRelu) {
    // LRELU has one operand; IFM2_SCALE is its rescale below zero (alpha's, elementwise.hpp).
    w.reg1(IFM2_SCALE,
           scale_register(w, u.ifm2_scale, u.ifm2_shift, u.ifm2_double_round, u.ifm2_round_mode, 1, "IFM2 scale"),
           "IFM2 scale");
  }

  w.reg0(BLOCKDEP, 0, "block dependency", 0, 3);
  w.command(command, param, "operation");
}

}  // namespace cascader::ethos_u85
