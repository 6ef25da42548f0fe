// Read-after-write hazards of an operation whose OFM bytes overlap its IFM/IFM2 bytes (an
// in-place operation), on byte addresses.
//
// The NPU walks OFM blocks in the order arch/block_traversal.hpp gives; each job reads its IFM
// footprint before it writes its OFM block, and jobs are fetched in order. So the operation is
// safe exactly when no job reads a byte that an earlier job wrote. The check replays the jobs
// over byte runs (maximal contiguous address ranges, through tiles, strides and the NHWC /
// NHCWB16 layouts) and a set of written intervals.
//
// Proven against brute force (tests/test_in_place.py): executing an operation job by job on
// one shared buffer gives the non-overlapping result for every input exactly when no hazard
// is reported; and on Vela's own command streams with the OFM base patched over the IFM.
//
// Complexity: building the runs is O(IFM footprint + OFM elements); one check is
// O(R log R) for R runs. min_in_place_shift replays candidate shifts upward in 16 B steps,
// and a hazard at one shift skips every shift that keeps the same read and write overlapping,
// so O(K * R log R) for K replayed candidates (at most shift / 16, in practice a handful).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cascader/arch/block_traversal.hpp"
#include "cascader/sim/command_stream.hpp"

namespace cascader::sim {

// The first job (in traversal order) that reads a byte an earlier job wrote.
struct InPlaceHazard {
  size_t reader = 0, writer = 0;  // job indices in traversal order
  FeatureBox reader_ofm, writer_ofm;
  const char* operand = "IFM";  // "IFM" or "IFM2"
  uint64_t address = 0;         // the first such byte the reader reads (region-relative)

  std::string describe() const;
};

// The operation's traversal shape (IFM extent from the OFM shape, kernel and padding).
TraversalShape traversal_shape(const NpuOperation& op);

// The first hazard of the operation as its registers place it, or none. `ifm` / `ifm2` say
// whether that operand shares the OFM's memory (the caller knows the region bindings); an
// operand in other memory cannot be overwritten.
std::optional<InPlaceHazard> find_in_place_hazard(const NpuOperation& op, bool ifm = true, bool ifm2 = true);

// The smallest multiple of 16 bytes by which the OFM can start below the IFM (OFM BASE0 =
// IFM BASE0 - shift, the other tiles moving with it) with no hazard through the IFM: 0 for a
// same-shape elementwise operation, one IFM row (W x C bytes) for a 3x3 same-padded depthwise
// whose blocks span the width.
int64_t min_in_place_shift(const NpuOperation& op);

}  // namespace cascader::sim
