#include "cascader/perf/cycle_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

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
    mix(q.ifm2_scalar); mix(q.ifm_bits); mix(q.uses_lut); mix(q.rescaled); mix(int(q.traversal));
    const Kernel& kn = q.kernel;
    mix(kn.height); mix(kn.width); mix(kn.stride_y); mix(kn.stride_x); mix(kn.dilation_y); mix(kn.dilation_x);
    return size_t(h);
  }
};

}  // namespace

struct BlockConfigCache::Impl {
  std::unordered_map<QueryKey, BlockConfig, QueryHash> map;
};

BlockConfigCache::BlockConfigCache() : impl_(std::make_unique<Impl>()) {}
BlockConfigCache::~BlockConfigCache() = default;
BlockConfigCache::BlockConfigCache(BlockConfigCache&&) noexcept = default;
BlockConfigCache& BlockConfigCache::operator=(BlockConfigCache&&) noexcept = default;
size_t BlockConfigCache::size() const { return impl_->map.size(); }

const BlockConfig& BlockConfigCache::get(const AcceleratorConfig& arch, const BlockQuery& q) {
  QueryKey key{arch.id, q};
  auto it = impl_->map.find(key);
  if (it != impl_->map.end()) return it->second;
  return impl_->map.emplace(key, choose_block_config(arch, q)).first->second;
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
  q.uses_lut = op.activation == Activation::Lut;
  q.rescaled = op.rescaled;
  q.traversal = op.traversal;
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
bool is_u55_64_or_128(const AcceleratorConfig& a) {
  return !a.is_u65 && (a.macs_per_cycle == 64 || a.macs_per_cycle == 128);
}

// Bytes `to_transfer` inflated by how far the access pattern's burst falls short of the
// memory's burst length (a full burst = efficiency 1).
double burst_scaled(const ArchConfig& arch, bool is_read, MemoryArea mem, TensorFormat format, int bits,
                    const BlockShape& block, const Shape4& shape, double to_transfer) {
  const int cores = arch.accelerator().cores;
  int64_t burst_bits = 8;
  if (format == TensorFormat::NHCWB16) {
    const double c_stride = bits * 16.0 * shape.w / 8;  // bytes between 16-channel slices
    if (c_stride == block.depth) {
      burst_bits = int64_t(bits) * block.depth * block.width;
    } else if (is_read) {
      burst_bits = 16LL * bits * block.width;
    } else {
      burst_bits = 16LL * bits * block.width * cores;
    }
  } else {
    const double z_stride = bits / 8.0;
    if (is_read) {
      burst_bits = z_stride == block.depth ? int64_t(bits) * block.depth * block.width : int64_t(bits) * block.depth;
    } else if (block.depth <= 16 && z_stride == block.depth) {
      burst_bits = int64_t(bits) * block.depth * block.width;
    } else {
      burst_bits = std::min<int64_t>({64 * 8, 16LL * bits * cores, int64_t(block.depth) * bits});
    }
  }
  const int64_t max_burst = arch.burst_length(mem);
  const int64_t burst = std::max<int64_t>(1, std::min<int64_t>(max_burst, burst_bits / 8));
  return to_transfer * (double(max_burst) / double(burst));
}

// Memory cycles for the first IFM block and OFM block: the per-block command overhead.
std::pair<double, double> block_memory_cycles(const NpuOp& op, const ArchConfig& arch, const BlockConfig& cfg) {
  const double ifm_elems = double(min4(op.ifm.shape, cfg.ifm_block).elements());
  const double ifm = arch.latency(op.ifm.memory, Direction::Read) +
                     burst_scaled(arch, true, op.ifm.memory, op.ifm.format, op.ifm.bits, cfg.ifm_block, op.ifm.shape,
                                  ifm_elems) /
                         arch.bandwidth(op.ifm.memory);
  const double ofm_elems = double(min4(op.ofm.shape, cfg.ofm_block).elements());
  const double ofm = arch.latency(op.ofm.memory, Direction::Write) +
                     burst_scaled(arch, false, op.ofm.memory, op.ofm.format, op.ofm.bits, cfg.ofm_block, op.ofm.shape,
                                  ofm_elems) /
                         arch.bandwidth(op.ofm.memory);
  return {ifm, ofm};
}

double output_cycles_per_element(const NpuOp& op, const ArchConfig& arch, const BlockConfig& cfg) {
  const AcceleratorConfig& a = arch.accelerator();
  const NpuBlockType bt = block_type_of(op.type);
  OutputKind kind;
  if (bt == NpuBlockType::ElementWise && op.ifm.bits == 32) {
    // Index as Vela's table is indexed: binary (two inputs) at 0, unary at 1.
    kind = op.ifm2 ? OutputKind::ElementwiseUnary32 : OutputKind::ElementwiseBinary32;
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
  const ActivationKind act = op.activation == Activation::Lut    ? ActivationKind::Lut
                             : op.activation == Activation::Relu ? ActivationKind::Relu
                                                                 : ActivationKind::None;
  double cpe = std::max(a.output_cycles_per_element[int(kind)], a.activation_cycles_per_element[int(act)]);
  if (is_elementwise(op.type)) {
    // Elementwise blocks are short: the block's memory latency, spread over the four DPU
    // pipeline stages, can dominate.
    const double n = double(cfg.ofm_block.elements());
    auto [ifm_c, ofm_c] = block_memory_cycles(op, arch, cfg);
    const double cmd = (ifm_c + ofm_c + cpe * n) / 4;
    cpe = std::max(cpe, cmd / n);
  }
  return cpe;
}

MemoryArea const_memory(const NpuOp& op) { return op.weight_buffer_memory ? *op.weight_buffer_memory : op.weight_memory; }

double conv_cycles(const NpuOp& op, const ArchConfig& arch, const BlockConfig& cfg) {
  const AcceleratorConfig& a = arch.accelerator();
  const NpuBlockType bt = block_type_of(op.type);
  const Shape4 ifm_block = min4(op.ifm.shape, cfg.ifm_block);
  Shape4 ofm_block = min4(op.ofm.shape, cfg.ofm_block);
  BlockShape ublock = a.ofm_ublock;
  // 2-high micro-blocks run a 1-high, even-width OFM as 1x4 micro-blocks.
  if (a.ofm_ublock.height == 2 &&
      (bt == NpuBlockType::ConvolutionMxN || bt == NpuBlockType::ConvolutionDepthWise ||
       bt == NpuBlockType::VectorProduct) &&
      op.ofm.shape.h == 1 && op.ofm.shape.w % 2 == 0 && op.kernel.height == 1) {
    ublock = BlockShape{1, 4, a.ofm_ublock.depth};
    ofm_block.h = 1;
  }
  const int ublk_x = div_round_up(ofm_block.w, ublock.width);
  const int ublk_y = div_round_up(ofm_block.h, ublock.height);
  const int64_t ublk_xy = int64_t(ublk_x) * ublk_y;
  const int ublk_z = div_round_up(ofm_block.c, ublock.depth);
  const bool acc40 = cfg.accumulator == ShramElement::Acc40;

  // The DPU walks a kernel in sub-kernels of at most 8x8 (1x1 for vector products).
  const int lim = bt == NpuBlockType::VectorProduct ? 1 : a.sub_kernel_max.height;
  const int n_sub_y = div_round_up(op.kernel.height, lim), n_sub_x = div_round_up(op.kernel.width, lim);
  const double cycles_wb = 32.0 * ublock.depth / 8;  // weight broadcast per micro-block
  const int ifm_depth_slices = div_round_up(ifm_block.c, 8);

  double dpu = 0;
  for (int sy = 0; sy < n_sub_y; ++sy) {
    const int ky = std::min(op.kernel.height - sy * lim, lim);
    for (int sx = 0; sx < n_sub_x; ++sx) {
      const int kx = std::min(op.kernel.width - sx * lim, lim);
      const int64_t k_elems = int64_t(kx) * ky;
      int64_t steps = 1;
      double cycles = 0;
      if (bt == NpuBlockType::Pooling) {
        cycles = double(std::max<int64_t>(4, k_elems) * ublk_xy * ublk_z);
        if (op.ifm.bits == 16 && !is_u55_32(a)) cycles *= 2;
      } else if (bt == NpuBlockType::ConvolutionDepthWise) {
        cycles = 4.0 * ublk_xy * (op.ifm.bits == 16 ? 2 : 1);
        steps = (k_elems + 3) / 4;
        cycles = std::max(cycles_wb, cycles) * steps * ublk_z;
      } else if ((bt == NpuBlockType::ConvolutionMxN && !cfg.part_kernel_first) || bt == NpuBlockType::VectorProduct ||
                 bt == NpuBlockType::ReduceSum) {
        steps = k_elems;
        cycles = std::max(cycles_wb, 4.0 * ublk_xy) * steps * ublk_z;
      } else {  // part-kernel-first convolution: 4 (int8) or 2 (int16) kernel elements per step
        const int div = op.ifm.bits == 16 ? 2 : 4;
        steps = (k_elems + div - 1) / div;
        cycles = std::max(cycles_wb, 4.0 * ublk_xy) * double(steps * ifm_depth_slices * ublk_z);
      }
      // Small blocks cannot hide the accumulator pipeline latency.
      double delay_cycles = 0;
      if (is_u55_32(a)) {
        const int delay = acc40 ? 7 : 3;
        if (ublk_x == 1 && ublk_y == 1) {
          if (ublk_z == 1) delay_cycles = double(delay * steps);
          else if (steps > 1) delay_cycles = double(delay * (steps - 1) * ublk_z);
        }
        if ((ublk_x == 1 || ublk_y == 1) && ublk_z > 1 && acc40) delay_cycles += delay * ublk_z;
      } else {
        const int delay = (acc40 && is_u55_64_or_128(a)) ? 3 : 2;
        if (ublk_x == 1 && ublk_y == 1) {
          if (ublk_z == 1) delay_cycles = double(delay * steps);
          else if (steps > 1) delay_cycles = double(delay * (steps - 1) * ublk_z);
        }
      }
      if (bt == NpuBlockType::ConvolutionMxN && cfg.part_kernel_first) delay_cycles *= ifm_depth_slices;
      dpu += cycles + delay_cycles;
    }
  }
  if (bt == NpuBlockType::ConvolutionMxN || bt == NpuBlockType::VectorProduct || bt == NpuBlockType::ReduceSum) {
    dpu *= div_round_up(op.ifm.shape.c, ifm_block.c);
  }
  dpu /= a.cores;

  const int64_t num_blocks = int64_t(div_round_up(op.ofm.shape.n, ofm_block.n)) *
                             div_round_up(op.ofm.shape.h, ofm_block.h) * div_round_up(op.ofm.shape.w, ofm_block.w) *
                             div_round_up(op.ofm.shape.c, ofm_block.c);
  double output = std::ceil(output_cycles_per_element(op, arch, cfg) * double(ofm_block.elements()));
  if (op.scale_bytes > 0) {
    // Scale and bias fetch per block.
    const double bias = 10.0 * ofm_block.c * arch.latency(const_memory(op), Direction::Read) / 256;
    output = std::max(output, bias);
  }
  auto [ifm_c, ofm_c] = block_memory_cycles(op, arch, cfg);
  const double cmd = (ifm_c + ofm_c + output + dpu) / 4;
  dpu = std::max(dpu, cmd);
  output = std::max(output, cmd);
  // The slower stage is paid per block; the faster one only for the last block.
  return dpu > output ? dpu * num_blocks + output : output * num_blocks + dpu;
}

double mem2mem_cycles(const ArchConfig& arch, MemoryArea from, MemoryArea to, double bytes) {
  const double from_c = std::floor(bytes / arch.bandwidth(from)) + arch.latency(from, Direction::Read);
  const double to_c = std::floor(bytes / arch.bandwidth(to));
  return std::max(from_c, to_c);
}

void validate(const NpuOp& op) {
  auto bits_ok = [](int b) { return b == 8 || b == 16 || b == 32; };
  if (!bits_ok(op.ifm.bits) || !bits_ok(op.ofm.bits) || (op.ifm2 && !bits_ok(op.ifm2->bits))) {
    throw InvalidArgument("element bits must be 8, 16 or 32");
  }
  if (op.weight_bytes < 0 || op.scale_bytes < 0 || op.lut_bytes < 0 || op.dma_bytes < 0) {
    throw InvalidArgument("weight_bytes, scale_bytes, lut_bytes and dma_bytes must be >= 0");
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

CostRecord estimate(const NpuOp& op, const ArchConfig& arch, BlockConfigCache& cache) {
  CostRecord r;
  auto read = [&r](MemoryArea m, double b) { r.read_bytes[int(m)] += b; };
  auto write = [&r](MemoryArea m, double b) { r.write_bytes[int(m)] += b; };
  std::array<double, kMemoryAreaCount> scaled{};

  if (op.type == NpuOpType::Dma) {
    if (op.ifm.memory != op.ofm.memory) {
      r.dma_cycles = int64_t(mem2mem_cycles(arch, op.ifm.memory, op.ofm.memory, double(op.dma_bytes)));
      read(op.ifm.memory, double(op.dma_bytes));
      write(op.ofm.memory, double(op.dma_bytes));
    }
    r.npu_cycles = r.dma_cycles;
    r.total_cycles = double(r.npu_cycles);
    return r;
  }
  validate(op);
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
  double op_cycles = 0;
  if (bt == NpuBlockType::ElementWise) {
    op_cycles = std::ceil(output_cycles_per_element(op, arch, cfg) *
                          double(storage_rounded(ofm, op.ofm.format).elements()));
  } else {
    const int64_t k = op.kernel.elements_wh();
    r.macs = (bt == NpuBlockType::ConvolutionDepthWise || bt == NpuBlockType::Pooling) ? k * ofm.elements()
                                                                                       : k * ifm.c * ofm.elements();
    op_cycles = conv_cycles(op, arch, cfg);
  }

  // Element accesses.
  const Shape4 ifm_block = min4(ifm, cfg.ifm_block);
  const Shape4 ofm_block = min4(ofm, cfg.ofm_block);
  double ifm_read = 0, ifm2_read = 0, weight_read = 0;
  if (bt != NpuBlockType::ElementWise) {
    const bool equal_depth = bt == NpuBlockType::ConvolutionDepthWise || bt == NpuBlockType::Pooling;
    const int64_t blocks_d = equal_depth ? 1 : div_round_up(ofm.c, ofm_block.c);
    const int64_t block_count = int64_t(div_round_up(ofm.n, ofm_block.n)) * div_round_up(ofm.h, ofm_block.h) *
                                div_round_up(ofm.w, ofm_block.w) * blocks_d;
    const int64_t block_depth = equal_depth ? ifm.c : ofm_block.c;
    const int lim = bt == NpuBlockType::VectorProduct ? 1 : a.sub_kernel_max.height;
    const int64_t sub_kernels = int64_t(div_round_up(op.kernel.width, lim)) * div_round_up(op.kernel.height, lim);
    const Shape4 rb = storage_rounded(ifm_block, op.ifm.format);
    const int64_t ifm_fetch = rb.elements_wh() * storage_rounded(ifm, op.ifm.format).c;
    const int64_t kernel_read = equal_depth ? op.kernel.elements_wh() : int64_t(op.kernel.elements_wh()) * ifm.c;
    ifm_read = double(ifm_fetch * sub_kernels * block_count);
    if (bt != NpuBlockType::Pooling && op.weight_bytes > 0) {
      // Weights are refetched per OFM block; scale by the encoder's compression ratio.
      const double raw = bt == NpuBlockType::ConvolutionDepthWise ? double(op.kernel.elements_wh()) * ofm.c
                                                                  : double(kernel_read) * ofm.c;
      weight_read = double(kernel_read * block_depth * block_count) * (double(op.weight_bytes) / raw);
    }
  } else {
    const double out = double(storage_rounded(ofm, op.ifm.format).elements());
    if (ifm.elements() == 1) {
      if (op.ifm.bits > 8) ifm_read = double(storage_rounded(ifm, op.ifm.format).elements());
      if (op.ifm2) ifm2_read = out;
    } else {
      ifm_read = out;
      if (op.ifm2) {
        if (op.ifm2->shape.elements() > 1) ifm2_read = out;
        else if (op.ifm2->bits > 8) ifm2_read = double(storage_rounded(op.ifm2->shape, op.ifm.format).elements());
      }
    }
  }
  const double ofm_write = double(storage_rounded(ofm, op.ofm.format).elements());

  // Bytes and burst-scaled bytes per memory.
  double bytes = ofm_write * op.ofm.bits / 8;
  write(op.ofm.memory, bytes);
  scaled[int(op.ofm.memory)] += burst_scaled(arch, false, op.ofm.memory, op.ofm.format, op.ofm.bits, cfg.ofm_block,
                                             ofm, bytes);
  bytes = ifm_read * op.ifm.bits / 8;
  read(op.ifm.memory, bytes);
  scaled[int(op.ifm.memory)] += burst_scaled(arch, true, op.ifm.memory, op.ifm.format, op.ifm.bits, cfg.ifm_block,
                                             ifm, bytes);
  if (op.ifm2) {
    bytes = ifm2_read * op.ifm2->bits / 8;
    read(op.ifm2->memory, bytes);
    scaled[int(op.ifm2->memory)] += burst_scaled(arch, true, op.ifm2->memory, op.ifm2->format, op.ifm2->bits,
                                                 cfg.ifm_block, op.ifm2->shape, bytes);
  }
  const bool buffered = op.weight_buffer_memory && *op.weight_buffer_memory != op.weight_memory;
  const MemoryArea cmem = const_memory(op);
  const double scale_read = bt == NpuBlockType::Pooling ? 0.0 : double(op.scale_bytes);
  read(cmem, weight_read + scale_read);
  // Buffered weights are read from the buffer in bursts the DMA already paid for.
  if (!buffered) scaled[int(cmem)] += weight_read + scale_read;

  // DMA: weights into their buffer (not hidden: there is no preceding op here to overlap with),
  // and the LUT into SHRAM.
  double dma = 0;
  if (buffered) {
    const double w = double(op.weight_bytes + op.scale_bytes);
    dma += mem2mem_cycles(arch, op.weight_memory, *op.weight_buffer_memory, w);
    read(op.weight_memory, w);
    write(*op.weight_buffer_memory, w);
  }
  const MemoryArea fast = arch.region_memory(Region::FastCache);
  if (op.activation == Activation::Lut && op.lut_bytes > 0 && op.lut_memory != fast) {
    dma += mem2mem_cycles(arch, op.lut_memory, fast, double(op.lut_bytes));
    read(op.lut_memory, double(op.lut_bytes));
  }
  r.dma_cycles = int64_t(dma);
  r.npu_cycles = int64_t(op_cycles) + int64_t(dma);

  r.total_cycles = double(r.npu_cycles);
  for (int m = 0; m < kMemoryAreaCount; ++m) {
    r.access_cycles[m] = scaled[m] / arch.bandwidth(MemoryArea(m));
    r.total_cycles = std::max(r.total_cycles, r.access_cycles[m]);
  }
  return r;
}

CostRecord estimate(const NpuOp& op, const ArchConfig& arch) {
  thread_local BlockConfigCache cache;
  return estimate(op, arch, cache);
}

}  // namespace cascader
