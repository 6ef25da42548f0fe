#include "cascader/emit/command_encoder.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "cascader/arch/block_config.hpp"
#include "cascader/arch/ethos_u85/command_encoder.hpp"
#include "cascader/arch/ethos_u85/registers.hpp"
#include "cascader/arch/npu_registers.hpp"
#include "cascader/common/error.hpp"
#include "cascader/emit/register_writer.hpp"
#include "cascader/perf/cycle_model.hpp"
#include "cascader/sim/estimator.hpp"

namespace cascader::emit {

namespace {

using namespace npu;
using sim::AddressRange;
using sim::DataType;
using sim::FeatureMap;
using sim::NpuOperation;
using sim::OpKind;

// A byte range of one region, for the dependency checks.
struct Span {
  int region = 0;
  uint64_t begin = 0, end = 0;
  bool overlaps(const Span& o) const { return region == o.region && begin < o.end && o.begin < end; }
};

using Writer = RegisterWriter;

int ifm_precision_code(DataType t) {
  switch (t) {
    case DataType::U8: return 0;
    case DataType::S8: return 1;
    case DataType::U16: return 4;
    case DataType::S16: return 5;
    case DataType::S32: return 9;
    case DataType::S64: throw InvalidArgument("the Ethos-U55/U65 have no 64-bit feature maps");
  }
  return 0;
}

int ofm_precision_code(DataType t) {
  switch (t) {
    case DataType::U8: return 0;
    case DataType::S8: return 1;
    case DataType::U16: return 2;
    case DataType::S16: return 3;
    case DataType::S32: return 5;
    case DataType::S64: throw InvalidArgument("the Ethos-U55/U65 have no 64-bit feature maps");
  }
  return 0;
}

int format_code(const FeatureMap& f) { return f.layout == sim::Layout::NHCWB16 ? 1 : 0; }

constexpr MapRegisters kIfm{IFM_REGION, IFM_BASE0, IFM_HEIGHT0_M1, IFM_HEIGHT1_M1, IFM_WIDTH0_M1, IFM_ZERO_POINT};
constexpr MapRegisters kIfm2{IFM2_REGION, IFM2_BASE0, IFM2_HEIGHT0_M1, IFM2_HEIGHT1_M1, IFM2_WIDTH0_M1,
                             IFM2_ZERO_POINT};
constexpr MapRegisters kOfm{OFM_REGION, OFM_BASE0, OFM_HEIGHT0_M1, OFM_HEIGHT1_M1, OFM_WIDTH0_M1, OFM_ZERO_POINT};

void address_range(Writer& w, const AddressRange& a, uint32_t base, uint32_t length, const char* name) {
  w.reg1(base, a.address, name);
  w.reg1(length, a.length, name, 0xFFFFFFFFu);
}

uint32_t operation_command(const NpuOperation& op) {
  switch (op.kind) {
    case OpKind::Conv: return OP_CONV;
    case OpKind::Depthwise: return OP_DEPTHWISE;
    case OpKind::Pool: return OP_POOL;
    case OpKind::Elementwise: return OP_ELEMENTWISE;
    case OpKind::Dma: return OP_DMA_START;
    case OpKind::Resize: break;  // Ethos-U85 only
  }
  throw InvalidArgument(std::string("the U55/U65 encoder has no ") + name(op.kind) + " operation");
}

// The SHRAM layout the block config needs, from the same model that chose the block.
ShramLayout shram_layout(Writer& w, const NpuOperation& op, const ArchConfig& arch) {
  const BlockQuery q = block_query(sim::npu_op_of(op, arch));
  // The block as programmed, as the estimator checks it (on an Ethos-U65-512 the register
  // holds both cores' depth; the SHRAM model is per accelerator).
  const BlockShape block{op.block_height, op.block_width, op.block_depth};
  const auto cfg = try_block_config(arch.accelerator(), q, block);
  if (!cfg) {
    w.fail("block config", std::to_string(op.block_height) + "x" + std::to_string(op.block_width) + "x" +
                               std::to_string(op.block_depth) + " is not valid for this operation on " +
                               arch.accelerator().name);
  }
  return cfg->layout;
}

void compute_registers(Writer& w, const NpuOperation& op, const ArchConfig& arch) {
  const bool elementwise = op.kind == OpKind::Elementwise;
  const bool convolution = op.kind == OpKind::Conv || op.kind == OpKind::Depthwise;

  write_feature_map(w, op.ifm, kIfm);
  w.reg0(IFM_DEPTH_M1, op.ifm.depth - 1, "IFM depth", 0, 0xFFFF);
  w.reg0(IFM_PRECISION,
         ifm_precision_code(op.ifm.dtype) | (format_code(op.ifm) << kFormatShift) |
             (op.ifm_scale_mode << kScaleModeShift) | (static_cast<int>(op.ifm_rounding) << kRoundingShift),
         "IFM precision", 0, 0xFFFF);
  w.reg0(IFM_UPSCALE, op.ifm_upscale, "IFM upscale", 0, 2);
  if (op.ifm_scale_mode < 0 || op.ifm_scale_mode > 2) w.fail("IFM scale mode", std::to_string(op.ifm_scale_mode));

  write_feature_map(w, op.ofm, kOfm);
  w.reg0(OFM_WIDTH_M1, op.ofm.width - 1, "OFM width", 0, 0xFFFF);
  w.reg0(OFM_HEIGHT_M1, op.ofm.height - 1, "OFM height", 0, 0xFFFF);
  w.reg0(OFM_DEPTH_M1, op.ofm.depth - 1, "OFM depth", 0, 0xFFFF);
  w.reg0(OFM_PRECISION,
         ofm_precision_code(op.ofm.dtype) | (format_code(op.ofm) << kFormatShift) |
             (int(op.global_scale) << kOfmScalingShift) | (static_cast<int>(op.rounding) << kRoundingShift),
         "OFM precision", 0, 0xFFFF);
  w.reg0(OFM_BLK_WIDTH_M1, op.block_width - 1, "block width", 0, 63);
  w.reg0(OFM_BLK_HEIGHT_M1, op.block_height - 1, "block height", 0, 31);
  w.reg0(OFM_BLK_DEPTH_M1, op.block_depth - 1, "block depth", 0, 127);

  if (!elementwise) {
    w.reg0(IFM_PAD_TOP, op.padding.top, "padding top", 0, 127);
    w.reg0(IFM_PAD_LEFT, op.padding.left, "padding left", 0, 127);
    w.reg0(IFM_PAD_BOTTOM, op.padding.bottom, "padding bottom", 0, 127);
    w.reg0(IFM_PAD_RIGHT, op.padding.right, "padding right", 0, 127);
    const sim::Kernel& k = op.kernel;
    w.reg0(KERNEL_WIDTH_M1, k.width - 1, "kernel width", 0, 0xFFFF);
    w.reg0(KERNEL_HEIGHT_M1, k.height - 1, "kernel height", 0, 0xFFFF);
    w.check(k.stride_x, 1, 16, "stride x");
    w.check(k.stride_y, 1, 16, "stride y");
    w.check(k.dilation_x, 1, 2, "dilation x");
    w.check(k.dilation_y, 1, 2, "dilation y");
    const int sx = k.stride_x - 1, sy = k.stride_y - 1;
    w.reg0(KERNEL_STRIDE,
           ((sx & 1) << kStrideXLsb) | ((sy & 1) << kStrideYLsb) | (int(k.part_kernel_first) << kPartKernelFirst) |
               ((k.dilation_x - 1) << kDilationX) | ((k.dilation_y - 1) << kDilationY) | ((sx >> 1) << kStrideXMsb) |
               ((sy >> 1) << kStrideYMsb),
           "kernel stride", 0, 0xFFFF);
  }

  w.reg0(ACC_FORMAT, op.acc_format, "accumulator format", 0, 2);
  w.reg0(ACTIVATION, op.activation.function | (op.activation.clip_range << kClipRangeShift), "activation", 0,
         0xFFFF);
  w.reg0(ACTIVATION_MIN, op.activation.min, "activation min", -32768, 32767);
  w.reg0(ACTIVATION_MAX, op.activation.max, "activation max", -32768, 32767);

  if (convolution) {
    const int cores = op.parallel_mode + 1;
    if (cores > arch.accelerator().cores) {
      w.fail("parallel mode", std::to_string(op.parallel_mode) + " needs " + std::to_string(cores) + " cores; " +
                                  arch.accelerator().name + " has " + std::to_string(arch.accelerator().cores));
    }
    if (op.weights.region != op.scales.region) w.fail("weights", "and scales must share a region");
    w.reg0(WEIGHT_REGION, op.weights.region, "weight region", 0, 7);
    w.reg0(SCALE_REGION, op.scales.region, "scale region", 0, 7);
    address_range(w, op.weights, WEIGHT_BASE, WEIGHT_LENGTH, "weights");
    address_range(w, op.scales, SCALE_BASE, SCALE_LENGTH, "scales");
    if (cores > 1) {
      address_range(w, op.weights1, WEIGHT1_BASE, WEIGHT1_LENGTH, "second core's weights");
      address_range(w, op.scales1, SCALE1_BASE, SCALE1_LENGTH, "second core's scales");
    }
  }
  if (arch.accelerator().cores > 1) w.reg0(PARALLEL_MODE, op.parallel_mode, "parallel mode", 0, 1);

  // OFM_SCALE's high half holds the shift; OPA likewise.
  w.check(op.ofm_shift, 0, 63, "OFM shift");
  w.check(op.opa_shift, 0, 63, "OPA shift");
  w.reg1(OFM_SCALE, (static_cast<uint64_t>(op.ofm_shift) << 32) | op.ofm_scale, "OFM scale");
  if (elementwise) {
    w.reg1(OPA_SCALE, (static_cast<uint64_t>(op.opa_shift) << 32) | op.opa_scale, "OPA scale");
    w.reg1(OPB_SCALE, op.opb_scale, "OPB scale");
  }

  const ShramLayout shram = shram_layout(w, op, arch);
  w.reg0(IFM_IB_END, shram.ifm_end, "IFM buffer end", 0, 0xFFFF);
  w.reg0(AB_START, shram.acc_start, "accumulator start", 0, 0xFFFF);

  if (op.has_ifm2()) {
    w.reg0(IFM2_BROADCAST,
           int(op.broadcast_h) | (int(op.broadcast_w) << 1) | (int(op.broadcast_c) << 2) |
               (int(op.reversed_operands) << kReversedOperands) | (int(op.ifm2_is_scalar) << kIfm2Scalar),
           "IFM2 broadcast", 0, 0xFFFF);
    if (op.ifm2_is_scalar) {
      w.reg0(IFM2_SCALAR, op.ifm2_scalar, "IFM2 scalar", -32768, 32767);
    } else {
      write_feature_map(w, op.ifm2, kIfm2);
    }
    w.reg0(IFM2_ZERO_POINT, op.ifm2.zero_point, "IFM2 zero point", -32768, 65535);
    w.reg0(IFM2_PRECISION, ifm_precision_code(op.ifm2.dtype) | (format_code(op.ifm2) << kFormatShift),
           "IFM2 precision", 0, 0xFFFF);
    w.reg0(IFM2_IB_START, shram.ifm2_start, "IFM2 buffer start", 0, 0xFFFF);
  }
}

// Bytes of a feature map the operation touches: the span from its lowest to its highest
// addressed element over every tile (coarse, never smaller than the real footprint).
std::vector<Span> map_spans(const FeatureMap& f, int height, int width, int depth) {
  const int es = sim::element_size(f.dtype);
  const uint64_t last_c = f.layout == sim::Layout::NHWC
                              ? static_cast<uint64_t>(depth - 1) * es
                              : static_cast<uint64_t>((depth - 1) / 16) * f.stride_c + ((depth - 1) % 16) * es;
  const uint64_t extent = static_cast<uint64_t>(std::max(height - 1, 0)) * f.stride_y +
                          static_cast<uint64_t>(std::max(width - 1, 0)) * f.stride_x + last_c + es;
  std::vector<Span> out;
  for (uint64_t b : f.base) out.push_back(Span{f.region, b, b + extent});
  return out;
}

struct Access {
  std::vector<Span> reads, writes;
  bool rows = false;  // an Ethos-U85 strided or indexed DMA
};

// The LUT an activation reads: slot (function - 16) of the last 2 KiB of the SHRAM, 256 bytes
// per 8-bit table, 1 KiB for a 32-bit one, all 2 KiB for a 16-bit one (the Ethos-U85: its table
// in the LUT RAM, ethos_u85::lut_bytes). A DMA that loads the next table must wait for the
// kernels still reading this one.
std::optional<Span> lut_span(const NpuOperation& op, const ArchConfig& arch) {
  const int f = op.activation.function;
  if (arch.accelerator().product == Product::EthosU85) {
    const auto bytes = ethos_u85::lut_bytes(op);
    if (!bytes) return std::nullopt;
    return Span{sim::kShramRegion, bytes->first, bytes->second};
  }
  if (f < 16) return std::nullopt;
  const auto& npu = arch.accelerator();
  const uint64_t at = uint64_t(npu.shram_banks) * uint64_t(npu.shram_bank_bytes) - 2048 + uint64_t(f - 16) * 256;
  const int es = sim::element_size(op.ofm.dtype);
  return Span{sim::kShramRegion, at, at + (es == 1 ? 256 : es == 4 ? 1024 : 2048)};
}

Access accesses(const NpuOperation& op, const ArchConfig& arch) {
  Access a;
  if (op.kind == OpKind::Dma) {
    // A strided or indexed DMA's ranges bound every byte it may touch (ethos_u85/dma.hpp).
    a.reads.push_back(Span{op.dma_src.region, op.dma_src.address, op.dma_src.address + op.dma_src.length});
    a.writes.push_back(Span{op.dma_dst.region, op.dma_dst.address, op.dma_dst.address + op.dma_dst.length});
    const auto& index = op.u85.dma.index;
    a.rows = op.u85.dma.strided_or_indexed();
    if (op.u85.dma.src_indexed || op.u85.dma.dst_indexed) {
      a.reads.push_back(Span{index.region, index.address, index.address + index.length});
    }
    return a;
  }
  // The IFM extent the operation may read: the tiles as programmed cover it. An Ethos-U85 map
  // in a chaining buffer (its REGION the buffer's number) is in no memory.
  const auto in_memory = [](int storage) { return storage < ethos_u85::CHAINED; };
  const int ih = std::max(op.ifm.height0, op.ifm.height1), iw = op.ifm.width0;
  auto add = [](std::vector<Span>& to, const std::vector<Span>& from) { to.insert(to.end(), from.begin(), from.end()); };
  if (in_memory(op.u85.ifm_storage)) add(a.reads, map_spans(op.ifm, ih, iw, op.ifm.depth));
  if (op.has_ifm2() && !op.ifm2_is_scalar && in_memory(op.u85.ifm2_storage)) {
    add(a.reads, map_spans(op.ifm2, std::max(op.ifm2.height0, op.ifm2.height1), op.ifm2.width0,
                           op.broadcast_c ? 1 : op.ofm.depth));
  }
  if (op.kind == OpKind::Conv || op.kind == OpKind::Depthwise) {
    for (const AddressRange* r : {&op.weights, &op.scales, &op.weights1, &op.scales1}) {
      if (r->length > 0) a.reads.push_back(Span{r->region, r->address, r->address + r->length});
    }
  }
  if (const auto lut = lut_span(op, arch)) a.reads.push_back(*lut);
  if (in_memory(op.u85.ofm_storage)) add(a.writes, map_spans(op.ofm, op.ofm.height, op.ofm.width, op.ofm.depth));
  return a;
}

bool any_overlap(const std::vector<Span>& x, const std::vector<Span>& y) {
  for (const Span& a : x) {
    for (const Span& b : y) {
      if (a.overlaps(b)) return true;
    }
  }
  return false;
}

}  // namespace

std::vector<uint32_t> encode_command_stream(const std::vector<NpuOperation>& ops, const ArchConfig& arch) {
  Writer w(0);
  // The Ethos-U85 has registers of its own for block operations; the stream around them (DMAs,
  // waits, STOP) is written alike.
  const bool u85 = arch.accelerator().product == Product::EthosU85;
  std::vector<Access> dmas;     // issued DMAs not yet waited for, oldest first
  std::vector<Access> kernels;  // issued kernels not yet waited for
  // Waits for the newest issued DMA `a` depends on (`when` it counts); the later ones go on.
  const auto wait_for_dma = [&](const Access& a, const auto& when) {
    for (size_t d = dmas.size(); d-- > 0;) {
      const Access& dma = dmas[d];
      if (when(dma) && (any_overlap(a.reads, dma.writes) || any_overlap(a.writes, dma.writes) ||
                        any_overlap(a.writes, dma.reads))) {
        w.command(OP_DMA_WAIT, static_cast<int64_t>(dmas.size() - 1 - d), "DMA wait");
        dmas.erase(dmas.begin(), dmas.begin() + static_cast<std::ptrdiff_t>(d + 1));
        return;
      }
    }
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const NpuOperation& op = ops[i];
    w.set_index(i);
    const Access access = accesses(op, arch);
    if (op.kind == OpKind::Dma) {
      const bool rows = op.u85.dma.strided_or_indexed();
      if (rows && !u85) w.fail("DMA", "strided and indexed DMAs are the Ethos-U85's");
      if (!rows && op.dma_src.length != op.dma_dst.length) w.fail("DMA", "source and destination lengths differ");
      bool conflict = false;
      for (const Access& k : kernels) {
        conflict |= any_overlap(access.writes, k.reads) || any_overlap(access.writes, k.writes) ||
                    any_overlap(access.reads, k.writes);
      }
      if (conflict) {
        w.command(OP_KERNEL_WAIT, 0, "kernel wait");
        kernels.clear();
      }
      // A strided or indexed DMA over the bytes of one still running (a scatter into the zeros
      // just copied in) waits for it, as Vela's streams do; plain copies never overlap so.
      wait_for_dma(access, [&](const Access& dma) { return rows || dma.rows; });
      if (rows) {
        ethos_u85::encode_dma(w, op);
      } else {
        w.reg0(DMA0_SRC_REGION, op.dma_src.region, "DMA source region", 0, static_cast<int64_t>(kDmaRegionMask));
        w.reg0(DMA0_DST_REGION, op.dma_dst.region, "DMA destination region", 0, static_cast<int64_t>(kDmaRegionMask));
        w.reg1(DMA0_SRC, op.dma_src.address, "DMA source");
        w.reg1(DMA0_DST, op.dma_dst.address, "DMA destination");
        w.reg1(DMA0_LEN, op.dma_src.length, "DMA length");
      }
      w.command(OP_DMA_START, 0, "DMA start");
      dmas.push_back(access);
      if (dmas.size() > static_cast<size_t>(arch.accelerator().max_outstanding_dma)) dmas.erase(dmas.begin());
      continue;
    }
    // Wait for the newest DMA this kernel depends on; the ones issued after it may go on.
    wait_for_dma(access, [](const Access&) { return true; });
    if (u85) {
      ethos_u85::encode_block_operation(w, op, arch);
    } else {
      compute_registers(w, op, arch);
      w.reg0(BLOCKDEP, 0, "block dependency", 0, 3);
      const uint32_t cmd = operation_command(op);
      w.command(cmd, (op.kind == OpKind::Pool || op.kind == OpKind::Elementwise) ? op.sub_op : 0, "operation");
    }
    kernels.push_back(access);
    if (kernels.size() > static_cast<size_t>(arch.accelerator().max_outstanding_kernels)) kernels.erase(kernels.begin());
  }
  w.command(OP_STOP, 0, "stop");
  return w.take();
}

}  // namespace cascader::emit
