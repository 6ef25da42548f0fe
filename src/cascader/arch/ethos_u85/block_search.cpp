#include "cascader/arch/ethos_u85/block_search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "cascader/arch/ethos_u85/performance.hpp"
#include "cascader/arch/ethos_u85/registers.hpp"
#include "cascader/arch/ethos_u85/weight_order.hpp"
#include "cascader/common/error.hpp"

namespace cascader::ethos_u85 {

namespace {

// The operations a micro-block serves, per IFM precision.
enum Unit : unsigned { Conv = 1, Depthwise = 2, Pool = 4, ReduceSum = 8, Elementwise = 16 };

struct MicroBlockUse {
  int macs;
  BlockShape ublock;
  unsigned by_bits[3];  // 8-, 16-, 32-bit IFM
};

constexpr unsigned kAll = Conv | Depthwise | Pool | ReduceSum | Elementwise;
const MicroBlockUse kUses[] = {
    {128, {1, 2, 8}, {Conv | ReduceSum | Elementwise, kAll, ReduceSum | Elementwise}},
    {128, {1, 1, 16}, {Depthwise | Pool | Elementwise, Conv | Elementwise, Elementwise}},
    {256, {2, 2, 8}, {Conv | ReduceSum | Elementwise, kAll, ReduceSum | Elementwise}},
    {256, {1, 4, 8}, {Conv | ReduceSum | Elementwise, kAll, ReduceSum | Elementwise}},
    {256, {1, 2, 16}, {Depthwise | Pool | Elementwise, Conv | Elementwise, Elementwise}},
    {512, {2, 2, 16}, {kAll, kAll, ReduceSum | Elementwise}},
    {512, {1, 4, 16}, {kAll, kAll, ReduceSum | Elementwise}},
    {1024, {2, 2, 32}, {Conv | Elementwise, Conv | Elementwise, Elementwise}},
    {1024, {1, 4, 32}, {Conv | Elementwise, Conv | Elementwise, Elementwise}},
    {1024, {2, 4, 16}, {kAll, kAll, ReduceSum | Elementwise}},
    {2048, {2, 2, 64}, {Conv | Elementwise, Conv | Elementwise, Elementwise}},
    {2048, {1, 4, 64}, {Conv | Elementwise, Conv | Elementwise, Elementwise}},
    {2048, {4, 4, 16}, {kAll, kAll, ReduceSum | Elementwise}},
};

Unit unit_of(NpuOpType t) {
  switch (t) {
    case NpuOpType::Conv2D: case NpuOpType::FullyConnected: return Conv;
    case NpuOpType::DepthwiseConv2D: return Depthwise;
    case NpuOpType::MaxPool: case NpuOpType::AvgPool: return Pool;
    case NpuOpType::ReduceSum: return ReduceSum;
    case NpuOpType::Add: case NpuOpType::Sub: case NpuOpType::Mul: case NpuOpType::Minimum: case NpuOpType::Maximum:
      return Elementwise;
    case NpuOpType::Dma: break;
  }
  throw InvalidArgument("a DMA has no block config");
}

bool serves(const AcceleratorConfig& a, const BlockShape& ub, Unit unit, int ifm_bits, bool depth_first_1x1) {
  const int bits = ifm_bits / 16;  // 8 -> 0, 16 -> 1, 32 -> 2
  if (bits > 2) return false;
  for (const MicroBlockUse& u : kUses) {
    if (u.macs != a.macs_per_cycle || !(u.ublock == ub)) continue;
    // The 1x1x16 (U85-128) and 1x2x16 (U85-256) convolutions are 1x1 depth-first ones.
    const bool narrow = (a.macs_per_cycle == 128 && ub == BlockShape{1, 1, 16}) ||
                        (a.macs_per_cycle == 256 && ub == BlockShape{1, 2, 16});
    if (unit == Conv && narrow && !depth_first_1x1) return false;
    return (u.by_bits[bits] & unit) != 0;
  }
  return false;
}

bool elementwise_unit(NpuOpType t) { return unit_of(t) == Elementwise; }

// An axis of `length` cut into 1, 2, 3... nearly equal parts rounded up to `granule`, at most
// `most`: the distinct part sizes, largest first.
std::vector<int> tilings(int length, int granule, int most) {
  std::vector<int> out;
  const int top = std::min(round_up(length, granule), most / granule * granule);
  for (int parts = 1; parts <= length; ++parts) {
    const int v = std::min(round_up(div_round_up(length, parts), granule), top);
    if (out.empty() || v < out.back()) out.push_back(v);
    if (v == granule || out.size() >= 24) break;
  }
  if (out.empty()) out.push_back(granule);
  return out;
}

// The granule times 1, 2, 4... up to tilings()' largest: the small blocks its grid misses on a
// long axis (it stops after 24 parts), for operations no block of the grid fits.
std::vector<int> doublings(int length, int granule, int most) {
  const int top = std::min(round_up(length, granule), most / granule * granule);
  std::vector<int> out;
  for (int v = granule; v <= top; v *= 2) out.push_back(v);
  if (out.empty()) out.push_back(granule);
  return out;
}

U85Op describe(const NpuOp& op, const AcceleratorConfig& a, const BlockShape& ofm_block, bool part_kernel_first) {
  U85Op u;
  const bool conv = unit_of(op.type) == Conv;
  const bool one_by_one = op.kernel.height == 1 && op.kernel.width == 1;
  u.ofm_ublock = micro_block(a, op.type, op.ifm.bits, op.whole_ofm.value_or(op.ofm.shape),
                             conv && one_by_one && !part_kernel_first);
  const Unit unit = unit_of(op.type);
  u.acc48 = (op.ifm.bits == 16 && unit != Pool && unit != ReduceSum && op.rescaled) || op.ifm.bits > 32;
  u.own_ofm_bits = op.ofm.bits;
  int ifm_block_depth = 0;  // depthwise, pooling: the OFM block's
  if (unit == Conv || unit == ReduceSum) {
    ifm_block_depth = conv_ifm_block_depth(part_kernel_first && unit == Conv ? ethos_u85::Traversal::PartKernel
                                                                             : ethos_u85::Traversal::DepthFirst,
                                           a.macs_per_cycle, u.ofm_ublock.depth, false, op.ifm.bits);
  }
  u.ifm_block = elementwise_unit(op.type) ? ofm_block
                                        : ifm_block(a, ofm_block, u.ofm_ublock, op.kernel, op.ifm.bits, ifm_block_depth,
                                                    op.ifm_upscale);
  return u;
}

// An elementwise block: its rows of OFM in the output buffer, and a broadcast operand's part
// in one of the chaining buffer's six slots (16-element bricks): one brick a pixel when the
// channels broadcast, a brick per 16 channels of a column of micro-blocks when the rows do.
bool fits_elementwise(const NpuOp& op, const AcceleratorConfig& a, const BlockShape& b, const BlockShape& ub) {
  const int bytes = op.ifm.bits / 8;
  if (int64_t(b.width) * b.depth * bytes > a.internal_ram.ob_bytes) return false;
  const Shape4& o = op.ofm.shape;
  bool c = false, h = false;
  for (const Shape4* in : {&op.ifm.shape, op.ifm2 ? &op.ifm2->shape : nullptr}) {
    if (in == nullptr || in->elements() == 1) continue;  // a scalar is OP_SCALAR, not a map
    c |= in->c < o.c;
    h |= in->h < o.h;
  }
  const int bricks = a.internal_ram.cb_bytes / 6 / (16 * bytes);
  if (c) return int64_t(b.height) * b.width <= bricks;
  if (h) return int64_t(b.width) * div_round_up(b.depth, 16) <= bricks / ub.height;
  return true;
}

// `range` cut into the fewest tiles of at most `tile` (a multiple of `granule`), the tile
// shrunk to the granule that spreads them evenly.
int granular_tile(int range, int granule, int tile) {
  if (range % tile == 0) return tile;
  return std::max(round_up(range / (range / tile + 1), granule), granule);
}

// `value` grown by the factor that `avail` (at least `required` a unit) can give up, if that
// factor is 2 or more and `value` stays within `most`; `avail` shrinks by the same factor.
int reapportion(int value, int most, int& avail, int required) {
  const int factor = std::min(avail / required, most / value);
  if (factor < 2) return value;
  avail /= factor;
  return value * factor;
}

// The elementwise block Vela 5.2's U85 backend chooses (its block for every unchained
// elementwise operation, with no search): the output buffer's elements shared between the
// row's width and depth granules, or, with an operand broadcast in C or H, the chaining
// buffer's slot of bricks between the width and the micro-block's rows (C only) or 16-channel
// bricks (H). Looser than fits_elementwise's area rule where more than one axis broadcasts.
// Its height and depth stay within the OFM (rounded to the granule), its width does not: the
// buffer's width, up to the largest block (a 1x1x1 OFM runs in a 1x128x16 block on U85-256).
BlockShape vela_elementwise_block(const NpuOp& op, const AcceleratorConfig& a, const BlockShape& ub) {
  const BlockShape granule{ub.height, ub.width, 16};
  const Shape4& o = op.ofm.shape;
  const BlockShape shape{round_up(o.h, granule.height), round_up(o.w, granule.width), round_up(o.c, granule.depth)};
  const BlockShape limit{std::min(shape.height, a.ofm_block_max.height), std::min(shape.width, a.ofm_block_max.width),
                         std::min(shape.depth, a.ofm_block_max.depth)};
  const int bits = op.ifm.bits;
  const int cb_width = a.internal_ram.cb_bytes / 6 / (16 * (bits / 8)) / ub.height;
  const int ob_width = a.internal_ram.ob_bytes * 8 / bits / granule.depth;
  int h = granular_tile(shape.height, granule.height, limit.height);
  const int w_required = std::max(
      granular_tile(shape.width, granule.width, std::min(ob_width, limit.width)), granule.width);
  int w = ob_width;
  int c = reapportion(granule.depth, limit.depth, w, w_required);
  const bool scalar = op.ifm.shape.elements() == 1 || (op.ifm2 && op.ifm2->shape.elements() == 1);
  if (op.ifm2 && !scalar) {
    bool bc = false, bw = false, bh = false;
    for (const Shape4* in : {&op.ifm.shape, &op.ifm2->shape}) {
      bc |= in->c < o.c;
      bw |= in->w < o.w;
      bh |= in->h < o.h;
    }
    if (bc) {
      c = granular_tile(shape.depth, granule.depth, limit.depth);
      w = cb_width;
      if (!bw && !bh) h = reapportion(ub.height, limit.height, w, w_required);
    } else if (bh) {
      w = cb_width;
      c = reapportion(16, limit.depth, w, w_required);
    }
  }
  return {std::min(round_up(h, granule.height), limit.height),
          std::min(round_up(std::max(w, 1), granule.width), a.ofm_block_max.width / granule.width * granule.width),
          std::min(round_up(c, granule.depth), limit.depth)};
}

// `b` a multiple of the micro-block `ub` in H and W and of its depth granule (or the
// operation's fixed block depth), within the largest block.
bool granular(const NpuOp& op, const AcceleratorConfig& a, const BlockShape& ub, const BlockShape& b) {
  const BlockShape& most = a.ofm_block_max;
  const bool depth_ok = b.depth % std::max(16, ub.depth) == 0 || b.depth == op.block_depth;
  return b.height % ub.height == 0 && b.width % ub.width == 0 && depth_ok && b.height <= most.height &&
         b.width <= most.width && b.depth <= most.depth && b.height >= 1 && b.width >= 1 && b.depth >= 1;
}

// An elementwise block the U85 runs: one fits_elementwise allows, or one within Vela's block.
bool fits_elementwise_block(const NpuOp& op, const AcceleratorConfig& a, const BlockShape& b, const BlockShape& ub) {
  const BlockShape v = vela_elementwise_block(op, a, ub);
  return fits_elementwise(op, a, b, ub) || (b.height <= v.height && b.width <= v.width && b.depth <= v.depth);
}

// The widest elementwise block of `height` and `depth` that the U85 runs (a multiple of the
// micro-block's width, at most the largest block's, wider than the OFM where the buffers allow:
// the cycle model spreads each block's memory latency over the block's whole volume, so the
// widest is the fastest); nullopt where not even the micro-block's width fits.
std::optional<BlockShape> widest_elementwise_block(const NpuOp& op, const AcceleratorConfig& a, const BlockShape& ub,
                                                   int height, int depth) {
  for (int w = a.ofm_block_max.width / ub.width * ub.width; w >= ub.width; w -= ub.width) {
    const BlockShape b{height, w, depth};
    if (fits_elementwise_block(op, a, b, ub)) return b;
  }
  return std::nullopt;
}

bool fits(const NpuOp& op, const AcceleratorConfig& a, const BlockShape& b, const U85Op& u) {
  const InternalRam& ram = a.internal_ram;
  if (elementwise_unit(op.type)) return fits_elementwise_block(op, a, b, u.ofm_ublock);
  const int acc_bytes = u.acc48 ? 8 : 4;
  if (b.elements() * acc_bytes > ram.acc_bytes) return false;
  const int64_t ifm_bytes = u.ifm_block.elements() * (op.ifm.bits / 8);
  return ifm_bytes <= ram.ifm_bytes || op.ifm.shape.elements() * (op.ifm.bits / 8) <= ram.ifm_bytes;
}

NpuOp described(const NpuOp& op, const AcceleratorConfig& a, const BlockShape& block, bool part_kernel_first) {
  NpuOp d = op;
  d.u85 = describe(op, a, block, part_kernel_first);
  BlockConfig cfg;
  cfg.ofm_block = block;
  cfg.ifm_block = d.u85->ifm_block;
  cfg.part_kernel_first = part_kernel_first;
  cfg.accumulator = d.u85->acc48 ? ShramElement::Acc40 : ShramElement::Acc32;
  d.block_config = cfg;
  if (unit_of(op.type) == Conv) d.traversal = part_kernel_first ? cascader::Traversal::PartKernelFirst : cascader::Traversal::DepthFirst;
  return d;
}

// Costs each of `blocks` that fits `op` (traversal part-kernel-first or not) and keeps the
// fastest in `best` (the larger block on a tie, unless `only_faster`).
void cost_blocks(const NpuOp& op, const ArchConfig& arch, const std::vector<BlockShape>& blocks, bool pkf,
                 std::optional<BlockConfig>& best, double& best_cycles, bool only_faster = false) {
  const AcceleratorConfig& a = arch.accelerator();
  for (const BlockShape& block : blocks) {
    const NpuOp candidate = described(op, a, block, pkf);
    if (!fits(op, a, block, *candidate.u85)) continue;
    const double cycles = ethos_u85::estimate(candidate, arch).total_cycles;
    if (cycles < best_cycles ||
        (!only_faster && cycles == best_cycles && block.elements() > best->ofm_block.elements())) {
      best_cycles = cycles;
      best = *candidate.block_config;
    }
  }
}

// The search's cache key: everything its cost estimate can read, which is the whole operation
// (memories, formats, weight stream, activation table, chaining...) and the whole target (the
// array, the system config's bandwidths and latencies, the memory mode). A key of shapes alone
// (BlockQuery, enough for the U55/U65 choice) let one compile's choice leak into the next: the
// NCHW MobileNet v2 on U85-128 cost 919,707 cycles in a fresh process and 947,195 after the
// NHWC one.
class SearchKey {
 public:
  SearchKey(const NpuOp& op, const ArchConfig& arch) {
    put(arch.accelerator().id, arch.accelerator().name, arch.memory_mode());
    const SystemConfig& s = arch.system();
    put(s.core_clock, s.axi0, s.axi1);
    for (const MemorySpec& m : s.memories) {
      put(m.clock_scale, m.burst_length, m.read_latency, m.write_latency, m.ports_used, m.max_reads, m.max_writes);
    }
    put(op.type);
    map(op.ifm);
    put(bool(op.ifm2));
    if (op.ifm2) map(*op.ifm2);
    map(op.ofm);
    const Kernel& k = op.kernel;
    put(k.height, k.width, k.stride_y, k.stride_x, k.dilation_y, k.dilation_x);
    put(op.padding.top, op.padding.left, op.padding.bottom, op.padding.right);
    put(op.weight_bytes, op.scale_bytes, op.weight_memory, bool(op.weight_buffer_memory),
        op.weight_buffer_memory.value_or(MemoryArea::Sram), op.weight_first_dma_bytes, op.weight_last_slice_depth,
        op.dma_slack_cycles);
    put(op.activation, op.lut_bytes, op.lut_memory, op.rescaled, op.traversal, op.block_depth, op.dma_bytes,
        op.ifm_upscale, op.ofm_step, op.transpose, op.scalar_first);
    put(bool(op.u85));
    if (op.u85) {
      const U85Op& u = *op.u85;
      block(u.ofm_ublock);
      block(u.ifm_block);
      put(u.acc48, u.fast_weights, u.sparse_weights, u.resize, u.ifm_chained, u.ifm2_chained, u.ofm_chained,
          u.own_ofm_bits, u.ofm_half_throughput, u.chain.size());
      for (const U85Chained& c : u.chain) {
        put(c.type, c.ifm_bits, c.ofm_bits, c.writes_chain, c.lut, bool(c.memory_input));
        if (c.memory_input) map(*c.memory_input);
      }
    }
    put(bool(op.whole_ofm));
    if (op.whole_ofm) shape(*op.whole_ofm);
  }
  const std::string& bytes() const { return bytes_; }

