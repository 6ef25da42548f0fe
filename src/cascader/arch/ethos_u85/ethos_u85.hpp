// Ethos-U85: the NPU without SHRAM (an IFM buffer, accumulator, output and chaining RAMs
// instead), 128 to 2048 MACs per cycle, one to four weight decoders, a 128-bit AXI interface.
// Its accelerator sizes, vela.ini's U85 systems and the CONFIG/ID words of its driver payloads;
// its register interface is ethos_u85/registers.hpp and its command-stream decoder
// ethos_u85/command_decoder.hpp.
#pragma once

#include <cstdint>

#include "cascader/arch/target_family.hpp"

namespace cascader::ethos_u85 {

TargetFamily family();

// The command stream version of a U85 payload's CONFIG word (sim::NpuConfig packs it).
constexpr int kCommandStreamVersion = 1;

}  // namespace cascader::ethos_u85
