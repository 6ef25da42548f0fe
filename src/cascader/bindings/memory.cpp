#include <optional>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "cascader/bindings/bindings.hpp"
#include "cascader/common/error.hpp"
#include "cascader/memory/allocation.hpp"
#include "cascader/memory/arena_layout.hpp"
#include "cascader/memory/buffer_schedule.hpp"
#include "cascader/memory/exact_allocator.hpp"
#include "cascader/memory/greedy_allocator.hpp"
#include "cascader/memory/live_range.hpp"
#include "cascader/memory/schedule_layout.hpp"
#include "cascader/memory/staircase.hpp"

namespace py = pybind11;

namespace cascader::bindings {

namespace {

using I64Array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

std::vector<LiveRange> to_ranges(const I64Array& start, const I64Array& end, const I64Array& size,
                                 const std::optional<I64Array>& alignment = std::nullopt) {
  if (start.ndim() != 1 || end.ndim() != 1 || size.ndim() != 1 || start.size() != end.size() ||
      start.size() != size.size() || (alignment && (alignment->ndim() != 1 || alignment->size() != start.size()))) {
    throw InvalidArgument("start, end, size (and alignment) must be 1-D arrays of the same length");
  }
  auto s = start.unchecked<1>();
  auto e = end.unchecked<1>();
  auto z = size.unchecked<1>();
  std::vector<LiveRange> ranges(static_cast<size_t>(start.size()));
  for (py::ssize_t i = 0; i < start.size(); ++i) {
    ranges[static_cast<size_t>(i)] = {s(i), e(i), z(i), alignment ? alignment->at(i) : 1};
  }
  return ranges;
}

using TieTuple = std::tuple<int, int, int64_t>;  // lower, upper, offset
// name, kind, size, alignment, persistent, access_bytes, constant, cpu_visible
using BufferTuple = std::tuple<std::string, BufferKind, int64_t, int64_t, bool, double, bool, bool>;
using StepPair = std::pair<std::vector<int>, std::vector<int>>;                // reads, writes
using AliasTuple = std::tuple<int, int, int64_t, AliasKind, int64_t>;         // buffer, target, offset, kind, shift

std::vector<Tie> to_ties(const std::vector<TieTuple>& ties) {
  std::vector<Tie> out;
  for (const auto& [lower, upper, offset] : ties) out.push_back(Tie{lower, upper, offset});
  return out;
}

}  // namespace

void bind_memory(py::module_& m) {
  m.def(
      "peak_live_bytes",
      [](const I64Array& start, const I64Array& end, const I64Array& size, const std::vector<TieTuple>& ties) {
        return peak_live_bytes(to_ranges(start, end, size), to_ties(ties));
      },
      py::arg("start"), py::arg("end"), py::arg("size"), py::arg("ties") = std::vector<TieTuple>{},
      "Maximum over time of the bytes live in half-open intervals [start, end); a tie's shared bytes count once.");

  m.def(
      "staircase_shift",
      [](const std::vector<std::tuple<int64_t, int64_t, int64_t>>& writes,
         const std::vector<std::tuple<int64_t, int64_t, int64_t>>& reads, int64_t alignment) {
        auto accesses = [](const std::vector<std::tuple<int64_t, int64_t, int64_t>>& v) {
          std::vector<ByteAccess> out;
          for (const auto& [step, begin, end] : v) out.push_back(ByteAccess{step, begin, end});
          return out;
        };
        return staircase_shift(accesses(writes), accesses(reads), alignment);
      },
      py::arg("writes"), py::arg("reads"), py::arg("alignment") = 16,
      "writes, reads: (step, begin, end) byte accesses of the output and the input it is written over.");

  py::class_<Allocation>(m, "Allocation")
      .def_readonly("offsets", &Allocation::offsets)
      .def_readonly("height", &Allocation::height)
      .def_readonly("lower_bound", &Allocation::lower_bound)
      .def_readonly("optimal", &Allocation::optimal)
      .def_readonly("nodes", &Allocation::nodes)
      .def_readonly("seconds", &Allocation::seconds)
      .def_readonly("solver", &Allocation::solver);

  py::enum_<GreedyFit>(m, "GreedyFit").value("best", GreedyFit::BestFit).value("first", GreedyFit::FirstFit);
  py::enum_<GreedyOrder>(m, "GreedyOrder").value("by_size", GreedyOrder::BySize).value("by_start", GreedyOrder::ByStart);

  m.def(
      "greedy_allocate",
      [](const I64Array& start, const I64Array& end, const I64Array& size, const I64Array& alignment, GreedyFit fit,
         const std::vector<TieTuple>& ties, GreedyOrder order) {
        return greedy_allocate(to_ranges(start, end, size, alignment), fit, to_ties(ties), order);
      },
      py::arg("start"), py::arg("end"), py::arg("size"), py::arg("alignment"), py::arg("fit") = GreedyFit::BestFit,
      py::arg("ties") = std::vector<TieTuple>{}, py::arg("order") = GreedyOrder::BySize);

  m.def(
      "exact_allocate",
      [](const I64Array& start, const I64Array& end, const I64Array& size, const I64Array& alignment,
         int64_t capacity, bool minimise, int64_t node_limit, double time_limit_s) {
        ExactOptions options;
        options.capacity = capacity;
        options.minimise = minimise;
        options.node_limit = node_limit;
        options.time_limit_s = time_limit_s;
        return exact_allocate(to_ranges(start, end, size, alignment), options);
      },
      py::arg("start"), py::arg("end"), py::arg("size"), py::arg("alignment"), py::arg("capacity") = -1,
      py::arg("minimise") = true, py::arg("node_limit") = 2'000'000, py::arg("time_limit_s") = 2.0);

  m.def(
      "check_allocation",
      [](const I64Array& start, const I64Array& end, const I64Array& size, const I64Array& alignment,
         const std::vector<int64_t>& offsets, const std::vector<TieTuple>& ties) {
        check_allocation(to_ranges(start, end, size, alignment), offsets, to_ties(ties));
      },
      py::arg("start"), py::arg("end"), py::arg("size"), py::arg("alignment"), py::arg("offsets"),
      py::arg("ties") = std::vector<TieTuple>{});

  py::enum_<BufferKind>(m, "BufferKind")
      .value("feature_map", BufferKind::FeatureMap)
      .value("stripe_buffer", BufferKind::StripeBuffer)
      .value("weights", BufferKind::Weights)
      .value("double_weights", BufferKind::DoubleWeights)
      .value("copy", BufferKind::Copy)
      .value("lut", BufferKind::Lut)
      .value("scratch", BufferKind::Scratch);
  py::enum_<AliasKind>(m, "AliasKind")
      .value("in_place", AliasKind::InPlace)
      .value("slice", AliasKind::Slice)
      .value("reshape", AliasKind::Reshape)
      .value("staircase", AliasKind::Staircase);

  py::class_<ScheduleLiveRanges>(m, "ScheduleLiveRanges")
      .def_readonly("range_buffer", &ScheduleLiveRanges::range_buffer)
      .def_readonly("buffer_range", &ScheduleLiveRanges::buffer_range)
      .def_readonly("buffer_offset", &ScheduleLiveRanges::buffer_offset)
      .def_property_readonly("ties", [](const ScheduleLiveRanges& r) {
        std::vector<TieTuple> v;
        for (const Tie& t : r.ties) v.emplace_back(t.lower, t.upper, t.offset);
        return v;
      })
      .def_property_readonly("start", [](const ScheduleLiveRanges& r) {
        std::vector<int64_t> v;
        for (const LiveRange& x : r.ranges) v.push_back(x.start);
        return v;
      })
      .def_property_readonly("end", [](const ScheduleLiveRanges& r) {
        std::vector<int64_t> v;
        for (const LiveRange& x : r.ranges) v.push_back(x.end);
        return v;
      })
      .def_property_readonly("size", [](const ScheduleLiveRanges& r) {
        std::vector<int64_t> v;
        for (const LiveRange& x : r.ranges) v.push_back(x.size);
        return v;
      })
      .def_property_readonly("alignment", [](const ScheduleLiveRanges& r) {
        std::vector<int64_t> v;
        for (const LiveRange& x : r.ranges) v.push_back(x.alignment);
        return v;
      });

  py::class_<BufferSchedule>(m, "BufferSchedule")
      .def(py::init([](const std::vector<BufferTuple>& buffers, const std::vector<StepPair>& steps,
                       const std::vector<AliasTuple>& aliases) {
             BufferSchedule s;
             for (const auto& [name, kind, size, alignment, persistent, access_bytes, constant, cpu_visible] : buffers) {
               s.buffers.push_back({name, kind, size, alignment, persistent, access_bytes, constant, cpu_visible});
             }
             for (const auto& [reads, writes] : steps) s.steps.push_back({reads, writes});
             for (const auto& [buffer, target, offset, kind, shift] : aliases) {
               s.aliases.push_back({buffer, target, offset, kind, shift});
             }
             return s;
           }),
           py::arg("buffers"), py::arg("steps"), py::arg("aliases"),
           "buffers: (name, kind, size, alignment, persistent, access_bytes, constant, cpu_visible); "
           "steps: (reads, writes); aliases: (buffer, target, offset, kind, shift).")
      .def("__len__", [](const BufferSchedule& s) { return s.buffers.size(); })
      .def_property_readonly("buffers", [](const BufferSchedule& s) {
        std::vector<BufferTuple> v;
        for (const ScheduledBuffer& b : s.buffers) {
          v.emplace_back(b.name, b.kind, b.size, b.alignment, b.persistent, b.access_bytes, b.constant, b.cpu_visible);
        }
        return v;
      })
      .def_property_readonly("steps", [](const BufferSchedule& s) {
        std::vector<StepPair> v;
        for (const Step& t : s.steps) v.emplace_back(t.reads, t.writes);
        return v;
      })
      .def_property_readonly("aliases", [](const BufferSchedule& s) {
        std::vector<AliasTuple> v;
        for (const Alias& a : s.aliases) v.emplace_back(a.buffer, a.target, a.offset, a.kind, a.shift);
        return v;
      });

  m.def("build_live_ranges", &build_live_ranges, py::arg("schedule"));

  py::enum_<Arena>(m, "Arena")
      .value("fast", Arena::Fast)
      .value("slow", Arena::Slow)
      .value("persistent", Arena::Persistent)
      .value("flash", Arena::Flash);
  py::class_<ArenaLayout>(m, "ArenaLayout")
      .def_readonly("arena", &ArenaLayout::arena)
      .def_readonly("offset", &ArenaLayout::offset)
      .def_readonly("fast_size", &ArenaLayout::fast_size)
      .def_readonly("slow_size", &ArenaLayout::slow_size)
      .def_readonly("persistent_size", &ArenaLayout::persistent_size)
      .def_readonly("flash_size", &ArenaLayout::flash_size)
      .def_readonly("fast_lower_bound", &ArenaLayout::fast_lower_bound)
      .def_readonly("slow_lower_bound", &ArenaLayout::slow_lower_bound)
      .def_readonly("eviction_cycles", &ArenaLayout::eviction_cycles);

  py::class_<MemoryConfig>(m, "MemoryConfig")
      .def(py::init<>())
      .def_readwrite("fast_capacity", &MemoryConfig::fast_capacity)
      .def_readwrite("slow_capacity", &MemoryConfig::slow_capacity)
      .def_readwrite("fast_cycles_per_byte", &MemoryConfig::fast_cycles_per_byte)
      .def_readwrite("slow_cycles_per_byte", &MemoryConfig::slow_cycles_per_byte)
      .def_readwrite("exact", &MemoryConfig::exact)
      .def_readwrite("time_limit_s", &MemoryConfig::time_limit_s)
      .def_readwrite("node_limit", &MemoryConfig::node_limit)
      .def_readwrite("shared", &MemoryConfig::shared);
  py::class_<ScheduleLayout>(m, "ScheduleLayout")
      .def_readonly("ranges", &ScheduleLayout::ranges)
      .def_readonly("arenas", &ScheduleLayout::arenas)
      // As ints: a list of enum objects costs more to make and to look up than the layout.
      .def_property_readonly("buffer_arena",
                             [](const ScheduleLayout& l) {
                               std::vector<int> v;
                               for (Arena a : l.buffer_arena) v.push_back(static_cast<int>(a));
                               return v;
                             })
      .def_readonly("buffer_address", &ScheduleLayout::buffer_address)
      .def_readonly("buffer_start", &ScheduleLayout::buffer_start)
      .def_readonly("buffer_end", &ScheduleLayout::buffer_end)
      .def_readonly("buffer_bytes", &ScheduleLayout::buffer_bytes);
  m.def("layout_schedule", &layout_schedule, py::arg("schedule"), py::arg("config"));
}

}  // namespace cascader::bindings
