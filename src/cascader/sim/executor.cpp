#include "cascader/sim/executor.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

#include "cascader/arch/ethos_u85/argmax_pool.hpp"
#include "cascader/arch/ethos_u85/bilinear_resize.hpp"
#include "cascader/arch/ethos_u85/broadcast.hpp"
#include "cascader/arch/ethos_u85/command_encoder.hpp"
#include "cascader/arch/ethos_u85/dma.hpp"
#include "cascader/arch/ethos_u85/elementwise.hpp"
#include "cascader/arch/ethos_u85/matmul.hpp"
#include "cascader/arch/ethos_u85/ofm_order.hpp"
#include "cascader/arch/ethos_u85/operation_weights.hpp"
#include "cascader/arch/ethos_u85/output_stage.hpp"
#include "cascader/arch/ethos_u85/registers.hpp"
#include "cascader/common/error.hpp"
#include "cascader/emit/weights.hpp"
#include "cascader/sim/in_place_hazard.hpp"
#include "cascader/sim/integer_ops.hpp"
#include "cascader/sim/tanh_sigmoid.hpp"

namespace cascader::sim {

namespace {

using i128 = __int128;

[[noreturn]] void fail(const NpuOperation& op, const std::string& what) {
  std::ostringstream s;
  s << "command stream word " << op.word_offset << " (" << name(op.kind) << "): " << what;
  throw BinaryError(s.str());
}

int64_t type_min(DataType t) {
  switch (t) {
    case DataType::U8: case DataType::U16: return 0;
    case DataType::S8: return -128;
    case DataType::S16: return -32768;
    case DataType::S32: return std::numeric_limits<int32_t>::min();
    case DataType::S64: return std::numeric_limits<int64_t>::min();
  }
  return 0;
}

int64_t type_max(DataType t) {
  switch (t) {
    case DataType::U8: return 255;
    case DataType::S8: return 127;
    case DataType::U16: return 65535;
    case DataType::S16: return 32767;
    case DataType::S32: return std::numeric_limits<int32_t>::max();
    case DataType::S64: return std::numeric_limits<int64_t>::max();
  }
  return 0;
}

int64_t load(const uint8_t* p, DataType t) {
  switch (t) {
    case DataType::U8: return p[0];
    case DataType::S8: return static_cast<int8_t>(p[0]);
    case DataType::U16: return static_cast<uint16_t>(p[0] | (p[1] << 8));
    case DataType::S16: return static_cast<int16_t>(p[0] | (p[1] << 8));
    case DataType::S32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<int32_t>(v);
    }
    case DataType::S64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
  return 0;
}

void store(uint8_t* p, DataType t, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  const int n = element_size(t);
  for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(u >> (8 * i));
}


int64_t rounding_right_shift(i128 x, int e) {
  // TensorFlow Lite's RoundingDivideByPOT: round half away from zero.
  if (e <= 0) return static_cast<int64_t>(x);
  const i128 mask = (static_cast<i128>(1) << e) - 1;
  const i128 remainder = x & mask;
  const i128 threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return static_cast<int64_t>((x >> e) + (remainder > threshold ? 1 : 0));
}

// Right shift with the output unit's rounding; TFL rounds half away from zero here, which
// is what TFLite's rounding doubling high multiply and RoundingHalfSum do.
int64_t shift_accumulator(int64_t v, int shift, Rounding rounding) {
  if (shift == 0) return v;
  switch (rounding) {
    case Rounding::TFL: return rounding_right_shift(v, shift);
    case Rounding::Natural: return (v + (int64_t{1} << (shift - 1))) >> shift;
    case Rounding::Truncate: return v / (int64_t{1} << shift);
  }
  return v;
}

// Work the simulator accepts in one operation; mutated or hostile binaries can declare far
// more through 16-bit dimensions and zero strides.
constexpr uint64_t kMaxElements = uint64_t{1} << 26;
constexpr uint64_t kMaxMacs = uint64_t{1} << 33;

// Checks, before any work, that the farthest element of every tile an H x W x C map uses lies
// inside its region. Addresses grow with y, x and c (strides are unsigned), so the corners
// bound the whole map.
void check_extent(const NpuOperation& op, const FeatureMap& fm, const RegionMemory& mem, int H, int W, int C,
                  const char* what) {
  if (static_cast<uint64_t>(H) * W * C > kMaxElements) {
    fail(op, std::string(what) + " of " + std::to_string(H) + "x" + std::to_string(W) + "x" + std::to_string(C) +
                 " elements exceeds what the simulator accepts in one operation");
  }
  if (mem.data == nullptr) fail(op, std::string(what) + " region " + std::to_string(fm.region) + " has no memory");
  const int es = element_size(fm.dtype);
  auto check = [&](int y, int x) {
    const uint64_t a = fm.address(y, x, C - 1);
    if (a > mem.size || static_cast<uint64_t>(es) > mem.size - a) {
      std::ostringstream s;
      s << what << " element (" << y << "," << x << "," << C - 1 << ") at 0x" << std::hex << a
        << " is beyond region " << std::dec << fm.region << " (" << mem.size << " bytes)";
      fail(op, s.str());
    }
  };
  const int w0 = std::min(W, fm.width0);
  check(std::min(H, fm.height0) - 1, w0 - 1);
  if (W > fm.width0) check(std::min(H, fm.height1) - 1, W - 1);
  if (H > fm.height0) check(H - 1, w0 - 1);
  if (H > fm.height1 && W > fm.width0) check(H - 1, W - 1);
}

// The highest address of an H x W x C map's elements: the corners of its tiles bound it.
uint64_t last_address(const FeatureMap& fm, int H, int W, int C) {
  uint64_t a = 0;
  for (int y : {std::min(H, fm.height0) - 1, H - 1}) {
    for (int x : {std::min(W, fm.width0) - 1, W - 1}) a = std::max(a, fm.address(y, x, C - 1));
  }
  return a;
}

// n / d (d > 0) rounded half away from zero.
int64_t divide_half_away(int64_t n, int64_t d) { return n >= 0 ? (n + d / 2) / d : -((-n + d / 2) / d); }

}  // namespace

int64_t scale_accumulator(int64_t acc, uint32_t scale, int shift, Rounding rounding) {
  const i128 p = static_cast<i128>(acc) * scale;
  switch (rounding) {
    case Rounding::TFL: {
      // SaturatingRoundingDoublingHighMul then RoundingDivideByPOT, as TFLite composes them.
      const i128 scaled = shift >= 31 ? p : p * (static_cast<i128>(1) << (31 - shift));
      const i128 nudge = scaled >= 0 ? (static_cast<i128>(1) << 30) : (1 - (static_cast<i128>(1) << 30));
      const i128 high = (scaled + nudge) / (static_cast<i128>(1) << 31);  // truncates toward zero
      return rounding_right_shift(high, shift >= 31 ? shift - 31 : 0);
    }
    case Rounding::Natural:
      if (shift == 0) return static_cast<int64_t>(p);
      return static_cast<int64_t>((p + (static_cast<i128>(1) << (shift - 1))) >> shift);
    case Rounding::Truncate:
      return static_cast<int64_t>(p / (static_cast<i128>(1) << shift));
  }
  return 0;
}

Executor::Executor(const NpuConfig& config, const std::array<RegionMemory, 8>& regions)
    : config_(config), regions_(regions), shram_(config.internal_dma_bytes(), 0) {
  if (u85()) accelerator_ = &accelerator_config(config_.accelerator());
}

ExecutionStats Executor::run(const CommandStream& stream, size_t max_operations) {
  if ((stream.product == Product::EthosU85) != u85()) throw BinaryError("the command stream is not the payload's product's");
  stats_ = {};
  const size_t n = std::min(max_operations, stream.operations.size());
  for (size_t i = 0; i < n; ++i) execute(stream.operations[i]);
  return stats_;
}

void Executor::execute(const NpuOperation& op) {
  ++stats_.operations;
  if (op.kind == OpKind::Dma) {
    dma(op);
  } else {
    block(op);
  }
}

uint8_t* Executor::bytes(const NpuOperation& op, int region, uint64_t address, uint64_t length,
                         const char* what) {
  uint8_t* base;
  size_t size;
  if (region == kShramRegion) {
    base = shram_.data();
    size = shram_.size();
  } else if (region >= 0 && region < 8) {
    base = regions_[static_cast<size_t>(region)].data;
    size = regions_[static_cast<size_t>(region)].size;
  } else {
    fail(op, std::string(what) + " uses unknown region " + std::to_string(region));
  }
  if (base == nullptr && length > 0) {
    fail(op, std::string(what) + " uses region " + std::to_string(region) + ", which has no memory bound to it");
  }
  if (address > size || length > size - address) {
    std::ostringstream s;
    s << what << " accesses [0x" << std::hex << address << ", 0x" << address + length << ") beyond region "
      << std::dec << region << " (" << size << " bytes)";
    fail(op, s.str());
  }
  return base + address;
}

void Executor::dma(const NpuOperation& op) {
  if (op.u85.dma.strided_or_indexed()) {
    ethos_u85::run_dma(op, [&](int region, uint64_t address, uint64_t length, const char* what) {
      return bytes(op, region, address, length, what);
    });
    stats_.dma_bytes += op.u85.dma.length * static_cast<uint64_t>(op.u85.dma.size0) * op.u85.dma.size1;
    return;
  }
  const uint64_t n = op.dma_src.length;
  if (u85() && op.dma_dst.region == kShramRegion) {
    const uint64_t begin = op.dma_dst.address, end = begin + n;
    for (const auto& [a, b] : chain_tables_) {
      if (begin < b && a < end) {
        std::ostringstream s;
        s << "a DMA writes LUT RAM bytes [" << begin << ", " << end << ") while an operation of the unfinished chain "
          << "reads its table from [" << a << ", " << b << "): the chain's operations run block by block together, "
          << "so the tables they read must be in place before the chain starts and stay until it ends";
        fail(op, s.str());
      }
    }
  }
  const uint8_t* src = bytes(op, op.dma_src.region, op.dma_src.address, n, "DMA source");
  uint8_t* dst = bytes(op, op.dma_dst.region, op.dma_dst.address, n, "DMA destination");
  std::memmove(dst, src, n);
  stats_.dma_bytes += n;
}

namespace {

// The operation's extents. The IFM extent is what the kernel can reach minus the padding:
// the registers give only the OFM shape and the IFM depth.
struct Geometry {
  int OH, OW, OC, IH, IW, IC;
  int kh, kw;  // undilated kernel
  int sy, sx, dy, dx, pt, pl;
  bool depthwise;

