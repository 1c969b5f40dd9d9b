#include "bindings.hpp"
#include "blocking.hpp"
#include "version.hpp"

namespace {

// Lets core destructors that wait for device work drop the GIL meanwhile.
void* release_gil() {
  if (!Py_IsInitialized() || !PyGILState_Check()) return nullptr;
  return PyEval_SaveThread();
}

void reacquire_gil(void* state) {
  if (state != nullptr) PyEval_RestoreThread(static_cast<PyThreadState*>(state));
}

}  // namespace

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "chipdock core runtime (C++); use the `chipdock` package, not this module";
  m.attr("__version__") = chipdock::kCoreVersion;
  m.attr("ABI_VERSION") = py::make_tuple(CD_ABI_VERSION_MAJOR, CD_ABI_VERSION_MINOR);
  chipdock::set_blocking_hooks({&release_gil, &reacquire_gil});
  chipdock::python::register_errors(m);
  chipdock::python::register_runtime(m);
  chipdock::python::register_streams(m);
  chipdock::python::register_tensor(m);
  chipdock::python::register_dlpack(m);
  chipdock::python::register_dispatch(m);
  chipdock::python::register_abi(m);
}
