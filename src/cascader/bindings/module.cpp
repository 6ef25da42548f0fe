#include <exception>
#include <utility>

#include "cascader/bindings/bindings.hpp"
#include "cascader/common/error.hpp"
#include "cascader/common/parallel.hpp"

namespace py = pybind11;

namespace {

// The Python classes live in cascader/errors.py (documented there); they are looked up at
// throw time so that the extension module has no import-order dependency on them.
void raise_as(const char* python_class, const std::exception& e) {
  py::object cls = py::module_::import("cascader.errors").attr(python_class);
  PyErr_SetString(cls.ptr(), e.what());
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "cascader C++ core (thin bindings; see the cascader package for the API)";

  // Most derived first: a catch of the base would swallow the specific types.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const cascader::BudgetError& e) {
      raise_as("BudgetError", e);
    } catch (const cascader::BinaryError& e) {
      raise_as("BinaryError", e);
    } catch (const cascader::InvalidArgument& e) {
      raise_as("InvalidArgumentError", e);
    } catch (const cascader::Error& e) {
      raise_as("CascaderError", e);
    }
  });

  m.def("core_count", &cascader::core_count,
        "The cores a compile uses: $CASCADER_NUM_THREADS when set, else every core (common/parallel.hpp).");
  m.def("set_worker_cap", [](size_t cap) { return std::exchange(cascader::worker_cap(), cap); }, py::arg("cap"),
        "Caps the workers of this thread's parallel work (0: none); returns the cap it replaces.");

  cascader::bindings::bind_memory(m);
  cascader::bindings::bind_arch(m);
  cascader::bindings::bind_perf(m);
  cascader::bindings::bind_sim(m);
  cascader::bindings::bind_estimator(m);
  cascader::bindings::bind_in_place(m);
  cascader::bindings::bind_relocate(m);
  cascader::bindings::bind_weight_encoder(m);
  cascader::bindings::bind_command_encoder(m);
  cascader::bindings::bind_planner(m);
  cascader::bindings::bind_ethos_u85(m);
}
