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
using Tensors = std::vector<std::tuple<std::string, int, uint64_t, uint64_t, bool>>;

// A part is command stream words (an array) or the tensors of a step outside the NPU (a list
// of (name, region, address, size, written)).
struct Parts {
  std::vector<Words> words;
  std::vector<sim::CommandStream> streams;
  std::vector<sim::SchedulePart> parts;
};

Parts parts_of(const py::list& items) {
  Parts p;
  for (const auto& item : items) {
    if (py::isinstance<py::array>(item)) p.words.push_back(item.cast<Words>());
  }
  p.streams.reserve(p.words.size());
  size_t k = 0;
  for (const auto& item : items) {
    sim::SchedulePart part;
    if (py::isinstance<py::array>(item)) {
      const Words& w = p.words[k++];
      p.streams.push_back(sim::decode_command_stream(w.data(), static_cast<size_t>(w.size())));
      part.stream = &p.streams.back();
      part.words = w.data();
    } else {
      for (const auto& [name, region, address, size, written] : item.cast<Tensors>()) {
        part.tensors.push_back({name, region, address, size, written});
      }
    }
    p.parts.push_back(std::move(part));
  }
  return p;
}

}  // namespace

void bind_relocate(py::module_& m) {
  m.def(
      "derive_schedule",
      [](const py::list& items, const std::array<int, 8>& memory_of_region) {
        const Parts p = parts_of(items);
        const sim::StreamSchedule s = sim::derive_schedule(p.parts, memory_of_region);
        py::list buffers, steps, uses, aliases;
        for (size_t b = 0; b < s.placed.size(); ++b) {
          const ScheduledBuffer& sb = s.schedule.buffers[b];
          buffers.append(py::make_tuple(sb.name, to_string(sb.kind), sb.size, sb.alignment, s.placed[b].memory,
                                        s.placed[b].address));
        }
        for (const Step& st : s.schedule.steps) steps.append(py::make_tuple(st.reads, st.writes));
        for (const sim::AddressUse& u : s.uses) {
          uses.append(py::make_tuple(u.stream, u.operation, sim::name(u.field), u.buffer, u.address));
        }
        for (const Alias& a : s.schedule.aliases) aliases.append(py::make_tuple(a.buffer, a.target, a.shift));
        return py::dict(py::arg("buffers") = buffers, py::arg("steps") = steps, py::arg("uses") = uses,
                        py::arg("in_place") = aliases, py::arg("boundary_buffer") = s.boundary_buffer);
      },
      py::arg("parts"), py::arg("memory_of_region"),
      "The schedule of command streams (uint32 arrays) and outside steps (lists of (name, region, address, size, "
      "written)): buffers (name, kind, size, alignment, memory, address), steps (reads, writes), address uses "
      "(stream, operation, register, buffer, address), in-place aliases (buffer, target, shift) and the buffer of "
      "each outside tensor.");

  m.def(
      "relocate_command_streams",
      [](const py::list& items, const std::array<int, 8>& memory_of_region, const std::vector<uint64_t>& new_address) {
        const Parts p = parts_of(items);
        const sim::StreamSchedule s = sim::derive_schedule(p.parts, memory_of_region);
        py::list out;
        for (size_t k = 0; k < p.streams.size(); ++k) {
          const auto words = sim::relocate_command_stream(p.words[k].data(), static_cast<size_t>(p.words[k].size()),
                                                          p.streams[k], s, new_address, k);
          out.append(py::array_t<uint32_t>(static_cast<py::ssize_t>(words.size()), words.data()));
        }
        return out;
      },
      py::arg("parts"), py::arg("memory_of_region"), py::arg("new_address"),
      "Every command stream of the parts with every buffer moved to its new address (one per derived buffer).");
}

}  // namespace cascader::bindings
