// The register command-stream encoder: typed NPU operations -> cmd0/cmd1 words, ending in
// NPU_OP_STOP. The inverse of sim::decode_command_stream, over the same register map
// (arch/npu_registers.hpp) and the same operation type, so decode(encode(ops)) == ops. On an
// Ethos-U85 the block operations' registers are its own (arch/ethos_u85/command_encoder.hpp,
// over its decoder's map); the DMAs, waits and STOP around them are written here alike.
//
// What the encoder derives itself, rather than taking from the operation:
//  - the SHRAM layout registers (IFM_IB_END, IFM2_IB_START, AB_START), from the operation's
//    block config through the same SHRAM model the block-config search uses;
//  - the dependency commands. A kernel that touches bytes an outstanding DMA writes waits for
//    that DMA (NPU_OP_DMA_WAIT n: at most the n DMAs issued after it may still run); a DMA
//    whose destination a running kernel reads or writes, or whose source it writes, waits for
//    the kernels (NPU_OP_KERNEL_WAIT 0). BLOCKDEP is 0 before every kernel: no overlap with the
//    previous kernel, always safe (Vela computes a permissive value from the block order;
//    the cycle model does not credit it, so there is nothing to gain yet).
//  - redundant-write elimination: a register already holding the value is not written again.
//
// Complexity: O(operations x registers) plus the overlap checks, O(operations x outstanding).
#pragma once

#include <cstdint>
#include <vector>

#include "cascader/arch/arch_config.hpp"
#include "cascader/sim/command_stream.hpp"

namespace cascader::emit {

// Encodes `ops` (compute operations and DMAs, in order). Throws InvalidArgument naming the
// operation index and the register when a value does not fit its field, the block config
// does not fit the SHRAM, or the operation cannot run on `arch` (e.g. two cores' weights on a
// single-core NPU).
std::vector<uint32_t> encode_command_stream(const std::vector<sim::NpuOperation>& ops, const ArchConfig& arch);

}  // namespace cascader::emit
