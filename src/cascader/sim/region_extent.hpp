// How far into each memory region (NPU base pointer 0..7) a decoded command stream reaches:
// the end of every weight, scale and DMA range, the last element of every OFM and the base
// of every IFM. The packager checks these against the tensors an `ethos-u` operator passes as
// base pointers, so a stream that overruns its arenas is caught before it is written.
// Complexity: O(operations).
#pragma once

#include <array>
#include <cstdint>

#include "cascader/sim/command_stream.hpp"

namespace cascader::sim {

struct RegionExtent {
  bool used = false;
  uint64_t end = 0;             // one past the highest byte reached
  size_t operation = 0;         // the (first) operation reaching `end`
  const char* what = "";        // which access: "weights", "ofm", "DMA dst", ...
};

// Per region 0..7. DMA accesses to the NPU's internal SHRAM are not a region and are skipped.
std::array<RegionExtent, 8> region_extents(const CommandStream& stream);

}  // namespace cascader::sim
