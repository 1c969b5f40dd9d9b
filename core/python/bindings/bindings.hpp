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

// A string a backend supplied (a device name, a version, an error message) as Python text: bytes that are
// not UTF-8 become U+FFFD instead of a UnicodeDecodeError that would hide the device or the error.
py::str backend_text(const std::string& text);

// Argument conversion that names the call and the argument when it fails, as NumPy would raise it, never
// pybind11's bare "Unable to cast" RuntimeError. `what` names the argument ("shape[1]", "attribute 'axis'").
[[noreturn]] void throw_type_error(const std::string& call, const std::string& reason);
[[noreturn]] void throw_overflow_error(const std::string& call, const std::string& reason);
// A short description of a Python value for messages: "str 'a'", "int of 71 bits".
std::string describe_value(py::handle value);
// An integer (int, bool, NumPy integer: anything with __index__ but a float) as int64: TypeError for
// anything else, OverflowError outside int64.
int64_t to_int64(py::handle value, const std::string& call, const std::string& what);
// Any iterable of such integers.
Shape to_int64s(py::handle values, const std::string& call, const std::string& what);

}  // namespace chipdock::python