 private:
  template <class... T>
  void put(const T&... v) { (raw(v), ...); }
  template <class T>
  void raw(const T& v) {
    static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>, "a key field is a number");
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void raw(const std::string& v) { put(v.size()); bytes_ += v; }
  void shape(const Shape4& s) { put(s.n, s.h, s.w, s.c); }
  void block(const BlockShape& b) { put(b.height, b.width, b.depth); }
  void map(const FeatureMap& f) {
    shape(f.shape);
    put(f.format, f.bits, f.memory);
  }
  std::string bytes_;
};

BlockConfig search(const NpuOp& op, const ArchConfig& arch) {
  const AcceleratorConfig& a = arch.accelerator();
  const bool conv = unit_of(op.type) == Conv && op.type != NpuOpType::FullyConnected;
  std::vector<bool> traversals;
  switch (op.traversal) {
    case cascader::Traversal::Auto: traversals = conv ? std::vector<bool>{false, true} : std::vector<bool>{false}; break;
    case cascader::Traversal::DepthFirst: traversals = {false}; break;
    case cascader::Traversal::PartKernelFirst: traversals = {unit_of(op.type) == Conv}; break;
  }
  std::optional<BlockConfig> best;
  double best_cycles = std::numeric_limits<double>::infinity();
  for (const bool pkf : traversals) {
    const BlockShape ub = describe(op, a, BlockShape{}, pkf).ofm_ublock;
    const int depth_granule = std::max(16, ub.depth);
    const BlockShape& most = a.ofm_block_max;
    const std::vector<int> depths = op.block_depth > 0 ? std::vector<int>{op.block_depth}
                                                       : tilings(op.ofm.shape.c, depth_granule, most.depth);
    std::vector<BlockShape> blocks;
    const std::vector<int> heights = tilings(op.ofm.shape.h, ub.height, most.height);
    for (const int h : heights) {
      for (const int w : tilings(op.ofm.shape.w, ub.width, most.width)) {
        for (const int d : depths) blocks.push_back({h, w, d});
      }
    }
    std::vector<BlockShape> wider;  // elementwise blocks wider than the OFM
    if (elementwise_unit(op.type)) {
      // Vela's own block: the grid may miss it (a long axis's tilings stop before a narrow
      // chaining-buffer block). Within the OFM's width here, as it is...
      const int ofm_width = std::min(round_up(op.ofm.shape.w, ub.width), most.width / ub.width * ub.width);
      BlockShape v = vela_elementwise_block(op, a, ub);
      if (op.block_depth > 0) v.depth = op.block_depth;
      const BlockShape within{v.height, std::min(v.width, ofm_width), v.depth};
      if (std::find(blocks.begin(), blocks.end(), within) == blocks.end()) blocks.push_back(within);
      // ...and as wide as Vela's and as each height and depth of the grid allows (the grid's
      // widths end at the OFM's).
      // Vela's depth granule is 16 channels; ours that of a deeper micro-block (U85-1024's
      // 2x2x32), which its block may miss.
      if (v.width > ofm_width && granular(op, a, ub, v)) wider.push_back(v);
      for (const int h : heights) {
        for (const int d : depths) {
          const std::optional<BlockShape> wide = widest_elementwise_block(op, a, ub, h, d);
          if (wide && wide->width > ofm_width) wider.push_back(*wide);
        }
      }
    }
    cost_blocks(op, arch, blocks, pkf, best, best_cycles);
    // A block wider than the OFM only where it is faster: a tie keeps the block within the OFM
    // (the block the next operation must accept to chain it; no binary changes for nothing).
    cost_blocks(op, arch, wider, pkf, best, best_cycles, true);
  }
  if (!best) {
    // The grid's blocks are all too big (a long map whose IFM block outgrows the IFM buffer in
    // every tiling): the small blocks, doubling from the granule.
    for (const bool pkf : traversals) {
      const BlockShape ub = describe(op, a, BlockShape{}, pkf).ofm_ublock;
      const BlockShape& most = a.ofm_block_max;
      const std::vector<int> depths = op.block_depth > 0 ? std::vector<int>{op.block_depth}
                                                         : doublings(op.ofm.shape.c, std::max(16, ub.depth), most.depth);
      std::vector<BlockShape> blocks;
      for (const int h : doublings(op.ofm.shape.h, ub.height, most.height)) {
        for (const int w : doublings(op.ofm.shape.w, ub.width, most.width)) {
          for (const int d : depths) blocks.push_back({h, w, d});
        }
      }
      cost_blocks(op, arch, blocks, pkf, best, best_cycles);
    }
  }
  if (!best) throw InvalidArgument("no OFM block of " + a.name + " fits the operation's IFM and accumulators");
  return *best;
}

}  // namespace

BlockShape micro_block(const AcceleratorConfig& a, NpuOpType type, int ifm_bits, const Shape4& ofm,
                       bool depth_first_1x1) {
  const Unit unit = unit_of(type);
  std::optional<BlockShape> best;
  int64_t best_waste = std::numeric_limits<int64_t>::max();
  for (const BlockShape& ub : a.ofm_ublocks) {
    if (!serves(a, ub, unit, ifm_bits, depth_first_1x1)) continue;
    const int64_t waste = int64_t(round_up(ofm.h, ub.height)) * round_up(ofm.w, ub.width) * round_up(ofm.c, ub.depth) -
                          int64_t(ofm.h) * ofm.w * ofm.c;
    if (waste < best_waste) {
      best_waste = waste;
      best = ub;
    }
  }
  if (!best) {
    throw InvalidArgument(a.name + " has no OFM micro-block for this operation with " + std::to_string(ifm_bits) +
                          "-bit input");
  }
  return *best;
}

std::optional<BlockConfig> try_block_config(const NpuOp& op, const AcceleratorConfig& a, const BlockShape& ofm_block) {
  const bool pkf = op.traversal == cascader::Traversal::PartKernelFirst;
  const NpuOp d = described(op, a, ofm_block, pkf);
  if (!granular(op, a, d.u85->ofm_ublock, ofm_block) || !fits(op, a, ofm_block, *d.u85)) return std::nullopt;
  return d.block_config;
}

NpuOp resize_description(const NpuOp& op, const AcceleratorConfig& a, int scale_n, int scale_d) {
  if (scale_n < 1 || scale_d < 1) throw InvalidArgument("a resize's scale must be positive");
  const BlockShape ub = micro_block(a, op.type, op.ifm.bits, op.ofm.shape, false);
  const int bricks = a.internal_ram.cb_bytes / 6 / (16 * (op.ifm.bits / 8));
  const int widest = std::clamp(int(std::ceil(((bricks - 2) * double(scale_n) + 1) / scale_d)), 1, a.ofm_block_max.width);
  const int step = std::min(ub.width, widest);
  const BlockShape block{1, widest / step * step, 16};
  U85Op u;
  u.ofm_ublock = ub;
  u.ifm_block = block;
  u.resize = true;
  u.acc48 = op.ifm.bits == 16;  // as Vela runs a 16-bit resize
  u.own_ofm_bits = op.ofm.bits;
  NpuOp d = op;
  d.u85 = u;
  BlockConfig cfg;
  cfg.ofm_block = block;
  cfg.ifm_block = block;
  cfg.accumulator = u.acc48 ? ShramElement::Acc40 : ShramElement::Acc32;
  d.block_config = cfg;
  return d;
}

int micro_block_field(const BlockShape& ublock) {
  for (int m = 0; m < 6; ++m) {
    if (kMicroblockHeights[m] == ublock.height && kMicroblockWidths[m] == ublock.width) return m;
  }
  throw InvalidArgument("no ACC_FORMAT micro-block is " + std::to_string(ublock.height) + "x" +
                        std::to_string(ublock.width));
}

NpuOp with_block_config(const NpuOp& op, const ArchConfig& arch, BlockConfigCache& cache) {
  const AcceleratorConfig& a = arch.accelerator();
  if (op.block_config) {
    return described(op, a, op.block_config->ofm_block,
                     op.block_config->part_kernel_first || op.traversal == cascader::Traversal::PartKernelFirst);
  }
  const BlockConfig& chosen = cache.get(SearchKey(op, arch).bytes(), [&] { return search(op, arch); });
  return described(op, a, chosen.ofm_block, chosen.part_kernel_first);
}

}  // namespace cascader::ethos_u85
