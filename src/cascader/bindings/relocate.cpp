#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <array>
#include <string>
#include <tuple>
#include <vector>

#include "cascader/bindings/bindings.hpp"
#include "cascader/memory/buffer_schedule.hpp"
#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/relocate.hpp"
#include "cascader/sim/stream_schedule.hpp"

namespace py = pybind11;

namespace cascader::bindings {

namespace {

using Words = py::array_t<uint32_t, py::array::c_style | py::array::forcecast>;
using Boundary = std::vector<std::tuple<std::string, int, uint64_t, uint64_t, bool>>;

std::vector<sim::BoundaryTensor> boundary_of(const Boundary& b) {
  std::vector<sim::BoundaryTensor> out;
  for (const auto& [name, region, address, size, input] : b) out.push_back({name, region, address, size, input});
  return out;
}

sim::CommandStream decode(const Words& words) { return sim::decode_command_stream(words.data(), words.size()); }

}  // namespace

void bind_relocate(py::module_& m) {
  m.def(
      "derive_stream_schedule",
      [](const Words& words, const std::array<int, 8>& memory_of_region, const Boundary& boundary) {
        const sim::StreamSchedule s =
            sim::derive_stream_schedule(decode(words), words.data(), memory_of_region, boundary_of(boundary));
        py::list buffers, steps, uses;
        for (size_t b = 0; b < s.placed.size(); ++b) {
          const ScheduledBuffer& sb = s.schedule.buffers[b];
          buffers.append(py::make_tuple(sb.name, to_string(sb.kind), sb.size, sb.alignment, s.placed[b].memory,
                                        s.placed[b].address));
        }
        for (const Step& st : s.schedule.steps) steps.append(py::make_tuple(st.reads, st.writes));
        for (const sim::AddressUse& u : s.uses) {
          uses.append(py::make_tuple(u.operation, sim::name(u.field), u.buffer, u.address));
        }
        py::list aliases;
        for (const Alias& a : s.schedule.aliases) aliases.append(py::make_tuple(a.buffer, a.target, a.shift));
        return py::dict(py::arg("buffers") = buffers, py::arg("steps") = steps, py::arg("uses") = uses,
                        py::arg("in_place") = aliases,
                        py::arg("boundary_buffer") = s.boundary_buffer);
      },
      py::arg("words"), py::arg("memory_of_region"), py::arg("boundary"),
      "A command stream's schedule: buffers (name, kind, size, alignment, memory, address), steps (reads, writes), "
      "address uses (operation, register, buffer, address), in-place aliases (buffer, target, shift) and the buffer of "
      "each boundary tensor.");

  m.def(
      "relocate_command_stream",
      [](const Words& words, const std::array<int, 8>& memory_of_region, const Boundary& boundary,
         const std::vector<uint64_t>& new_address) {
        const sim::CommandStream cs = decode(words);
        const sim::StreamSchedule s =
            sim::derive_stream_schedule(cs, words.data(), memory_of_region, boundary_of(boundary));
        const auto out = sim::relocate_command_stream(words.data(), words.size(), cs, s, new_address);
        return py::array_t<uint32_t>(static_cast<py::ssize_t>(out.size()), out.data());
      },
      py::arg("words"), py::arg("memory_of_region"), py::arg("boundary"), py::arg("new_address"),
      "The command stream with every buffer moved to its new address (one per derived buffer).");
}

}  // namespace cascader::bindings
