#include "cascader/perf/cycle_model.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cascader/arch/ethos_u85/block_search.hpp"
#include "cascader/arch/ethos_u85/performance.hpp"
#include "cascader/common/error.hpp"

namespace cascader {

// ---------------------------------------------------------------------------------------------
// Block-config cache

namespace {

struct QueryKey {
  int arch;  // AcceleratorConfig::id
  BlockQuery q;
  bool operator==(const QueryKey& o) const { return arch == o.arch && q == o.q; }
};

struct QueryHash {
  size_t operator()(const QueryKey& k) const {
    const BlockQuery& q = k.q;
    uint64_t h = uint64_t(k.arch) + 0x9e3779b97f4a7c15ULL;
    auto mix = [&h](int64_t v) { h = (h ^ uint64_t(v)) * 0x100000001b3ULL + (h >> 29); };
    mix(int(q.block_type));
    for (const Shape4* s : {&q.ifm, &q.ofm}) { mix(s->n); mix(s->h); mix(s->w); mix(s->c); }
    if (q.ifm2) { mix(q.ifm2->h); mix(q.ifm2->w); mix(q.ifm2->c); mix(q.ifm2->n); }
    mix(q.ifm2_scalar); mix(q.ifm_bits); mix(q.lut_bytes); mix(q.rescaled); mix(int(q.traversal)); mix(q.block_depth);
    mix(q.ifm_upscale);
    const Kernel& kn = q.kernel;
    mix(kn.height); mix(kn.width); mix(kn.stride_y); mix(kn.stride_x); mix(kn.dilation_y); mix(kn.dilation_x);
    return size_t(h);
  }
};

}  // namespace

struct BlockConfigCache::Impl {
  // Node-based maps: a returned reference stays valid while other threads insert.
  std::unordered_map<QueryKey, BlockConfig, QueryHash> map;
  std::unordered_map<std::string, BlockConfig> searched;  // by the search's complete key
  // Held to look up and to insert, not while choosing: two threads may choose the same block
  // at once, and the second keeps the first's (the choice depends on the key alone).
  std::mutex lock;
};

BlockConfigCache::BlockConfigCache() : impl_(std::make_unique<Impl>()) {}
BlockConfigCache::~BlockConfigCache() = default;
BlockConfigCache::BlockConfigCache(BlockConfigCache&&) noexcept = default;
BlockConfigCache& BlockConfigCache::operator=(BlockConfigCache&&) noexcept = default;
size_t BlockConfigCache::size() const {
  std::lock_guard<std::mutex> hold(impl_->lock);
  return impl_->map.size() + impl_->searched.size();
}

const BlockConfig& BlockConfigCache::get(const AcceleratorConfig& arch, const BlockQuery& q) {
  QueryKey key{arch.id, q};
  {
    std::lock_guard<std::mutex> hold(impl_->lock);
    auto it = impl_->map.find(key);
    if (it != impl_->map.end()) return it->second;
  }
  BlockConfig chosen = choose_block_config(arch, q);
  std::lock_guard<std::mutex> hold(impl_->lock);
  return impl_->map.emplace(key, std::move(chosen)).first->second;
}

const BlockConfig& BlockConfigCache::get(const std::string& key, const std::function<BlockConfig()>& choose) {
  {
    std::lock_guard<std::mutex> hold(impl_->lock);
    auto it = impl_->searched.find(key);
    if (it != impl_->searched.end()) return it->second;
  }
  BlockConfig chosen = choose();
  std::lock_guard<std::mutex> hold(impl_->lock);
  return impl_->searched.emplace(key, std::move(chosen)).first->second;
}

BlockQuery block_query(const NpuOp& op) {
  BlockQuery q;
  q.block_type = block_type_of(op.type);
  q.ifm = op.ifm.shape;
  q.ofm = op.ofm.shape;
  if (op.ifm2) {
    q.ifm2 = op.ifm2->shape;
    q.ifm2_scalar = op.ifm2->shape.elements() == 1;
  }
  q.ifm_bits = op.ifm.bits;
  q.kernel = op.kernel;
  q.lut_bytes = op.activation == Activation::Lut ? int(std::clamp<int64_t>(op.lut_bytes, 256, 1 << 24)) : 0;
  q.rescaled = op.rescaled;
  q.traversal = op.traversal;
  q.block_depth = op.block_depth;
  q.ifm_upscale = op.ifm_upscale;
  return q;
}

// ---------------------------------------------------------------------------------------------
// The model

namespace {

Shape4 min4(const Shape4& a, const BlockShape& b) {
  return Shape4{std::min(a.n, 1), std::min(a.h, b.height), std::min(a.w, b.width), std::min(a.c, b.depth)};
}

// NHCWB16 storage is rounded to 16 channels; NHWC is not rounded.
Shape4 storage_rounded(const Shape4& s, TensorFormat f) {
  Shape4 r = s;
  if (f == TensorFormat::NHCWB16) r.c = round_up(s.c, 16);
  return r;
}

bool is_u55_32(const AcceleratorConfig& a) { return !a.is_u65 && a.macs_per_cycle == 32; }

// Bytes moved for `elements`, inflated by how far the access pattern's burst falls short of
// the memory's burst length (a full burst = efficiency 1). NHWC bursts cover a whole block row
// only when the block spans the full depth; otherwise one block depth.
int64_t burst_scaled_bytes(const ArchConfig& arch, bool is_read, MemoryArea mem, TensorFormat format, int bits,
                           const BlockShape& block, const Shape4& shape, int64_t elements) {
  const int cores = arch.accelerator().cores;
  int64_t burst_bits = 8;
  if (format == TensorFormat::NHCWB16) {
    const int64_t c_stride = int64_t(shape.w) * bits * 16 / 8;  // bytes between 16-channel slices
    if (c_stride == block.depth) {
      burst_bits = int64_t(bits) * block.width * block.depth;
    } else if (is_read) {
      burst_bits = 16LL * bits * block.width;
    } else {
      burst_bits = 16LL * bits * block.width * cores;
    }
  } else {
    const int64_t x_stride = int64_t(shape.c) * bits / 8;  // bytes between pixels
    if (is_read) {
      burst_bits = x_stride == block.depth ? int64_t(bits) * block.width * block.depth : int64_t(bits) * block.depth;
    } else if (block.depth <= 16 && x_stride == block.depth) {
      burst_bits = int64_t(bits) * block.width * block.depth;
    } else {
      burst_bits = std::min<int64_t>({64 * 8, 16LL * bits * cores, int64_t(block.depth) * bits});
    }
  }
  const int64_t max_burst = arch.burst_length(mem);
  const int64_t burst = std::max<int64_t>(1, std::min<int64_t>(max_burst, burst_bits / 8));
  return elements * bits / 8 * max_burst / burst;
}

// The IFM as memory holds it. An upscaled IFM (ifm_upscale 2) is fetched at its stored size:
// half the extent its OFM walks, and half the IFM block, in H and W.
struct StoredIfm {
  Shape4 shape;
  BlockShape block;
};
StoredIfm stored_ifm(const NpuOp& op, const BlockShape& ifm_block) {
  StoredIfm s{op.ifm.shape, ifm_block};
  if (op.ifm_upscale == 2) {
    s.shape.h = div_round_up(s.shape.h, 2), s.shape.w = div_round_up(s.shape.w, 2);
    s.block.height = div_round_up(s.block.height, 2), s.block.width = div_round_up(s.block.width, 2);
  }
  return s;
}

// Cycles to fetch the first IFM block (the slower input for two-input ops): paid once per op
// and, where it differs from the OFM block's, per block as command overhead.
int64_t first_ifm_block_cycles(const NpuOp& op, const ArchConfig& arch, const BlockConfig& cfg) {
  int64_t cycles = 0;
  const StoredIfm ifm = stored_ifm(op, cfg.ifm_block);
  for (const FeatureMap* fm : {&op.ifm, op.ifm2 ? &*op.ifm2 : nullptr}) {
    if (!fm) continue;
    const Shape4& shape = fm == &op.ifm ? ifm.shape : fm->shape;
    const BlockShape& block = fm == &op.ifm ? ifm.block : cfg.ifm_block;
    const int64_t tx = burst_scaled_bytes(arch, true, fm->memory, fm->format, op.ifm.bits, block, shape,
                                          min4(shape, block).elements());
    cycles = std::max(cycles, arch.latency(fm->memory, Direction::Read) +
                                  int64_t(float(tx) / float(arch.bandwidth(fm->memory))));
  }
  return cycles;
}

int64_t last_ofm_block_cycles(const NpuOp& op, const ArchConfig& arch, const BlockConfig& cfg) {
  const int64_t tx = burst_scaled_bytes(arch, false, op.ofm.memory, op.ofm.format, op.ofm.bits, cfg.ofm_block,
                                        op.ofm.shape, min4(op.ofm.shape, cfg.ofm_block).elements());
  return arch.latency(op.ofm.memory, Direction::Write) + int64_t(float(tx) / float(arch.bandwidth(op.ofm.memory)));
}

// Output-unit (activation/output) cycles per OFM element.
double output_cycles_per_element(const NpuOp& op, const ArchConfig& arch, const BlockConfig& cfg) {
  const AcceleratorConfig& a = arch.accelerator();
  const NpuBlockType bt = block_type_of(op.type);
  OutputKind kind;
  if (bt == NpuBlockType::ElementWise && op.ifm.bits == 32) {
    kind = op.ifm2 ? OutputKind::ElementwiseBinary32 : OutputKind::ElementwiseUnary32;
  } else if (op.type == NpuOpType::Mul && op.ofm.bits == 32) {
    kind = OutputKind::Mul32;
  } else if (op.type == NpuOpType::Mul ||
             (bt != NpuBlockType::ElementWise && cfg.accumulator == ShramElement::Acc40)) {
    kind = OutputKind::Acc40OrMul;
  } else if (op.type == NpuOpType::Add || op.type == NpuOpType::Sub) {
    kind = OutputKind::AdvancedAddSub;
  } else if (op.type == NpuOpType::MaxPool) {
    kind = OutputKind::MaxPool;
  } else {
    kind = OutputKind::Other;
  }
  // A table lookup that is the op itself (Vela's LUT op) costs its output stage as no activation.
  const ActivationKind act = op.activation == Activation::Lut && !is_lut_operation(op) ? ActivationKind::Lut
                             : op.activation == Activation::Relu ? ActivationKind::Relu
                                                                 : ActivationKind::None;
  return std::max(a.output_cycles_per_element[int(kind)], a.activation_cycles_per_element[int(act)]);
}

MemoryArea const_memory(const NpuOp& op) { return op.weight_buffer_memory ? *op.weight_buffer_memory : op.weight_memory; }

// The micro-block the DPU uses: 2-high micro-blocks run a 1-high, even-width OFM of a
// 1-high-kernel convolution as 1x4 micro-blocks.
BlockShape micro_block(const NpuOp& op, const AcceleratorConfig& a) {
  const NpuBlockType bt = block_type_of(op.type);
  if (a.ofm_ublock.height == 2 && (bt == NpuBlockType::ConvolutionMxN || bt == NpuBlockType::VectorProduct) &&
      op.ofm.shape.h == 1 && op.ofm.shape.w % 2 == 0 && op.kernel.height == 1) {
    return BlockShape{1, 4, a.ofm_ublock.depth};
  }
  return a.ofm_ublock;
}

// DPU (MAC array) cycles for one OFM block, over all sub-kernels and IFM depth slices.
int64_t dpu_cycles_per_block(const NpuOp& op, const AcceleratorConfig& a, const BlockConfig& cfg) {
  const NpuBlockType bt = block_type_of(op.type);
  const Shape4 ifm_block = min4(op.ifm.shape, cfg.ifm_block);
  const Shape4 ofm_block = min4(op.ofm.shape, cfg.ofm_block);
  const BlockShape ublock = micro_block(op, a);
  const int ublk_x = div_round_up(ofm_block.w, ublock.width);
  const int ublk_y = div_round_up(ofm_block.h, ublock.height);
  const int64_t ublk_xy = int64_t(ublk_x) * ublk_y;
  const int64_t ublk_z = div_round_up(ofm_block.c, ublock.depth);
  const bool acc40 = cfg.accumulator == ShramElement::Acc40;
  const int bits = op.ifm.bits;

  // The DPU walks a kernel in sub-kernels of at most 8x8 (1x1 for vector products).
  const int lim = bt == NpuBlockType::VectorProduct ? 1 : a.sub_kernel_max.height;
  const int64_t cycles_wb = 32 * ublock.depth / 8;  // weight broadcast per micro-block
  const int64_t ifm_depth_slices = div_round_up(ifm_block.c, 8);

  int64_t dpu = 0;
  for (int sx = 0; sx < op.kernel.width; sx += lim) {
    for (int sy = 0; sy < op.kernel.height; sy += lim) {
      const int64_t k_elems = int64_t(std::min(op.kernel.height - sy, lim)) * std::min(op.kernel.width - sx, lim);
      int64_t steps = 0, cycles = 0;
      if (bt == NpuBlockType::Pooling) {
        steps = 1;
        cycles = std::max<int64_t>(4, k_elems) * ublk_xy * ublk_z;
        if (!is_u55_32(a)) cycles *= bits / 2;
      } else if (bt == NpuBlockType::ConvolutionDepthWise) {
        steps = (k_elems + 3) / 4;
        cycles = std::max(cycles_wb, 4 * ublk_xy * (bits / 8)) * steps * ublk_z;
      } else if ((bt == NpuBlockType::ConvolutionMxN && !cfg.part_kernel_first) || bt == NpuBlockType::VectorProduct ||
                 bt == NpuBlockType::ReduceSum) {
        steps = k_elems;
        cycles = std::max(cycles_wb, 4 * ublk_xy) * steps * ublk_z;
      } else {  // part-kernel-first convolution: 4 (int8) or 2 (int16) kernel elements per step
        const int div = bits == 16 ? 2 : 4;
        steps = (k_elems + div - 1) / div;
        cycles = std::max(cycles_wb, 4 * ublk_xy) * steps * ublk_z * ifm_depth_slices;
      }
      // Small blocks cannot hide the accumulator pipeline latency.
      int64_t delay_cycles = 0;
      const int64_t delay = is_u55_32(a) ? (acc40 ? 7 : 3) : ((acc40 && a.macs_per_cycle <= 128) ? 3 : 2);
      if (ublk_xy == 1) {
        if (ublk_z == 1) delay_cycles = delay * steps;
        else if (steps > 1) delay_cycles = delay * (steps - 1) * ublk_z;
      }
      if (is_u55_32(a) && (ublk_x == 1 || ublk_y == 1) && ublk_z > 1 && acc40) delay_cycles += delay * ublk_z;
      if (bt == NpuBlockType::ConvolutionMxN && cfg.part_kernel_first) delay_cycles *= ifm_depth_slices;
      dpu += cycles + delay_cycles;
    }
  }
  if (bt == NpuBlockType::ConvolutionMxN || bt == NpuBlockType::VectorProduct || bt == NpuBlockType::ReduceSum) {
    dpu *= div_round_up(op.ifm.shape.c, ifm_block.c);
  }
  return dpu / a.cores;
}

// Compute cycles of a MAC op (convolution, depthwise, pooling, vector product).
int64_t mac_op_cycles(const NpuOp& op, const ArchConfig& arch, const BlockConfig& cfg) {
  const AcceleratorConfig& a = arch.accelerator();
  const NpuBlockType bt = block_type_of(op.type);
  const Shape4 ofm_block = min4(op.ofm.shape, cfg.ofm_block);
  const BlockShape u = micro_block(op, a);
  const Shape4& o = op.ofm.shape;
  // Fractional block count, in whole micro-blocks: edge blocks cost what they contain.
  const int64_t ublocks_per_block =
      int64_t(div_round_up(ofm_block.h, u.height)) * div_round_up(ofm_block.w, u.width) * div_round_up(ofm_block.c, u.depth);
  const double blocks = double(int64_t(o.n) * div_round_up(o.h, u.height) * div_round_up(o.w, u.width) *
                               div_round_up(o.c, u.depth)) / double(ublocks_per_block);

  const double ao_compute = std::ceil(output_cycles_per_element(op, arch, cfg) * double(ofm_block.elements()));
  double bias = 0;
  if (bt != NpuBlockType::Pooling && op.scale_bytes > 0) {
    // Scale and bias fetch per block (from the weight buffer when there is one).
    bias = 10.0 * ofm_block.c * arch.latency(const_memory(op), Direction::Read) / 256;
  }
  const double ao = std::max(ao_compute, bias);
  const double mac = double(dpu_cycles_per_block(op, a, cfg));

  const int64_t ifm_first = first_ifm_block_cycles(op, arch, cfg);
  const int64_t ofm_last = last_ofm_block_cycles(op, arch, cfg);
  const int64_t mem = blocks > 1 ? std::abs(ofm_last - ifm_first) : 0;
  const double cmd = (double(mem) + mac + ao) / 4;  // command issue, per DPU pipeline stage
  const double mac_b = std::max(mac, cmd), ao_b = std::max(ao, cmd);
  // The slower stage is paid per block; the faster one only for the last block. The first IFM
  // block's fetch and the last OFM block's write are not overlapped.
  int64_t total = mac_b > ao_b ? int64_t(int64_t(mac_b * blocks) + ao_b) : int64_t(ao_b * blocks + mac_b);
  return total + ofm_last + ifm_first;
}

// Compute cycles of an elementwise op: output-unit bound or command-issue bound.
int64_t elementwise_cycles(const NpuOp& op, const ArchConfig& arch, const BlockConfig& cfg) {
  const double elements = double(storage_rounded(op.ofm.shape, op.ofm.format).elements());
  const double cpe = output_cycles_per_element(op, arch, cfg);
  const double ao = std::ceil(cpe * elements);
  // Input and output of a block overlap; the slower one limits command issue.
  const double block = double(std::max(last_ofm_block_cycles(op, arch, cfg), first_ifm_block_cycles(op, arch, cfg)));
  const double cmd = std::ceil((block / double(cfg.ofm_block.elements()) + cpe) / 4.0 * elements);
  return int64_t(std::max(cmd, ao));
}

// Cycles one side of a DMA takes: its bytes at the memory's bandwidth, plus its latency.
int64_t transfer_cycles(const ArchConfig& arch, MemoryArea m, Direction d, int64_t bytes) {
  return int64_t(float(bytes) / float(arch.bandwidth(m))) + arch.latency(m, d);
}

int64_t mem2mem_cycles(const ArchConfig& arch, MemoryArea from, MemoryArea to, int64_t bytes) {
  return std::max(transfer_cycles(arch, from, Direction::Read, bytes), transfer_cycles(arch, to, Direction::Write, bytes));
}

// A LUT DMA writes the SHRAM, which Vela (5.2) models as a memory of 1 byte per cycle without
// latency: a 2 KiB int16 table costs at least 2048 cycles whatever memory it comes from.
int64_t lut_load_cycles(const ArchConfig& arch, MemoryArea from, int64_t bytes) {
  return std::max(transfer_cycles(arch, from, Direction::Read, bytes), bytes);
}

void validate(const NpuOp& op) {
  auto bits_ok = [](int b) { return b == 8 || b == 16 || b == 32; };
  if (!bits_ok(op.ifm.bits) || !bits_ok(op.ofm.bits) || (op.ifm2 && !bits_ok(op.ifm2->bits))) {
    throw InvalidArgument("element bits must be 8, 16 or 32");
  }
  if (op.weight_bytes < 0 || op.scale_bytes < 0 || op.lut_bytes < 0 || op.dma_bytes < 0 ||
      op.weight_first_dma_bytes < 0 || op.weight_last_slice_depth < 0 || op.dma_slack_cycles < 0) {
    throw InvalidArgument("byte counts, slice depth and slack cycles must be >= 0");
  }
  if (op.ifm2 && !is_elementwise(op.type)) throw InvalidArgument("only elementwise ops take an ifm2");
  const Shape4 &i = op.ifm.shape, &o = op.ofm.shape;
  auto positive = [](const Shape4& s) { return s.n > 0 && s.h > 0 && s.w > 0 && s.c > 0; };
  if (!positive(i) || !positive(o) || (op.ifm2 && !positive(op.ifm2->shape))) {
    throw InvalidArgument("feature-map shapes must have every dimension >= 1");
  }
  if (is_elementwise(op.type)) {
    auto fits = [&o](const Shape4& s) {
      return (s.n == o.n || s.n == 1) && (s.h == o.h || s.h == 1) && (s.w == o.w || s.w == 1) && (s.c == o.c || s.c == 1);
    };
    if (!fits(i) || (op.ifm2 && !fits(op.ifm2->shape))) {
      throw InvalidArgument("elementwise inputs must equal the OFM shape or broadcast to it (size-1 axes)");
    }
    return;
  }
  const NpuBlockType bt = block_type_of(op.type);
  if (bt == NpuBlockType::ConvolutionMxN || bt == NpuBlockType::ConvolutionDepthWise || bt == NpuBlockType::Pooling) {
    const Kernel& k = op.kernel;
    if (k.height < 1 || k.width < 1 || k.stride_y < 1 || k.stride_x < 1 || k.dilation_y < 1 || k.dilation_x < 1) {
      throw InvalidArgument("kernel size, stride and dilation must be >= 1");
    }
    const Padding& p = op.padding;
    const int eh = (i.h + p.top + p.bottom - k.area_height()) / k.stride_y + 1;
    const int ew = (i.w + p.left + p.right - k.area_width()) / k.stride_x + 1;
    if (eh != o.h || ew != o.w) {
      throw InvalidArgument("OFM " + std::to_string(o.h) + "x" + std::to_string(o.w) + " does not follow from IFM " +
                            std::to_string(i.h) + "x" + std::to_string(i.w) + ", kernel, stride, dilation and padding "
                            "(expected " + std::to_string(eh) + "x" + std::to_string(ew) + "); pass explicit padding");
    }
    if (bt != NpuBlockType::ConvolutionMxN && i.c != o.c) {
      throw InvalidArgument("depthwise and pooling ops need IFM depth == OFM depth");
    }
  }
}

}  // namespace

// Vela's scheduler plans weight buffering on its reference schedule, before fast-storage
// placement moves feature maps: it counts an op's compute with its feature maps in their home
// memory, and only the last depth slice's when the weights are sliced. That figure is the
// slack the op offers the next op's DMAs, and the tail its own buffered transfer must precede.
// (Matching it matters on U65 Dedicated_Sram, where home is DRAM with 500-cycle latencies.)
int64_t buffering_slack_cycles(const NpuOp& op, const ArchConfig& arch, const BlockConfig& cfg) {
  NpuOp ref = op;
  const MemoryArea home = arch.region_memory(Region::Arena);
  ref.ifm.memory = home;
  ref.ofm.memory = home;
  if (ref.ifm2) ref.ifm2->memory = home;
  const NpuBlockType bt = block_type_of(op.type);
  if (bt == NpuBlockType::ElementWise) return elementwise_cycles(ref, arch, cfg);
  if (op.weight_last_slice_depth > 0 && op.weight_last_slice_depth < op.ofm.shape.c) {
    ref.ofm.shape.c = op.weight_last_slice_depth;
    if (bt != NpuBlockType::ConvolutionMxN && bt != NpuBlockType::VectorProduct) ref.ifm.shape.c = ref.ofm.shape.c;
  }
  return mac_op_cycles(ref, arch, cfg);
}

namespace {
CostRecord estimate_valid(const NpuOp& op, const ArchConfig& arch, BlockConfigCache& cache);

// A transpose step as Vela costs it (NpuOp::transpose): the slower of reading the input and
// writing the permuted output, each burst-scaled with the blocks Vela's search picks for a
// MAC op without weights over the unpermuted shape, plus that memory's latency. The formula
// matched all 3,108 Vela 5.2 transpose rows of a sweep (every 4-D permutation, U55 and U65);
// through the estimator, 584 of 600 of them are within 5% (the rest are single commands whose
// step the command stream leaves ambiguous, see estimator.cpp transpose_step).
CostRecord transpose_estimate(const NpuOp& op, const ArchConfig& arch, BlockConfigCache& cache) {
  const Shape4 &in = op.ifm.shape, &out = op.ofm.shape;
  if (in.elements() <= 0 || out.elements() != in.elements() || op.ifm.bits != op.ofm.bits) {
    throw InvalidArgument("a transpose's output must hold its input's elements, at the same element size");
  }
  BlockQuery q;
  q.block_type = NpuBlockType::VectorProduct;
  q.ifm = q.ofm = in;
  q.ifm_bits = op.ifm.bits;
  q.traversal = Traversal::DepthFirst;
  CostRecord r;
  r.block_config = cache.get(arch.accelerator(), q);
  const BlockConfig& cfg = r.block_config;
  const int64_t read = burst_scaled_bytes(arch, true, op.ifm.memory, op.ifm.format, op.ifm.bits, cfg.ifm_block, in,
                                          in.elements());
  const int64_t out_elements = storage_rounded(out, op.ofm.format).elements();
  const int64_t written =
      burst_scaled_bytes(arch, false, op.ofm.memory, op.ofm.format, op.ofm.bits, cfg.ofm_block, out, out_elements);
  // The step's cycles with its input in `from` and its output in `to`.
  const auto cycles = [&](MemoryArea from, MemoryArea to) {
    const int64_t rd = burst_scaled_bytes(arch, true, from, op.ifm.format, op.ifm.bits, cfg.ifm_block, in, in.elements());
    const int64_t wr = burst_scaled_bytes(arch, false, to, op.ofm.format, op.ofm.bits, cfg.ofm_block, out, out_elements);
    return std::max(int64_t(double(rd) / arch.bandwidth(from)) + arch.latency(from, Direction::Read),
                    int64_t(double(wr) / arch.bandwidth(to)) + arch.latency(to, Direction::Write));
  };
  r.npu_cycles = cycles(op.ifm.memory, op.ofm.memory);
  r.read_bytes[int(op.ifm.memory)] += double(in.elements() * op.ifm.bits / 8);
  r.write_bytes[int(op.ofm.memory)] += double(out_elements * op.ofm.bits / 8);
  std::array<int64_t, kMemoryAreaCount> scaled{};
  scaled[int(op.ifm.memory)] += read;
  scaled[int(op.ofm.memory)] += written;
  r.total_cycles = double(r.npu_cycles);
  for (int m = 0; m < kMemoryAreaCount; ++m) {
    r.access_cycles[m] = std::floor(double(scaled[m]) / arch.bandwidth(MemoryArea(m)));
    r.total_cycles = std::max(r.total_cycles, r.access_cycles[m]);
  }
  // As buffering_slack_cycles: Vela's scheduler counts the step with its maps in their home.
  const MemoryArea home = arch.region_memory(Region::Arena);
  r.buffering_slack_cycles = cycles(home, home);
  return r;
}
}  // namespace

CostRecord estimate(const NpuOp& op, const ArchConfig& arch, BlockConfigCache& cache) {
  if (op.type == NpuOpType::Dma) {
    CostRecord r;
    if (op.dma_bytes < 0) throw InvalidArgument("dma_bytes must be >= 0");
    if (op.ifm.memory != op.ofm.memory) {
      r.dma_cycles = mem2mem_cycles(arch, op.ifm.memory, op.ofm.memory, op.dma_bytes);
      r.read_bytes[int(op.ifm.memory)] = double(op.dma_bytes);
      r.write_bytes[int(op.ofm.memory)] = double(op.dma_bytes);
    }
    r.npu_cycles = r.dma_cycles;
    r.total_cycles = double(r.npu_cycles);
    return r;
  }
  if (op.transpose != Transpose::None) return transpose_estimate(op, arch, cache);
  if (arch.accelerator().product == Product::EthosU85) {  // its own formulas, and its own block search
    return op.u85 && op.block_config ? ethos_u85::estimate(op, arch)
                                     : ethos_u85::estimate(ethos_u85::with_block_config(op, arch, cache), arch);
  }
  validate(op);
  if (op.ofm_step < 1) throw InvalidArgument("ofm_step must be >= 1");
  if (op.ofm_step == 1) return estimate_valid(op, arch, cache);
  // Vela's accounting (see NpuOp::ofm_step): the same operation over the box its OFM pixels
  // span, reading the same IFM.
  NpuOp spanned = op;
  spanned.ofm_step = 1;
  spanned.ofm.shape.h = (op.ofm.shape.h - 1) * op.ofm_step + 1;
  spanned.ofm.shape.w = (op.ofm.shape.w - 1) * op.ofm_step + 1;
  return estimate_valid(spanned, arch, cache);
}

namespace {

// `estimate` for an op `validate` accepted (or Vela's spanned form of one).
CostRecord estimate_valid(const NpuOp& op, const ArchConfig& arch, BlockConfigCache& cache) {
  require_shram(arch.accelerator());
  CostRecord r;
  std::array<int64_t, kMemoryAreaCount> read{}, write{};
  const AcceleratorConfig& a = arch.accelerator();
  if (op.block_config) {
    // A caller-fixed block config must be one the hardware accepts for this op.
    if (!try_block_config(a, block_query(op), op.block_config->ofm_block)) {
      throw InvalidArgument("the given block config does not fit SHRAM / the micro-block rules for this op on " + a.name);
    }
    r.block_config = *op.block_config;
  } else {
    r.block_config = cache.get(a, block_query(op));
  }
  const BlockConfig& cfg = r.block_config;
  const NpuBlockType bt = block_type_of(op.type);
  const Shape4 &ifm = op.ifm.shape, &ofm = op.ofm.shape;

  // Compute cycles and MACs.
  int64_t op_cycles = 0;
  if (bt == NpuBlockType::ElementWise) {
    op_cycles = elementwise_cycles(op, arch, cfg);
  } else {
    const int64_t k = op.kernel.elements_wh();
    r.macs = (bt == NpuBlockType::ConvolutionDepthWise || bt == NpuBlockType::Pooling) ? k * ofm.elements()
                                                                                       : k * ifm.c * ofm.elements();
    op_cycles = mac_op_cycles(op, arch, cfg);
  }

  r.buffering_slack_cycles = buffering_slack_cycles(op, arch, cfg);

  // Elements accessed, the IFM's at its stored size.
  const StoredIfm stored = stored_ifm(op, cfg.ifm_block);
  const Shape4& ifm_stored = stored.shape;
  const BlockShape& ifm_block_stored = stored.block;
  const Shape4 ifm_block = min4(ifm_stored, ifm_block_stored);
  const Shape4 ofm_block = min4(ofm, cfg.ofm_block);
  int64_t ifm_read = 0, ifm2_read = 0, weight_read = 0, scale_read = 0;
  if (bt != NpuBlockType::ElementWise) {
    const bool equal_depth = bt == NpuBlockType::ConvolutionDepthWise || bt == NpuBlockType::Pooling;
    const int64_t blocks_hw = int64_t(div_round_up(ofm.n, ofm_block.n)) * div_round_up(ofm.h, ofm_block.h) *
                              div_round_up(ofm.w, ofm_block.w);
    const int64_t block_count = blocks_hw * (equal_depth ? 1 : div_round_up(ofm.c, ofm_block.c));
    const int lim = bt == NpuBlockType::VectorProduct ? 1 : a.sub_kernel_max.height;
    const int64_t sub_kernels = int64_t(div_round_up(op.kernel.width, lim)) * div_round_up(op.kernel.height, lim);
    const int64_t ifm_fetch = storage_rounded(ifm_block, op.ifm.format).elements_wh() *
                              storage_rounded(ifm_stored, op.ifm.format).c;
    ifm_read = ifm_fetch * sub_kernels * block_count;
    if (bt != NpuBlockType::Pooling) {
      // The whole encoded weight and scale stream is fetched once per OFM block position.
      weight_read = blocks_hw * op.weight_bytes;
      scale_read = blocks_hw * op.scale_bytes;
    }
  } else {
    const int64_t out = storage_rounded(ofm, op.ifm.format).elements();
    if (op.scalar_first && op.ifm2 && op.ifm2->shape.elements() == 1) {
      // The scalar (IFM2 here) is Vela's IFM: see NpuOp::scalar_first.
      if (op.ifm2->bits > 8) ifm2_read = storage_rounded(op.ifm2->shape, op.ifm2->format).elements();
      else ifm_read = out;
    } else if (ifm.elements() == 1) {
      if (op.ifm.bits > 8) ifm_read = storage_rounded(ifm, op.ifm.format).elements();
      else if (op.ifm2) ifm2_read = out;
    } else {
      ifm_read = out;
      if (op.ifm2) {
        if (op.ifm2->shape.elements() > 1) ifm2_read = out;
        else if (op.ifm2->bits > 8) ifm2_read = storage_rounded(op.ifm2->shape, op.ifm.format).elements();
      }
    }
  }
  const int64_t ofm_write = storage_rounded(ofm, op.ofm.format).elements();

  // Bytes per memory, inflated by burst efficiency.
  r.write_bytes[int(op.ofm.memory)] += double(ofm_write * op.ofm.bits / 8);
  write[int(op.ofm.memory)] +=
      burst_scaled_bytes(arch, false, op.ofm.memory, op.ofm.format, op.ofm.bits, cfg.ofm_block, ofm, ofm_write);
  r.read_bytes[int(op.ifm.memory)] += double(ifm_read * op.ifm.bits / 8);
  read[int(op.ifm.memory)] +=
      burst_scaled_bytes(arch, true, op.ifm.memory, op.ifm.format, op.ifm.bits, ifm_block_stored, ifm_stored, ifm_read);
  if (op.ifm2) {
    r.read_bytes[int(op.ifm2->memory)] += double(ifm2_read * op.ifm2->bits / 8);
    read[int(op.ifm2->memory)] += burst_scaled_bytes(arch, true, op.ifm2->memory, op.ifm2->format, op.ifm2->bits,
                                                     cfg.ifm_block, op.ifm2->shape, ifm2_read);
  }
  const bool buffered = op.weight_buffer_memory && *op.weight_buffer_memory != op.weight_memory;
  int64_t dma = 0;
  int64_t npu = op_cycles;  // compute plus the DMA it has to wait for
  auto rd = [&](MemoryArea m, int64_t b) { read[int(m)] += b; r.read_bytes[int(m)] += double(b); };
  auto wr = [&](MemoryArea m, int64_t b) { write[int(m)] += b; r.write_bytes[int(m)] += double(b); };
  if (buffered) {
    // The NPU reads weights from the buffer; what the first DMA did not bring streams through
    // both memories during the op. Scales are accounted at their home, as Vela does.
    const MemoryArea buf = *op.weight_buffer_memory;
    const int64_t stream = op.weight_bytes + op.scale_bytes;
    const int64_t first = op.weight_first_dma_bytes > 0 ? std::min(op.weight_first_dma_bytes, stream) : stream;
    const int64_t streamed = std::max<int64_t>(op.weight_bytes - first, 0);
    rd(op.weight_memory, streamed);
    wr(buf, streamed);
    rd(buf, weight_read);
    // Compute waits for the first slice; the whole transfer must also end before the last
    // slice's compute can start.
    const int64_t slack = std::max<int64_t>(op.dma_slack_cycles, 0);
    const int64_t full = mem2mem_cycles(arch, op.weight_memory, buf, stream);
    const int64_t first_wait = std::max<int64_t>(mem2mem_cycles(arch, op.weight_memory, buf, first) - slack, 0);
    npu = std::max(full - slack + r.buffering_slack_cycles, op_cycles + first_wait);
    dma += full;
  } else {
    rd(op.weight_memory, weight_read);
  }
  rd(op.weight_memory, scale_read);

  // The LUT is copied into SHRAM before the op starts (from whichever memory holds it). Vela
  // (5.2) costs that copy, in cycles and in memory traffic, only when the table lookup is the op
  // itself; a LUT chained into another op (softmax's SUB + LUT, a convolution's fused
  // activation) is a sub-operation whose copy its estimate leaves out, so ours does too.
  if (op.activation == Activation::Lut && op.lut_bytes > 0) {
    const int64_t lut = lut_load_cycles(arch, op.lut_memory, op.lut_bytes);
    dma += lut;
    if (is_lut_operation(op)) {
      // As Vela: with buffered weights the slack went to the weights; otherwise it hides the LUT.
      npu += buffered ? lut : std::max<int64_t>(lut - std::max<int64_t>(op.dma_slack_cycles, 0), 0);
      // The table's bytes are traffic, but not access cycles of the op: Vela keeps the copy's
      // access apart from each memory's total, which is what bounds the op (the copy's time is
      // its DMA cycles above). An int16 table in off-chip flash would otherwise bound a 528-cycle
      // lookup at 2,048 (ARG_MAX int8 on U55-256, Vela 528).
      r.read_bytes[int(op.lut_memory)] += double(op.lut_bytes);
    }
  }
  r.dma_cycles = dma;
  r.npu_cycles = npu;

  r.total_cycles = double(r.npu_cycles);
  for (int m = 0; m < kMemoryAreaCount; ++m) {
    r.access_cycles[m] = double(read[m] + write[m]) / arch.bandwidth(MemoryArea(m));
    r.total_cycles = std::max(r.total_cycles, r.access_cycles[m]);
  }
  return r;
}

}  // namespace

CostRecord estimate(const NpuOp& op, const ArchConfig& arch) {
  thread_local BlockConfigCache cache;
  return estimate(op, arch, cache);
}

BlockConfig fastest_block_config(const NpuOp& op, const ArchConfig& arch, BlockConfigCache& cache) {
  const CostRecord first = estimate(op, arch, cache);
  if (arch.accelerator().product == Product::EthosU85 || op.type == NpuOpType::Dma || op.transpose != Transpose::None) {
    return first.block_config;
  }
  // What the next operation's weight DMA runs under: this one's compute with its maps in their
  // home memory (buffering_slack_cycles), less the time this one keeps the weights' memory
  // busy itself (the schedule's `busy`). A block that is faster but leaves the next DMA less
  // than it saves may cost the next operation more than it gains: on U65 the slack is counted
  // with the maps in DRAM, where a block can lose far more than it gains in SRAM (zoo
  // transformer_block's 2 x 16 x 16 average pool in 2 x 2 blocks: 96 cycles faster, its next
  // convolution's weight DMA exposed).
  const int weights = int(op.weight_buffer_memory ? *op.weight_buffer_memory : op.weight_memory);
  const bool weighted = op.weight_bytes > 0 || op.scale_bytes > 0;
  const auto cover = [&](const CostRecord& r) {
    return double(r.buffering_slack_cycles) - (weighted ? r.access_cycles[weights] : 0.0);
  };
  // Each placement of the maps the layout may move home (on U65, DRAM under a small budget; an
  // eviction moves one map, not all): the first block's cycles there, which a faster block may
  // not exceed (palm
  // detection's 48 x 48 x 32 max pool on U65-256 with its input evicted to DRAM: 37,853 cycles
  // in its 4 x 4 x 32 blocks, 83,389 in 2 x 4 x 16 ones).
  const MemoryArea home = arch.region_memory(Region::Arena);
  std::vector<FeatureMap*> movable;
  std::vector<MemoryArea> where;
  NpuOp moved = op;
  for (FeatureMap* fm : {&moved.ifm, moved.ifm2 ? &*moved.ifm2 : nullptr, &moved.ofm}) {
    if (fm && fm->memory != home) movable.push_back(fm), where.push_back(fm->memory);
  }
  const auto placed = [&](unsigned mask, const BlockConfig& cfg) {
    for (size_t k = 0; k < movable.size(); ++k) movable[k]->memory = (mask >> k) & 1 ? home : where[k];
    moved.block_config = cfg;
    return estimate(moved, arch, cache).total_cycles;
  };
  std::vector<double> first_placed;
  for (unsigned mask = 1; mask < (1u << movable.size()); ++mask) first_placed.push_back(placed(mask, first.block_config));
  CostRecord best = first;
  NpuOp trial = op;
  for (const BlockConfig& cfg : enumerate_block_configs(arch.accelerator(), block_query(op))) {
    trial.block_config = cfg;
    CostRecord r = estimate(trial, arch, cache);
    if (!(r.total_cycles < best.total_cycles) || cover(r) < cover(first) - (first.total_cycles - r.total_cycles)) continue;
    bool slower = false;
    for (unsigned mask = 1; mask < (1u << movable.size()) && !slower; ++mask) {
      slower = placed(mask, cfg) > first_placed[mask - 1];
    }
    if (!slower) best = std::move(r);
  }
  return best.block_config;
}

CostRecord estimate_matmul(const NpuOp& mul, const NpuOp& sum, int columns, const ArchConfig& arch,
                           BlockConfigCache& cache) {
  if (columns < 1) throw InvalidArgument("a matrix product has at least one column");
  if (mul.type != NpuOpType::Mul || !mul.ifm2 || mul.ofm.bits != 32 || sum.type != NpuOpType::ReduceSum ||
      !(sum.ifm.shape == mul.ofm.shape)) {
    throw InvalidArgument("a matrix product is a MUL into 32-bit products and a REDUCE_SUM of those products");
  }
  const AcceleratorConfig& a = arch.accelerator();
  // A block the binary ran a command with may not fit the query Vela costs in its place.
  const auto fitted = [&a](NpuOp op) {
    if (op.block_config && !try_block_config(a, block_query(op), op.block_config->ofm_block)) op.block_config.reset();
    return op;
  };
  NpuOp m = mul;
  m.ifm2->shape = m.ofm.shape;
  m = fitted(m);
  NpuOp s = sum;
  s.ifm.bits = mul.ifm.bits;
  s.ifm.format = mul.ifm.format;
  s = fitted(s);
  const CostRecord mc = estimate(m, arch, cache), sc = estimate(s, arch, cache);

  CostRecord r;
  r.block_config = sc.block_config;
  r.npu_cycles = int64_t(columns) * (mc.npu_cycles + sc.npu_cycles);
  r.buffering_slack_cycles = r.npu_cycles;
  r.macs = int64_t(columns) * sc.macs;
  const BlockConfig& cfg = sc.block_config;
  const Shape4 x = mul.ofm.shape;  // the first operand, as the products cover it
  Shape4 y = mul.ifm2->shape;      // the second operand, one column per W position
  y.w = columns;
  Shape4 out = sum.ofm.shape;
  out.c = columns;
  std::array<int64_t, kMemoryAreaCount> scaled{};
  const int64_t x_read = x.elements() * columns, products = x_read;
  scaled[int(mul.ifm.memory)] +=
      burst_scaled_bytes(arch, true, mul.ifm.memory, mul.ifm.format, mul.ifm.bits, cfg.ifm_block, x, x_read);
  r.read_bytes[int(mul.ifm.memory)] += double(x_read * mul.ifm.bits / 8);
  scaled[int(mul.ifm2->memory)] += burst_scaled_bytes(arch, true, mul.ifm2->memory, mul.ifm2->format,
                                                      mul.ifm2->bits, cfg.ifm_block, y, y.elements());
  r.read_bytes[int(mul.ifm2->memory)] += double(y.elements() * mul.ifm2->bits / 8);
  scaled[int(sum.ifm.memory)] += 2 * products;
  r.write_bytes[int(sum.ifm.memory)] += double(products * sum.ifm.bits / 8);
  r.read_bytes[int(sum.ifm.memory)] += double(products * sum.ifm.bits / 8);
  const int64_t written = storage_rounded(out, sum.ofm.format).elements();
  scaled[int(sum.ofm.memory)] +=
      burst_scaled_bytes(arch, false, sum.ofm.memory, sum.ofm.format, sum.ofm.bits, cfg.ofm_block, out, written);
  r.write_bytes[int(sum.ofm.memory)] += double(written * sum.ofm.bits / 8);
  r.total_cycles = double(r.npu_cycles);
  for (int k = 0; k < kMemoryAreaCount; ++k) {
    r.access_cycles[k] = double(scaled[k]) / arch.bandwidth(MemoryArea(k));
    r.total_cycles = std::max(r.total_cycles, r.access_cycles[k]);
  }
  return r;
}

double access_cycles_per_byte(const ArchConfig& arch, MemoryArea m) { return 1.0 / arch.bandwidth(m); }

}  // namespace cascader
