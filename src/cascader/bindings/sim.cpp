#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <string>

#include "cascader/bindings/bindings.hpp"
#include "cascader/bindings/operation_dict.hpp"
#include "cascader/common/error.hpp"
#include "cascader/emit/weights.hpp"
#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/driver_payload.hpp"
#include "cascader/sim/executor.hpp"
#include "cascader/sim/region_extent.hpp"

namespace py = pybind11;

namespace cascader::bindings {

namespace {

sim::DriverPayload payload_of(const py::bytes& payload) {
  const std::string_view s = payload;
  return sim::parse_driver_payload(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

py::dict config(const sim::NpuConfig& c) {
  return py::dict(py::arg("accelerator") = c.accelerator(), py::arg("macs_per_cc") = c.macs_per_cc,
                  py::arg("shram_kib") = c.shram_kib, py::arg("product") = c.product,
                  py::arg("weight_decoders") = c.weight_decoders, py::arg("axi_sram_ports_log2") = c.axi_sram_ports_log2,
                  py::arg("axi_ext_ports_log2") = c.axi_ext_ports_log2,
                  py::arg("cmd_stream_version") = c.cmd_stream_version, py::arg("config_word") = c.config_word,
                  py::arg("id_word") = c.id_word);
}

}  // namespace

void bind_sim(py::module_& m) {
  m.def(
      "decode_driver_payload",
      [](const py::bytes& payload) {
        const sim::DriverPayload p = payload_of(payload);
        const sim::CommandStream cs = sim::decode_command_stream(p.command_stream.data(), p.command_stream.size(), static_cast<Product>(p.config.product));
        py::list ops;
        for (const auto& op : cs.operations) ops.append(operation_to_dict(op, cs.product == Product::EthosU85));
        return py::dict(py::arg("config") = config(p.config), py::arg("command_stream_words") = cs.words,
                        py::arg("command_stream_word") = p.command_stream_word, py::arg("operations") = ops);
      },
      py::arg("payload"), "Decodes a COP1 driver payload into its config and typed NPU operations.");

  m.def(
      "split_driver_payload",
      [](const py::bytes& payload) {
        const sim::DriverPayload p = payload_of(payload);
        return py::make_tuple(config(p.config), py::array_t<uint32_t>(static_cast<py::ssize_t>(p.command_stream.size()),
                                                                       p.command_stream.data()));
      },
      py::arg("payload"), "A COP1 driver payload's config (with its raw words) and command stream words.");

  m.def(
      "region_extents",
      [](const py::bytes& payload) {
        const sim::DriverPayload p = payload_of(payload);
        const sim::CommandStream cs = sim::decode_command_stream(p.command_stream.data(), p.command_stream.size(), static_cast<Product>(p.config.product));
        py::list out;
        for (const auto& e : sim::region_extents(cs)) {
          out.append(e.used ? py::object(py::make_tuple(e.end, e.operation, e.what)) : py::object(py::none()));
        }
        return out;
      },
      py::arg("payload"), "Per region 0..7: (end byte, operation index, access) of the furthest access, or None.");

  m.def(
      "encode_driver_payload",
      [](const py::array_t<uint32_t, py::array::c_style | py::array::forcecast>& words, const std::string& accelerator,
         uint32_t id_word) {
        const auto bytes = sim::encode_driver_payload(std::vector<uint32_t>(words.data(), words.data() + words.size()),
                                                      sim::NpuConfig::for_accelerator(accelerator, id_word));
        return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      },
      py::arg("command_stream"), py::arg("accelerator"), py::arg("id_word") = 0,
      "A COP1 driver payload for a command stream on an accelerator, as Vela writes it\n"
      "(id_word 0: the ID word Vela 5.2 writes for the accelerator's product).");

  m.def(
      "simulate_driver_payload",
      [](const py::bytes& payload, const std::map<int, py::array_t<uint8_t, py::array::c_style>>& regions,
         long long stop_after) {
        const sim::DriverPayload p = payload_of(payload);
        const sim::CommandStream cs = sim::decode_command_stream(p.command_stream.data(), p.command_stream.size(), static_cast<Product>(p.config.product));
        std::array<sim::RegionMemory, 8> mem{};
        std::vector<py::array_t<uint8_t, py::array::c_style>> keep;
        for (const auto& [region, array] : regions) {
          if (region < 0 || region > 7) throw InvalidArgument("region numbers are 0..7, got " + std::to_string(region));
          if (!array.writeable()) throw InvalidArgument("region arrays must be writeable");
          auto a = array;
          mem[static_cast<size_t>(region)] = {a.mutable_data(), static_cast<size_t>(a.size())};
          keep.push_back(a);
        }
        sim::Executor ex(p.config, mem);
        sim::ExecutionStats st;
        {
          py::gil_scoped_release release;
          st = stop_after < 0 ? ex.run(cs) : ex.run(cs, static_cast<size_t>(stop_after));
        }
        return py::dict(py::arg("operations") = st.operations, py::arg("dma_bytes") = st.dma_bytes,
                        py::arg("macs") = st.macs);
      },
      py::arg("payload"), py::arg("regions"), py::arg("stop_after") = -1,
      "Executes a driver payload in place over region memories {region: writeable uint8 array};\n"
      "stop_after >= 0 runs only that many operations (for inspecting intermediates).");

  m.def(
      "decode_weight_stream",
      [](const py::bytes& data) {
        const std::string_view s = data;
        const auto v = emit::decode_weight_stream(reinterpret_cast<const uint8_t*>(s.data()), s.size());
        return py::array_t<int16_t>(static_cast<py::ssize_t>(v.size()), v.data());
      },
      py::arg("data"), "Decompresses an Ethos-U weight stream into its 9-bit values (NPU order).");

  m.def(
      "unpack_weights",
      [](const py::array_t<int16_t, py::array::c_style | py::array::forcecast>& stream, int ofm_depth,
         int kernel_height, int kernel_width, int ifm_depth, int ofm_block_depth, bool depthwise,
         bool part_kernel_first, int ifm_bits, int dilation_x, int dilation_y, int ifm_ublock_depth,
         int ofm_ublock_depth) {
        emit::WeightLayout l{ofm_depth, kernel_height, kernel_width, ifm_depth, ofm_block_depth, depthwise,
                             part_kernel_first, ifm_bits, dilation_x, dilation_y, ifm_ublock_depth, ofm_ublock_depth};
        const std::vector<int16_t> s(stream.data(), stream.data() + stream.size());
        const auto v = emit::unpack_weights(s, l);
        py::array_t<int16_t> out({ofm_depth, kernel_height, kernel_width, depthwise ? 1 : ifm_depth});
        std::copy(v.begin(), v.end(), out.mutable_data());
        return out;
      },
      py::arg("stream"), py::arg("ofm_depth"), py::arg("kernel_height"), py::arg("kernel_width"),
      py::arg("ifm_depth"), py::arg("ofm_block_depth"), py::arg("depthwise") = false,
      py::arg("part_kernel_first") = false, py::arg("ifm_bits") = 8, py::arg("dilation_x") = 1,
      py::arg("dilation_y") = 1, py::arg("ifm_ublock_depth") = 8, py::arg("ofm_ublock_depth") = 8,
      "Inverse of the NPU weight reorder: stream values -> OHWI weights.");

  m.def(
      "decode_scale_stream",
      [](const py::bytes& data, size_t count) {
        const std::string_view s = data;
        const auto v = emit::decode_scale_stream(reinterpret_cast<const uint8_t*>(s.data()), s.size(), count);
        py::list out;
        for (const auto& e : v) out.append(py::make_tuple(e.bias, e.scale, e.shift));
        return out;
      },
      py::arg("data"), py::arg("count"), "Reads (bias, scale, shift) per channel from a scale stream.");

  m.def("scale_accumulator",
        [](const py::array_t<int64_t, py::array::c_style | py::array::forcecast>& acc, uint32_t scale, int shift,
           int rounding) {
          if (rounding < 0 || rounding > 2 || shift < 0 || shift > 63) throw InvalidArgument("rounding 0..2, shift 0..63");
          py::array_t<int64_t> out(acc.size());
          const int64_t* in = acc.data();
          int64_t* o = out.mutable_data();
          for (py::ssize_t i = 0; i < acc.size(); ++i)
            o[i] = sim::scale_accumulator(in[i], scale, shift, static_cast<sim::Rounding>(rounding));
          return out.reshape(std::vector<py::ssize_t>(acc.shape(), acc.shape() + acc.ndim()));
        },
        py::arg("acc"), py::arg("scale"), py::arg("shift"), py::arg("rounding") = 0,
        "The NPU's (acc * scale) >> shift with rounding 0 TFL, 1 TRUNCATE, 2 NATURAL, over an array of\n"
        "accumulators: the lowering checks register values against the reference with it.");
}

}  // namespace cascader::bindings
