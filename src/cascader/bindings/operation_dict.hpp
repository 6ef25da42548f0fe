// The Python form of sim::NpuOperation: a dict, as cascader.sim.decode returns it and as the
// emitter builds it. Both directions live here and nowhere else, so the decoder's output, the
// encoder's input and the in-place checks read one format. Type conversion only.
#pragma once

#include <pybind11/pybind11.h>

#include "cascader/sim/command_stream.hpp"

namespace cascader::bindings {

pybind11::dict operation_to_dict(const sim::NpuOperation& op);

// Throws InvalidArgument naming a missing or malformed key. `word_offset` is optional.
sim::NpuOperation operation_from_dict(const pybind11::dict& d);

}  // namespace cascader::bindings
