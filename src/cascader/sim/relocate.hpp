// Relocation of a command stream: every arena address it uses moves with its buffer.
//
// Vela writes a register only when its value changes, so one address word can serve several
// operations, and two versions of a buffer at one address can share a word; after relocation
// they may need different values. The relocator therefore drops the stream's address words
// (IFM/IFM2/OFM BASE0..3, WEIGHT/SCALE(1)_BASE, DMA0_SRC/DST) and, before each operation
// command, writes the address registers that operation uses whose relocated value differs from
// the value last written. Everything else (every other register, waits, the stop) is kept in
// order, so the operations decode to the same ones with only their addresses moved.
// Complexity: O(words + address uses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/stream_schedule.hpp"

namespace cascader::sim {

// `new_address[b]` is where buffer b of `derived` goes (same memory); an address into it moves
// by new_address[b] - derived.placed[b].address. `words` / `stream` must be command stream
// number `stream_index` of those `derived` was derived from. Throws InvalidArgument for a
// wrong number of addresses or an address that would leave 0..2^40.
std::vector<uint32_t> relocate_command_stream(const uint32_t* words, size_t count, const CommandStream& stream,
                                              const StreamSchedule& derived, const std::vector<uint64_t>& new_address,
                                              size_t stream_index = 0);

}  // namespace cascader::sim
