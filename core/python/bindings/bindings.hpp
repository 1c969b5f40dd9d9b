// Shared helpers of the Python binding. Only this layer turns core Errors
// into Python exceptions (see py_errors.cc).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "runtime.hpp"
#include "tensor.hpp"

namespace chipdock::python {

namespace py = pybind11;

void register_errors(py::module_& m);
void register_runtime(py::module_& m);
void register_streams(py::module_& m);
void register_tensor(py::module_& m);
void register_dlpack(py::module_& m);
void register_dispatch(py::module_& m);
void register_abi(py::module_& m);

// Resolves None / "cpu:0" / Device through chipdock._resolve_device.
Device& to_device(py::handle obj);

py::tuple to_tuple(const Shape& values);

}  // namespace chipdock::python
