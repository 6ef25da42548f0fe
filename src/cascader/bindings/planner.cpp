#include <pybind11/stl.h>

#include "cascader/bindings/bindings.hpp"
#include "cascader/graph/plan_graph.hpp"
#include "cascader/graph/propagator.hpp"
#include "cascader/plan/cascade.hpp"
#include "cascader/plan/configs.hpp"
#include "cascader/plan/pareto.hpp"
#include "cascader/proposal/proposal.hpp"
#include "cascader/proposal/proposal_layout.hpp"

namespace py = pybind11;

namespace cascader::bindings {

namespace {

py::tuple run_inputs(const StripeRun& r) {
  py::tuple out(size_t(r.inputs.count));
  for (int i = 0; i < r.inputs.count; ++i) {
    const RowsColumns& g = r.inputs.regions[size_t(i)];
    out[size_t(i)] = py::make_tuple(g.begin, g.end, g.column_begin, g.column_end);
  }
  return out;
}

py::tuple run_padding(const StripeRun& r) {
  const Padding& p = r.inputs.padding;
  return py::make_tuple(p.top, p.left, p.bottom, p.right);
}

py::tuple run_fields(const StripeRun& r) {
  return py::make_tuple(r.part, py::make_tuple(r.begin, r.end, r.column_begin, r.column_end), run_inputs(r),
                        run_padding(r), py::make_tuple(r.channel_begin, r.channel_end));
}

}  // namespace

void bind_planner(py::module_& m) {
  py::class_<Box>(m, "Box")
      .def(py::init<>())
      .def(py::init([](std::array<int64_t, 4> offset, std::array<int64_t, 4> extent) { return Box{offset, extent}; }),
           py::arg("offset"), py::arg("extent"))
      .def_readwrite("offset", &Box::offset)
      .def_readwrite("extent", &Box::extent)
      .def("cropped", &Box::cropped, py::arg("shape"))
      .def("__eq__", &Box::operator==);
  py::class_<AxisMap>(m, "AxisMap")
      .def(py::init<>())
      .def_readwrite("scale", &AxisMap::scale)
      .def_readwrite("extent_bias", &AxisMap::extent_bias)
      .def_readwrite("offset_bias", &AxisMap::offset_bias)
      .def_readwrite("divisor", &AxisMap::divisor)
      .def_readwrite("inserts_zeros", &AxisMap::inserts_zeros)
      .def_readwrite("step", &AxisMap::step)
      .def_readwrite("lo", &AxisMap::lo)
      .def_readwrite("hi", &AxisMap::hi);
  py::class_<Propagator>(m, "Propagator")
      .def(py::init<>())
      .def_readwrite("axes", &Propagator::axes)
      .def_readwrite("from_axes", &Propagator::from)
      .def("propagate", &Propagator::propagate, py::arg("box"))
      .def("__repr__", &Propagator::repr)
      .def_static("identity", &Propagator::identity)
      .def_static("window", &Propagator::window, py::arg("kernel_h"), py::arg("kernel_w"), py::arg("stride_h"),
                  py::arg("stride_w"), py::arg("dilation_h"), py::arg("dilation_w"), py::arg("pad_top"),
                  py::arg("pad_left"), py::arg("depthwise"), py::arg("input_depth"))
      .def_static("broadcast", &Propagator::broadcast, py::arg("operand"), py::arg("output"))
      .def_static("upscale", &Propagator::upscale, py::arg("factor"))
      .def_static("transposed", &Propagator::transposed, py::arg("kernel_h"), py::arg("kernel_w"), py::arg("pad_top"),
                  py::arg("pad_left"), py::arg("input_depth"), py::arg("factor"))
      .def_static("permutation", &Propagator::permutation, py::arg("from_axes"))
      .def("upscaled", &Propagator::upscaled, py::arg("box"));

  py::class_<PlanTensor>(m, "PlanTensor")
      .def(py::init<>())
      .def_readwrite("name", &PlanTensor::name)
      .def_readwrite("shape", &PlanTensor::shape)
      .def_readwrite("bytes", &PlanTensor::bytes)
      .def_readwrite("cascadable", &PlanTensor::cascadable)
      .def_readwrite("cpu_visible", &PlanTensor::cpu_visible)
      .def("__repr__", &PlanTensor::repr);
  py::class_<Part>(m, "Part")
      .def(py::init<>())
      .def_readwrite("name", &Part::name)
      .def_readwrite("op", &Part::op)
      .def_readwrite("inputs", &Part::inputs)
      .def_readwrite("propagators", &Part::propagators)
      .def_readwrite("output", &Part::output)
      .def_readwrite("first_operand", &Part::first_operand)
      .def_readwrite("stripable", &Part::stripable)
      .def_readwrite("alignment", &Part::alignment)
      .def_readwrite("channel_sliceable", &Part::channel_sliceable)
      .def_readwrite("bufferable", &Part::bufferable)
      .def_readwrite("buffered_cycles", &Part::buffered_cycles)
      .def_readwrite("buffered_bytes", &Part::buffered_bytes)
      .def_readwrite("buffered_second_slot_bytes", &Part::buffered_second_slot_bytes)
      .def_readwrite("whole_cycles", &Part::whole_cycles)
      .def("__repr__", &Part::repr);
  py::class_<PlanGraph>(m, "PlanGraph")
      .def(py::init<>())
      .def_readwrite("weight_buffer_memory", &PlanGraph::weight_buffer_memory)
      .def_readonly("tensors", &PlanGraph::tensors)
      .def_readonly("parts", &PlanGraph::parts)
      .def_readwrite("inputs", &PlanGraph::inputs)
      .def_readwrite("outputs", &PlanGraph::outputs)
      .def("add_tensor", &PlanGraph::add_tensor, py::arg("tensor"))
      .def("add_part", &PlanGraph::add_part, py::arg("part"))
      .def("validate", &PlanGraph::validate);

  py::class_<StripeRun>(m, "StripeRun")
      .def_readonly("part", &StripeRun::part)
      .def_readonly("begin", &StripeRun::begin)
      .def_readonly("end", &StripeRun::end)
      .def_readonly("column_begin", &StripeRun::column_begin)
      .def_readonly("column_end", &StripeRun::column_end)
      .def_readonly("channel_begin", &StripeRun::channel_begin)
      .def_readonly("channel_end", &StripeRun::channel_end)
      .def_property_readonly("inputs", &run_inputs)
      .def_property_readonly("padding", &run_padding)
      .def("fields", &run_fields,
           "(part, (begin, end, column_begin, column_end), inputs, padding, (channel_begin, channel_end)) in one "
           "call");
  py::class_<RollingBuffer>(m, "RollingBuffer")
      .def_readonly("tensor", &RollingBuffer::tensor)
      .def_readonly("rows", &RollingBuffer::rows)
      .def_readonly("columns", &RollingBuffer::columns)
      .def_readonly("bytes", &RollingBuffer::bytes)
      .def_readonly("channels", &RollingBuffer::channels);
  py::class_<CascadePlan>(m, "CascadePlan")
      .def_readonly("first", &CascadePlan::first)
      .def_readonly("last", &CascadePlan::last)
      .def_readonly("stripe_height", &CascadePlan::stripe_height)
      .def_readonly("stripes", &CascadePlan::stripes)
      .def_readonly("column_bands", &CascadePlan::column_bands)
      .def_readonly("depth_slices", &CascadePlan::depth_slices)
      .def_readonly("slice_depth", &CascadePlan::slice_depth)
      .def_readonly("buffer_bytes", &CascadePlan::buffer_bytes)
      .def_readonly("buffered_weights", &CascadePlan::buffered_weights)
      .def_readonly("weight_buffer_bytes", &CascadePlan::weight_buffer_bytes)
      .def_readonly("weight_second_slot_bytes", &CascadePlan::weight_second_slot_bytes)
      .def_readonly("buffers", &CascadePlan::buffers)
      .def_readonly("staircase_tensor", &CascadePlan::staircase_tensor)
      .def_readonly("staircase_shift", &CascadePlan::staircase_shift)
      .def_readonly("cycles", &CascadePlan::cycles)
      .def_readonly("operations", &CascadePlan::operations)
      .def_readonly("runs", &CascadePlan::runs)
      .def(
          "run_fields",
          [](const CascadePlan& c) {
            py::list out(c.runs.size());
            for (size_t i = 0; i < c.runs.size(); ++i) out[i] = run_fields(c.runs[i]);
            return out;
          },
          "`StripeRun.fields` of every run, in one call (`runs` copies each run into an object first)")
      .def("__repr__", &CascadePlan::repr);
  py::class_<StripeConfig>(m, "StripeConfig")
      .def_readonly("shape", &StripeConfig::shape)
      .def_readonly("extent", &StripeConfig::extent)
      .def_readonly("strides", &StripeConfig::strides)
      .def_readonly("count", &StripeConfig::count)
      .def_readonly("order", &StripeConfig::order)
      .def_readonly("offset", &StripeConfig::offset)
      .def_readonly("edge", &StripeConfig::edge)
      .def("__repr__", &StripeConfig::repr);
  py::enum_<TensorConfig::Mode>(m, "BufferMode")
      .value("whole", TensorConfig::Mode::Whole)
      .value("rolling", TensorConfig::Mode::Rolling);
  py::class_<TensorConfig>(m, "TensorConfig")
      .def_readonly("tensor", &TensorConfig::tensor)
      .def_readonly("name", &TensorConfig::name)
      .def_readonly("mode", &TensorConfig::mode)
      .def_readonly("boundary", &TensorConfig::boundary)
      .def_readonly("rows", &TensorConfig::rows)
      .def_readonly("columns", &TensorConfig::columns)
      .def_readonly("bytes", &TensorConfig::bytes)
      .def("__repr__", &TensorConfig::repr);
  m.def("stripe_config", &stripe_config, py::arg("graph"), py::arg("plan"));
  m.def("tensor_configs", &tensor_configs, py::arg("graph"), py::arg("plan"));
  py::class_<ProposalOptions>(m, "ProposalOptions")
      .def(py::init<>())
      .def_readwrite("max_cascade_parts", &ProposalOptions::max_cascade_parts)
      .def_readwrite("stripe_heights", &ProposalOptions::stripe_heights)
      .def_readwrite("max_proposals", &ProposalOptions::max_proposals)
      .def_readwrite("column_bands", &ProposalOptions::column_bands)
      .def_readwrite("depth_slices", &ProposalOptions::depth_slices);
  py::class_<Proposal>(m, "Proposal")
      .def(py::init([](std::vector<CascadePlan> cascades, int64_t memory, double cycles) {
             return Proposal{std::move(cascades), memory, cycles};
           }),
           py::arg("cascades"), py::arg("memory"), py::arg("cycles"))
      .def_readonly("cascades", &Proposal::cascades)
      .def_readonly("memory", &Proposal::memory)
      .def_readonly("cycles", &Proposal::cycles)
      .def("__repr__", &Proposal::repr);

  m.def("plan_cascade", [](const PlanGraph& g, int first, int last, int stripe_height, const ArchConfig& arch,
                           bool buffer_weights, int column_bands, bool runs) {
    StripeCoster coster(g, arch);
    return plan_cascade(g, g.uses(), first, last, stripe_height, coster, buffer_weights, runs, column_bands);
  }, py::arg("graph"), py::arg("first"), py::arg("last"), py::arg("stripe_height"), py::arg("arch"),
        py::arg("buffer_weights") = false, py::arg("column_bands") = 1, py::arg("runs") = true);
  m.def("plan_depth_cascade", [](const PlanGraph& g, int first, int last, int depth_slices, const ArchConfig& arch,
                                 bool runs) {
    StripeCoster coster(g, arch);
    return plan_depth_cascade(g, g.uses(), first, last, depth_slices, coster, runs);
  }, py::arg("graph"), py::arg("first"), py::arg("last"), py::arg("depth_slices"), py::arg("arch"),
        py::arg("runs") = true);
  m.def("channel_local", &channel_local, py::arg("propagator"));
  m.def("plan_cascades", [](const PlanGraph& g, int first_lo, int first_hi, int last, int stripe_height,
                            const ArchConfig& arch, bool buffer_weights, int column_bands) {
    StripeCoster coster(g, arch);
    return plan_cascades(g, g.uses(), first_lo, first_hi, last, stripe_height, coster, buffer_weights, column_bands);
  }, py::arg("graph"), py::arg("first_lo"), py::arg("first_hi"), py::arg("last"), py::arg("stripe_height"),
        py::arg("arch"), py::arg("buffer_weights") = false, py::arg("column_bands") = 1);
  m.def("cascade_memory", [](const PlanGraph& g, const CascadePlan& plan) { return cascade_memory(g, g.uses(), plan); },
        py::arg("graph"), py::arg("plan"));
  m.def("generate_proposals", &generate_proposals, py::arg("graph"), py::arg("arch"), py::arg("options"),
        py::call_guard<py::gil_scoped_release>());
  m.def("without_weight_buffers", &without_weight_buffers, py::arg("graph"), py::arg("arch"), py::arg("proposals"),
        py::call_guard<py::gil_scoped_release>());
  m.def("proposal_sram", [](const PlanGraph& g, const Proposal& p, const BufferSchedule& uncascaded,
                            const MemoryConfig& config) { return proposal_sram(g, p.cascades, uncascaded, config); },
        py::arg("graph"), py::arg("proposal"), py::arg("uncascaded"), py::arg("config"));
  m.def("proposal_srams", &proposal_srams, py::arg("graph"), py::arg("proposals"), py::arg("uncascaded"),
        py::arg("config"), py::call_guard<py::gil_scoped_release>());
  m.def("undominated_srams", &undominated_srams, py::arg("graph"), py::arg("proposals"), py::arg("settled"),
        py::arg("bounded"), py::arg("uncascaded"), py::arg("config"), py::call_guard<py::gil_scoped_release>());
  py::class_<Pending<std::vector<int64_t>>>(m, "PendingSrams")
      .def("take", &Pending<std::vector<int64_t>>::take, py::call_guard<py::gil_scoped_release>());
  // The work reads the graph, the proposals (held by their list) and the schedule: kept alive with it.
  m.def("queue_undominated_srams", &queue_undominated_srams, py::arg("graph"), py::arg("proposals"),
        py::arg("settled"), py::arg("bounded"), py::arg("uncascaded"), py::arg("config"), py::keep_alive<0, 1>(),
        py::keep_alive<0, 2>(), py::keep_alive<0, 5>());
  m.def("proposal_schedule", [](const PlanGraph& g, const Proposal& p, const BufferSchedule& uncascaded) {
    return proposal_schedule(g, p.cascades, uncascaded);
  }, py::arg("graph"), py::arg("proposal"), py::arg("uncascaded"));
  m.def("pareto_frontier", [](const std::vector<std::pair<int64_t, double>>& pts) {
    std::vector<CostPoint> p;
    for (const auto& [m_, c] : pts) p.push_back(CostPoint{m_, c});
    return pareto_frontier(p);
  }, py::arg("points"));
  m.def("thin_frontier", [](const std::vector<std::pair<int64_t, double>>& pts, const std::vector<size_t>& front,
                            size_t keep) {
    std::vector<CostPoint> p;
    for (const auto& [m_, c] : pts) p.push_back(CostPoint{m_, c});
    return thin_frontier(p, front, keep);
  }, py::arg("points"), py::arg("front"), py::arg("keep"));
}

}  // namespace cascader::bindings
