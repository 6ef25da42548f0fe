#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "cascader/bindings/bindings.hpp"
#include "cascader/common/error.hpp"
#include "cascader/common/pending.hpp"
#include "cascader/arch/ethos_u85/weight_encoder.hpp"
#include "cascader/arch/ethos_u85/weight_order.hpp"
#include "cascader/emit/weight_encoder.hpp"
#include "cascader/sim/command_stream.hpp"

namespace py = pybind11;

namespace cascader::bindings {

namespace {

template <typename T>
std::vector<T> as_vector(const py::array_t<T, py::array::c_style | py::array::forcecast>& a) {
  return std::vector<T>(a.data(), a.data() + a.size());
}

// Raw weights and the array that holds them (kept alive while the encoder reads them).
struct HeldWeights {
  py::array array;
  emit::RawWeights raw;
};

template <typename T>
HeldWeights held(const py::array& a, emit::RawWeights::Type type) {
  auto c = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!c) throw py::error_already_set();
  const emit::RawWeights raw{c.data(), static_cast<size_t>(c.size()), type};
  return HeldWeights{std::move(c), raw};
}

// Weights as the model stores them (int8 or uint8) are read in place: the encoder widens each
// value as it reorders it, and no copy of a model's weights is made. Any other type is cast to
// int32 as numpy casts.
HeldWeights weight_values(const py::array& a) {
  const py::dtype d = a.dtype();
  if (d.itemsize() == 1 && d.kind() == 'i') return held<int8_t>(a, emit::RawWeights::Type::Int8);
  if (d.itemsize() == 1 && d.kind() == 'u') return held<uint8_t>(a, emit::RawWeights::Type::UInt8);
  return held<int32_t>(a, emit::RawWeights::Type::Int32);
}

using Int64s = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

// Per OFM channel: bias, scale and shift.
std::vector<emit::BiasScale> channels_of(const Int64s& bias, const Int64s& scale, const Int64s& shift) {
  const auto b = as_vector(bias), s = as_vector(scale), sh = as_vector(shift);
  if (b.size() != s.size() || b.size() != sh.size()) throw InvalidArgument("bias, scale and shift differ in length");
  std::vector<emit::BiasScale> channels(b.size());
  for (size_t c = 0; c < b.size(); ++c) {
    if (s[c] < 0 || s[c] > 0xFFFFFFFFll) throw InvalidArgument("scale of channel " + std::to_string(c) + " is not 32-bit");
    channels[c] = emit::BiasScale{b[c], static_cast<uint32_t>(s[c]), static_cast<int>(sh[c])};
  }
  return channels;
}

// plan_operation_weights queued (Pending) with what it reads: the weights' array, held while
// the job may read it and released with the GIL held (by Python, which owns this object).
struct PendingWeights {
  PendingWeights(HeldWeights w, std::vector<int32_t> z, std::vector<emit::BiasScale> c, const emit::WeightLayout& l,
                 int cores, int depth_step)
      : weights(std::move(w)), zps(std::move(z)), channels(std::move(c)), layout(l),
        planned([this, cores, depth_step] {
          return emit::plan_operation_weights(weights.raw, zps, channels, layout, cores, depth_step, nullptr);
        }) {}
  HeldWeights weights;
  std::vector<int32_t> zps;
  std::vector<emit::BiasScale> channels;
  emit::WeightLayout layout;
  Pending<emit::PlannedWeights> planned;  // last: dropped (or waited for) before what it reads
};

emit::WeightLayout layout_of(const py::array& ohwi, int ofm_block_depth, bool depthwise, bool part_kernel_first,
                             int ifm_bits, int dilation_y, int dilation_x, int ifm_ublock_depth, int ofm_ublock_depth) {
  if (ohwi.ndim() != 4) throw InvalidArgument("weights must be OHWI (4 dimensions)");
  return emit::WeightLayout{static_cast<int>(ohwi.shape(0)), static_cast<int>(ohwi.shape(1)),
                            static_cast<int>(ohwi.shape(2)), static_cast<int>(ohwi.shape(3)),
                            ofm_block_depth, depthwise, part_kernel_first, ifm_bits, dilation_x,
                            dilation_y, ifm_ublock_depth, ofm_ublock_depth};
}

}  // namespace

