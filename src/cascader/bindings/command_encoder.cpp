#include "cascader/bindings/bindings.hpp"

namespace cascader::bindings {

void bind_command_encoder(pybind11::module_& m) { (void)m; }

}  // namespace cascader::bindings