  // Input row/column of kernel tap k for output o, or -1 when it falls in the padding.
  int in_y(int oy, int ky) const { const int y = oy * sy - pt + ky * dy; return y >= 0 && y < IH ? y : -1; }
  int in_x(int ox, int kx) const { const int x = ox * sx - pl + kx * dx; return x >= 0 && x < IW ? x : -1; }
  size_t index(int y, int x, int c) const { return (static_cast<size_t>(y) * OW + x) * OC + c; }
};

Geometry geometry(const NpuOperation& op, bool u85) {
  Geometry g{};
  g.OH = op.ofm.height;
  g.OW = op.ofm.width;
  g.OC = op.ofm.depth;
  g.depthwise = op.kind == OpKind::Depthwise;
  g.kh = op.kernel.undilated_height();
  g.kw = op.kernel.undilated_width();
  g.sy = op.kernel.stride_y;
  g.sx = op.kernel.stride_x;
  g.dy = op.kernel.dilation_y;
  g.dx = op.kernel.dilation_x;
  g.pt = op.padding.top;
  g.pl = op.padding.left;
  g.IH = g.OH;
  g.IW = g.OW;
  if (op.kind != OpKind::Elementwise) {
    g.IH = (g.OH - 1) * g.sy + op.kernel.height - op.padding.top - op.padding.bottom;
    g.IW = (g.OW - 1) * g.sx + op.kernel.width - op.padding.left - op.padding.right;
    if (g.IH < 1 || g.IW < 1) fail(op, "padding leaves an empty IFM");
  }
  if (op.kind == OpKind::Resize) {  // the kernel registers hold the IFM extent it reads
    g.IH = op.kernel.height;
    g.IW = op.kernel.width;
  }
  g.IC = g.depthwise ? g.OC : op.ifm.depth;
  // The Ethos-U85's elementwise unit reads OFM-depth channels of its inputs; Vela leaves IFM_DEPTH
  // at the full tensor's depth when the operation covers a slice of it, or stale when the IFM
  // is chained.
  if (u85 && op.kind == OpKind::Elementwise) {
    g.IC = g.OC;
  } else if (op.kind == OpKind::Elementwise && op.ifm.depth != g.OC) {
    fail(op, "elementwise IFM depth differs from OFM depth");
  }
  if (op.kind == OpKind::Pool && op.sub_op != static_cast<int>(PoolMode::ReduceSum) && g.IC != g.OC) {
    fail(op, "pooling IFM depth differs from OFM depth");
  }
  return g;
}

// Accumulators (bias included) of a convolution or depthwise convolution; weights are OHWI.
std::vector<int64_t> convolve(const Geometry& g, const Dense& ifm, const std::vector<int16_t>& w,
                              const std::vector<emit::BiasScale>& bias) {
  std::vector<int64_t> acc(static_cast<size_t>(g.OH) * g.OW * g.OC);
  const int wi = g.depthwise ? 1 : g.IC;
  for (int oy = 0; oy < g.OH; ++oy) {
    for (int ox = 0; ox < g.OW; ++ox) {
      for (int o = 0; o < g.OC; ++o) {
        int64_t a = bias[static_cast<size_t>(o)].bias;
        for (int ky = 0; ky < g.kh; ++ky) {
          const int iy = g.in_y(oy, ky);
          if (iy < 0) continue;
          for (int kx = 0; kx < g.kw; ++kx) {
            const int ix = g.in_x(ox, kx);
            if (ix < 0) continue;
            const int16_t* wk = w.data() + ((static_cast<size_t>(o) * g.kh + ky) * g.kw + kx) * wi;
            const int64_t* in = ifm.at(iy, ix);
            if (g.depthwise) {
              a += in[o] * wk[0];
            } else {
              for (int i = 0; i < g.IC; ++i) a += in[i] * wk[i];
            }
          }
        }
        acc[g.index(oy, ox, o)] = a;
      }
    }
  }
  return acc;
}

// Calls f(iy, ix) for every kernel tap of output (oy, ox) that falls inside the IFM (taps in
// the padding are skipped); returns how many taps it visited.
template <typename F>
int for_each_tap(const Geometry& g, int oy, int ox, F&& f) {
  int taps = 0;
  for (int ky = 0; ky < g.kh; ++ky) {
    const int iy = g.in_y(oy, ky);
    if (iy < 0) continue;
    for (int kx = 0; kx < g.kw; ++kx) {
      const int ix = g.in_x(ox, kx);
      if (ix < 0) continue;
      f(iy, ix);
      ++taps;
    }
  }
  return taps;
}

std::vector<int64_t> pool(const NpuOperation& op, const Geometry& g, const Dense& ifm, bool u85) {
  std::vector<int64_t> acc(static_cast<size_t>(g.OH) * g.OW * g.OC);
  const auto mode = static_cast<PoolMode>(op.sub_op);
  const bool padded = op.padding.top || op.padding.left || op.padding.bottom || op.padding.right;
  if (mode == PoolMode::ReduceSum && g.OC != 1) fail(op, "REDUCE_SUM needs an OFM depth of 1");
  for (int oy = 0; oy < g.OH; ++oy) {
    for (int ox = 0; ox < g.OW; ++ox) {
      if (mode == PoolMode::ReduceSum) {
        // Sums the window over every IFM channel into the single OFM channel.
        int64_t a = 0;
        for_each_tap(g, oy, ox, [&](int iy, int ix) {
          for (int c = 0; c < g.IC; ++c) a += ifm.at(iy, ix)[c];
        });
        acc[g.index(oy, ox, 0)] = a;
        continue;
      }
      for (int c = 0; c < g.OC; ++c) {
        int64_t a = mode == PoolMode::Max ? std::numeric_limits<int64_t>::min()
                    : mode == PoolMode::Min ? std::numeric_limits<int64_t>::max() : 0;
        const int count = for_each_tap(g, oy, ox, [&](int iy, int ix) {
          const int64_t v = ifm.at(iy, ix)[c];
          a = mode == PoolMode::Max ? std::max(a, v) : mode == PoolMode::Min ? std::min(a, v) : a + v;
        });
        if (count == 0) fail(op, "pooling window entirely in padding");
        if (mode == PoolMode::Average && (padded || u85)) {
          // With IFM padding the NPU itself divides by the number of valid (non-padding)
          // elements, then OFM_SCALE rescales. The division rounds half away from zero:
          // that is what makes Vela's padded average pools bit-exact (it emits NATURAL
          // rounding with a 1.0 rescale there), so the rounding mode does not apply to it.
          // The Ethos-U85's AVERAGE always divides (Vela's unpadded average pools there are
          // SUM with the division folded into OFM_SCALE, or AVERAGE with a 1.0 rescale).
          a = divide_half_away(a, count);
        }
        acc[g.index(oy, ox, c)] = a;
      }
    }
  }
  return acc;
}

// ADD/SUB input scaling. Mode 0 multiplies both operands by their 16-bit scales. Modes 1/2
// rescale one operand with the 32-bit OPA scale and shift; the other keeps the fixed left
// shift that Vela's scale choice assumes (input shift 20 - 1 for 8-bit, 15 - 1 for 16-bit).
std::pair<int64_t, int64_t> scale_operands(const NpuOperation& op, int64_t a, int64_t b, int ifm_bits) {
  if (op.ifm_scale_mode == 0) return {a * op.opa_scale, b * op.opb_scale};
  const int unscaled_shift = ifm_bits == 8 ? 19 : 14;
  const int64_t scaled = op.ifm_scale_mode == 1 ? a : b;
  const int64_t plain = (op.ifm_scale_mode == 1 ? b : a) * (int64_t{1} << unscaled_shift);
  const int64_t s = scale_accumulator(scaled, op.opa_scale, op.opa_shift, op.ifm_rounding);
  return op.ifm_scale_mode == 1 ? std::make_pair(s, plain) : std::make_pair(plain, s);
}

int64_t elementwise_value(const NpuOperation& op, int64_t a, int64_t b, int ifm_bits) {
  switch (static_cast<ElementwiseMode>(op.sub_op)) {
    case ElementwiseMode::Add: {
      const auto [sa, sb] = scale_operands(op, a, b, ifm_bits);
      return sa + sb;
    }
    case ElementwiseMode::Sub: {
      const auto [sa, sb] = scale_operands(op, a, b, ifm_bits);
      return sa - sb;
    }
    case ElementwiseMode::Mul: return a * b;
    case ElementwiseMode::Min: return std::min(a, b);
    case ElementwiseMode::Max: return std::max(a, b);
    case ElementwiseMode::Abs: return sim::abs_value(a);
    case ElementwiseMode::Clz: return sim::count_leading_zeros32(a);
    case ElementwiseMode::Shl: return sim::shift_left32(a, b);
    case ElementwiseMode::Shr: {
      const int shift = static_cast<int>(std::clamp<int64_t>(b, 0, 31));
      // TRUNCATE on SHR is taken as a plain arithmetic shift (no Vela output uses it).
      return op.rounding == Rounding::Truncate ? a >> shift : shift_accumulator(a, shift, op.rounding);
    }
    case ElementwiseMode::LRelu:
      // OFM_SCALE holds alpha (Vela: the quantised alpha, TFL rounding), applied to negative
      // values only; the output stage then does not rescale (see write_output). Vela emits
      // LRELU only where the IFM and OFM quantization are equal (int16).
      return a < 0 ? scale_accumulator(a, op.ofm_scale, op.ofm_shift, op.rounding) : a;
    default:  // the Ethos-U85's other modes: ethos_u85::elementwise_value computes U85 streams
      break;
  }
  fail(op, "unknown elementwise mode " + std::to_string(op.sub_op));
}

std::vector<int64_t> elementwise(const NpuOperation& op, const Geometry& g, const Dense& ifm, const Dense& ifm2,
                                 bool u85) {
  if (u85) ethos_u85::require_simulated_elementwise(op);
  std::vector<int64_t> acc(static_cast<size_t>(g.OH) * g.OW * g.OC);
  const int ifm_bits = 8 * element_size(op.ifm.dtype);
  for (int y = 0; y < g.OH; ++y) {
    for (int x = 0; x < g.OW; ++x) {
      for (int c = 0; c < g.OC; ++c) {
        int64_t a = ifm.at(y, x)[c];
        int64_t b = 0;
        if (op.has_ifm2()) {
          b = op.ifm2_is_scalar ? op.ifm2_scalar - op.ifm2.zero_point
                                : ifm2.at(op.broadcast_h ? 0 : y, op.broadcast_w ? 0 : x)[op.broadcast_c ? 0 : c];
        }
        if (op.reversed_operands) std::swap(a, b);
        acc[g.index(y, x, c)] = u85 ? ethos_u85::elementwise_value(op, a, b) : elementwise_value(op, a, b, ifm_bits);
      }
    }
  }
  return acc;
}

// RESIZE: output (y, x) sits at IFM position (y * d + offset) / n per axis. BILINEAR is
// ethos_u85::bilinear_resize; NEAREST takes the IFM element nearest to it (ties up: Vela's
// half-pixel offsets make none; clamped into the IFM), weighted by 1.0 in 16 fractional bits,
// which OFM_SCALE shifts out.
std::vector<int64_t> resize(const NpuOperation& op, const Geometry& g, const Dense& ifm) {
  const auto& u = op.u85;
  if (u.resize_mode == 0) return ethos_u85::bilinear_resize(op, ifm, g.OH, g.OW);
  if (u.resize_mode != 2) fail(op, "REPLICATE resizing is not simulated");
  std::vector<int64_t> acc(static_cast<size_t>(g.OH) * g.OW * g.OC);
  auto source = [&](int p, const NpuOperation::U85Fields::ResizeAxis& a, int extent) {
    const int64_t twice = 2 * (static_cast<int64_t>(p) * a.d + a.offset) + a.n;  // 2 n (position + 1/2)
    const int64_t i = twice >= 0 ? twice / (2 * a.n) : -((-twice + 2 * a.n - 1) / (2 * a.n));
    return static_cast<int>(std::clamp<int64_t>(i, 0, extent - 1));  // the edge repeats (TOSA's RESIZE)
  };
  for (int y = 0; y < g.OH; ++y) {
    const int iy = source(y, u.resize_y, g.IH);
    for (int x = 0; x < g.OW; ++x) {
      const int64_t* in = ifm.at(iy, source(x, u.resize_x, g.IW));
      for (int c = 0; c < g.OC; ++c) acc[g.index(y, x, c)] = in[c] * (int64_t{1} << 16);
    }
  }
  return acc;
}

}  // namespace

Dense Executor::read_input(const NpuOperation& op, const FeatureMap& fm, int storage, int H, int W, int C,
                           int upscale, const char* what) {
  if (!u85() || storage < ethos_u85::CHAINED) return read_map(op, fm, H, W, C, upscale, what);
  Dense d;
  d.h = H;
  d.w = W;
  d.c = C;
  if (storage == ethos_u85::NONE) {  // the operand is OP_SCALAR (IFM/IFM2_BROADCAST 8)
    d.v.assign(static_cast<size_t>(H) * W * C, static_cast<int32_t>(op.u85.op_scalar) - fm.zero_point);
    return d;
  }
  if (fm.region < 0 || fm.region >= int(chained_.size())) {
    fail(op, std::string(what) + " is chained, in unknown chaining buffer " + std::to_string(fm.region));
  }
  const Chained& buffer = chained_[size_t(fm.region)];
  if (!buffer.valid) {
    fail(op, std::string(what) + " is chained, but no operation left its OFM in chaining buffer " +
                 std::to_string(fm.region));
  }
  if (buffer.h != H || buffer.w != W || buffer.c != C || buffer.dtype != fm.dtype || upscale) {
    std::ostringstream s;
    s << what << " reads " << H << "x" << W << "x" << C << " " << name(fm.dtype) << " from chaining buffer " << fm.region
      << ", which holds " << buffer.h << "x" << buffer.w << "x" << buffer.c << " " << name(buffer.dtype);
    fail(op, s.str());
  }
  d.v.resize(buffer.v.size());
  for (size_t i = 0; i < d.v.size(); ++i) d.v[i] = buffer.v[i] - fm.zero_point;
  return d;
}

Dense Executor::read_map(const NpuOperation& op, const FeatureMap& fm, int H, int W, int C, int upscale,
                         const char* what) {
  Dense d;
  d.h = H;
  d.w = W;
  d.c = C;
  const int es = element_size(fm.dtype);
  const RegionMemory& mem = regions_[static_cast<size_t>(fm.region)];
  check_extent(op, fm, mem, upscale ? (H + 1) / 2 : H, upscale ? (W + 1) / 2 : W, C, what);
  d.v.assign(static_cast<size_t>(H) * W * C, 0);
  for (int y = 0; y < H; ++y) {
    for (int x = 0; x < W; ++x) {
      if (upscale == 2 && ((y | x) & 1)) continue;  // transpose upscale inserts zeros
      const int py = upscale ? y / 2 : y, px = upscale ? x / 2 : x;
      int64_t* out = d.v.data() + (static_cast<size_t>(y) * W + x) * C;
      for (int c = 0; c < C; ++c) {
        const uint64_t a = fm.address(py, px, c);
        if (a > mem.size || static_cast<uint64_t>(es) > mem.size - a) {
          std::ostringstream s;
          s << what << " element (" << py << "," << px << "," << c << ") at 0x" << std::hex << a
            << " is beyond region " << std::dec << fm.region << " (" << mem.size << " bytes)";
          fail(op, s.str());
        }
        out[c] = load(mem.data + a, fm.dtype) - fm.zero_point;
      }
    }
  }
  return d;
}

void Executor::load_weights(const NpuOperation& op, int kh, int kw, int ifm_depth, std::vector<int16_t>& w,
                            std::vector<emit::BiasScale>& scales) {
  if (u85()) {
    auto fetch = [&](const AddressRange& r, const char* what) -> const uint8_t* {
      return bytes(op, r.region, r.address, r.length, what);
    };
    ethos_u85::OperationWeights weights = ethos_u85::load_operation_weights(op, *accelerator_, fetch);
    w = std::move(weights.ohwi);
    scales = std::move(weights.channels);
    return;
  }
  // Ethos-U65-512 splits the OFM channels between its two cores (core k takes channels k,
  // k + 2, ...), each with its own weight and scale stream and half the block depth.
  const int cores = op.parallel_mode + 1;
  if (cores > 2) fail(op, "parallel mode " + std::to_string(op.parallel_mode) + " (more than two cores)");
  const int OC = op.ofm.depth;
  const size_t volume = static_cast<size_t>(kh) * kw * ifm_depth;
  w.assign(static_cast<size_t>(OC) * volume, 0);
  scales.assign(static_cast<size_t>(OC), {});
  for (int core = 0; core < cores; ++core) {
    const int channels = (OC - core + cores - 1) / cores;
    if (channels == 0) continue;
    const AddressRange& wr = core == 0 ? op.weights : op.weights1;
    const AddressRange& sr = core == 0 ? op.scales : op.scales1;
    const uint8_t* sp = bytes(op, sr.region, sr.address, sr.length, "scale stream");
    const std::vector<emit::BiasScale> s = emit::decode_scale_stream(sp, sr.length, static_cast<size_t>(channels));
    const uint8_t* wp = bytes(op, wr.region, wr.address, wr.length, "weight stream");
    emit::WeightLayout layout;
    layout.ofm_depth = channels;
    layout.kernel_height = kh;
    layout.kernel_width = kw;
    layout.ifm_depth = ifm_depth;
    layout.ofm_block_depth = (op.block_depth + cores - 1 - core) / cores;
    layout.depthwise = op.kind == OpKind::Depthwise;
    layout.part_kernel_first = op.kernel.part_kernel_first;
    layout.ifm_bits = 8 * element_size(op.ifm.dtype);
    layout.dilation_x = op.kernel.dilation_x;
    layout.dilation_y = op.kernel.dilation_y;
    layout.ifm_ublock_depth = config_.ifm_ublock_depth();
    layout.ofm_ublock_depth = config_.ofm_ublock_depth();
    if (layout.ifm_bits > 16) fail(op, "convolution IFM must be 8 or 16 bits");
    if (layout.ofm_block_depth < 1) fail(op, "OFM block depth too small for the core count");
    const std::vector<int16_t> part = emit::unpack_weights(emit::decode_weight_stream(wp, wr.length), layout);
    for (int j = 0; j < channels; ++j) {
      const size_t c = static_cast<size_t>(core + j * cores);
      std::copy_n(part.begin() + static_cast<std::ptrdiff_t>(j * volume), volume,
                  w.begin() + static_cast<std::ptrdiff_t>(c * volume));
      scales[c] = s[static_cast<size_t>(j)];
    }
  }
}

void Executor::block(const NpuOperation& op) {
  if (op.acc_format == 2) fail(op, "the FP S5.10 accumulator format is not supported by the simulator");
  const Geometry g = geometry(op, u85());
  const bool convolution = op.kind == OpKind::Conv || op.kind == OpKind::Depthwise;
  if (u85()) {  // the tables the chain this operation starts or continues reads, while it lasts
    const bool continues = op.u85.ifm_storage == ethos_u85::CHAINED || op.u85.ifm2_storage == ethos_u85::CHAINED;
    if (!continues) chain_tables_.clear();
    if (op.u85.ofm_storage != ethos_u85::CHAINED) {
      chain_tables_.clear();
    } else if (const auto table = ethos_u85::lut_bytes(op)) {
      chain_tables_.push_back(*table);
    }
  }

  // Bound the work before doing any, then read, compute and write.
  const RegionMemory& out_mem = regions_[static_cast<size_t>(op.ofm.region)];
  // Ethos-U85 maps in the chaining buffer (or an operand with no storage) are not in memory.
  const auto in_memory = [&](int storage) { return !u85() || storage < ethos_u85::CHAINED; };
  const bool in_memory_ofm = in_memory(op.u85.ofm_storage);
  const ethos_u85::OfmOrder ofm_order(op);  // the identity on the U55/U65 (no such fields)
  // Ethos-U85: the IFM of an elementwise operation may be the broadcast operand (modes 1-7).
  const int ifm_broadcast = op.kind == OpKind::Elementwise && op.u85.ifm_broadcast_mode < ethos_u85::kBroadcastScalar
                                ? op.u85.ifm_broadcast_mode : 0;
  const std::array<int, 3> ifm_extent = ethos_u85::broadcast_extent(ifm_broadcast, g.IH, g.IW, g.IC);
  const std::array<int, 3> ofm_extent = ofm_order.stored_extent();
  if (in_memory_ofm) check_extent(op, op.ofm, out_mem, ofm_extent[0], ofm_extent[1], ofm_extent[2], "OFM");
  const uint64_t volume = static_cast<uint64_t>(g.OC) * g.kh * g.kw * (g.depthwise ? 1 : g.IC);
  if (convolution) {
    if (static_cast<uint64_t>(g.OH) * g.OW * volume > kMaxMacs) fail(op, "more MACs than the simulator accepts in one operation");
    if (volume > kMaxElements) fail(op, "a weight volume larger than the simulator accepts");
  }
  // An OFM over its own IFM/IFM2 (in place) is legal only where the block order never reads a
  // byte an earlier block wrote; otherwise the hardware silently computes garbage.
  const auto shares_ofm_memory = [&](const FeatureMap& fm) {
    const uint8_t* a = regions_[static_cast<size_t>(fm.region)].data;
    return fm.region == op.ofm.region || (a != nullptr && a == regions_[static_cast<size_t>(op.ofm.region)].data);
  };
  const bool ifm_shared = in_memory(op.u85.ifm_storage) && shares_ofm_memory(op.ifm);
  // Ethos-U85: a matrix multiply's weights and a null pooling's accumulators are IFM2 too.
  const bool ifm2_in_memory_operand = op.has_ifm2() || op.u85.weights_ifm2 || op.u85.acc_input == ethos_u85::kAccInputIfm2;
  const bool ifm2_shared = ifm2_in_memory_operand && in_memory(op.u85.ifm2_storage) && shares_ofm_memory(op.ifm2);
  const auto overlaps = [&](const FeatureMap& fm, int H, int W, int C) {
    return fm.base[0] <= last_address(op.ofm, ofm_extent[0], ofm_extent[1], ofm_extent[2]) &&
           op.ofm.base[0] <= last_address(fm, H, W, C);
  };
  if (!in_memory_ofm) {
    // No in-place hazard: the OFM goes to the chaining buffer.
  } else if (op.kind == OpKind::Resize || !ofm_order.identity() || op.u85.weights_ifm2 ||
             op.u85.acc_input == ethos_u85::kAccInputIfm2) {
    // The block-traversal replay knows the U55/U65 operations only: a resize, an OFM written
    // transposed or reversed, a matrix multiply or a null pooling must not overlap its inputs.
    // A null pooling does not read its IFM, and may write each element over its own IFM2
    // element (the same map: the value is read before it is written).
    const bool null_pooling = op.u85.acc_input == ethos_u85::kAccInputIfm2;
    const auto same_map = [&](const FeatureMap& a, const FeatureMap& b) {
      return a.base == b.base && a.stride_x == b.stride_x && a.stride_y == b.stride_y && a.stride_c == b.stride_c &&
             a.height0 == b.height0 && a.height1 == b.height1 && a.width0 == b.width0 && a.layout == b.layout &&
             element_size(a.dtype) == element_size(b.dtype);
    };
    if ((ifm_shared && !null_pooling && overlaps(op.ifm, g.IH, g.IW, g.IC)) ||
        (ifm2_shared && !(null_pooling && same_map(op.ifm2, op.ofm)) &&
         (op.u85.weights_ifm2 ? overlaps(op.ifm2, g.OH, g.OC, g.IC)
                              : overlaps(op.ifm2, op.broadcast_h ? 1 : g.OH, op.broadcast_w ? 1 : g.OW,
                                         op.broadcast_c ? 1 : g.OC)))) {
      fail(op, op.kind == OpKind::Resize ? "a resize whose OFM may overlap its IFM is not simulated"
                                         : "an OFM over its own input is not simulated for this U85 operation");
    }
  } else {
    // Nor does it know a broadcast IFM (Ethos-U85): that one must not overlap the OFM.
    if (ifm_broadcast != 0 && ifm_shared && overlaps(op.ifm, ifm_extent[0], ifm_extent[1], ifm_extent[2])) {
      fail(op, "an OFM over its own broadcast IFM is not simulated");
    }
    if (const auto hazard = find_in_place_hazard(op, ifm_shared && ifm_broadcast == 0, ifm2_shared)) {
      fail(op, hazard->describe());
    }
  }
  const bool null_pool = u85() && op.kind == OpKind::Pool && op.u85.acc_input == ethos_u85::kAccInputIfm2;
  if (u85()) {
    const auto& u = op.u85;
    accumulators_.check_input(op);
    if ((u.ifm_storage == ethos_u85::NONE) != (u.ifm_broadcast_mode == ethos_u85::kBroadcastScalar)) {
      fail(op, "an IFM with no storage must be the scalar operand, and the scalar operand has no storage");
    }
  }
  Dense ifm;
  if (ifm_broadcast != 0) {
    ifm = ethos_u85::broadcast_to(read_input(op, op.ifm, op.u85.ifm_storage, ifm_extent[0], ifm_extent[1],
                                             ifm_extent[2], 0, "IFM"), g.IH, g.IW, g.IC);
  } else if (!null_pool) {  // null pooling reads IFM2 only
    ifm = read_input(op, op.ifm, op.u85.ifm_storage, g.IH, g.IW, g.IC, op.ifm_upscale, "IFM");
  }

  std::vector<emit::BiasScale> channel_scale;
  std::vector<int64_t> acc;
  if (convolution && op.u85.weights_ifm2) {  // Ethos-U85 matrix multiply
    const Dense ifm2 = read_input(op, op.ifm2, op.u85.ifm2_storage, g.OH, g.OC, g.IC, 0, "IFM2");
    acc = ethos_u85::matmul(op, ifm, ifm2);
    stats_.macs += static_cast<uint64_t>(g.OH) * g.OW * g.OC * g.IC;
  } else if (convolution) {
    std::vector<int16_t> w;
    load_weights(op, g.kh, g.kw, g.depthwise ? 1 : g.IC, w, channel_scale);
    acc = convolve(g, ifm, w, channel_scale);
    stats_.macs += static_cast<uint64_t>(g.OH) * g.OW * volume;
  } else if (null_pool) {
    acc = read_input(op, op.ifm2, op.u85.ifm2_storage, g.OH, g.OW, g.OC, 0, "IFM2").v;
  } else if (op.kind == OpKind::Pool && op.sub_op >= static_cast<int>(PoolMode::ArgmaxX)) {
    acc = ethos_u85::argmax_pool(op, ifm, g.OH, g.OW);
  } else if (op.kind == OpKind::Pool) {
    acc = pool(op, g, ifm, u85());
  } else if (op.kind == OpKind::Resize) {
    acc = resize(op, g, ifm);
  } else {
    Dense ifm2;
    if (op.has_ifm2() && !op.ifm2_is_scalar) {
      ifm2 = read_input(op, op.ifm2, op.u85.ifm2_storage, op.broadcast_h ? 1 : g.OH, op.broadcast_w ? 1 : g.OW,
                        op.broadcast_c ? 1 : g.OC, 0, "IFM2");
    }
    acc = elementwise(op, g, ifm, ifm2, u85());
  }
  if (u85()) {
    acc = accumulators_.start(op, std::move(acc), channel_scale);
    if (!accumulators_.finish(op, acc)) return;  // output disabled: the accumulators stay
  }
  write_output(op, acc, channel_scale);
}

void Executor::write_output(const NpuOperation& op, const std::vector<int64_t>& acc,
                            const std::vector<emit::BiasScale>& channel_scale) {
  if (u85()) {
    const ethos_u85::OutputStage stage(op, shram_.data(), shram_.size());
    const bool per_channel = (op.kind == OpKind::Conv || op.kind == OpKind::Depthwise) && !op.global_scale;
    const int OH = op.ofm.height, OW = op.ofm.width, OC = op.ofm.depth;
    const bool chain = op.u85.ofm_storage == ethos_u85::CHAINED;
    const ethos_u85::OfmOrder order(op);
    if (chain && (op.ofm.region < 0 || op.ofm.region >= int(chained_.size()))) {
      fail(op, "the OFM is chained, in unknown chaining buffer " + std::to_string(op.ofm.region));
    }
    Chained* buffer = chain ? &chained_[size_t(op.ofm.region)] : nullptr;
    if (chain) {
      *buffer = {OH, OW, OC, op.ofm.dtype, std::vector<int64_t>(acc.size()), true};
    } else {
      const std::array<int, 3> e = order.stored_extent();
      check_extent(op, op.ofm, regions_[static_cast<size_t>(op.ofm.region)], e[0], e[1], e[2], "OFM");
    }
    uint8_t* out = regions_[static_cast<size_t>(op.ofm.region)].data;
    for (int y = 0; y < OH; ++y) {
      for (int x = 0; x < OW; ++x) {
        for (int c = 0; c < OC; ++c) {
          const size_t i = (static_cast<size_t>(y) * OW + x) * OC + c;
          const int64_t v = stage(acc[i], per_channel ? &channel_scale[static_cast<size_t>(c)] : nullptr);
          if (chain) {
            buffer->v[i] = v;
          } else {
            const std::array<int, 3> at = order.stored(y, x, c);
            store(out + op.ofm.address(at[0], at[1], at[2]), op.ofm.dtype, v);
          }
        }
      }
    }
    return;
  }
  const DataType ot = op.ofm.dtype;
  const int oes = element_size(ot);
  int64_t lo = type_min(ot), hi = type_max(ot);
  if (oes <= 2) {
    lo = std::max<int64_t>(lo, op.activation.min);
    hi = std::min<int64_t>(hi, op.activation.max);
  }
  switch (op.activation.clip_range) {
    case 0: break;
    case 2: lo = std::max<int64_t>({lo, 0, op.activation.min}); hi = std::min<int64_t>({hi, 255, op.activation.max}); break;
    case 3: lo = std::max<int64_t>({lo, -128, op.activation.min}); hi = std::min<int64_t>({hi, 127, op.activation.max}); break;
    case 5: lo = std::max<int64_t>({lo, -32768, op.activation.min}); hi = std::min<int64_t>({hi, 32767, op.activation.max}); break;
    default: fail(op, "reserved activation clip range " + std::to_string(op.activation.clip_range));
  }
  const int f = op.activation.function;
  const bool lut = f >= 16;
  const bool tanh_sigmoid = f == 3 || f == 4;
  if (tanh_sigmoid && ot != DataType::S16) {
    fail(op, "the built-in TANH/SIGMOID activation needs an int16 OFM (its result is Q0.15), not " +
                 std::string(name(ot)));
  }
  const uint8_t* table = nullptr;
  if (lut) {
    // LUTs live in the last 2 KiB of the SHRAM, in 256-byte slots: 256 bytes for 8-bit
    // outputs, 1 KiB (256 words) for 32-bit outputs, all 2 KiB (512 base/slope words) for 16-bit.
    const size_t at = shram_.size() - 2048 + static_cast<size_t>(f - 16) * 256;
    const size_t table_bytes = oes == 1 ? 256 : oes == 4 ? 1024 : 2048;
    if (at + table_bytes > shram_.size()) fail(op, "LUT slot beyond the SHRAM");
    table = shram_.data() + at;
  }
  const bool per_channel = (op.kind == OpKind::Conv || op.kind == OpKind::Depthwise) && !op.global_scale;
  const bool wide_elementwise = op.kind == OpKind::Elementwise && element_size(op.ifm.dtype) == 4;
  // LRELU spends OFM_SCALE on alpha (applied in elementwise_value): there is no output rescale.
  const bool lrelu = op.kind == OpKind::Elementwise && static_cast<ElementwiseMode>(op.sub_op) == ElementwiseMode::LRelu;
  const RegionMemory& out_mem = regions_[static_cast<size_t>(op.ofm.region)];
  const int OH = op.ofm.height, OW = op.ofm.width, OC = op.ofm.depth;
  for (int y = 0; y < OH; ++y) {
    for (int x = 0; x < OW; ++x) {
      for (int c = 0; c < OC; ++c) {
        int64_t v = acc[(static_cast<size_t>(y) * OW + x) * OC + c];
        if (per_channel) {
          const auto& s = channel_scale[static_cast<size_t>(c)];
          v = scale_accumulator(v, s.scale, s.shift, op.rounding);
        } else if (op.global_scale && wide_elementwise) {
          // 32-bit operands leave no room for the 32-bit multiplier: only the shift applies
          // (Vela relies on this; its softmax MULs with scale 2^30, shift 31 are TFLite's
          // SaturatingRoundingDoublingHighMul).
          v = shift_accumulator(v, op.ofm_shift, op.rounding);
        } else if (op.global_scale && !lrelu) {
          v = scale_accumulator(v, op.ofm_scale, op.ofm_shift, op.rounding);
        }
        if (tanh_sigmoid) v = f == 3 ? tanh_q15(v) : sigmoid_q15(v);
        // Vela emits the source tensor's zero point on 32-bit intermediates (softmax); the
        // NPU ignores the OFM zero point for 32-bit outputs unless the clip range narrows
        // them to 8/16 bits (a 32-bit LUT's index).
        if (oes <= 2 || op.activation.clip_range != 0) v += op.ofm.zero_point;
        v = std::clamp(v, lo, hi);
        if (lut && oes == 2) {
          // 512 words of (slope << 16 | base) over the 16-bit range, linearly interpolated
          // between entries over the low 7 bits, as TFLite's int16 LUT lookup does.
          const int u = static_cast<int>(v - (is_signed(ot) ? -32768 : 0));
          const int64_t word = load(table + 4 * (u >> 7), DataType::S32);
          const int64_t base = static_cast<int16_t>(word & 0xFFFF), slope = static_cast<int16_t>((word >> 16) & 0xFFFF);
          v = std::clamp<int64_t>(base + ((slope * (u & 0x7F) + 64) >> 7), type_min(ot), type_max(ot));
        } else if (lut) {
          const int index = static_cast<int>(v - (is_signed(ot) || oes == 4 ? -128 : 0));
          if (index < 0 || index > 255) fail(op, "LUT index out of range");
          v = oes == 4 ? load(table + 4 * index, DataType::S32) : load(table + index, ot);
        }
        const uint64_t a = op.ofm.address(y, x, c);
        if (a > out_mem.size || static_cast<uint64_t>(oes) > out_mem.size - a) {
          std::ostringstream s;
          s << "OFM element (" << y << "," << x << "," << c << ") at 0x" << std::hex << a << " is beyond region "
            << std::dec << op.ofm.region << " (" << out_mem.size << " bytes)";
          fail(op, s.str());
        }
        store(out_mem.data + a, ot, v);
      }
    }
  }
}

}  // namespace cascader::sim
