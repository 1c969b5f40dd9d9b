// Launching kernels from Python: the raw launch (caller-allocated outputs,
// used by kernel tests and the conformance suite).
#include "bindings.hpp"
#include "launch.hpp"

namespace chipdock::python {

namespace {

bool all_ints(const py::sequence& seq) {
  for (py::handle v : seq) {
    if (!py::isinstance<py::int_>(v)) return false;
  }
  return true;
}

// A Python value as an ABI attribute: bool/int -> INT, float -> FLOAT,
// str -> STRING, a sequence of ints -> INTS, of numbers -> FLOATS.
Attribute to_attribute(const std::string& name, py::handle value, const char* call) {
  Attribute a;
  a.name = name;
  if (py::isinstance<py::bool_>(value) || py::isinstance<py::int_>(value)) {
    a.type = CD_ATTR_INT;
    a.i = value.cast<int64_t>();
  } else if (py::isinstance<py::float_>(value)) {
    a.type = CD_ATTR_FLOAT;
    a.f = value.cast<double>();
  } else if (py::isinstance<py::str>(value)) {
    a.type = CD_ATTR_STRING;
    a.s = value.cast<std::string>();
  } else if (py::isinstance<py::sequence>(value)) {
    auto seq = py::reinterpret_borrow<py::sequence>(value);
    if (all_ints(seq)) {
      a.type = CD_ATTR_INTS;
      for (py::handle v : seq) a.ints.push_back(v.cast<int64_t>());
    } else {
      a.type = CD_ATTR_FLOATS;
      for (py::handle v : seq) a.floats.push_back(v.cast<double>());
    }
  } else {
    throw_invalid(call, "attribute '" + name + "' has unsupported type " +
                            std::string(py::str(py::type::handle_of(value).attr("__name__"))));
  }
  return a;
}

void raw_launch(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                const py::dict& attrs, std::optional<std::vector<cd_dtype_t>> signature) {
  if (outputs.empty()) throw_invalid("launch_kernel", "at least one output is needed");
  std::vector<Attribute> attributes;
  for (auto [key, value] : attrs) attributes.push_back(to_attribute(py::str(key), value, "launch_kernel"));
  std::vector<const Tensor*> in, out;
  for (const Tensor& t : inputs) in.push_back(&t);
  for (const Tensor& t : outputs) out.push_back(&t);
  Device& device = outputs.front().device();
  for (const Tensor* t : in) {
    if (&t->device() != &device) {
      throw_invalid("launch_kernel", "inputs and outputs must be on one device (" + t->device().label() +
                                         " and " + device.label() + ")");
    }
  }
  py::gil_scoped_release release;
  StreamPtr stream = device.current_stream();
  launch_kernel(*stream, op, in, out, attributes, signature ? &*signature : nullptr);
}

}  // namespace

void register_dispatch(py::module_& m) {
  m.def("launch_kernel", &raw_launch, py::arg("op"), py::arg("inputs"), py::arg("outputs"),
        py::arg("attributes") = py::dict(), py::arg("signature") = py::none(),
        "Runs the device's kernel for `op` on the current stream with caller-allocated outputs. "
        "No shape inference and no attribute defaults: the raw ABI call, for kernel tests.");
}

}  // namespace chipdock::python
