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

py::str backend_text(const std::string& text) {
  PyObject* decoded = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (decoded == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(decoded);
}

void throw_type_error(const std::string& call, const std::string& reason) {
  throw py::type_error("[core] " + call + ": " + reason);
}

void throw_overflow_error(const std::string& call, const std::string& reason) {
  PyErr_SetString(PyExc_OverflowError, ("[core] " + call + ": " + reason).c_str());
  throw py::error_already_set();
}

std::string describe_value(py::handle value) {
  std::string type = py::str(py::type::handle_of(value).attr("__name__"));
  if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
    const auto bits = value.attr("bit_length")().cast<int64_t>();
    if (bits > 200) return type + " of " + std::to_string(bits) + " bits";  // its repr may have 10^4 digits
  }
  PyObject* repr = PyObject_Repr(value.ptr());
  if (repr == nullptr) {
    PyErr_Clear();
    return type;
  }
  std::string text = py::reinterpret_steal<py::str>(repr);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return type + " " + text;
}

int64_t to_int64(py::handle value, const std::string& call, const std::string& what) {
  PyObject* obj = value.ptr();
  if (PyFloat_Check(obj) || !PyIndex_Check(obj)) {
    throw_type_error(call, what + " must be an integer, got " + describe_value(value));
  }
  PyObject* index = PyNumber_Index(obj);
  if (index == nullptr) {
    PyErr_Clear();
    throw_type_error(call, what + " must be an integer, got " + describe_value(value));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (overflow != 0) {
    throw_overflow_error(call, what + " is outside int64 [-2^63, 2^63): got " + describe_value(value));
  }
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return v;
}

Shape to_int64s(py::handle values, const std::string& call, const std::string& what) {
  if (PyUnicode_Check(values.ptr()) || PyBytes_Check(values.ptr())) {
    throw_type_error(call, what + " must be a sequence of integers, got " + describe_value(values));
  }
  PyObject* iter = PyObject_GetIter(values.ptr());
  if (iter == nullptr) {
    PyErr_Clear();
    throw_type_error(call, what + " must be a sequence of integers, got " + describe_value(values));
  }
  auto owned = py::reinterpret_steal<py::object>(iter);
  Shape out;
  while (PyObject* item = PyIter_Next(iter)) {
    auto held = py::reinterpret_steal<py::object>(item);
    out.push_back(to_int64(held, call, what + "[" + std::to_string(out.size()) + "]"));
  }
  if (PyErr_Occurred()) throw py::error_already_set();
  return out;
}

void register_errors(py::module_& m) {
  m.def("status_name", &status_name);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      py::object errors = py::module_::import("chipdock.errors");
      py::object cls = errors.attr(class_for(e.code()));
      py::object exc = cls(backend_text(e.what()), py::arg("backend") = backend_text(e.backend()),
                           py::arg("call") = backend_text(e.call()), py::arg("reason") = backend_text(e.reason()),
                           py::arg("code") = status_name(e.code()));
      PyErr_SetObject(cls.ptr(), exc.ptr());
    }
  });
}

}  // namespace chipdock::python
