// The Ethos-U85's operand broadcast (IFM_BROADCAST, IFM2_BROADCAST): bits 0-2 of the mode make
// the operand one element tall, wide or deep (H 1, W 2, C 4, in any combination), repeated over
// the OFM's extent along those axes; mode 8 is a scalar from OP_SCALAR. Either input of an
// elementwise operation may be the broadcast one, so SUB/DIV-like modes need no operand swap.
// Complexity: O(H W C) for the expanded map.
#pragma once

#include <array>

#include "cascader/sim/executor.hpp"

namespace cascader::ethos_u85 {

// The extent the operand is read with: 1 along each broadcast axis of `mode` (0-7).
std::array<int, 3> broadcast_extent(int mode, int H, int W, int C);

// `d` (read with broadcast_extent) repeated to H x W x C.
sim::Dense broadcast_to(const sim::Dense& d, int H, int W, int C);

}  // namespace cascader::ethos_u85
