// Decoding of an Ethos-U85 command stream (registers.hpp) into the typed NPU operations the
// U55/U65 decoder also produces (sim/command_stream.hpp), with the U85-only fields in
// NpuOperation::u85. Complexity: O(words).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cascader/sim/command_stream.hpp"

namespace cascader::ethos_u85 {

// Throws BinaryError naming the word offset for unknown opcodes, a truncated cmd1, reserved
// field values, or a stream that does not end with NPU_OP_STOP.
sim::CommandStream decode_command_stream(const uint32_t* words, size_t count);

}  // namespace cascader::ethos_u85
