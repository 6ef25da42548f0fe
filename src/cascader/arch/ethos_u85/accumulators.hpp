// The Ethos-U85's accumulator input and output (ACC_FORMAT bits 4-5 and 6). An operation's
// accumulators start from its bias (RESET), from the accumulators the previous operation kept
// (KEEP), or from IFM2 (a 32-bit map for 32-bit accumulators, 64-bit for 48-bit ones); Vela's
// null pooling (POOL mode NONE) is the last alone: a copy of IFM2 through the output unit, how
// it moves and rescales 32-bit maps. With the output disabled the operation writes no OFM and
// keeps its accumulators for the next operation.
// Complexity: O(OFM elements).
#pragma once

#include <cstdint>
#include <vector>

#include "cascader/emit/weights.hpp"
#include "cascader/sim/command_stream.hpp"

namespace cascader::ethos_u85 {

class AccumulatorRam {
 public:
  // Throws BinaryError naming the operation for an accumulator input the simulator does not
  // model with the operation's kind (IFM2 outside null pooling; KEEP on an elementwise or
  // resize operation), or KEEP with nothing kept or kept for another OFM shape.
  void check_input(const sim::NpuOperation& op) const;
  // The accumulators of `op` given those its unit computed from a reset (`computed`, OFM
  // order, with `bias` per channel, empty for no bias; for null pooling, IFM2's values).
  std::vector<int64_t> start(const sim::NpuOperation& op, std::vector<int64_t> computed,
                             const std::vector<emit::BiasScale>& bias) const;
  // Holds the operation's accumulators, as the hardware does, for a next operation that keeps
  // them; returns whether the output is enabled (the output unit writes the OFM).
  bool finish(const sim::NpuOperation& op, const std::vector<int64_t>& acc);

 private:
  std::vector<int64_t> kept_;
  int h_ = 0, w_ = 0, c_ = 0;
  bool valid_ = false;
};

}  // namespace cascader::ethos_u85
