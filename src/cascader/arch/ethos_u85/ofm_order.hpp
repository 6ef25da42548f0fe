// The Ethos-U85's OFM transpose and reverse (OFM_PRECISION bits 9-10 and 11-13): the output unit
// computes the operation's OFM in its own order (OFM_HEIGHT/WIDTH/DEPTH give that shape) and
// writes each element at a permuted or mirrored position of the stored map, whose tiles and
// strides (OFM_HEIGHT0/1, OFM_WIDTH0, OFM_STRIDE_*) describe the map after the permutation.
// Transpose modes name the stored axes in terms of the computed ones: HWC (none), WHC, HCW,
// WCH, CHW, CWH; reverse mirrors H, W or C within the operation's extent. Vela never combines
// them, nor either with chaining.
// Complexity: O(1) per element.
#pragma once

#include <array>

#include "cascader/sim/command_stream.hpp"

namespace cascader::ethos_u85 {

class OfmOrder {
 public:
  // Throws BinaryError naming the operation for a reserved transpose (4, 5) or reverse mode, or
  // a transpose combined with a reverse.
  explicit OfmOrder(const sim::NpuOperation& op);

  bool identity() const { return transpose_ == 0 && reverse_ == 0; }
  // The stored (y, x, c) of computed element (y, x, c).
  std::array<int, 3> stored(int y, int x, int c) const;
  // The stored map's height, width and depth.
  std::array<int, 3> stored_extent() const { return stored_of({oh_, ow_, oc_}); }

 private:
  std::array<int, 3> stored_of(std::array<int, 3> hwc) const;
  int transpose_, reverse_;
  int oh_, ow_, oc_;
};

}  // namespace cascader::ethos_u85
