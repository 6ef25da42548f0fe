#include "cascader/arch/ethos_u85/performance.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "cascader/arch/ethos_u85/block_search.hpp"
#include "cascader/common/error.hpp"

namespace cascader::ethos_u85 {

namespace {

// Per array size (Vela 5.2's U85 tables): output-unit cycles per element (8/16/32-bit OFM,
// 64-bit OFM, 32-bit into the chaining buffer or a 32-bit binary elementwise to 8/16 bits,
// 32-bit binary elementwise to 32 bits), activation cycles (normal, half throughput), resize
// cycles (low/high ratio; 8/16-bit), and the read buffers of the AXI read channels (Mem2Mem,
// IFM stream, weights, fast weights, IFM, scales).
struct PerfInfo {
  int macs;
  double output[6];
  double activation[2];
  double resize_low[2], resize_high[2];
  int read_buffers[6];
};

constexpr PerfInfo kPerf[] = {
    {128, {0.5, 0.5, 0.5, 1.0, 1.0, 1.0}, {0.5, 1.0}, {0.5, 1.0}, {0.5, 1.0}, {64, 64, 128, 128, 104, 16}},
    {256, {0.25, 0.25, 0.25, 0.5, 0.5, 0.5}, {0.25, 0.5}, {0.25, 0.5}, {0.25, 0.5}, {104, 104, 128, 128, 128, 16}},
    {512, {0.125, 0.125, 0.25, 0.5, 0.25, 0.25}, {0.125, 0.25}, {0.125, 0.25}, {0.125, 0.25}, {128, 128, 256, 256, 128, 16}},
    {1024, {0.0625, 0.125, 0.25, 0.5, 0.125, 0.25}, {0.0625, 0.125}, {0.125, 0.125}, {0.0625, 0.125}, {256, 256, 416, 208, 256, 16}},
    {2048, {0.03125, 0.0625, 0.125, 0.25, 0.0625, 0.125}, {0.03125, 0.0625}, {0.0625, 0.0625}, {0.03125, 0.0625}, {256, 256, 512, 256, 256, 16}},
};

const PerfInfo& perf_info(const AcceleratorConfig& a) {
  for (const PerfInfo& p : kPerf) {
    if (p.macs == a.macs_per_cycle) return p;
  }
  throw InvalidArgument(a.name + " is not an Ethos-U85 size");
}

// The AXI channels an access goes through.
enum class Channel { Mem2Mem = 0, IfmStream, Weight, FastWeight, Ifm, Scale, Write };

// A channel's bandwidth: bounded by its outstanding transactions (and, for reads, its read
// buffers) over the memory's latency, and by the memory's own bandwidth.
double channel_bandwidth(const ArchConfig& arch, MemoryArea m, Channel c) {
  const MemorySpec& s = arch.system().memory(m);
  const int burst_words = std::max(s.burst_length / 16, 1);
  const bool write = c == Channel::Write;
  const int outstanding = write ? s.max_writes : s.max_reads;
  const int latency = write ? s.write_latency : s.read_latency;
  const double rb_limit = write ? std::numeric_limits<double>::max()
                                : double(perf_info(arch.accelerator()).read_buffers[int(c)]) / burst_words;
  const double util = std::min(rb_limit, double(float(outstanding * s.ports_used * 0.8)));
  const double by_latency = latency > 0 ? double(float(s.burst_length * util / latency * 0.8))
                                        : std::numeric_limits<double>::max();
  return double(float(std::min(arch.bandwidth(m), by_latency)));
}

int round_up(int v, int m) { return (v + m - 1) / m * m; }
int div_up(int v, int m) { return (v + m - 1) / m; }
int64_t div_up64(int64_t v, int64_t m) { return (v + m - 1) / m; }

Shape4 min_shape(const Shape4& s, const BlockShape& b) { return {1, std::min(s.h, b.height), std::min(s.w, b.width), std::min(s.c, b.depth)}; }
BlockShape as_block(const Shape4& s) { return {s.h, s.w, s.c}; }

// NHCWB16 storage holds whole 16-channel bricks.
Shape4 storage_rounded(const Shape4& s, TensorFormat f) {
  return f == TensorFormat::NHCWB16 ? Shape4{s.n, s.h, s.w, round_up(s.c, 16)} : s;
}

// Bytes moved for `elements`, inflated by how far the access's burst falls short of the
// memory's burst length.
int64_t memory_transfer(const ArchConfig& arch, bool read, MemoryArea m, TensorFormat format, int bits,
                        const BlockShape& block, const Shape4& shape, int64_t elements) {
  int burst = 8;  // bits
  const int64_t block_wc = int64_t(block.width) * block.depth;
  if (format == TensorFormat::NHCWB16) {
    const int z_stride = shape.w * bits * 16 / 8;
    burst = z_stride == block.depth ? int(bits * block_wc) : 16 * bits * block.width;
  } else {
    const int x_stride = shape.c * bits / 8;
    if (read) {
      burst = x_stride == block.depth ? int(bits * block_wc) : bits * block.depth;
    } else if (block.depth <= 16 && x_stride == block.depth) {
      burst = int(bits * block_wc);
    } else {
      burst = std::min(std::min(64 * 8, 16 * bits), block.depth * bits);
    }
  }
  const int64_t bytes = elements * bits / 8;
  const int max_burst = arch.burst_length(m);
  const int burst_bytes = std::min(max_burst, burst / 8);
  if (burst_bytes <= 0) throw InvalidArgument("a zero burst length");
  return bytes * max_burst / burst_bytes;
}

int64_t block_read_cycles(const ArchConfig& arch, const FeatureMap& fm, const BlockShape& ifm_block) {
  const int64_t elements = min_shape(fm.shape, ifm_block).elements();
  const int64_t tx = memory_transfer(arch, true, fm.memory, fm.format, fm.bits, ifm_block, fm.shape, elements);
  return arch.latency(fm.memory, Direction::Read) + int64_t(float(tx) / float(arch.bandwidth(fm.memory)));
}

// The first IFM block's fetch (the slower input of two).
int64_t min_ifm_cycles(const NpuOp& op, const ArchConfig& arch, const BlockShape& ifm_block) {
  int64_t c = block_read_cycles(arch, op.ifm, ifm_block);
  if (op.ifm2 && op.ifm2->shape.elements() > 0) c = std::max(c, block_read_cycles(arch, *op.ifm2, ifm_block));
  return c;
}

// The last OFM block's write.
int64_t min_ofm_cycles(const NpuOp& op, const ArchConfig& arch, const BlockShape& ofm_block) {
  const int64_t elements = min_shape(op.ofm.shape, ofm_block).elements();
  const int64_t tx = memory_transfer(arch, false, op.ofm.memory, op.ofm.format, op.ofm.bits, ofm_block, op.ofm.shape,
                                     elements);
  return arch.latency(op.ofm.memory, Direction::Write) + int64_t(float(tx) / float(arch.bandwidth(op.ofm.memory)));
}

bool binary_elementwise(NpuOpType t) {
  return t == NpuOpType::Add || t == NpuOpType::Sub || t == NpuOpType::Mul || t == NpuOpType::Minimum ||
         t == NpuOpType::Maximum;
}

double output_cycles(const PerfInfo& p, const AcceleratorConfig& a, NpuOpType type, bool resize, int ifm_bits,
                     int ofm_bits, bool writes_chain, const Shape4& ifm, const Shape4& ofm) {
  if (resize) {
    const int i = ifm_bits == 8 ? 0 : 1;
    const int rx = (ofm.w + ifm.w / 2) / ifm.w, ry = (ofm.h + ifm.h / 2) / ifm.h;
    return std::min(rx, ry) >= a.macs_per_cycle / 512 ? p.resize_high[i] : p.resize_low[i];
  }
  int index = 0;
  if (writes_chain && (ofm_bits == 32 || ifm_bits == 32)) index = 4;
  else if (ofm_bits == 64) index = 3;
  else if (binary_elementwise(type) && ifm_bits == 32) index = ofm_bits == 32 ? 5 : 4;
  else if (ofm_bits == 32) index = 2;
  else if (ofm_bits == 16) index = 1;
  return p.output[index];
}

// Output-unit cycles per element of the operation and its chain: each operation's output
// cycles, an activation in the same pass costing at most as much as its operation's.
double ao_cycles_per_element(const NpuOp& op, const AcceleratorConfig& a) {
  const PerfInfo& p = perf_info(a);
  const U85Op& u = *op.u85;
  double total = 0;
  double current = output_cycles(p, a, op.type, u.resize, op.ifm.bits, u.own_ofm_bits, u.ofm_chained, op.ifm.shape,
                                 op.ofm.shape);
  if (op.activation == Activation::Lut) current = std::max(current, p.activation[0]);
  if (u.ofm_half_throughput && u.chain.empty()) current = std::max(current, p.activation[1]);
  for (const U85Chained& c : u.chain) {
    total += current;
    current = output_cycles(p, a, c.type, false, c.ifm_bits, c.ofm_bits, c.writes_chain, op.ofm.shape, op.ofm.shape);
    if (c.lut) current = std::max(current, p.activation[0]);
  }
  if (u.ofm_half_throughput && !u.chain.empty()) current = std::max(current, p.activation[1]);
  return total + current;
}

bool is_mac_op(NpuOpType t) { return !binary_elementwise(t) && t != NpuOpType::Dma; }

// MAC cycles for one OFM block, over its sub-kernels and IFM blocks.
double mac_cycles_per_block(const NpuOp& op, const AcceleratorConfig& a, const BlockShape& ofm_block_cfg,
                            const BlockShape& ifm_block_cfg) {
  const U85Op& u = *op.u85;
  const Shape4 ifm_block = min_shape(op.ifm.shape, ifm_block_cfg);
  const Shape4 ofm_block = min_shape(op.ofm.shape, ofm_block_cfg);
  const BlockShape& ub = u.ofm_ublock;
  const int64_t ub_h = div_up(ofm_block.h, ub.height), ub_w = div_up(ofm_block.w, ub.width), ub_c = div_up(ofm_block.c, ub.depth);
  const int64_t ub_wh = ub_h * ub_w;
  const int bits = op.ifm.bits;
  const int cycles_wb = 32 * ub.depth / (8 * a.weight_decoders);
  const bool conv = op.type == NpuOpType::Conv2D || op.type == NpuOpType::FullyConnected;
  const bool part_kernel = conv && op.traversal == Traversal::PartKernelFirst;
  const bool pooling = op.type == NpuOpType::MaxPool || op.type == NpuOpType::AvgPool;
  const bool sparse = u.sparse_weights;
  const int delay = (u.acc48 && a.macs_per_cycle <= 128) ? 3 : 2;
  int64_t total = 0;
  for (int x = 0; x < op.kernel.width; x += 8) {
    for (int y = 0; y < op.kernel.height; y += 8) {
      const int elements = std::min(op.kernel.height - y, 8) * std::min(op.kernel.width - x, 8);
      int64_t steps = 0, cycles = 0;
      if (pooling) {
        steps = 1;
        cycles = int64_t(std::max(4, elements)) * ub_wh * ub_c * (bits / 2);
      } else if (op.type == NpuOpType::DepthwiseConv2D) {
        steps = div_up(elements, 4);
        cycles = std::max<int64_t>(cycles_wb, 4 * ub_wh * (bits / 8)) * steps * ub_c;
      } else if ((conv && !part_kernel) || op.type == NpuOpType::ReduceSum) {
        steps = elements;
        cycles = std::max<int64_t>(cycles_wb, ifm_block.c / 8 * ub_wh) * steps * ub_c * (bits / 8);
        if (sparse) cycles /= 2;
      } else {
        steps = div_up(elements, bits == 16 ? 2 : 4);
        cycles = std::max<int64_t>(cycles_wb, 4 * ub_wh) * steps * ub_c * div_up(ifm_block.c, 8);
        if (sparse) cycles /= 2;
      }
      int64_t delay_cycles = 0;
      if (ub_wh == 1) {
        if (ub_c == 1) delay_cycles = delay * steps;
        else if (steps > 1) delay_cycles = delay * (steps - 1) * ub_c;
      }
      if (part_kernel) delay_cycles *= div_up(ifm_block.c, 8);
      total += cycles + delay_cycles;
    }
  }
  if (conv || op.type == NpuOpType::ReduceSum) total *= div_up(op.ifm.shape.c, ifm_block.c);
  return double(total);
}

// Which ends of an operation a costing includes: a whole operation both (the first IFM block's
// fetch, the last block's output and OFM write); a depth slice of a sliced one only its own.
struct Ends {
  bool first = true, last = true;
};

int64_t mac_op_cycles(const NpuOp& op, const ArchConfig& arch, const BlockShape& ofm_block_cfg,
                      const BlockShape& ifm_block_cfg, double ao_per_element, const MemoryArea* const_memory,
                      Ends ends = {}) {
  const AcceleratorConfig& a = arch.accelerator();
  const BlockShape& ub = op.u85->ofm_ublock;
  const Shape4 ofm_block = min_shape(op.ofm.shape, ofm_block_cfg);
  const int64_t ub_in_block = int64_t(div_up(ofm_block.h, ub.height)) * div_up(ofm_block.w, ub.width) * div_up(ofm_block.c, ub.depth);
  const int64_t ub_total = int64_t(div_up(op.ofm.shape.h, ub.height)) * div_up(op.ofm.shape.w, ub.width) * div_up(op.ofm.shape.c, ub.depth);
  const double blocks = double(ub_total) / double(ub_in_block);
  const double ao_compute = std::ceil(ao_per_element * double(ofm_block.elements()));
  double bias = 0;
  if ((op.type == NpuOpType::Conv2D || op.type == NpuOpType::FullyConnected || op.type == NpuOpType::DepthwiseConv2D) &&
      const_memory != nullptr && op.scale_bytes > 0) {
    bias = 10.0 * ofm_block.c * arch.latency(*const_memory, Direction::Read) / 256;
  }
  const double ao = std::max(ao_compute, bias);
  const double mac = mac_cycles_per_block(op, a, ofm_block_cfg, ifm_block_cfg);
  const int64_t ifm_cycles = min_ifm_cycles(op, arch, ifm_block_cfg);
  const int64_t ofm_cycles = min_ofm_cycles(op, arch, ofm_block_cfg);
  const int64_t min_mem = blocks > 1 ? std::abs(ofm_cycles - ifm_cycles) : 0;
  const double cmd = (double(min_mem) + mac + ao) / 4;
  const double mac_b = std::max(mac, cmd), ao_b = std::max(ao, cmd);
  int64_t total = 0;
  if (mac_b > ao_b) {
    total = int64_t(mac_b * blocks);
    if (ends.last) total += int64_t(ao_b);
  } else {
    total = int64_t(ao_b * blocks + mac_b);
  }
  return total + (ends.last ? ofm_cycles : 0) + (ends.first ? ifm_cycles : 0);
}

int64_t elementwise_op_cycles(const NpuOp& op, const ArchConfig& arch, const BlockShape& ofm_block,
                              const BlockShape& ifm_block, double ao_per_element) {
  const Shape4 ofm = op.ofm.format == TensorFormat::NHCWB16 ? storage_rounded(op.ofm.shape, TensorFormat::NHCWB16)
                                                             : op.ofm.shape;
  const int64_t elements = ofm.elements();
  const double ao = std::ceil(ao_per_element * double(elements));
  const double block = double(std::max(min_ofm_cycles(op, arch, ofm_block), min_ifm_cycles(op, arch, ifm_block)));
  const double cmd_per_element = (block / double(ofm_block.elements()) + ao_per_element) / 4.0;
  return int64_t(std::max(std::ceil(cmd_per_element * double(elements)), ao));
}

// Cycles of a DMA between two memories (the LUT RAM: one byte per cycle, no latency).
int64_t mem2mem(const ArchConfig& arch, MemoryArea from, std::optional<MemoryArea> to, int64_t bytes) {
  const int64_t read = int64_t(float(bytes) / float(channel_bandwidth(arch, from, Channel::Mem2Mem))) +
                       arch.latency(from, Direction::Read);
  const int64_t write = to ? int64_t(float(bytes) / float(channel_bandwidth(arch, *to, Channel::Write))) +
                                 arch.latency(*to, Direction::Write)
                           : bytes;
  return std::max(read, write);
}

}  // namespace

BlockShape ifm_block(const AcceleratorConfig& a, const BlockShape& ofm_block, const BlockShape& ofm_ublock,
                     const Kernel& kernel, int ifm_bits, int ifm_block_depth, int upscale) {
  // The IFM allocation unit: by micro-block shape and the IFM block's depth in bits.
  const int depth = ifm_block_depth ? ifm_block_depth : ofm_block.depth;
  const int depth_bits = depth * ifm_bits;
  const int index = depth_bits > 256 ? 2 : depth_bits > 128 ? 1 : 0;
  BlockShape au{1, 1, 1};
  const bool wide_ublock = ofm_ublock.height == 1 && ofm_ublock.width == 4;  // 1x4 micro-blocks
  switch (a.macs_per_cycle) {
    case 128: au = std::array<BlockShape, 3>{BlockShape{1, 2, 1}, BlockShape{1, 1, 2}, BlockShape{1, 1, 2}}[index]; break;
    case 256:
    case 512:
      au = wide_ublock ? std::array<BlockShape, 3>{BlockShape{1, 4, 1}, BlockShape{1, 2, 2}, BlockShape{1, 1, 4}}[index]
                       : std::array<BlockShape, 3>{BlockShape{2, 2, 1}, BlockShape{1, 2, 2}, BlockShape{1, 1, 4}}[index];
      break;
    case 1024:
      au = wide_ublock ? std::array<BlockShape, 3>{BlockShape{2, 4, 1}, BlockShape{1, 4, 2}, BlockShape{1, 2, 4}}[index]
                       : std::array<BlockShape, 3>{BlockShape{2, 4, 1}, BlockShape{2, 2, 2}, BlockShape{1, 2, 4}}[index];
      break;
    default:
      au = wide_ublock ? std::array<BlockShape, 3>{BlockShape{2, 4, 1}, BlockShape{1, 4, 2}, BlockShape{1, 2, 4}}[index]
                       : std::array<BlockShape, 3>{BlockShape{4, 4, 1}, BlockShape{2, 4, 2}, BlockShape{2, 2, 4}}[index];
      break;
  }
  au.depth = au.depth * 128 / ifm_bits;
  const auto input = [&](int out, int stride, int dilated, int limit) {
    const int border = std::min(dilated, limit);
    return int(std::ceil(float((out - 1) * stride + border) / float(upscale)));
  };
  const int h = round_up(input(ofm_block.height, kernel.stride_y, kernel.area_height(), 8), au.height);
  const int w = round_up(input(ofm_block.width, kernel.stride_x, kernel.area_width(), 8), au.width);
  return {h, w, round_up(depth, au.depth)};
}

CostRecord estimate(const NpuOp& op, const ArchConfig& arch) {
  if (!op.u85 || !op.block_config) {
    throw InvalidArgument(arch.accelerator().name + ": the Ethos-U85 cycle model costs operations decoded from a "
                          "command stream (with their micro-block and block config); op estimates and plans need an "
                          "Ethos-U55/U65 accelerator");
  }
  const AcceleratorConfig& a = arch.accelerator();
  const U85Op& u = *op.u85;
  CostRecord r;
  r.block_config = *op.block_config;
  const BlockShape ofm_block = op.block_config->ofm_block;
  const BlockShape ifm_blk = u.ifm_block;
  const bool elementwise = binary_elementwise(op.type) || u.resize;
  const double ao = ao_cycles_per_element(op, a);
  const bool buffered = op.weight_buffer_memory && *op.weight_buffer_memory != op.weight_memory;
  const MemoryArea const_memory = buffered ? *op.weight_buffer_memory : op.weight_memory;
  const bool has_weights = op.weight_bytes > 0 || op.scale_bytes > 0;

  int64_t op_cycles = 0;
  if (elementwise) {
    op_cycles = elementwise_op_cycles(op, arch, ofm_block, ifm_blk, ao);
  } else {
    op_cycles = mac_op_cycles(op, arch, ofm_block, ifm_blk, ao, has_weights ? &const_memory : nullptr);
    const bool per_pixel = op.type == NpuOpType::DepthwiseConv2D || op.type == NpuOpType::MaxPool ||
                           op.type == NpuOpType::AvgPool;
    r.macs = int64_t(op.kernel.elements_wh()) * op.ofm.shape.elements() * (per_pixel ? 1 : op.ifm.shape.c);
    if (u.sparse_weights) r.macs /= 2;
  }

  // Elements accessed, then bytes per memory and channel.
  std::map<std::pair<MemoryArea, Channel>, int64_t> bytes;  // burst-scaled
  auto access = [&](MemoryArea m, Channel c, int64_t b, bool read) {
    bytes[{m, c}] += b;
    (read ? r.read_bytes : r.write_bytes)[int(m)] += double(b);
  };
  const Channel ifm_channel = elementwise ? Channel::IfmStream : Channel::Ifm;
  if (!elementwise) {
    const Shape4 ifm_b = min_shape(op.ifm.shape, ifm_blk);
    const Shape4 ofm_b = min_shape(op.ofm.shape, ofm_block);
    const bool equal_depth = op.type == NpuOpType::DepthwiseConv2D || op.type == NpuOpType::MaxPool ||
                             op.type == NpuOpType::AvgPool;
    const int64_t blocks_hw = div_up64(op.ofm.shape.h, ofm_b.h) * div_up64(op.ofm.shape.w, ofm_b.w);
    const int64_t blocks = blocks_hw * (equal_depth ? 1 : div_up64(op.ofm.shape.c, ofm_b.c));
    const int64_t sub_kernels = int64_t(div_up(op.kernel.width, 8)) * div_up(op.kernel.height, 8);
    const Shape4 ifm_rounded_block = storage_rounded(ifm_b, op.ifm.format);
    const int64_t fetch = int64_t(ifm_rounded_block.h) * ifm_rounded_block.w * storage_rounded(op.ifm.shape, op.ifm.format).c;
    if (!u.ifm_chained) {
      access(op.ifm.memory, ifm_channel,
             memory_transfer(arch, true, op.ifm.memory, op.ifm.format, op.ifm.bits, ifm_blk, op.ifm.shape,
                             fetch * sub_kernels * blocks),
             true);
    }
    if (has_weights) {
      const Channel wc = u.fast_weights ? Channel::FastWeight : Channel::Weight;
      const int64_t weights = blocks_hw * op.weight_bytes, scales = blocks_hw * op.scale_bytes;
      if (buffered) {
        const int64_t first = op.weight_first_dma_bytes > 0 ? op.weight_first_dma_bytes : op.weight_bytes + op.scale_bytes;
        const int64_t streamed = std::max<int64_t>(op.weight_bytes - first, 0);
        access(op.weight_memory, Channel::Mem2Mem, streamed, true);
        access(const_memory, Channel::Write, streamed, false);
        access(const_memory, wc, weights, true);
      } else {
        access(op.weight_memory, Channel::Weight, weights, true);
      }
      access(op.weight_memory, Channel::Scale, scales, true);
    }
  } else {
    bool scalar_encoded = false;
    auto operand = [&](const FeatureMap& fm, bool chained) {
      const int64_t n = fm.shape.elements();
      if (n > 1 || scalar_encoded) {
        if (!chained) {
          access(fm.memory, ifm_channel,
                 memory_transfer(arch, true, fm.memory, fm.format, fm.bits, ifm_blk, fm.shape,
                                 storage_rounded(fm.shape, fm.format).elements()),
                 true);
        }
      } else {
        scalar_encoded = true;
      }
    };
    operand(op.ifm, u.ifm_chained);
    if (op.ifm2) operand(*op.ifm2, u.ifm2_chained);
  }
  for (const U85Chained& c : u.chain) {  // the later operations' inputs from memory
    if (c.memory_input && c.memory_input->shape.elements() > 1) {
      const FeatureMap& fm = *c.memory_input;
      access(fm.memory, Channel::IfmStream,
             memory_transfer(arch, true, fm.memory, fm.format, fm.bits, ifm_blk, fm.shape,
                             storage_rounded(fm.shape, fm.format).elements()),
             true);
    }
  }
  const bool ofm_in_memory = u.chain.empty() ? !u.ofm_chained : !u.chain.back().writes_chain;
  if (ofm_in_memory) {
    access(op.ofm.memory, Channel::Write,
           memory_transfer(arch, false, op.ofm.memory, op.ofm.format, op.ofm.bits, ofm_block, op.ofm.shape,
                           storage_rounded(op.ofm.shape, op.ofm.format).elements()),
           false);
  }

  // Access cycles per memory: the slower of its total at its bandwidth and its busiest channel.
  std::array<int64_t, kMemoryAreaCount> total{}, busiest{};
  std::map<std::pair<MemoryArea, Channel>, int64_t> channel_cycles;
  for (const auto& [key, b] : bytes) {
    total[int(key.first)] += b;
    channel_cycles[key] += int64_t(double(b) / channel_bandwidth(arch, key.first, key.second));
  }
  for (const auto& [key, c] : channel_cycles) busiest[int(key.first)] = std::max(busiest[int(key.first)], c);

  // Weight buffering and the LUT load: DMAs the previous operation's slack hides. Vela's
  // scheduler plans the buffering on its reference schedule, before it moves feature maps to
  // faster storage: the slack an operation offers is its compute with its maps in their home
  // memory (the arena's: the DRAM in Dedicated_Sram, whose latencies lengthen the first and
  // last blocks), and an operation whose buffered weights come in depth slices offers its last
  // slice's cycles (the time the DMA of the next weights overlaps). As the U55/U65's
  // buffering_slack_cycles (perf/cycle_model.cpp).
  int64_t npu = op_cycles;
  const int64_t slack = std::max<int64_t>(op.dma_slack_cycles, 0);
  {
    NpuOp ref = op;
    const MemoryArea home = arch.region_memory(Region::Arena);
    ref.ifm.memory = ref.ofm.memory = home;
    if (ref.ifm2) ref.ifm2->memory = home;
    Ends ends;
    if (buffered && !elementwise && op.weight_last_slice_depth > 0 && op.weight_last_slice_depth < op.ofm.shape.c) {
      ref.ofm.shape.c = op.weight_last_slice_depth;
      if (op.type != NpuOpType::Conv2D && op.type != NpuOpType::FullyConnected) ref.ifm.shape.c = ref.ofm.shape.c;
      ends = Ends{false, true};
    }
    r.buffering_slack_cycles = elementwise ? elementwise_op_cycles(ref, arch, ofm_block, ifm_blk, ao)
                                           : mac_op_cycles(ref, arch, ofm_block, ifm_blk, ao,
                                                           has_weights ? &const_memory : nullptr, ends);
  }
  int64_t dma = 0;
  if (buffered) {
    const int64_t stream = op.weight_bytes + op.scale_bytes;
    const int64_t first = op.weight_first_dma_bytes > 0 ? std::min(op.weight_first_dma_bytes, stream) : stream;
    const int64_t full = mem2mem(arch, op.weight_memory, const_memory, stream);
    const int64_t first_wait = std::max<int64_t>(mem2mem(arch, op.weight_memory, const_memory, first) - slack, 0);
    npu = std::max(full - slack + r.buffering_slack_cycles, op_cycles + first_wait);
    dma += full;
  }
  if (op.lut_bytes > 0) {
    const int64_t lut = mem2mem(arch, op.lut_memory, std::nullopt, op.lut_bytes);
    dma += lut;
    npu += buffered ? lut : std::max<int64_t>(lut - slack, 0);
    r.read_bytes[int(op.lut_memory)] += double(op.lut_bytes);
  }
  r.dma_cycles = dma;
  r.npu_cycles = npu;
  r.total_cycles = double(npu);
  for (int m = 0; m < kMemoryAreaCount; ++m) {
    if (total[m] == 0) continue;
    r.access_cycles[m] = double(std::max(int64_t(double(total[m]) / arch.bandwidth(MemoryArea(m))), busiest[m]));
    r.total_cycles = std::max(r.total_cycles, r.access_cycles[m]);
  }
  return r;
}

U85Chained chain_link(const NpuOp& next, bool ifm2_chained, bool other_in_memory, bool writes_chain, bool lut) {
  U85Chained link;
  link.type = next.type;
  link.ifm_bits = next.ifm.bits;
  link.ofm_bits = next.ofm.bits;
  link.writes_chain = writes_chain;
  link.lut = lut;
  if (other_in_memory) {
    if (ifm2_chained) {
      link.memory_input = next.ifm;
    } else if (next.ifm2) {
      link.memory_input = next.ifm2;
    }
  }
  return link;
}

void chain_into(NpuOp& first, const NpuOp& next, bool ifm2_chained) {
  if (!first.u85 || !first.block_config) throw InvalidArgument("chain_into: the first operation is not described");
  first.u85->ofm_chained = true;
  if (!first.u85->chain.empty()) first.u85->chain.back().writes_chain = true;  // on to `next`
  first.u85->chain.push_back(chain_link(next, ifm2_chained, true, false, next.activation == Activation::Lut));
  first.ofm = next.ofm;
}

NpuOp chained(const NpuOp& first, const std::vector<NpuOp>& next, const std::vector<bool>& ifm2_chained,
              const ArchConfig& arch) {
  if (next.empty() || next.size() != ifm2_chained.size()) {
    throw InvalidArgument("chained: one ifm2_chained flag per chained operation, at least one");
  }
  BlockConfigCache cache;
  NpuOp chain = with_block_config(first, arch, cache);
  for (size_t i = 0; i < next.size(); ++i) chain_into(chain, next[i], ifm2_chained[i]);
  return chain;
}

}  // namespace cascader::ethos_u85
