// The cycle estimator of Ethos-U binaries: decoded command-stream operations are turned into
// the cycle model's NpuOp (perf/npu_op.hpp) and costed by the shared estimate() -- there is no
// second cost model here. What the binary fixes is taken from it, never re-chosen: the block
// config, the weight and scale stream lengths, and the DMAs that fill weight buffers and load
// LUTs (each DMA is folded into the operation that first consumes its destination; a DMA that
// no operation consumes, e.g. a feature-map copy, is costed as a Dma op of its own).
//
// The figures are Vela's, so that Vela's output and ours compare on one yardstick: operations
// Vela costs once are costed once (the depth slices of a weight-buffered convolution, the runs
// of 1x1 pieces its TRANSPOSE lowering emits, the stripes of a cascaded convolution, the MUL
// and REDUCE_SUM per column of its matrix product), and DMAs follow Vela's slack rule on a
// timeline (a transfer runs under the operation before its consumer, one transfer at a time).
// Operations that share a weight stream but depend on each other's output (the time steps of
// a recurrent network) are not stripes: each is costed once, as Vela does.
//
// Regions map to memories as Vela's npu_serialisation numbers them: 0 the constants (flash)
// tensor, 1 the scratch arena, 2 scratch_fast, 3 and up IO (inside the arena); the target's
// memory mode then places each region on a memory.
//
// Complexity: O(operations x pending DMAs), plus one block-config check per operation.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "cascader/arch/arch_config.hpp"
#include "cascader/perf/cycle_model.hpp"
#include "cascader/sim/command_stream.hpp"

namespace cascader::sim {

struct OperationEstimate {
  size_t operation = 0;          // index into CommandStream::operations
  // Further compute operations costed in this row: the rest of a run of identical 1x1 pieces
  // (Vela's lowering of TRANSPOSE and the like), or the other depth slices of a convolution
  // whose weights Vela buffers slice by slice. Vela costs each of these as one operation.
  std::vector<size_t> merged;
  NpuOp op;                      // what the cycle model was given
  // A matrix product as Vela runs it (perf/cycle_model.hpp estimate_matmul; 0: not one): `op`
  // is its first MUL, `matmul_sum` its first REDUCE_SUM, and `merged` the rest of its columns.
  int matmul_columns = 0;
  NpuOp matmul_sum;
  CostRecord cost;
  std::vector<size_t> dmas;      // indices of the DMA operations folded into this one
  bool block_config_from_binary = true;  // false: the binary's block does not fit our SHRAM model
};

struct StreamEstimate {
  std::vector<OperationEstimate> operations;  // in stream order; folded DMAs have no row
  double total_cycles = 0;
  std::array<double, kMemoryAreaCount> read_bytes{};
  std::array<double, kMemoryAreaCount> write_bytes{};
};

// The memory a command-stream region lives in on `arch` (region 0x103, the SHRAM, has none:
// throws BinaryError).
MemoryArea region_memory(int region, const ArchConfig& arch);

// The cycle model's description of one decoded compute operation (shapes, formats, kernel,
// activation, weight stream sizes), without the DMA-related fields. Also what the command
// encoder derives the operation's SHRAM layout from, so both agree on the block query.
NpuOp npu_op_of(const NpuOperation& o, const ArchConfig& arch);

// Estimates one decoded command stream. Throws BinaryError for operations the cycle model
// cannot describe (e.g. an unsupported element size), naming the word offset.
// `merge_as_vela`: costed as Vela's own figures cost an operator it runs in several
// operations, once over the whole OFM: the stripes of a cascaded operation (one weight stream
// read in place), a run of identical 1x1 pieces (a transpose, whose one-channel pieces are
// costed with the width they walk as the depth) and a matrix product; and elementwise
// operations with a one-element first operand as Vela reads them (NpuOp::scalar_first). False
// costs each operation as the NPU runs it (its own blocks, weight fetches and overheads).
StreamEstimate estimate_stream(const CommandStream& stream, const ArchConfig& arch, BlockConfigCache& cache,
                               bool merge_as_vela = true);

}  // namespace cascader::sim
