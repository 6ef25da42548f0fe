#include "cascader/sim/estimator.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <string>

#include "cascader/arch/ethos_u85/command_encoder.hpp"
#include "cascader/arch/ethos_u85/performance.hpp"
#include "cascader/arch/ethos_u85/registers.hpp"
#include "cascader/arch/ethos_u85/weight_order.hpp"
#include "cascader/common/error.hpp"
#include "cascader/sim/in_place_hazard.hpp"

namespace cascader::sim {

namespace {

// A DMA not yet consumed: where it copies from and to; `read`: an operation has read a feature
// map from what it wrote (a staged input, say), so a later DMA over the same bytes does not
// make it moot.
struct PendingDma {
  size_t index = 0;
  AddressRange src, dst;
  bool read = false;
};

bool covers(const AddressRange& dst, const AddressRange& use) {
  return use.length > 0 && dst.region == use.region && use.address >= dst.address &&
         use.address + use.length <= dst.address + dst.length;
}

int bits_of(DataType t) { return 8 * element_size(t); }

// Only convolutions read weight and scale streams; for other operations the registers hold
// whatever an earlier operation left there.
bool reads_weights(const NpuOperation& o) { return o.kind == OpKind::Conv || o.kind == OpKind::Depthwise; }

cascader::FeatureMap feature_map(const sim::FeatureMap& f, const Shape4& shape, const ArchConfig& arch) {
  cascader::FeatureMap m;
  m.shape = shape;
  m.format = f.layout == Layout::NHCWB16 ? TensorFormat::NHCWB16 : TensorFormat::NHWC;
  m.bits = bits_of(f.dtype);
  m.memory = region_memory(f.region, arch);
  return m;
}

// A clamp to the full range of the OFM type is no activation; a narrower one is a ReLU.
cascader::Activation activation_of(const NpuOperation& o) {
  if (o.activation.function != 0) return cascader::Activation::Lut;
  const int bits = bits_of(o.ofm.dtype);
  const int64_t lo = is_signed(o.ofm.dtype) ? -(int64_t(1) << (bits - 1)) : 0;
  const int64_t hi = is_signed(o.ofm.dtype) ? (int64_t(1) << (bits - 1)) - 1 : (int64_t(1) << bits) - 1;
  return (o.activation.min > lo || o.activation.max < hi) ? cascader::Activation::Relu : cascader::Activation::None;
}

NpuOpType op_type(const NpuOperation& o) {
  switch (o.kind) {
    case OpKind::Conv:
      // Vela runs fully connected layers as 1x1 convolutions over a 1x1 OFM (vector product).
      return (o.ofm.height == 1 && o.ofm.width == 1 && o.kernel.width == 1 && o.kernel.height == 1)
                 ? NpuOpType::FullyConnected
                 : NpuOpType::Conv2D;
    case OpKind::Depthwise: return NpuOpType::DepthwiseConv2D;
    case OpKind::Pool:
      switch (static_cast<PoolMode>(o.sub_op)) {
        case PoolMode::Max: return NpuOpType::MaxPool;
        case PoolMode::ReduceSum: return NpuOpType::ReduceSum;
        default: return NpuOpType::AvgPool;
      }
    case OpKind::Elementwise:
      switch (static_cast<ElementwiseMode>(o.sub_op)) {
        case ElementwiseMode::Mul: return NpuOpType::Mul;
        case ElementwiseMode::Add: return NpuOpType::Add;
        case ElementwiseMode::Sub: return NpuOpType::Sub;
        case ElementwiseMode::Min: return NpuOpType::Minimum;
        // MAX and the unary modes (LRELU, ABS, CLZ, SHR, SHL) cost as a non-multiplying
        // elementwise pass.
        default: return NpuOpType::Maximum;
      }
    case OpKind::Dma: return NpuOpType::Dma;
    case OpKind::Resize: return NpuOpType::Maximum;  // an output-unit pass (U85Op::resize)
  }
  return NpuOpType::Dma;
}

// Whether `b` writes the OFM channels right after `a`'s: the next depth slice of one map. (The
// sub-kernel convolutions of a transposed convolution also share IFM, kernel and OFM area, but
// each writes every other pixel of the same channels, one pixel or row on.)
bool next_channels(const sim::FeatureMap& a, const sim::FeatureMap& b) {
  const int64_t delta = int64_t(b.base[0]) - int64_t(a.base[0]);
  if (a.layout == Layout::NHWC) {
    const bool every_other_row = a.stride_y == 2 * int64_t(a.width) * a.stride_x;
    return !every_other_row && delta == int64_t(a.depth) * element_size(a.dtype);
  }
  return a.depth % 16 == 0 && delta == int64_t(a.depth / 16) * a.stride_c;
}

// Vela splits one operation into commands per OFM depth slice when it buffers its weights
// (same IFM, kernel and OFM area; each slice its own weight stream and DMA). Vela costs the
// operation once, and so does the estimator: one row, and one step of the DMA timeline.
bool same_operation(const NpuOperation& a, const NpuOperation& b) {
  // A depthwise depth slice reads a channel range of a deeper NHWC map (its pixels lie further
  // apart than its own depth); a depthwise reading a dense map of its own depth is a whole
  // operation, as each phase of Vela's bilinear resize is (4 depthwise commands, costed apart).
  const auto channel_range = [](const NpuOperation& o) {
    return o.kind != OpKind::Depthwise || o.ifm.layout != Layout::NHWC ||
           o.ifm.stride_x > int64_t{o.ifm.depth} * element_size(o.ifm.dtype);
  };
  return a.kind == b.kind && reads_weights(a) && a.weights.length > 0 && channel_range(a) && channel_range(b) &&
         b.weights.length > 0 && a.weights.region == b.weights.region && a.ifm.region == b.ifm.region &&
         // A depthwise slice reads its own IFM channels; a convolution slice reads them all.
         (a.kind == OpKind::Depthwise || a.ifm.base[0] == b.ifm.base[0]) && a.ifm.stride_y == b.ifm.stride_y &&
         a.ofm.stride_y == b.ofm.stride_y && a.ofm.region == b.ofm.region && next_channels(a.ofm, b.ofm) &&
         a.ofm.height == b.ofm.height &&
         a.ofm.width == b.ofm.width && a.kernel.width == b.kernel.width && a.kernel.height == b.kernel.height &&
         a.kernel.stride_x == b.kernel.stride_x && a.kernel.stride_y == b.kernel.stride_y;
}

// Vela lowers some operators (TRANSPOSE, some reshapes and concatenations) into a run of
// identical 1x1 pooling commands, each moving a one-channel piece through the same strides,
// each the same number of bytes on from the one before, and costs the operator once over the
// whole tensor. Copies of whole pixels (MIRROR_PAD's edge rows and columns) are costed one by
// one, as Vela costs them. (The two steps of a 0312 transpose are two runs: their pieces
// differ in strides.)
bool same_piece(const NpuOperation& a, const NpuOperation& b) {
  if (a.ofm.depth != 1) return false;  // fm() below makes b's the same
  auto fm = [](const sim::FeatureMap& x, const sim::FeatureMap& y) {
    return x.region == y.region && x.dtype == y.dtype && x.layout == y.layout && x.height == y.height &&
           x.width == y.width && x.depth == y.depth && x.stride_x == y.stride_x && x.stride_y == y.stride_y;
  };
  return a.kind == OpKind::Pool && b.kind == OpKind::Pool && a.sub_op == b.sub_op && a.kernel.width == 1 &&
         a.kernel.height == 1 && b.kernel.width == 1 && b.kernel.height == 1 && a.kernel.stride_x == 1 &&
         a.kernel.stride_y == 1 && b.kernel.stride_x == 1 && b.kernel.stride_y == 1 && a.activation.function == 0 &&
         b.activation.function == 0 && fm(a.ifm, b.ifm) && fm(a.ofm, b.ofm) && a.block_width == b.block_width &&
         a.block_height == b.block_height && a.block_depth == b.block_depth;
}

// A 1x1 average pool that only moves elements: the commands Vela (and our lowering) copy
// tensors with.
bool is_plain_copy(const NpuOperation& o) {
  return o.kind == OpKind::Pool && static_cast<PoolMode>(o.sub_op) == PoolMode::Average && o.kernel.width == 1 &&
         o.kernel.height == 1 && o.kernel.stride_x == 1 && o.kernel.stride_y == 1 && o.activation.function == 0 &&
         !o.ifm_upscale && o.ifm.layout == Layout::NHWC && o.ofm.layout == Layout::NHWC && o.ifm.dtype == o.ofm.dtype;
}

// A step of a transpose (NpuOp::transpose): its kind, its input and its permuted output.
struct TransposeStep {
  Transpose kind = Transpose::None;
  Shape4 in, out;
};

// Recognises a transpose step in `count` commands from `first` (a run of same_piece pieces,
// or one command), by their strides. One command with whole pixels swaps H and W: it writes
// its OFM with the x and y strides swapped (Vela) or reads its IFM so (our lowering). A run of
// n one-channel pieces of P x Q elements (OFM y stride one element) swaps W and C when each
// piece is one input row (n x P x Q -> n x Q x P), H and C when each is one input column
// (P x n x Q -> Q x n x P). A single piece is read as the first. It could also be the second
// (Vela's figures differ by under 5%) or an H and W swap of one-channel pixels, which Vela
// costs up to 4x differently: only the model's tensors tell, not the commands.
std::optional<TransposeStep> transpose_step(const std::vector<NpuOperation>& ops, size_t first, size_t count) {
  const NpuOperation& o = ops[first];
  if (!is_plain_copy(o)) return std::nullopt;
  const int64_t e = element_size(o.ofm.dtype);
  const int64_t P = o.ofm.height, Q = o.ofm.width, C = o.ofm.depth, n = int64_t(count);
  auto dense = [&](const sim::FeatureMap& f, int64_t width) { return f.stride_x == C * e && f.stride_y == width * C * e; };
  auto swapped = [&](const sim::FeatureMap& f, int64_t height) {
    return f.stride_y == C * e && f.stride_x == height * C * e;
  };
  TransposeStep t;
  if (count == 1 && C > 1 && P > 1 && Q > 1) {
    if (swapped(o.ofm, P) && dense(o.ifm, Q)) {
      t.kind = Transpose::NWHC, t.in = Shape4{1, int(P), int(Q), int(C)}, t.out = Shape4{1, int(Q), int(P), int(C)};
    } else if (swapped(o.ifm, P) && dense(o.ofm, Q)) {
      t.kind = Transpose::NWHC, t.in = Shape4{1, int(Q), int(P), int(C)}, t.out = Shape4{1, int(P), int(Q), int(C)};
    } else {
      return std::nullopt;
    }
    return t;
  }
  if (C != 1 || o.ifm.stride_x != e || o.ofm.stride_y != e) return std::nullopt;
  const int64_t in_step = n > 1 ? int64_t(ops[first + 1].ifm.base[0]) - int64_t(o.ifm.base[0]) : 0;
  const int64_t out_step = n > 1 ? int64_t(ops[first + 1].ofm.base[0]) - int64_t(o.ofm.base[0]) : 0;
  if (o.ifm.stride_y == Q * e && o.ofm.stride_x == P * e && (n == 1 || (in_step == P * Q * e && out_step == P * Q * e))) {
    t.kind = Transpose::NHCW, t.in = Shape4{1, int(n), int(P), int(Q)}, t.out = Shape4{1, int(n), int(Q), int(P)};
  } else if (o.ifm.stride_y == n * Q * e && o.ofm.stride_x == n * P * e && in_step == Q * e && out_step == P * e) {
    t.kind = Transpose::NCWH, t.in = Shape4{1, int(P), int(n), int(Q)}, t.out = Shape4{1, int(Q), int(n), int(P)};
  } else {
    return std::nullopt;
  }
  return t;
}

// The OFM is every other pixel of every other row of a dense NHWC map: one phase of a 2x
// upscale written by a depthwise command (Vela's and our RESIZE_BILINEAR).
bool writes_every_other_pixel(const NpuOperation& o) {
  const int64_t pixel = int64_t(o.ofm.depth) * element_size(o.ofm.dtype);
  return o.kind == OpKind::Depthwise && o.ofm.layout == Layout::NHWC && o.ofm.stride_x == 2 * pixel &&
         o.ofm.stride_y == 2 * int64_t(o.ofm.width) * o.ofm.stride_x;
}

// A convolution writing every other pixel of every other row of a dense NHWC map: one of the
// sub-kernel convolutions Vela splits an Ethos-U85 transposed convolution of stride 2 into.
bool writes_sub_kernel_phase(const NpuOperation& o) {
  return o.kind == OpKind::Conv && o.ofm.layout == Layout::NHWC && o.ofm.stride_x == 2 * int64_t(o.ofm.depth) * element_size(o.ofm.dtype) &&
         o.ofm.stride_y == 2 * int64_t(o.ofm.width) * o.ofm.stride_x;
}

// Vela costs each sub-kernel convolution over the map from its first pixel to the map's end:
// the OFM's rows and columns from the phase's offset (dy, dx) on, 2H - dy by 2W - dx. The
// offset is the phase's from the first pixel any phase around it writes (the map's origin).
Shape4 sub_kernel_span(const std::vector<NpuOperation>& ops, size_t i) {
  const NpuOperation& o = ops[i];
  const auto sibling = [&o](const NpuOperation& s) {
    return writes_sub_kernel_phase(s) && s.ifm.region == o.ifm.region && s.ifm.base[0] == o.ifm.base[0] &&
           s.ofm.region == o.ofm.region && s.ofm.stride_x == o.ofm.stride_x && s.ofm.stride_y == o.ofm.stride_y;
  };
  uint64_t origin = o.ofm.base[0];
  for (size_t k = i, seen = 0; k-- > 0 && seen < 3;) {
    if (ops[k].kind == OpKind::Dma) continue;
    if (!sibling(ops[k])) break;
    origin = std::min(origin, ops[k].ofm.base[0]);
    ++seen;
  }
  const int64_t delta = int64_t(o.ofm.base[0] - origin), row = o.ofm.stride_y / 2, pixel = o.ofm.stride_x / 2;
  const int dy = int(delta / row), dx = int((delta % row) / pixel);
  return Shape4{1, std::max(2 * o.ofm.height - dy, 1), std::max(2 * o.ofm.width - dx, 1), o.ofm.depth};
}

// Step k of Vela's matrix product (its MatMul, cycle_model.hpp estimate_matmul): an
// elementwise MUL into 32-bit products at `k`, then a REDUCE_SUM over depth of exactly those
// products.
bool is_matmul_step(const std::vector<NpuOperation>& ops, size_t k) {
  if (k + 1 >= ops.size()) return false;
  const NpuOperation &m = ops[k], &s = ops[k + 1];
  return m.kind == OpKind::Elementwise && static_cast<ElementwiseMode>(m.sub_op) == ElementwiseMode::Mul &&
         m.has_ifm2() && !m.ifm2_is_scalar && m.ofm.dtype == DataType::S32 && m.activation.function == 0 &&
         s.kind == OpKind::Pool && static_cast<PoolMode>(s.sub_op) == PoolMode::ReduceSum && s.ofm.depth == 1 &&
         s.activation.function == 0 &&
         s.ifm.dtype == DataType::S32 && s.ifm.region == m.ofm.region && s.ifm.base[0] == m.ofm.base[0] &&
         s.ifm.depth == m.ofm.depth && s.ofm.height == m.ofm.height && s.ofm.width == m.ofm.width;
}

// The steps of one product: the same first operand and products buffer, the same shapes and
// blocks, each step's column of the second operand and output column as far on from the
// last as the second step's. Returns the number of steps from `first` (0: not a product).
size_t matmul_columns(const std::vector<NpuOperation>& ops, size_t first) {
  if (!is_matmul_step(ops, first)) return 0;
  const NpuOperation &m0 = ops[first], &s0 = ops[first + 1];
  const auto same_fm = [](const sim::FeatureMap& a, const sim::FeatureMap& b) {
    return a.region == b.region && a.dtype == b.dtype && a.layout == b.layout && a.depth == b.depth &&
           a.stride_x == b.stride_x && a.stride_y == b.stride_y && a.stride_c == b.stride_c;
  };
  size_t n = 1;
  int64_t column_step = 0, output_step = 0;
  for (size_t k = first + 2; is_matmul_step(ops, k); k += 2, ++n) {
    const NpuOperation &m = ops[k], &s = ops[k + 1];
    const NpuOperation &pm = ops[k - 2], &ps = ops[k - 1];
    const int64_t cs = int64_t(m.ifm2.base[0]) - int64_t(pm.ifm2.base[0]);
    const int64_t os = int64_t(s.ofm.base[0]) - int64_t(ps.ofm.base[0]);
    if (n == 1) column_step = cs, output_step = os;
    if (cs != column_step || os != output_step || cs == 0 || os == 0 || !same_fm(m.ifm, m0.ifm) ||
        m.ifm.base[0] != m0.ifm.base[0] || !same_fm(m.ifm2, m0.ifm2) || !same_fm(m.ofm, m0.ofm) ||
        m.ofm.base[0] != m0.ofm.base[0] || m.ofm.height != m0.ofm.height || m.ofm.width != m0.ofm.width ||
        m.broadcast_h != m0.broadcast_h || m.broadcast_w != m0.broadcast_w || m.broadcast_c != m0.broadcast_c ||
        !same_fm(s.ofm, s0.ofm) || m.block_height != m0.block_height || m.block_width != m0.block_width ||
        m.block_depth != m0.block_depth || s.block_height != s0.block_height || s.block_width != s0.block_width ||
        s.block_depth != s0.block_depth) {
      break;
    }
  }
  return n;
}

// A region's byte range: the hull of what an access reaches.
struct Span {
  int region = -1;
  int64_t begin = 0, end = 0;
  bool overlaps(const Span& o) const { return region == o.region && begin < o.end && o.begin < end; }
};

// The hull of a height x width x depth box of `fm`. Addresses are linear in y, x and the
// channel within each tile (NHCWB16: with its brick stride above 16 channels), so the box's
// extremes lie at the corners of its tiles.
Span hull(const sim::FeatureMap& fm, int height, int width, int depth) {
  Span s{fm.region, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  for (int y : {0, fm.height0 - 1, fm.height0, fm.height1 - 1, fm.height1, height - 1}) {
    for (int x : {0, fm.width0 - 1, fm.width0, width - 1}) {
      for (int c : {0, depth - 1}) {
        if (y < 0 || y >= height || x < 0 || x >= width || c < 0) continue;
        const auto a = int64_t(fm.address(y, x, c));
        s.begin = std::min(s.begin, a);
        s.end = std::max(s.end, a + element_size(fm.dtype));
      }
    }
  }
  if (s.begin > s.end) s.begin = s.end = 0;
  return s;
}

// What an operation reads and writes of the feature maps (weights and scales are constants).
struct Accesses {
  std::vector<Span> reads;
  Span written;
};

Accesses accesses_of(const NpuOperation& o) {
  Accesses a;
  if (o.kind == OpKind::Dma) {
    a.reads.push_back(Span{o.dma_src.region, int64_t(o.dma_src.address), int64_t(o.dma_src.address + o.dma_src.length)});
    a.written = Span{o.dma_dst.region, int64_t(o.dma_dst.address), int64_t(o.dma_dst.address + o.dma_dst.length)};
    return a;
  }
  if (o.kind == OpKind::Resize) {  // no block traversal; the kernel registers hold the IFM extent it reads
    a.reads.push_back(hull(o.ifm, o.kernel.height, o.kernel.width, o.ofm.depth));
    a.written = hull(o.ofm, o.ofm.height, o.ofm.width, o.ofm.depth);
    return a;
  }
  const TraversalShape s = traversal_shape(o);
  const auto source = [&s](int extent) { return s.upscale == 2 ? (extent + 1) / 2 : extent; };
  a.reads.push_back(hull(o.ifm, source(s.ifm_height), source(s.ifm_width), s.ifm_depth));
  if (s.has_ifm2 && !s.ifm2_scalar) {
    a.reads.push_back(hull(o.ifm2, s.broadcast_h ? 1 : s.ofm_height, s.broadcast_w ? 1 : s.ofm_width,
                           s.broadcast_c ? 1 : s.ofm_depth));
  }
  a.written = hull(o.ofm, s.ofm_height, s.ofm_width, s.ofm_depth);
  return a;
}

// Which operations after `first` read, directly or through operations between, what `first`
// wrote: a time step of a recurrent network reads its state from the step before, the stripes
// of one cascaded operation never read each other's output. Feature maps are compared by the
// hulls of their bytes.
class Dependents {
 public:
  // `cache`: the accesses of `ops`, filled as needed (shared between uses over one stream).
  Dependents(const std::vector<NpuOperation>& ops, std::vector<std::optional<Accesses>>& cache, size_t first)
      : ops_(ops), cache_(cache), next_(first + 1) {
    produced_.push_back(access(first).written);
  }
  // Whether operation `k` (> every k asked before) depends on `first` or on an operation
  // added with also_produced.
  bool depends(size_t k) {
    for (; next_ < k; ++next_) {
      if (reads_produced(next_)) produced_.push_back(access(next_).written);
    }
    return reads_produced(k);
  }
  void also_produced(size_t k) { produced_.push_back(access(k).written); }

 private:
  const Accesses& access(size_t k) {
    if (!cache_[k]) cache_[k] = accesses_of(ops_[k]);
    return *cache_[k];
  }
  bool reads_produced(size_t k) {
    for (const Span& r : access(k).reads) {
      for (const Span& p : produced_) {
        if (r.overlaps(p)) return true;
      }
    }
    return false;
  }
  const std::vector<NpuOperation>& ops_;
  std::vector<std::optional<Accesses>>& cache_;
  size_t next_;
  std::vector<Span> produced_;
};

// A stripe of a cascaded operation starts its IFM whole rows on from the stripe before (a
// rolling buffer wraps by whole rows too); an operation reading elsewhere along W or C is not.
bool rows_on(const NpuOperation& before, const NpuOperation& s) {
  if (s.ifm.region != before.ifm.region || s.ifm.stride_y != before.ifm.stride_y) return false;
  const int64_t delta = int64_t(s.ifm.base[0]) - int64_t(before.ifm.base[0]);
  return before.ifm.stride_y > 0 ? delta % before.ifm.stride_y == 0 : delta == 0;
}

// The shape of the map an Ethos-U85 operation writes with OFM_TRANSPOSE `transpose`: its OFM
// (in register order, H x W x C) permuted as the map lies in memory.
Shape4 transposed_ofm(const Shape4& s, int transpose) {
  switch (transpose) {
    case 0: return s;                        // HWC
    case 1: return {s.n, s.w, s.h, s.c};     // WHC
    case 2: return {s.n, s.h, s.c, s.w};     // HCW
    case 3: return {s.n, s.w, s.c, s.h};     // WCH
    case 6: return {s.n, s.c, s.h, s.w};     // CHW
    case 7: return {s.n, s.c, s.w, s.h};     // CWH
    default: throw BinaryError("OFM transpose " + std::to_string(transpose) + " is not one the Ethos-U85 has");
  }
}

// Writes that swap H and W, and reversals along W, run the output unit at half throughput.
bool half_throughput_write(const NpuOperation& o) {
  const int t = o.u85.ofm_transpose;
  return t == 1 || t == 3 || t == 7 || o.u85.ofm_reverse == 2;
}

// The bytes of an operation's weight streams: the U85 has up to four, one per weight decoder.
int64_t weight_stream_bytes(const NpuOperation& o, bool u85) {
  if (!u85) return int64_t(o.weights.length + o.weights1.length);
  int64_t bytes = 0;
  for (const AddressRange& w : o.u85.weight_streams) bytes += int64_t(w.length);
  return bytes;
}

// The Ethos-U85 part of an operation's description (NpuOp::u85): micro-block, IFM block,
// accumulator, weight format and chaining, with the block config the registers give.
void describe_u85(const NpuOperation& o, NpuOp& op, const AcceleratorConfig& a) {
  U85Op u;
  u.ofm_half_throughput = half_throughput_write(o);
  u.ofm_ublock = ethos_u85::ofm_micro_block(o, a);
  u.acc48 = o.acc_format == 1;
  u.fast_weights = reads_weights(o) && o.u85.weight_format == 1;
  u.sparse_weights = reads_weights(o) && o.u85.weight_sparsity == 1;
  u.resize = o.kind == OpKind::Resize;
  u.ifm_chained = o.u85.ifm_storage == ethos_u85::CHAINED;
  u.ifm2_chained = o.u85.ifm2_storage == ethos_u85::CHAINED;
  u.ofm_chained = o.u85.ofm_storage == ethos_u85::CHAINED;
  u.own_ofm_bits = op.ofm.bits;
  const BlockShape ofm_block{o.block_height, o.block_width, o.block_depth};
  int ifm_block_depth = 0;  // the OFM block's
  if (op.type == NpuOpType::Conv2D || op.type == NpuOpType::FullyConnected || op.type == NpuOpType::ReduceSum) {
    const auto traversal = o.kernel.part_kernel_first && op.type != NpuOpType::ReduceSum ? ethos_u85::Traversal::PartKernel
                                                                                         : ethos_u85::Traversal::DepthFirst;
    ifm_block_depth = ethos_u85::conv_ifm_block_depth(traversal, a.macs_per_cycle, u.ofm_ublock.depth,
                                                      u.sparse_weights, op.ifm.bits);
    if (op.type == NpuOpType::FullyConnected && o.kernel.part_kernel_first) op.traversal = Traversal::PartKernelFirst;
  }
  const bool elementwise = o.kind == OpKind::Elementwise || o.kind == OpKind::Resize;
  if (!elementwise && o.ifm.stride_x > 0 && op.kernel.stride_x > 1) {
    // A strided kernel may leave up to stride - 1 of the IFM's last columns unread; Vela costs
    // the whole IFM, whose width the row pitch shows (the rows, which no register shows, stay
    // the box the kernel reads).
    const int64_t pitch = o.ifm.stride_y / o.ifm.stride_x;
    op.ifm.shape.w = int(std::clamp<int64_t>(pitch, op.ifm.shape.w, op.ifm.shape.w + op.kernel.stride_x - 1));
  }
  u.ifm_block = elementwise ? ofm_block
                            : ethos_u85::ifm_block(a, ofm_block, u.ofm_ublock, op.kernel, op.ifm.bits, ifm_block_depth,
                                                   op.ifm_upscale);
  BlockConfig cfg;
  cfg.ofm_block = ofm_block;
  cfg.ifm_block = u.ifm_block;
  cfg.part_kernel_first = o.kernel.part_kernel_first;
  op.block_config = cfg;
  op.u85 = u;
}

}  // namespace

NpuOp npu_op_of(const NpuOperation& o, const ArchConfig& arch) {
  NpuOp op;
  op.type = op_type(o);
  const Shape4 ofm{1, o.ofm.height, o.ofm.width, o.ofm.depth};
  op.ofm = feature_map(o.ofm, ofm, arch);
  if (o.kind == OpKind::Elementwise) {
    // Each operand covers the OFM but on its broadcast axes, where it has size 1. The IFM2's
    // broadcast is in the fields every target decodes; the Ethos-U85 also broadcasts the IFM
    // (IFM_BROADCAST: bits H, W, C, or a scalar), and Vela costs it at its own shape.
    auto broadcast = [&ofm](bool scalar, bool h, bool w, bool c) {
      if (scalar) return Shape4{1, 1, 1, 1};
      return Shape4{1, h ? 1 : ofm.h, w ? 1 : ofm.w, c ? 1 : ofm.c};
    };
    const int ib = o.u85.ifm_broadcast_mode;
    op.ifm = feature_map(o.ifm, broadcast(ib == ethos_u85::kBroadcastScalar, ib & 1, ib & 2, ib & 4), arch);
    if (o.has_ifm2()) {
      op.ifm2 = feature_map(o.ifm2, broadcast(o.ifm2_is_scalar, o.broadcast_h, o.broadcast_w, o.broadcast_c), arch);
    }
  } else if (o.kind == OpKind::Resize) {
    // The kernel registers hold the IFM extent the resize reads.
    op.ifm = feature_map(o.ifm, Shape4{1, o.kernel.height, o.kernel.width, ofm.c}, arch);
  } else {
    cascader::Kernel k;
    k.dilation_x = o.kernel.dilation_x;
    k.dilation_y = o.kernel.dilation_y;
    // The registers hold the dilated extent.
    k.width = (o.kernel.width - 1) / std::max(k.dilation_x, 1) + 1;
    k.height = (o.kernel.height - 1) / std::max(k.dilation_y, 1) + 1;
    k.stride_x = o.kernel.stride_x;
    k.stride_y = o.kernel.stride_y;
    op.kernel = k;
    op.padding = cascader::Padding{o.padding.top, o.padding.left, o.padding.bottom, o.padding.right};
    // The IFM box the OFM box reads (the tiles may hold more than this stripe uses).
    Shape4 ifm{1, (ofm.h - 1) * k.stride_y + k.area_height() - o.padding.top - o.padding.bottom,
               (ofm.w - 1) * k.stride_x + k.area_width() - o.padding.left - o.padding.right,
               op.type == NpuOpType::Conv2D || op.type == NpuOpType::FullyConnected || op.type == NpuOpType::ReduceSum
                   ? o.ifm.depth
                   : ofm.c};
    if (ifm.h < 1 || ifm.w < 1) {
      throw BinaryError("operation at word " + std::to_string(o.word_offset) +
                        ": the padding exceeds the IFM area the kernel reads");
    }
    op.ifm = feature_map(o.ifm, ifm, arch);
    op.ifm_upscale = o.ifm_upscale ? 2 : 1;
    if (op.type == NpuOpType::Conv2D) {
      op.traversal = o.kernel.part_kernel_first ? Traversal::PartKernelFirst : Traversal::DepthFirst;
    }
  }
  op.activation = activation_of(o);
  if (!reads_weights(o)) return op;
  op.weight_bytes = weight_stream_bytes(o, arch.accelerator().product == Product::EthosU85);
  op.scale_bytes = int64_t(o.scales.length + o.scales1.length);
  if (op.weight_bytes > 0 || op.scale_bytes > 0) {
    op.weight_memory = region_memory(op.weight_bytes > 0 ? o.weights.region : o.scales.region, arch);
  }
  return op;
}

MemoryArea region_memory(int region, const ArchConfig& arch) {
  if (region == kShramRegion) throw BinaryError("the SHRAM (region 0x103) is not a system memory");
  if (region < 0 || region > 7) throw BinaryError("region " + std::to_string(region) + " is out of range 0..7");
  switch (region) {
    case 0: return arch.region_memory(Region::Constants);
    case 2: return arch.region_memory(Region::FastCache);
    default: return arch.region_memory(Region::Arena);  // 1 scratch; 3+ IO, inside the arena
  }
}

StreamEstimate estimate_stream(const CommandStream& stream, const ArchConfig& arch, BlockConfigCache& cache,
                               bool merge_as_vela) {
  const bool u85 = stream.product == Product::EthosU85;
  StreamEstimate result;
  std::vector<PendingDma> pending;
  std::vector<PendingDma> read_copies;  // replaced in `pending` after an operation read them
  // DMA slack as Vela counts it: a weight or LUT transfer runs under the operation before its
  // consumer, for that operation's CostRecord::buffering_slack_cycles (its compute as Vela's
  // scheduler saw it), not for the time that operation actually took. Rows of one operation
  // (stripes not merged into one row) share the slack of the operation before them.
  int64_t slack = 0;         // offered to the current operation
  int64_t last_offered = 0;  // by the last row costed
  const NpuOperation* prev = nullptr;
  auto add = [&result](OperationEstimate&& e) {
    result.total_cycles += e.cost.total_cycles;
    for (int m = 0; m < kMemoryAreaCount; ++m) {
      result.read_bytes[m] += e.cost.read_bytes[m];
      result.write_bytes[m] += e.cost.write_bytes[m];
    }
    result.operations.push_back(std::move(e));
  };

  const std::vector<NpuOperation>& ops = stream.operations;
  std::vector<char> done(ops.size(), 0);  // costed already, as part of an earlier row
  std::vector<std::optional<Accesses>> accesses(ops.size());  // what each operation reads and writes, as needed
  // Convolutions by weight stream address: the stripes of one cascaded operation share it. On
  // the Ethos-U85 Vela also cascades operations whose weights it buffered in the SRAM once, before
  // the first stripe: those stripes share the buffer's address, until a DMA refills it.
  const auto stripes_share = [u85](const AddressRange& w) { return w.length > 0 && (w.region == 0 || u85); };
  std::multimap<std::pair<int, uint64_t>, size_t> by_weights;
  std::vector<size_t> dma_indices;
  for (size_t k = 0; k < ops.size(); ++k) {
    if (reads_weights(ops[k]) && stripes_share(ops[k].weights)) {
      by_weights.emplace(std::make_pair(ops[k].weights.region, ops[k].weights.address), k);
    }
    if (ops[k].kind == OpKind::Dma) dma_indices.push_back(k);
  }
  // Whether a DMA between operations `a` and `b` writes into `w`.
  const auto refilled = [&](const AddressRange& w, size_t a, size_t b) {
    if (w.region == 0) return false;
    for (auto it = std::upper_bound(dma_indices.begin(), dma_indices.end(), a); it != dma_indices.end() && *it < b; ++it) {
      const AddressRange& d = ops[*it].dma_dst;
      if (d.region == w.region && d.address < w.address + w.length && w.address < d.address + d.length) return true;
    }
    return false;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    if (done[i]) continue;
    const NpuOperation& o = ops[i];
    if (o.kind == OpKind::Dma) {
      if (o.dma_src.region == kShramRegion) {
        throw BinaryError("DMA at word " + std::to_string(o.word_offset) + " reads from the SHRAM");
      }
      // A new DMA over the same bytes replaces an older, unconsumed one. (Not a strided or
      // indexed one: its range only bounds the rows it writes, as a scatter's over the zeros
      // it lands in.)
      // A copy some operation read is costed whatever comes after it.
      if (!o.u85.dma.strided_or_indexed()) {
        const auto replaced = std::stable_partition(pending.begin(), pending.end(),
                                                    [&](const PendingDma& p) { return !covers(o.dma_dst, p.dst); });
        std::copy_if(replaced, pending.end(), std::back_inserter(read_copies), [](const PendingDma& p) { return p.read; });
        pending.erase(replaced, pending.end());
      }
      pending.push_back(PendingDma{i, o.dma_src, o.dma_dst});
      continue;
    }
    if (!pending.empty()) {
      if (!accesses[i]) accesses[i] = accesses_of(o);
      for (PendingDma& p : pending) {
        const Span dst{p.dst.region, int64_t(p.dst.address), int64_t(p.dst.address + p.dst.length)};
        for (const Span& r : accesses[i]->reads) p.read = p.read || (p.dst.length > 0 && r.overlaps(dst));
      }
    }
    if (!prev || !same_operation(*prev, o)) slack = last_offered;
    prev = &o;
    OperationEstimate e;
    e.operation = i;
    try {
      e.op = npu_op_of(o, arch);
      if (u85) describe_u85(o, e.op, arch.accelerator());
    } catch (const BinaryError& err) {
      throw BinaryError("operation at word " + std::to_string(o.word_offset) + ": " + err.what());
    }
    // Vela's matrix product: its MUL and REDUCE_SUM per column, costed as one operation.
    if (const size_t columns = merge_as_vela && !u85 ? matmul_columns(ops, i) : 0) {
      NpuOp sum;
      try {
        sum = npu_op_of(ops[i + 1], arch);
      } catch (const BinaryError& err) {
        throw BinaryError("operation at word " + std::to_string(ops[i + 1].word_offset) + ": " + err.what());
      }
      for (auto [op, k] : {std::pair<NpuOp*, size_t>{&e.op, i}, {&sum, i + 1}}) {
        const BlockShape block{ops[k].block_height, ops[k].block_width, ops[k].block_depth};
        if (auto cfg = try_block_config(arch.accelerator(), block_query(*op), block)) op->block_config = *cfg;
        else e.block_config_from_binary = false;
      }
      for (size_t k = i + 1; k < i + 2 * columns; ++k) e.merged.push_back(k), done[k] = 1;
      try {
        e.cost = estimate_matmul(e.op, sum, int(columns), arch, cache);
      } catch (const InvalidArgument& err) {
        throw BinaryError("operation at word " + std::to_string(o.word_offset) + " cannot be costed: " + err.what());
      }
      e.matmul_columns = int(columns);
      e.matmul_sum = sum;
      last_offered = e.cost.buffering_slack_cycles;
      add(std::move(e));
      continue;
    }
    // Vela reads a one-element first operand (a scalar, or a constant broadcast along every
    // axis) as its IFM (NpuOp::scalar_first).
    if (merge_as_vela && !u85 && o.reversed_operands && e.op.ifm2 && e.op.ifm2->shape.elements() == 1) {
      e.op.scalar_first = true;
    }
    // An Ethos-U85 chain (each OFM kept in the chaining buffer for the next operation) is one
    // operation, as Vela costs it: the first operation's, ending in the last one's OFM.
    std::vector<size_t> chained;
    if (u85 && e.op.u85->ofm_chained) {
      for (size_t k = i + 1; k < ops.size(); ++k) {
        const NpuOperation& c = ops[k];
        if (c.kind == OpKind::Dma) continue;
        const bool ifm = c.u85.ifm_storage == ethos_u85::CHAINED, ifm2 = c.u85.ifm2_storage == ethos_u85::CHAINED;
        if (!ifm && !ifm2) break;
        const NpuOp next = npu_op_of(c, arch);
        const int other = ifm ? c.u85.ifm2_storage : c.u85.ifm_storage;  // the operand not chained
        const U85Chained link = ethos_u85::chain_link(next, !ifm, other < ethos_u85::CHAINED,
                                                      c.u85.ofm_storage == ethos_u85::CHAINED, c.activation.function != 0);
        e.op.u85->chain.push_back(link);
        chained.push_back(k);
        if (!link.writes_chain) {
          e.op.ofm = next.ofm;
          break;
        }
      }
    }
    // A run of identical 1x1 pieces, each as far on from the one before, is one operation.
    const bool in_chain = !chained.empty();  // none of Vela's other merges applies
    for (size_t k = i + 1; merge_as_vela && !in_chain && k < ops.size() && same_piece(o, ops[k]); ++k) {
      if (k > i + 1 && (ops[k].ifm.base[0] - ops[k - 1].ifm.base[0] != ops[i + 1].ifm.base[0] - o.ifm.base[0] ||
                        ops[k].ofm.base[0] - ops[k - 1].ofm.base[0] != ops[i + 1].ofm.base[0] - o.ofm.base[0])) {
        break;
      }
      e.merged.push_back(k);
    }
    if (in_chain) {
      // Costed as the chain's first operation (U85Op::chain).
    } else if (auto t = merge_as_vela && !o.u85.ofm_transpose ? transpose_step(ops, i, 1 + e.merged.size())
                                                               : std::nullopt) {
      e.op.transpose = t->kind;
      e.op.ifm.shape = t->in;
      e.op.ofm.shape = t->out;
    } else {
      // Other runs (reshapes, concatenations): as tall as the run. Their pieces move one
      // channel through strided views; Vela costs the operator on its tensor, whose innermost
      // axis is the one the pieces walk: cost W as the depth.
      e.op.ofm.shape.h *= int(1 + e.merged.size());
      e.op.ifm.shape.h *= int(1 + e.merged.size());
      // Only a copy (stride 1, one width in and out): a strided 1x1 pool of a one-channel map
      // (a subsampling) keeps its shapes, or its IFM and OFM depths would differ.
      if (merge_as_vela && o.kind == OpKind::Pool && o.kernel.width == 1 && o.kernel.height == 1 &&
          o.kernel.stride_x == 1 && o.kernel.stride_y == 1 && o.ifm.width == o.ofm.width &&
          o.ofm.depth == 1 && o.ifm.depth == 1 && o.activation.function == 0) {
        for (Shape4* sh : {&e.op.ifm.shape, &e.op.ofm.shape}) std::swap(sh->w, sh->c);
      }
    }
    // The depth slices of one operation, each after the DMA of its weights: one operation whose
    // weight stream is the slices' together, buffered from the first slice's DMA on. On the
    // Ethos-U85 each slice of a chained operation feeds its own copy of the chain (a MEAN's
    // depthwise slices, each into its MUL): slices compare by what their chains write.
    std::vector<size_t> slice_dmas;
    int last_slice_depth = 0;
    if (e.merged.empty() && reads_weights(o) && o.weights.length > 0) {
      std::vector<size_t> between;
      size_t last = i, last_writer = in_chain ? chained.back() : i;
      for (size_t k = last_writer + 1; k < ops.size(); ++k) {
        if (ops[k].kind == OpKind::Dma) {
          between.push_back(k);
          continue;
        }
        std::vector<size_t> chain_k;  // slice k's chain, as long as the first slice's and alike
        for (size_t m = k + 1; m < ops.size() && chain_k.size() < chained.size(); ++m) {
          if (ops[m].kind != OpKind::Dma) chain_k.push_back(m);
        }
        bool alike = chain_k.size() == chained.size();
        for (size_t j = 0; alike && j < chained.size(); ++j) {
          const NpuOperation &x = ops[chained[j]], &y = ops[chain_k[j]];
          alike = x.kind == y.kind && x.u85.ifm_storage == y.u85.ifm_storage &&
                  x.u85.ifm2_storage == y.u85.ifm2_storage && x.u85.ofm_storage == y.u85.ofm_storage;
        }
        if (!alike) break;
        if (in_chain) {
          NpuOperation a = ops[last], b = ops[k];
          a.ofm = ops[last_writer].ofm;
          b.ofm = ops[chain_k.back()].ofm;
          if (!same_operation(a, b)) break;
        } else if (!same_operation(ops[last], ops[k])) {
          break;
        }
        // Vela's slices each copy their weights into a buffer; operations alike that read
        // their weights where they are stored, each with no DMA of its own before it (two
        // copies into one concatenation, each a 1x1 depthwise by a weight of 1), are
        // operations of their own.
        const auto fills_weights = [&](size_t d) { return covers(ops[d].dma_dst, ops[k].weights); };
        if (ops[k].weights.region == 0 && std::none_of(between.begin(), between.end(), fills_weights)) {
          break;
        }
        for (size_t d : between) {
          if (covers(ops[d].dma_dst, ops[k].weights) || covers(ops[d].dma_dst, ops[k].scales)) slice_dmas.push_back(d);
        }
        between.clear();
        e.merged.push_back(k);
        e.merged.insert(e.merged.end(), chain_k.begin(), chain_k.end());
        e.op.ofm.shape.c += ops[k].ofm.depth;
        e.op.weight_bytes += weight_stream_bytes(ops[k], u85);
        e.op.scale_bytes += int64_t(ops[k].scales.length + ops[k].scales1.length);
        last_slice_depth = ops[k].ofm.depth;
        last = k;
        last_writer = chain_k.empty() ? k : chain_k.back();
        k = last_writer;
      }
    }
    // The stripes of a cascaded operation (Vela's Size schedules interleave them with the
    // stripes of the operations they feed): Vela costs the operation once, over its whole OFM.
    // Operations that share weights but read what an earlier one wrote (the time steps of a
    // recurrent network), or read elsewhere than whole rows on (a step's column of a sequence),
    // are operations of their own, and so costed by Vela.
    if (merge_as_vela && e.merged.empty() && !in_chain && reads_weights(o) && stripes_share(o.weights)) {
      auto range = by_weights.equal_range(std::make_pair(o.weights.region, o.weights.address));
      int bottom = o.padding.bottom;
      std::optional<Dependents> dependents;
      const NpuOperation* last_stripe = &o;
      for (auto it = range.first; it != range.second; ++it) {
        const NpuOperation& s = ops[it->second];
        if (it->second <= i || done[it->second] || s.kind != o.kind || s.weights.length != o.weights.length ||
            s.ofm.width != o.ofm.width || s.ofm.depth != o.ofm.depth || s.ifm.depth != o.ifm.depth ||
            s.kernel.width != o.kernel.width || s.kernel.height != o.kernel.height ||
            s.kernel.stride_y != o.kernel.stride_y || !rows_on(*last_stripe, s) || refilled(o.weights, i, it->second)) {
          continue;
        }
        if (!dependents) dependents.emplace(ops, accesses, i);
        if (dependents->depends(it->second)) continue;
        dependents->also_produced(it->second);
        last_stripe = &s;
        e.merged.push_back(it->second);
        e.op.ofm.shape.h += s.ofm.height;
        bottom = s.padding.bottom;
      }
      if (!e.merged.empty()) {
        e.op.padding.bottom = bottom;
        const cascader::Kernel& k = e.op.kernel;
        e.op.ifm.shape.h = std::max((e.op.ofm.shape.h - 1) * k.stride_y + k.area_height() - e.op.padding.top - bottom, 1);
      }
    }
    // A depthwise operation's IFM depth follows its OFM's.
    if (e.op.type == NpuOpType::DepthwiseConv2D) e.op.ifm.shape.c = e.op.ofm.shape.c;
    // A transposed OFM: Vela costs the operation over the map as it lies in memory (the OFM
    // shape permuted, the block as the registers hold it), whose blocks refetch the weights
    // and whose bursts are those of the permuted map.
    if (u85) {
      if (e.merged.empty() && !in_chain && writes_sub_kernel_phase(o)) e.op.ofm.shape = sub_kernel_span(ops, i);
      const NpuOperation& writer = chained.empty() ? o : ops[chained.back()];
      if (writer.u85.ofm_transpose) e.op.ofm.shape = transposed_ofm(e.op.ofm.shape, writer.u85.ofm_transpose);
      if (!chained.empty() && half_throughput_write(writer)) e.op.u85->ofm_half_throughput = true;
    }
    // A phase of a bilinear resize writes every other pixel and row of a dense NHWC map; Vela
    // costs it over the box those pixels span (NpuOp::ofm_step).
    if (merge_as_vela && e.merged.empty() && !in_chain && writes_every_other_pixel(o)) e.op.ofm_step = 2;
    e.merged.insert(e.merged.end(), chained.begin(), chained.end());
    for (size_t k : e.merged) done[k] = 1;
    for (size_t d : slice_dmas) done[d] = 1;
    // Weights (and scales) in a buffer some DMA filled: cost the DMA with the operation. (Not a
    // copy an operation read as a feature map, whose bytes a weight buffer took over since.)
    if (reads_weights(o) && e.op.weight_bytes > 0) {
      auto it = std::find_if(pending.rbegin(), pending.rend(),
                             [&](const PendingDma& p) { return !p.read && covers(p.dst, o.weights); });
      if (it != pending.rend()) {
        e.op.weight_memory = region_memory(it->src.region, arch);
        e.op.weight_buffer_memory = region_memory(it->dst.region, arch);
        e.op.weight_first_dma_bytes = int64_t(it->dst.length);
        e.op.weight_last_slice_depth = last_slice_depth;
        e.op.dma_slack_cycles = slack;
        e.dmas.push_back(it->index);
        pending.erase(std::next(it).base());
        // Scales DMA'd separately into the buffer are part of the same transfer.
        auto s = std::find_if(pending.begin(), pending.end(),
                              [&](const PendingDma& p) { return !p.read && covers(p.dst, o.scales); });
        if (s != pending.end()) {
          e.dmas.push_back(s->index);
          pending.erase(s);
        }
      }
    }
    // The LUT this operation's activation reads was DMA'd into the SHRAM. On the Ethos-U85 Vela
    // costs that DMA only for an operation that is the table lookup itself (one input, no
    // weights: a TANH, SIGMOID or LUT operator); a table fused into another operation (a
    // convolution's or a binary elementwise operation's activation, e.g. softmax's SUB + exp
    // table) is a sub-operation whose DMA its cost leaves out.
    const bool lut_costed = !u85 || (!reads_weights(o) && !o.has_ifm2());
    if (e.op.activation == cascader::Activation::Lut) {
      // The newest DMA into the LUT memory; on the Ethos-U85 the newest into this table's bytes
      // (a chain's tables are all loaded before its first operation, each in bytes of its own).
      const auto table = u85 ? ethos_u85::lut_bytes(o) : std::nullopt;
      auto it = std::find_if(pending.rbegin(), pending.rend(), [&](const PendingDma& p) {
        return p.dst.region == kShramRegion &&
               (!table || (p.dst.address < table->second && table->first < p.dst.address + p.dst.length));
      });
      if (it != pending.rend()) {
        if (lut_costed) e.op.lut_bytes = int64_t(it->dst.length);
        e.op.lut_memory = region_memory(it->src.region, arch);
        if (lut_costed && !e.op.weight_buffer_memory) e.op.dma_slack_cycles = slack;
        e.dmas.push_back(it->index);
        pending.erase(std::next(it).base());
      }
    }
    // The tables of a chain's later operations, loaded before its first: sub-operations' tables,
    // whose DMAs Vela leaves out of the chain's cost (as a fused table's above).
    for (size_t k : chained) {
      const auto table = ethos_u85::lut_bytes(ops[k]);
      if (!table) continue;
      auto it = std::find_if(pending.rbegin(), pending.rend(), [&](const PendingDma& p) {
        return p.dst.region == kShramRegion && p.dst.address < table->second && table->first < p.dst.address + p.dst.length;
      });
      if (it != pending.rend()) {
        e.dmas.push_back(it->index);
        pending.erase(std::next(it).base());
      }
    }
    // The block config the binary runs with; one our SHRAM model rejects is re-chosen, and said.
    // (A transpose step is costed with the block Vela's search picks for it, not the commands'.)
    const BlockShape block{o.block_height, o.block_width, o.block_depth};
    if (u85) {
      // The registers' block (describe_u85): the U85 has no SHRAM layout to check it against.
    } else if (e.op.transpose != Transpose::None) {
      e.block_config_from_binary = false;
    } else if (auto cfg = try_block_config(arch.accelerator(), block_query(e.op), block)) {
      e.op.block_config = *cfg;
    } else {
      e.block_config_from_binary = false;
    }
    try {
      e.cost = estimate(e.op, arch, cache);
    } catch (const InvalidArgument& err) {
      throw BinaryError("operation at word " + std::to_string(o.word_offset) + " cannot be costed: " + err.what());
    }
    last_offered = e.cost.buffering_slack_cycles;
    e.dmas.insert(e.dmas.end(), slice_dmas.begin(), slice_dmas.end());
    add(std::move(e));
  }

  // DMAs no operation consumed as weights or a LUT (feature-map copies, buffers read by no
  // later operation).
  pending.insert(pending.end(), read_copies.begin(), read_copies.end());
  for (const PendingDma& p : pending) {
    if (p.dst.region == kShramRegion) continue;  // a LUT no activation reads: nothing waits for it
    const NpuOperation& o = ops[p.index];
    OperationEstimate e;
    e.operation = p.index;
    e.op.type = NpuOpType::Dma;
    e.op.ifm.memory = region_memory(p.src.region, arch);
    e.op.ofm.memory = region_memory(p.dst.region, arch);
    e.op.dma_bytes = int64_t(o.dma_src.length);
    e.dmas.push_back(p.index);
    e.cost = estimate(e.op, arch, cache);
    add(std::move(e));
  }
  std::stable_sort(result.operations.begin(), result.operations.end(),
                   [](const OperationEstimate& a, const OperationEstimate& b) { return a.operation < b.operation; });
  return result;
}

}  // namespace cascader::sim
