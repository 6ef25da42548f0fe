// The Ethos-U85's DMA beyond a 1-D copy: 2-D and 3-D strided transfers and indexed ones, which
// Vela emits for GATHER (indexed source) and SCATTER_ND (indexed destination).
//
// A transfer moves SIZE1 x SIZE0 rows of LEN bytes. Row (j, i) reads SRC + j*SRC_STRIDE1 +
// i*SRC_STRIDE0 and writes DST + j*DST_STRIDE1 + i*DST_STRIDE0, except that on the indexed side
// i is replaced by the index k read from DMA0_IDX (int32 words, row j's SIZE0 indices followed by
// IDX_SKIP1 bytes skipped: Vela reads the low word of int64 indices that way). An index beyond
// IDX_MAX (or negative) has no behaviour the register description pins down, and is refused.
// The decoded AddressRanges (dma_src, dma_dst) bound every byte the transfer may touch, so
// the region and hazard checks that read them keep working.
// Complexity: O(SIZE0 * SIZE1 * LEN).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/register_file.hpp"

namespace cascader::ethos_u85 {

// The DMA started at word `offset` with the registers `r` (any stride or index mode).
// Throws BinaryError for a reserved stride mode, indexing on both sides, or sizes of 0.
sim::NpuOperation read_dma(const sim::RegisterFile& r, size_t offset);

// Runs a DMA `read_dma` decoded; `bytes(region, address, length, what)` returns memory after
// checking the range (region may be the SHRAM's).
using MemoryAccess = std::function<uint8_t*(int region, uint64_t address, uint64_t length, const char* what)>;
void run_dma(const sim::NpuOperation& op, const MemoryAccess& bytes);

}  // namespace cascader::ethos_u85
