#include "bindings.hpp"
#include "version.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "chipdock core runtime (C++); use the `chipdock` package, not this module";
  m.attr("__version__") = chipdock::kCoreVersion;
  m.attr("ABI_VERSION") = py::make_tuple(CD_ABI_VERSION_MAJOR, CD_ABI_VERSION_MINOR);
  chipdock::python::register_errors(m);
  chipdock::python::register_runtime(m);
  chipdock::python::register_streams(m);
  chipdock::python::register_tensor(m);
  chipdock::python::register_dlpack(m);
}
