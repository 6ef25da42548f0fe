#include "cascader/sim/executor.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

#include "cascader/common/error.hpp"
#include "cascader/emit/weights.hpp"

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
  }
  return 0;
}

void store(uint8_t* p, DataType t, int64_t v) {
  const uint32_t u = static_cast<uint32_t>(v);
  const int n = element_size(t);
  for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(u >> (8 * i));
}

// A dense H x W x C view of a feature map, zero point removed.
struct Dense {
  int h = 0, w = 0, c = 0;
  std::vector<int64_t> v;
  const int64_t* at(int y, int x) const { return v.data() + (static_cast<size_t>(y) * w + x) * c; }
};

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
    : config_(config), regions_(regions), shram_(static_cast<size_t>(config.shram_kib) * 1024, 0) {}

ExecutionStats Executor::run(const CommandStream& stream, size_t max_operations) {
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
  const uint64_t n = op.dma_src.length;
  const uint8_t* src = bytes(op, op.dma_src.region, op.dma_src.address, n, "DMA source");
  uint8_t* dst = bytes(op, op.dma_dst.region, op.dma_dst.address, n, "DMA destination");
  std::memmove(dst, src, n);
  stats_.dma_bytes += n;
}

void Executor::block(const NpuOperation& op) {
  if (op.acc_format == 2) fail(op, "the FP S5.10 accumulator format is not supported by the simulator");
  const int f = op.activation.function;
  if (f == 3 || f == 4) fail(op, "the built-in TANH/SIGMOID activations (int16) are not supported by the simulator");
  const int OH = op.ofm.height, OW = op.ofm.width, OC = op.ofm.depth;
  const bool elementwise = op.kind == OpKind::Elementwise;
  const int kh = (op.kernel.height - 1) / op.kernel.dilation_y + 1;
  const int kw = (op.kernel.width - 1) / op.kernel.dilation_x + 1;
  const int sy = op.kernel.stride_y, sx = op.kernel.stride_x, dy = op.kernel.dilation_y, dx = op.kernel.dilation_x;
  const int pt = op.padding.top, pl = op.padding.left;

  // Logical IFM extent: the rows and columns the kernel can reach, minus the padding.
  int IH = OH, IW = OW;
  if (!elementwise) {
    IH = (OH - 1) * sy + op.kernel.height - op.padding.top - op.padding.bottom;
    IW = (OW - 1) * sx + op.kernel.width - op.padding.left - op.padding.right;
    if (IH < 1 || IW < 1) fail(op, "padding leaves an empty IFM");
  }
  const int IC = (op.kind == OpKind::Depthwise) ? OC : op.ifm.depth;
  if (elementwise && op.ifm.depth != OC) fail(op, "elementwise IFM depth differs from OFM depth");
  if (op.kind == OpKind::Pool && op.sub_op != static_cast<int>(PoolMode::ReduceSum) && IC != OC) {
    fail(op, "pooling IFM depth differs from OFM depth");
  }

  auto read_map = [&](const FeatureMap& fm, int H, int W, int C, int upscale, const char* what) {
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
        int py = y, px = x;
        if (upscale == 1) {
          py = y / 2;
          px = x / 2;
        } else if (upscale == 2) {
          if ((y | x) & 1) continue;  // transpose upscale inserts zeros
          py = y / 2;
          px = x / 2;
        }
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
  };

  const RegionMemory& out_mem = regions_[static_cast<size_t>(op.ofm.region)];
  check_extent(op, op.ofm, out_mem, OH, OW, OC, "OFM");
  if (op.kind == OpKind::Conv || op.kind == OpKind::Depthwise) {
    const uint64_t macs = static_cast<uint64_t>(OH) * OW * OC * kh * kw * (op.kind == OpKind::Depthwise ? 1 : IC);
    if (macs > kMaxMacs) fail(op, "more MACs than the simulator accepts in one operation");
    const uint64_t volume = static_cast<uint64_t>(OC) * kh * kw * (op.kind == OpKind::Depthwise ? 1 : IC);
    if (volume > kMaxElements) fail(op, "a weight volume larger than the simulator accepts");
  }
  const Dense ifm = read_map(op.ifm, IH, IW, IC, op.ifm_upscale, "IFM");
  std::vector<int64_t> result(static_cast<size_t>(OH) * OW * OC, 0);
  auto res = [&](int y, int x, int c) -> int64_t& { return result[(static_cast<size_t>(y) * OW + x) * OC + c]; };

  std::vector<emit::BiasScale> channel_scale;
  if (op.kind == OpKind::Conv || op.kind == OpKind::Depthwise) {
    const uint8_t* sp = bytes(op, op.scales.region, op.scales.address, op.scales.length, "scale stream");
    channel_scale = emit::decode_scale_stream(sp, op.scales.length, static_cast<size_t>(OC));
    const uint8_t* wp = bytes(op, op.weights.region, op.weights.address, op.weights.length, "weight stream");
    emit::WeightLayout layout;
    layout.ofm_depth = OC;
    layout.kernel_height = kh;
    layout.kernel_width = kw;
    layout.ifm_depth = op.kind == OpKind::Depthwise ? 1 : IC;
    layout.ofm_block_depth = op.block_depth;
    layout.depthwise = op.kind == OpKind::Depthwise;
    layout.part_kernel_first = op.kernel.part_kernel_first;
    layout.ifm_bits = 8 * element_size(op.ifm.dtype);
    layout.dilation_x = dx;
    layout.dilation_y = dy;
    layout.ifm_ublock_depth = config_.ifm_ublock_depth();
    layout.ofm_ublock_depth = config_.ofm_ublock_depth();
    if (layout.ifm_bits > 16) fail(op, "convolution IFM must be 8 or 16 bits");
    const std::vector<int16_t> w = emit::unpack_weights(emit::decode_weight_stream(wp, op.weights.length), layout);
    const int wi = layout.ifm_depth;
    for (int oy = 0; oy < OH; ++oy) {
      for (int ox = 0; ox < OW; ++ox) {
        for (int o = 0; o < OC; ++o) {
          int64_t acc = channel_scale[static_cast<size_t>(o)].bias;
          for (int ky = 0; ky < kh; ++ky) {
            const int iy = oy * sy - pt + ky * dy;
            if (iy < 0 || iy >= IH) continue;
            for (int kx = 0; kx < kw; ++kx) {
              const int ix = ox * sx - pl + kx * dx;
              if (ix < 0 || ix >= IW) continue;
              const int16_t* wk = w.data() + ((static_cast<size_t>(o) * kh + ky) * kw + kx) * wi;
              const int64_t* in = ifm.at(iy, ix);
              if (op.kind == OpKind::Depthwise) {
                acc += in[o] * wk[0];
              } else {
                for (int i = 0; i < IC; ++i) acc += in[i] * wk[i];
              }
            }
          }
          res(oy, ox, o) = acc;
        }
      }
    }
    stats_.macs += static_cast<uint64_t>(OH) * OW * OC * kh * kw * (op.kind == OpKind::Depthwise ? 1 : IC);
  } else if (op.kind == OpKind::Pool) {
    const auto mode = static_cast<PoolMode>(op.sub_op);
    const bool padded = op.padding.top || op.padding.left || op.padding.bottom || op.padding.right;
    for (int oy = 0; oy < OH; ++oy) {
      for (int ox = 0; ox < OW; ++ox) {
        if (mode == PoolMode::ReduceSum) {
          // Sums the window over every IFM channel into the single OFM channel.
          if (OC != 1) fail(op, "REDUCE_SUM needs an OFM depth of 1");
          int64_t acc = 0;
          for (int ky = 0; ky < kh; ++ky) {
            const int iy = oy * sy - pt + ky * dy;
            if (iy < 0 || iy >= IH) continue;
            for (int kx = 0; kx < kw; ++kx) {
              const int ix = ox * sx - pl + kx * dx;
              if (ix < 0 || ix >= IW) continue;
              for (int c = 0; c < IC; ++c) acc += ifm.at(iy, ix)[c];
            }
          }
          res(oy, ox, 0) = acc;
          continue;
        }
        for (int c = 0; c < OC; ++c) {
          int64_t acc = mode == PoolMode::Max ? std::numeric_limits<int64_t>::min() : 0;
          int count = 0;
          for (int ky = 0; ky < kh; ++ky) {
            const int iy = oy * sy - pt + ky * dy;
            if (iy < 0 || iy >= IH) continue;
            for (int kx = 0; kx < kw; ++kx) {
              const int ix = ox * sx - pl + kx * dx;
              if (ix < 0 || ix >= IW) continue;
              const int64_t v = ifm.at(iy, ix)[c];
              acc = mode == PoolMode::Max ? std::max(acc, v) : acc + v;
              ++count;
            }
          }
          if (count == 0) fail(op, "pooling window entirely in padding");
          if (mode == PoolMode::Average && padded) {
            // With IFM padding the NPU itself divides by the number of valid (non-padding)
            // elements, then OFM_SCALE rescales. The division rounds half away from zero:
            // that is what makes Vela's padded average pools bit-exact (it emits NATURAL
            // rounding with a 1.0 rescale there), so the rounding mode does not apply to it.
            acc = divide_half_away(acc, count);
          }
          res(oy, ox, c) = acc;
        }
      }
    }
  } else {
    const auto mode = static_cast<ElementwiseMode>(op.sub_op);
    Dense ifm2;
    if (op.has_ifm2() && !op.ifm2_is_scalar) {
      ifm2 = read_map(op.ifm2, op.broadcast_h ? 1 : OH, op.broadcast_w ? 1 : OW, op.broadcast_c ? 1 : OC, 0, "IFM2");
    }
    const int ifm_bits = 8 * element_size(op.ifm.dtype);
    for (int y = 0; y < OH; ++y) {
      for (int x = 0; x < OW; ++x) {
        for (int c = 0; c < OC; ++c) {
          int64_t a = ifm.at(y, x)[c];
          int64_t b = 0;
          if (op.has_ifm2()) {
            b = op.ifm2_is_scalar ? op.ifm2_scalar - op.ifm2.zero_point
                                  : ifm2.at(op.broadcast_h ? 0 : y, op.broadcast_w ? 0 : x)[op.broadcast_c ? 0 : c];
          }
          if (op.reversed_operands) std::swap(a, b);
          int64_t v = 0;
          switch (mode) {
            case ElementwiseMode::Add:
            case ElementwiseMode::Sub: {
              int64_t sa, sb;
              if (op.ifm_scale_mode == 0) {
                sa = a * op.opa_scale;
                sb = b * op.opb_scale;
              } else {
                // One operand is rescaled with the 32-bit OPA scale; the other keeps the fixed
                // left shift that Vela's scale choice assumes (20 - 1 for 8-bit, 15 - 1 for 16-bit).
                const int unscaled_shift = ifm_bits == 8 ? 19 : 14;
                int64_t& scaled = op.ifm_scale_mode == 1 ? a : b;
                int64_t& plain = op.ifm_scale_mode == 1 ? b : a;
                const int64_t s = scale_accumulator(scaled, op.opa_scale, op.opa_shift, op.ifm_rounding);
                const int64_t p = plain * (int64_t{1} << unscaled_shift);
                sa = op.ifm_scale_mode == 1 ? s : p;
                sb = op.ifm_scale_mode == 1 ? p : s;
              }
              v = mode == ElementwiseMode::Add ? sa + sb : sa - sb;
              break;
            }
            case ElementwiseMode::Mul: v = a * b; break;
            case ElementwiseMode::Min: v = std::min(a, b); break;
            case ElementwiseMode::Max: v = std::max(a, b); break;
            case ElementwiseMode::Abs: v = a < 0 ? -a : a; break;
            case ElementwiseMode::Clz: {
              const uint32_t u = static_cast<uint32_t>(a);
              v = u == 0 ? 32 : __builtin_clz(u);
              break;
            }
            case ElementwiseMode::Shl: {
              const int64_t s = std::clamp<int64_t>(b, 0, 31);
              v = static_cast<int32_t>(static_cast<uint32_t>(a) << s);
              break;
            }
            case ElementwiseMode::Shr: {
              const int64_t s = std::clamp<int64_t>(b, 0, 31);
              if (s == 0) {
                v = a;
              } else if (op.rounding == Rounding::Natural) {
                v = (a + (int64_t{1} << (s - 1))) >> s;
              } else if (op.rounding == Rounding::TFL) {
                v = rounding_right_shift(a, static_cast<int>(s));
              } else {
                v = a >> s;
              }
              break;
            }
            case ElementwiseMode::LRelu:
              fail(op, "elementwise LRELU is not supported by the simulator");
          }
          res(y, x, c) = v;
        }
      }
    }
  }

  // Output unit: scale, zero point, clamp, LUT, store.
  const DataType ot = op.ofm.dtype;
  int64_t lo = type_min(ot), hi = type_max(ot);
  if (element_size(ot) <= 2) {
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
  const bool lut = f >= 16;
  const uint8_t* table = nullptr;
  if (lut) {
    // LUTs live in the last 2 KiB of the SHRAM, in 256-byte slots: 256 bytes for 8-bit
    // outputs, 1 KiB (256 words) for 32-bit outputs, all 2 KiB (512 base/slope words) for 16-bit.
    const size_t at = shram_.size() - 2048 + static_cast<size_t>(f - 16) * 256;
    const size_t table_bytes = element_size(ot) == 1 ? 256 : element_size(ot) == 4 ? 1024 : 2048;
    if (at + table_bytes > shram_.size()) fail(op, "LUT slot beyond the SHRAM");
    table = shram_.data() + at;
  }
  const bool per_channel = (op.kind == OpKind::Conv || op.kind == OpKind::Depthwise) && !op.global_scale;
  const bool scaled = per_channel || op.global_scale;
  const bool wide_elementwise = elementwise && element_size(op.ifm.dtype) == 4;
  const int oes = element_size(ot);
  for (int y = 0; y < OH; ++y) {
    for (int x = 0; x < OW; ++x) {
      for (int c = 0; c < OC; ++c) {
        int64_t v = res(y, x, c);
        if (per_channel) {
          const auto& s = channel_scale[static_cast<size_t>(c)];
          v = scale_accumulator(v, s.scale, s.shift, op.rounding);
        } else if (scaled && wide_elementwise) {
          // 32-bit operands leave no room for the 32-bit multiplier: only the shift applies
          // (Vela relies on this; its softmax MULs with scale 2^30, shift 31 are TFLite's
          // SaturatingRoundingDoublingHighMul).
          v = shift_accumulator(v, op.ofm_shift, op.rounding);
        } else if (scaled) {
          v = scale_accumulator(v, op.ofm_scale, op.ofm_shift, op.rounding);
        }
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
