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

// The exception a signal handler raised during an interruptible wait on
// this thread, kept until the Interrupted it caused reaches Python.
struct PendingInterrupt {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
};
thread_local PendingInterrupt t_interrupt;

// Python runs signal handlers only on its main thread; other threads never
// take the GIL to ask.
unsigned long g_main_thread = 0;

// Called by core waits, never under a core lock: takes the GIL, runs the
// pending signal handlers (Ctrl-C raises KeyboardInterrupt in them).
bool signal_raised() {
  if (PyThread_get_thread_ident() != g_main_thread || !Py_IsInitialized()) return false;
  PyGILState_STATE gil = PyGILState_Ensure();
  const bool raised = PyErr_CheckSignals() != 0;
  if (raised) {
    Py_XDECREF(t_interrupt.type);
    Py_XDECREF(t_interrupt.value);
    Py_XDECREF(t_interrupt.traceback);
    PyErr_Fetch(&t_interrupt.type, &t_interrupt.value, &t_interrupt.traceback);
  }
  PyGILState_Release(gil);
  return raised;
}

// Interrupted becomes the exception the handler raised (KeyboardInterrupt).
void translate_interrupted(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const chipdock::Interrupted&) {
    if (t_interrupt.type != nullptr) {
      PyErr_Restore(t_interrupt.type, t_interrupt.value, t_interrupt.traceback);  // steals the references
      t_interrupt = PendingInterrupt{};
    } else {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
    }
  }
}

}  // namespace

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "chipdock core runtime (C++); use the `chipdock` package, not this module";
  m.attr("__version__") = chipdock::kCoreVersion;
  m.attr("ABI_VERSION") = py::make_tuple(CD_ABI_VERSION_MAJOR, CD_ABI_VERSION_MINOR);
  g_main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  chipdock::set_blocking_hooks({&release_gil, &reacquire_gil, &signal_raised});
  chipdock::python::register_errors(m);
  py::register_exception_translator(&translate_interrupted);  // tried before the Error translator
  chipdock::python::register_runtime(m);
  chipdock::python::register_streams(m);
  chipdock::python::register_tensor(m);
  chipdock::python::register_dlpack(m);
  chipdock::python::register_dispatch(m);
  chipdock::python::register_abi(m);
}
