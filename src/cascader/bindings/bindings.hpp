// One bind_* function per core area; module.cpp calls them in order. Bindings only convert
// types and forward calls: no logic lives here.
#pragma once

#include <pybind11/pybind11.h>

namespace cascader::bindings {

void bind_memory(pybind11::module_& m);
void bind_arch(pybind11::module_& m);
void bind_perf(pybind11::module_& m);
void bind_sim(pybind11::module_& m);
void bind_estimator(pybind11::module_& m);
void bind_in_place(pybind11::module_& m);
void bind_relocate(pybind11::module_& m);
void bind_weight_encoder(pybind11::module_& m);
void bind_command_encoder(pybind11::module_& m);
void bind_planner(pybind11::module_& m);
void bind_ethos_u85(pybind11::module_& m);

}  // namespace cascader::bindings
