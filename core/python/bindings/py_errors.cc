#include "bindings.hpp"

namespace chipdock::python {

namespace {

// The Python class for a status code; classes live in chipdock/errors.py.
const char* class_for(cd_status_t code) {
  switch (code) {
    case CD_STATUS_INVALID_ARGUMENT: return "InvalidArgumentError";
    case CD_STATUS_INVALID_HANDLE: return "InvalidHandleError";
    case CD_STATUS_OUT_OF_MEMORY: return "OutOfMemoryError";
    case CD_STATUS_UNIMPLEMENTED: return "UnimplementedError";
    case CD_STATUS_NOT_READY: return "NotReadyError";
    case CD_STATUS_DEVICE_ERROR: return "DeviceError";
    case CD_STATUS_UNAVAILABLE: return "UnavailableError";
    case CD_STATUS_OUT_OF_RANGE: return "OutOfRangeError";
    case kStatusPluginRefused: return "PluginRefusedError";
    default: return "ChipdockError";
  }
}

}  // namespace

void register_errors(py::module_& m) {
  m.def("status_name", &status_name);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      py::object errors = py::module_::import("chipdock.errors");
      py::object cls = errors.attr(class_for(e.code()));
      py::object exc = cls(e.what(), py::arg("backend") = e.backend(), py::arg("call") = e.call(),
                           py::arg("reason") = e.reason(), py::arg("code") = status_name(e.code()));
      PyErr_SetObject(cls.ptr(), exc.ptr());
    }
  });
}

}  // namespace chipdock::python
