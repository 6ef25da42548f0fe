// The Ethos-U85's BILINEAR resize (NPU_OP_RESIZE mode 0). Along each axis, output position p
// sits at IFM position (p * d + offset) / n (RESIZE_X/Y: n from SCALE_N_M1, d from the step's
// integer part and remainder, OFFSET signed); its integer part i and remainder r (in 1/n) weight
// the two neighbours i and i + 1 by n - r and r, each clamped into the IFM extent the kernel
// registers give. The four products sum to value x n_y x n_x; the unit works with 16 more
// fractional bits, which OFM_SCALE's shift (16 + log2(n_y n_x), multiplier 1) removes with
// its round mode (Vela: SYMMETRIC, TFLite's rounding of its 10-bit fixed-point kernel).
// Complexity: O(OH OW C).
#pragma once

#include <cstdint>
#include <vector>

#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/executor.hpp"

namespace cascader::ethos_u85 {

// The accumulators of a BILINEAR resize of `ifm` (IH x IW x C, zero points removed) to
// OH x OW x C. Throws BinaryError naming the operation when n or the offset is out of the
// registers' range.
std::vector<int64_t> bilinear_resize(const sim::NpuOperation& op, const sim::Dense& ifm, int OH, int OW);

}  // namespace cascader::ethos_u85
