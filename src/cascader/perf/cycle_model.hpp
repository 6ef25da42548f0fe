// The NPU cycle model: one estimate per NPU op, used by the planner, the compile summary and
// the command-stream estimator alike.
//
// Structure (the decomposition of Vela 5.2's Ethos-U55/U65 estimator, so figures compare 1:1):
//  - MAC ops: per OFM block, DPU cycles (micro-blocks x kernel steps x IFM depth slices, with
//    sub-kernel splitting and the small-block accumulator delay) against output-unit cycles
//    (elements x max(output, activation) cycles per element, at least the scale/bias fetch).
//    Both are at least a quarter of the block's command-issue work. The slower stage is paid
//    per block, over a fractional block count in whole micro-blocks; the faster one, the first
//    IFM block's fetch and the last OFM block's write are paid once.
//  - Elementwise: output-unit cycles per element, or command issue when blocks are small.
//  - Memory: bytes per memory (IFM refetch per OFM block and sub-kernel, the encoded weight
//    and scale stream once per OFM block position, the OFM once), inflated by burst efficiency
//    for the format, over the memory's bandwidth.
//  - DMA: weight buffering, LUT loads and Dma ops, memory to memory, added to the NPU cycles.
//  - total = max(npu cycles, access cycles of each memory), as Vela's "Op Cycles".
//
// Complexity: O(sub-kernels) per estimate, plus one block-config search per distinct op shape
// (see block_config.hpp), cached by BlockConfigCache.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cascader/arch/arch_config.hpp"
#include "cascader/perf/npu_op.hpp"

namespace cascader {

struct CostRecord {
  int64_t npu_cycles = 0;    // compute, plus DMA the NPU has to wait for
  int64_t dma_cycles = 0;    // weight / LUT / Dma-op transfers
  std::array<double, kMemoryAreaCount> access_cycles{};  // per MemoryArea, burst-efficiency scaled
  std::array<double, kMemoryAreaCount> read_bytes{};     // unscaled bytes per memory
  std::array<double, kMemoryAreaCount> write_bytes{};
  int64_t macs = 0;
  double total_cycles = 0;   // max(npu_cycles, access_cycles...)
  // The cycles that hide the next op's weight or LUT DMA (its NpuOp::dma_slack_cycles), as
  // Vela's scheduler counts them: this op's (last depth slice's) compute with its feature maps
  // in their home memory.
  int64_t buffering_slack_cycles = 0;
  BlockConfig block_config;  // the one used
};

// Caches block-config choices by op shape. Thread-safe: the workers of one planning share one
// (each choice is a search of thousands of blocks; a cache per worker made each choose again
// what the others had).
class BlockConfigCache {
 public:
  BlockConfigCache();
  ~BlockConfigCache();
  BlockConfigCache(BlockConfigCache&&) noexcept;
  BlockConfigCache& operator=(BlockConfigCache&&) noexcept;
  const BlockConfig& get(const AcceleratorConfig& arch, const BlockQuery& q);
  // The choice `choose` makes, made once per `key` (a target with a search of its own: the U85).
  // The key must hold everything the choice depends on, target included: a cached choice is
  // reused for any operation of the same key, whatever was compiled before it.
  const BlockConfig& get(const std::string& key, const std::function<BlockConfig()>& choose);
  size_t size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The block-config query an op implies.
BlockQuery block_query(const NpuOp& op);

// Estimates one op. Uses op.block_config if set, otherwise the cache's choice. Throws
// InvalidArgument for inconsistent ops (shapes, bits, a block config that does not fit).
CostRecord estimate(const NpuOp& op, const ArchConfig& arch, BlockConfigCache& cache);
// Convenience form with a private, thread-local cache.
CostRecord estimate(const NpuOp& op, const ArchConfig& arch);

// The block config under which `estimate` costs `op` least: every config the hardware accepts
// for the op's block query (enumerate_block_configs: its traversal and any fixed block depth
// hold), against the op's own block config if set, else the shape-only choice (Vela's
// heuristic, choose_block_config), which is kept unless another is strictly faster. The
// heuristic ranks blocks by IFM and weight fetch per OFM element; the cycle model also counts
// the micro-blocks an edge block wastes, the accumulator latency of small blocks and where
// each map lives. A block is taken only where it leaves the next op's weight DMA (this op's
// compute with its maps in their home memory, less the time it reads its own weights) short by
// no more than it saves, and is no slower with the maps in their home memory. The Ethos-U85
// has a search of its own: its op's choice is returned.
// Complexity: one estimate per valid config (see enumerate_block_configs).
BlockConfig fastest_block_config(const NpuOp& op, const ArchConfig& arch, BlockConfigCache& cache);

// Vela's accounting of a matrix product it runs column by column (its MatMul, Vela 5.2): for
// each of `columns` columns of the second operand, an elementwise MUL of the first operand by
// that column into 32-bit products (`mul`: IFM the first operand, IFM2 the column broadcast
// along W, OFM the products) and a REDUCE_SUM of the products over depth (`sum`). Vela costs
// the product as one operation:
//  - compute: `columns` times the MUL's and the REDUCE_SUM's compute, the MUL as if it read
//    the column at the products' full shape, the REDUCE_SUM as if the products had the first
//    operand's element type and format;
//  - memory: the first operand read once per column, the second operand once, the whole OFM
//    written once (each burst-scaled with the REDUCE_SUM's blocks), and the products written
//    and read once per column, counted as one byte per product and not burst-scaled;
//  - total: the larger of the two, once (the per-command figures, each the larger of its own
//    compute and memory, overcount a memory-bound MUL: BATCH_MATMUL 8x16 by 16x12 on U55-256,
//    3,356 -> 2,612 cycles, Vela 2,612).
// `mul` and `sum` may carry the binary's block configs (kept where they fit the queries above).
CostRecord estimate_matmul(const NpuOp& mul, const NpuOp& sum, int columns, const ArchConfig& arch,
                           BlockConfigCache& cache);

// Cycles per byte the access term charges for traffic to memory `m` (bursts aside): what a
// byte of feature map costs where it lives. The memory planner ranks evictions by it.
double access_cycles_per_byte(const ArchConfig& arch, MemoryArea m);

}  // namespace cascader