void bind_weight_encoder(py::module_& m) {
  m.def(
      "encode_weight_stream",
      [](const py::array_t<int16_t, py::array::c_style | py::array::forcecast>& values) {
        const auto bytes = emit::encode_weight_stream(as_vector(values));
        return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      },
      py::arg("values"), "Compresses stream-ordered 9-bit weight values into an Ethos-U weight stream.");

  py::class_<emit::PlannedWeights>(m, "PlannedWeights",
                                   "An operation's encoded weights planned: their layout and sizes; write() the bytes.")
      .def_readonly("size", &emit::PlannedWeights::size)
      .def_property_readonly(
          "slices",
          [](const emit::PlannedWeights& p) {
            py::list slices;
            for (const auto& streams : p.slices) {
              py::list cores_out;
              for (const auto& r : streams) {
                cores_out.append(py::make_tuple(r.scale_offset, r.scale_length, r.weight_offset, r.weight_length));
              }
              slices.append(cores_out);
            }
            return slices;
          },
          "[[(scale offset, scale length, weight offset, weight length) per core] per depth slice].")
      .def(
          "write",
          [](const emit::PlannedWeights& p) {
            std::vector<uint8_t> data;
            {
              // Reads only the plan's own codes: other threads may write other operations'.
              py::gil_scoped_release release;
              data = p.write();
            }
            return py::bytes(reinterpret_cast<const char*>(data.data()), data.size());
          },
          "The data: every stream written at its range.");

  m.def(
      "plan_operation_weights",
      [](const py::array& ohwi, const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& zero_points,
         const Int64s& bias, const Int64s& scale, const Int64s& shift, int ofm_block_depth,
         bool depthwise, bool part_kernel_first, int ifm_bits, int dilation_y, int dilation_x, int ifm_ublock_depth,
         int ofm_ublock_depth, int cores, int depth_step, const emit::PlannedWeights* whole) {
        const emit::WeightLayout layout = layout_of(ohwi, ofm_block_depth, depthwise, part_kernel_first, ifm_bits,
                                                    dilation_y, dilation_x, ifm_ublock_depth, ofm_ublock_depth);
        const std::vector<emit::BiasScale> channels = channels_of(bias, scale, shift);
        const HeldWeights weights = weight_values(ohwi);
        const std::vector<int32_t> zps = as_vector(zero_points);
        // The encoder touches no Python object (the array is held above, and a model's
        // constants are not written): other threads may plan other operations.
        py::gil_scoped_release release;
        return emit::plan_operation_weights(weights.raw, zps, channels, layout, cores, depth_step, whole);
      },
      py::arg("ohwi"), py::arg("zero_points"), py::arg("bias"), py::arg("scale"), py::arg("shift"),
      py::arg("ofm_block_depth"), py::arg("depthwise"), py::arg("part_kernel_first"), py::arg("ifm_bits"),
      py::arg("dilation_y"), py::arg("dilation_x"), py::arg("ifm_ublock_depth"), py::arg("ofm_ublock_depth"),
      py::arg("cores"), py::arg("depth_step"), py::arg("whole") = nullptr,
      "An operation's weights encoded up to their bits (PlannedWeights); `whole`: the same weights planned\n"
      "as one stream, which a depth slicing cuts its codes from (emit::plan_operation_weights).");

  py::class_<PendingWeights>(m, "PendingWeights", "plan_operation_weights queued for the process's threads.")
      .def(
          "take", [](PendingWeights& p) { return p.planned.take(); }, py::call_guard<py::gil_scoped_release>(),
          "The planned weights, once: planned here if no thread has started them, else waited for.");
  m.def(
      "queue_operation_weights",
      [](const py::array& ohwi, const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& zero_points,
         const Int64s& bias, const Int64s& scale, const Int64s& shift, int ofm_block_depth,
         bool depthwise, bool part_kernel_first, int ifm_bits, int dilation_y, int dilation_x, int ifm_ublock_depth,
         int ofm_ublock_depth, int cores, int depth_step) {
        const emit::WeightLayout layout = layout_of(ohwi, ofm_block_depth, depthwise, part_kernel_first, ifm_bits,
                                                    dilation_y, dilation_x, ifm_ublock_depth, ofm_ublock_depth);
        return std::make_unique<PendingWeights>(weight_values(ohwi), as_vector(zero_points),
                                                channels_of(bias, scale, shift), layout, cores, depth_step);
      },
      py::arg("ohwi"), py::arg("zero_points"), py::arg("bias"), py::arg("scale"), py::arg("shift"),
      py::arg("ofm_block_depth"), py::arg("depthwise"), py::arg("part_kernel_first"), py::arg("ifm_bits"),
      py::arg("dilation_y"), py::arg("dilation_x"), py::arg("ifm_ublock_depth"), py::arg("ofm_ublock_depth"),
      py::arg("cores"), py::arg("depth_step"),
      "plan_operation_weights (without `whole`) queued for the process's threads (common/pending.hpp): take()\n"
      "the result when needed.");

  m.def(
      "plan_u85_operation_weights",
      [](const py::array& ohwi, const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& zero_points,
         const Int64s& bias, const Int64s& scale, const Int64s& shift, int ofm_block_depth, bool depthwise,
         bool part_kernel_first, int ifm_bits, std::pair<int, int> stride, std::pair<int, int> dilation,
         int microblock, const std::string& accelerator, bool acc48, int depth_step) {
        if (ohwi.ndim() != 4) throw InvalidArgument("weights must be OHWI (4 dimensions)");
        const std::vector<emit::BiasScale> channels = channels_of(bias, scale, shift);
        ethos_u85::WeightedKernel k;
        k.ofm_depth = static_cast<int>(ohwi.shape(0));
        k.height = static_cast<int>(ohwi.shape(1));
        k.width = static_cast<int>(ohwi.shape(2));
        k.ifm_depth = static_cast<int>(ohwi.shape(3));
        k.ifm_bits = ifm_bits;
        std::tie(k.stride_y, k.stride_x) = stride;
        std::tie(k.dilation_y, k.dilation_x) = dilation;
        k.block_depth = ofm_block_depth;
        k.microblock = microblock;
        k.depthwise = depthwise;
        k.part_kernel_first = part_kernel_first;
        k.acc48 = acc48;
        const ethos_u85::WeightOrder order = ethos_u85::weight_order_for(k, accelerator_config(accelerator));
        const HeldWeights weights = weight_values(ohwi);
        const std::vector<int32_t> zps = as_vector(zero_points);
        py::gil_scoped_release release;  // as plan_operation_weights
        return ethos_u85::plan_operation_weights(weights.raw, zps, channels, order, acc48, depth_step);
      },
      py::arg("ohwi"), py::arg("zero_points"), py::arg("bias"), py::arg("scale"), py::arg("shift"),
      py::arg("ofm_block_depth"), py::arg("depthwise"), py::arg("part_kernel_first"), py::arg("ifm_bits"),
      py::arg("stride"), py::arg("dilation"), py::arg("microblock"), py::arg("accelerator"), py::arg("acc48"),
      py::arg("depth_step"),
      "An Ethos-U85 operation's streams planned (PlannedWeights): per depth slice one range per weight stream;\n"
      "the first stream of a slice carries its scale stream.");
}

}  // namespace cascader::bindings
