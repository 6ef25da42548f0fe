// The Python form of sim::NpuOperation: a dict, as cascader.sim.decode returns it and as the
// emitter builds it. Both directions live here and nowhere else, so the decoder's output, the
// encoder's input and the in-place checks read one format. Type conversion only.
#pragma once

#include <pybind11/pybind11.h>

#include "cascader/sim/command_stream.hpp"

namespace cascader::bindings {

// `u85`: add the Ethos-U85-only fields (NpuOperation::u85) under the key "u85".
pybind11::dict operation_to_dict(const sim::NpuOperation& op, bool u85 = false);

// Throws InvalidArgument naming a missing or malformed key. `word_offset` is optional.
sim::NpuOperation operation_from_dict(const pybind11::dict& d);

}  // namespace cascader::bindings
