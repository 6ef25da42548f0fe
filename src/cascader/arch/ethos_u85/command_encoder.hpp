// The Ethos-U85 register encoder: one block operation's registers and command, the inverse of
// command_decoder.cpp over the same register map (registers.hpp) and the same operation type
// (NpuOperation with its u85 fields). The stream around it (DMAs, the waits between DMAs and
// kernels, NPU_OP_STOP) is emit::encode_command_stream's, common to the products: the U85
// keeps the U55's opcodes for them.
//
// What the encoder refuses (InvalidArgument naming the operation and the register), rather
// than write a stream the U85 would read otherwise: U55/U65-only fields (an IFM scale mode,
// the TRUNCATE/NATURAL rounding of OFM_PRECISION, reversed operands, a second core's streams),
// values beyond their fields.
// Complexity: O(registers) per operation.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "cascader/arch/arch_config.hpp"
#include "cascader/emit/register_writer.hpp"
#include "cascader/sim/command_stream.hpp"

namespace cascader::ethos_u85 {

// The LUT RAM bytes [begin, end) an operation's table activation reads (a DMA fills them through
// region 0x103, the internal-memory bit and region 3), or nullopt without a table: table index x
// table size, 256 bytes for 8-bit entries, 512 for 16-bit, 1 KiB for 32-bit, 2 KiB for the
// 16-bit input tables and the TANH/SIGMOID ones.
std::optional<std::pair<uint64_t, uint64_t>> lut_bytes(const sim::NpuOperation& op);

// Writes the registers of a strided or indexed DMA (`op.u85.dma`, as ethos_u85/dma.hpp reads
// them back; the command is the caller's): the source region with its stride and index modes,
// the destination region with its index mode, the row length, sizes and strides, and the index
// array's region, address, IDX_MAX and IDX_SKIP1 for an indexed one.
void encode_dma(emit::RegisterWriter& w, const sim::NpuOperation& op);

// Writes `op`'s registers (those already holding their value are skipped) and its command.
void encode_block_operation(emit::RegisterWriter& w, const sim::NpuOperation& op, const ArchConfig& arch);

}  // namespace cascader::ethos_u85
