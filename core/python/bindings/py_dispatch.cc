// Ops from Python: registering the opset, dispatching op calls (also the
// Tensor operators), the fallback policy, and the raw kernel launch
// (caller-allocated outputs, for kernel tests and the conformance suite).
#include "bindings.hpp"
#include "dispatch.hpp"
#include "dtype.hpp"
#include "launch.hpp"
#include "small_vector.hpp"

namespace chipdock::python {

namespace {

// How a Python value reads as an attribute: NumPy scalars count as the Python values they hold.
enum class ScalarKind { Bool, Int, Float, Other };

ScalarKind scalar_kind(py::handle value) {
  // Leaked on purpose: a static py::object would be released after the interpreter is gone.
  static PyObject* const np_bool = py::object(py::module_::import("numpy").attr("bool_")).release().ptr();
  static PyObject* const np_integer = py::object(py::module_::import("numpy").attr("integer")).release().ptr();
  static PyObject* const np_floating = py::object(py::module_::import("numpy").attr("floating")).release().ptr();
  PyObject* obj = value.ptr();
  if (PyBool_Check(obj)) return ScalarKind::Bool;  // before int: bool is an int
  if (PyLong_Check(obj)) return ScalarKind::Int;
  if (PyFloat_Check(obj)) return ScalarKind::Float;  // numpy.float64 too
  if (PyObject_IsInstance(obj, np_bool) == 1) return ScalarKind::Bool;
  if (PyObject_IsInstance(obj, np_integer) == 1) return ScalarKind::Int;
  if (PyObject_IsInstance(obj, np_floating) == 1) return ScalarKind::Float;
  return ScalarKind::Other;
}

// The attribute in messages: "attribute 'pads'", or "attribute 'pads'[2]" for an element. Built only for
// an error: attributes are converted on every op call.
std::string attr_what(const std::string& name, Py_ssize_t index) {
  std::string what = "attribute '" + name + "'";
  return index < 0 ? what : what + "[" + std::to_string(index) + "]";
}

int64_t attr_int(py::handle value, ScalarKind kind, const char* call, const std::string& name, Py_ssize_t index) {
  if (kind == ScalarKind::Bool) return PyObject_IsTrue(value.ptr()) == 1 ? 1 : 0;
  if (PyLong_CheckExact(value.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow == 0 && !(v == -1 && PyErr_Occurred())) return v;
    PyErr_Clear();
  }
  return to_int64(value, call, attr_what(name, index));  // NumPy integers, and the error
}

double attr_double(py::handle value, const char* call, const std::string& name, Py_ssize_t index) {
  const double v = PyFloat_AsDouble(value.ptr());
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    throw_overflow_error(call, attr_what(name, index) + " does not fit in a float64: got " + describe_value(value));
  }
  return v;
}

// A Python value as an ABI attribute: bool/int -> INT, float -> FLOAT, str -> STRING, a sequence of ints ->
// INTS, of numbers -> FLOATS (NumPy scalars and 1-d arrays alike). Every failure names the call and the
// attribute: TypeError for a wrong type, OverflowError for a value outside int64 or float64.
Attribute to_attribute(const std::string& name, py::handle value, const char* call) {
  Attribute a;
  a.name = name;
  const ScalarKind kind = scalar_kind(value);
  if (kind == ScalarKind::Bool || kind == ScalarKind::Int) {
    a.type = CD_ATTR_INT;
    a.i = attr_int(value, kind, call, name, -1);
  } else if (kind == ScalarKind::Float) {
    a.type = CD_ATTR_FLOAT;
    a.f = attr_double(value, call, name, -1);
  } else if (py::isinstance<py::str>(value)) {
    a.type = CD_ATTR_STRING;
    a.s = value.cast<std::string>();
  } else if (!PyBytes_Check(value.ptr()) && py::isinstance<py::sequence>(value)) {
    const auto fast = py::reinterpret_steal<py::object>(PySequence_Fast(value.ptr(), "not a sequence"));
    if (!fast) throw py::error_already_set();
    PyObject** items = PySequence_Fast_ITEMS(fast.ptr());
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.ptr());
    SmallVector<ScalarKind, 8> kinds;
    bool ints = true;
    for (Py_ssize_t i = 0; i < n; ++i) {
      kinds.push_back(scalar_kind(items[i]));
      if (kinds.back() == ScalarKind::Other) {
        throw_type_error(call, attr_what(name, i) + " must be a number, got " + describe_value(items[i]));
      }
      ints = ints && kinds.back() != ScalarKind::Float;
    }
    a.type = ints ? CD_ATTR_INTS : CD_ATTR_FLOATS;
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (ints) {
        a.ints.push_back(attr_int(items[i], kinds[static_cast<size_t>(i)], call, name, i));
      } else {
        a.floats.push_back(attr_double(items[i], call, name, i));
      }
    }
  } else {
    throw_invalid(call, attr_what(name, -1) + " has unsupported type " +
                            std::string(py::str(py::type::handle_of(value).attr("__name__"))));
  }
  return a;
}

void raw_launch(const std::string& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                const py::dict& attrs, std::optional<std::vector<cd_dtype_t>> signature) {
  if (outputs.empty()) throw_invalid("launch_kernel", "at least one output is needed");
  std::vector<Attribute> attributes;
  for (auto [key, value] : attrs) attributes.push_back(to_attribute(py::str(key), value, "launch_kernel"));
  TensorRefs in, out;
  for (const Tensor& t : inputs) in.push_back(&t);
  for (const Tensor& t : outputs) out.push_back(&t);
  Device& device = outputs.front().device();
  for (const Tensor* t : in) {
    if (&t->device() != &device) {
      throw_invalid("launch_kernel", "inputs and outputs must be on one device (" + t->device().label() +
                                         " and " + device.label() + ")");
    }
  }
  std::optional<DtypeList> sig;
  if (signature) sig.emplace(*signature);
  py::gil_scoped_release release;
  StreamPtr stream = device.current_stream();
  launch_kernel(*stream, op, in, out, attributes, sig ? &*sig : nullptr);
}

// ------------------------------------------------------------ the opset --

AttrKind attr_kind(const std::string& kind) {
  static const std::map<std::string, AttrKind> kinds = {
      {"int", AttrKind::Int},       {"float", AttrKind::Float},   {"bool", AttrKind::Bool},
      {"string", AttrKind::String}, {"ints", AttrKind::Ints},     {"floats", AttrKind::Floats},
      {"dtype", AttrKind::DType}};
  auto it = kinds.find(kind);
  if (it == kinds.end()) throw_invalid("register_op", "unknown attribute type '" + kind + "'");
  return it->second;
}

ArgSpec arg_spec(const py::dict& d) {
  ArgSpec a;
  a.name = d["name"].cast<std::string>();
  a.type_var = d["type"].cast<std::string>();
  a.optional = d.contains("optional") && d["optional"].cast<bool>();
  a.variadic = d.contains("variadic") && d["variadic"].cast<bool>();
  if (d.contains("indexes")) {
    py::dict bound = d["indexes"].cast<py::dict>();
    a.indexes_input = bound["input"].cast<std::string>();
    py::object axis = bound["axis"];
    if (py::isinstance<py::str>(axis)) {
      a.indexes_axis_attr = axis.cast<std::string>();
    } else {
      a.indexes_axis = axis.cast<int64_t>();
    }
  }
  return a;
}

// The op dict is prepared by chipdock/_opset.py from opset.yaml.
void register_op(const py::dict& d) {
  OpSpec op;
  op.name = d["name"].cast<std::string>();
  for (py::handle a : d["inputs"]) op.inputs.push_back(arg_spec(a.cast<py::dict>()));
  for (py::handle a : d["outputs"]) op.outputs.push_back(arg_spec(a.cast<py::dict>()));
  for (auto [var, dtypes] : d["types"].cast<py::dict>()) op.types[var.cast<std::string>()] = dtypes.cast<std::vector<cd_dtype_t>>();
  for (py::handle item : d["attributes"]) {
    py::dict a = item.cast<py::dict>();
    AttrSpec spec;
    spec.name = a["name"].cast<std::string>();
    spec.kind = attr_kind(a["type"].cast<std::string>());
    spec.required = a["required"].cast<bool>();
    if (!spec.required) spec.default_value = to_attribute(spec.name, a["default"], "register_op");
    if (!a["min"].is_none()) spec.min = a["min"].cast<double>();
    if (a.contains("nan")) spec.allow_nan = a["nan"].cast<bool>();
    if (a.contains("finite")) spec.finite = a["finite"].cast<bool>();
    spec.length = a["length"].cast<int64_t>();
    spec.choices = a["choices"].cast<std::vector<std::string>>();
    if (a.contains("since") && !a["since"].is_none()) spec.since = a["since"].cast<int32_t>();
    // Store the default in the kind the kernel will see.
    if (!spec.required) {
      Attribute& def = spec.default_value;
      if (spec.kind == AttrKind::Float && def.type == CD_ATTR_INT) def = Attribute{def.name, CD_ATTR_FLOAT, 0, static_cast<double>(def.i)};
      if (spec.kind == AttrKind::Ints && def.type == CD_ATTR_FLOATS) def.type = CD_ATTR_INTS;  // an empty list
      if (spec.kind == AttrKind::Floats && def.type == CD_ATTR_INTS) {
        def.floats.assign(def.ints.begin(), def.ints.end());
        def.type = CD_ATTR_FLOATS;
      }
    }
    op.attributes.push_back(std::move(spec));
  }
  for (auto [out, attr] : d["output_dtype"].cast<py::dict>()) op.output_dtype_from_attr[out.cast<std::string>()] = attr.cast<std::string>();
  op.shape_rule = d["shape"].cast<std::string>();
  op.view = d["view"].cast<bool>();
  op.nonempty = d["nonempty"].cast<bool>();
  if (d.contains("since") && !d["since"].is_none()) op.since = d["since"].cast<int32_t>();
  Opset::instance().add(std::move(op));
}

const OpSpec& find_op(const std::string& name) {
  const OpSpec* op = Opset::instance().find(name);
  if (op == nullptr) throw Error(CD_STATUS_INVALID_ARGUMENT, "core", name, "no such op in the opset");
  return *op;
}

// ---------------------------------------------------------- dispatching --

// A Python scalar or array as a tensor of `dtype` on `device` (Python does
// the conversion: it knows float16/bfloat16 through ml_dtypes).
Tensor to_tensor(py::handle value, Device& device, cd_dtype_t dtype, const std::string& call) {
  static py::object convert = py::module_::import("chipdock._tensor").attr("_as_operand");
  return convert(value, py::cast(&device, py::return_value_policy::reference), dtype, call).cast<Tensor>();
}

// The Tensor behind `h`, or NULL when `h` is not one (one type lookup).
const Tensor* as_tensor(py::handle h) {
  py::detail::make_caster<Tensor> caster;
  if (!caster.load(h, false)) return nullptr;
  return &py::detail::cast_op<const Tensor&>(caster);
}

// The positional operands of one call, borrowed from the caller's frame.
using ArgList = SmallVector<PyObject*, 8>;

// `fast` must be a list or tuple (PySequence_Fast), which owns the items.
ArgList arg_list(const py::object& fast) {
  ArgList out;
  PyObject** items = PySequence_Fast_ITEMS(fast.ptr());
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.ptr()); ++i) out.push_back(items[i]);
  return out;
}

// Builds the per-declared-input groups; non-tensor operands take the dtype
// of a tensor bound to the same type variable (like `x + 1` in PyTorch).
std::vector<std::vector<Tensor>> collect_inputs(const OpSpec& op, const ArgList& args, Device*& device) {
  if (args.size() > op.inputs.size()) {
    throw Error(CD_STATUS_INVALID_ARGUMENT, "core", op.name,
                "takes " + std::to_string(op.inputs.size()) + " inputs, got " + std::to_string(args.size()));
  }
  std::vector<std::vector<Tensor>> groups(op.inputs.size());
  struct Bound {
    const std::string* type_var;
    cd_dtype_t dtype;
  };
  SmallVector<Bound, 4> bound;  // type variable -> dtype of its first tensor
  std::vector<size_t> pending;
  for (size_t i = 0; i < args.size(); ++i) {
    py::handle a = args[i];
    if (a.is_none()) continue;
    if (op.inputs[i].variadic) {
      if (!py::isinstance<py::sequence>(a) || PyUnicode_Check(a.ptr())) {
        throw Error(CD_STATUS_INVALID_ARGUMENT, "core", op.name,
                    op.inputs[i].name + ": expected a sequence of tensors, got " + describe_value(a));
      }
      for (py::handle t : py::reinterpret_borrow<py::sequence>(a)) {
        const Tensor* tensor = as_tensor(t);
        if (tensor == nullptr) throw Error(CD_STATUS_INVALID_ARGUMENT, "core", op.name, op.inputs[i].name + ": expected tensors");
        groups[i].push_back(*tensor);
      }
    } else if (const Tensor* tensor = as_tensor(a)) {
      groups[i].push_back(*tensor);
    } else {
      pending.push_back(i);
      continue;
    }
    if (!groups[i].empty()) {
      if (device == nullptr) device = &groups[i].front().device();
      bound.push_back({&op.inputs[i].type_var, groups[i].front().dtype()});
    }
  }
  for (size_t i : pending) {
    auto it = std::find_if(bound.begin(), bound.end(), [&](const Bound& b) { return *b.type_var == op.inputs[i].type_var; });
    if (device == nullptr) device = &to_device(py::none());
    cd_dtype_t dtype = it != bound.end() ? it->dtype : CD_DTYPE_INVALID;
    groups[i].push_back(to_tensor(py::handle(args[i]), *device, dtype, op.name + ": input '" + op.inputs[i].name + "'"));
  }
  return groups;
}

// Index values given as Python data (a list, a NumPy array) are known on
// the host before they become a device tensor, so they are checked here, at
// the call, on every device (PyTorch raises IndexError at the call on CPU);
// device-resident indices are checked by the kernel. Only what can be
// decided is checked: a missing or out-of-range axis is left to the shape
// rule, which reports it. Runs before any operand is converted (copying
// Python data onto a busy stream waits for it).
void check_host_indices(const OpSpec& op, const ArgList& args, const py::dict* attrs) {
  for (size_t i = 0; i < args.size() && i < op.inputs.size(); ++i) {
    const ArgSpec& arg = op.inputs[i];
    if (arg.indexes_input.empty() || args[i] == Py_None || as_tensor(args[i]) != nullptr) continue;
    size_t target = 0;
    while (target < op.inputs.size() && op.inputs[target].name != arg.indexes_input) ++target;
    const Tensor* indexed = target < args.size() ? as_tensor(args[target]) : nullptr;
    if (indexed == nullptr) continue;
    int64_t axis = arg.indexes_axis;
    if (!arg.indexes_axis_attr.empty()) {
      const AttrSpec* spec = op.attribute(arg.indexes_axis_attr);
      if (attrs != nullptr && attrs->contains(arg.indexes_axis_attr) && !(*attrs)[arg.indexes_axis_attr.c_str()].is_none()) {
        py::object given = (*attrs)[arg.indexes_axis_attr.c_str()];
        if (PyBool_Check(given.ptr()) || !PyIndex_Check(given.ptr())) continue;  // ints, NumPy integers
        py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(given.ptr()));
        const long long v = index ? PyLong_AsLongLong(index.ptr()) : -1;
        if (v == -1 && PyErr_Occurred()) {
          PyErr_Clear();
          continue;  // outside int64: the attribute conversion reports it
        }
        axis = v;
      } else if (spec != nullptr && !spec->required) {
        axis = spec->default_value.i;
      } else {
        continue;
      }
    }
    const Shape& shape = indexed->shape();
    const auto ndim = static_cast<int64_t>(shape.size());
    if (axis < -ndim || axis >= ndim) continue;
    if (axis < 0) axis += ndim;
    const int64_t size = shape[static_cast<size_t>(axis)];
    static py::object numpy = py::module_::import("numpy");
    py::object values;
    try {
      values = numpy.attr("asarray")(py::handle(args[i]));
    } catch (py::error_already_set&) {
      continue;  // not array-like: the conversion reports it, naming the op
    }
    if (values.attr("size").cast<int64_t>() == 0 || values.attr("dtype").attr("kind").cast<std::string>() != "i") continue;
    for (const char* extreme : {"min", "max"}) {
      const int64_t v = values.attr(extreme)().cast<int64_t>();
      if (v < -size || v >= size) {
        throw Error(CD_STATUS_OUT_OF_RANGE, "core", op.name,
                    arg.name + ": index " + std::to_string(v) + " is out of range for axis " + std::to_string(axis) +
                        " of size " + std::to_string(size));
      }
    }
  }
}

py::object wrap_outputs(const OpSpec& op, DispatchResult&& result) {
  if (!result.warning.empty()) {
    static py::object category = py::module_::import("chipdock.errors").attr("FallbackWarning");
    if (PyErr_WarnEx(category.ptr(), result.warning.c_str(), 2) != 0) throw py::error_already_set();
  }
  if (result.outputs.size() == 1 && !op.outputs.front().variadic) return py::cast(std::move(result.outputs.front()));
  py::tuple out(result.outputs.size());
  for (size_t i = 0; i < result.outputs.size(); ++i) out[i] = py::cast(std::move(result.outputs[i]));
  return out;
}

py::object py_dispatch(const OpSpec& op, const ArgList& args, const py::dict* attrs, py::handle device_obj) {
  Device* device = device_obj.is_none() ? nullptr : &to_device(device_obj);
  check_host_indices(op, args, attrs);
  std::vector<std::vector<Tensor>> groups = collect_inputs(op, args, device);
  std::vector<Attribute> given;
  if (attrs != nullptr) {
    given.reserve(attrs->size());
    for (auto [key, value] : *attrs) {
      if (value.is_none()) continue;
      given.push_back(to_attribute(py::str(key), value, op.name.c_str()));
    }
  }
  if (device == nullptr && !op.inputs.empty()) device = &to_device(py::none());
  if (device == nullptr) device = &to_device(py::none());
  // The GIL stays held: dispatching only enqueues work, and every wait in
  // the core (a synchronizing copy on the fallback path, the allocator
  // draining a stream on OOM) drops it through BlockingSection. Releasing
  // and retaking it costs more than a small op.
  DispatchResult result = dispatch(op, std::move(groups), given, device);
  return wrap_outputs(op, std::move(result));
}

// An op an operator dispatches to, looked up once (the opset is registered
// from Python after this module loads, hence lazily).
// Held by value in the operator's function record, which pybind11 frees
// with the module; the cache is filled under the GIL.
class OpRef {
 public:
  explicit OpRef(const char* name) : name_(name) {}
  const OpSpec& get() const {
    if (spec_ == nullptr) spec_ = &find_op(name_);
    return *spec_;
  }

 private:
  const char* name_;
  mutable const OpSpec* spec_ = nullptr;
};

// A binary operator: `a op b`, or `b op a` when reflected.
py::object binary(const OpRef& op, py::handle self, py::handle other, bool reflected) {
  const ArgList args = reflected ? ArgList{other.ptr(), self.ptr()} : ArgList{self.ptr(), other.ptr()};
  return py_dispatch(op.get(), args, nullptr, py::none());
}

py::object unary(const OpRef& op, py::handle self) { return py_dispatch(op.get(), ArgList{self.ptr()}, nullptr, py::none()); }

FallbackPolicy parse_policy(const std::string& name) {
  if (name == "error") return FallbackPolicy::Error;
  if (name == "warn") return FallbackPolicy::Warn;
  if (name == "allow") return FallbackPolicy::Allow;
  throw_invalid("set_fallback_policy", "'" + name + "' is not one of error, warn, allow");
}

}  // namespace

void register_dispatch(py::module_& m) {
  m.def("register_op", &register_op, py::arg("spec"));
  m.def("op_names", [] { return Opset::instance().names(); });
  m.def(
      "dispatch",
      [](const std::string& name, const py::sequence& args, const py::dict& attrs, py::handle device) {
        const auto fast = py::reinterpret_steal<py::object>(PySequence_Fast(args.ptr(), "inputs must be a sequence"));
        if (!fast) throw py::error_already_set();
        return py_dispatch(find_op(name), arg_list(fast), &attrs, device);
      },
      py::arg("op"), py::arg("inputs"), py::arg("attributes"), py::arg("device") = py::none(),
      "Runs one op: inputs in declared order (None for an absent optional, a list for a variadic one).");
  m.def("set_fallback_policy", [](const std::string& p) { set_fallback_policy(parse_policy(p)); });
  m.def("fallback_policy", [] {
    const char* names[] = {"error", "warn", "allow"};
    return std::string(names[static_cast<int>(fallback_policy())]);
  });
  m.def("set_denied_ops", &set_denied_ops, py::arg("device_type"), py::arg("ops"));
  m.def("denied_ops", &denied_ops, py::arg("device_type"));
  m.def(
      "set_declared_unsupported",
      [](const std::string& device_type,
         const std::vector<std::tuple<std::string, std::vector<std::string>, std::string>>& entries) {
        std::vector<DeclaredUnsupported> list;
        for (const auto& [op, dtypes, reason] : entries) list.push_back({op, dtypes, reason});
        set_declared_unsupported(device_type, list);
      },
      py::arg("device_type"), py::arg("entries"),
      "The manifest's unsupported list of `device_type`'s backend, as (op, dtypes, reason): the reason of a "
      "fallback it declares.");
  m.def("reset_fallback_records", &reset_fallback_records);
  m.def("fallback_records", [] {
    py::list out;
    for (const FallbackRecord& r : fallback_records()) {
      py::dict d;
      d["device_type"] = r.device_type;
      d["op"] = r.op;
      d["dtypes"] = r.signature;
      d["count"] = r.count;
      d["reason"] = r.reason;
      out.append(d);
    }
    return out;
  });

  // Tensor operators, bound here so that `a + b` goes straight to C++.
  auto tensor = py::reinterpret_borrow<py::object>(m.attr("Tensor"));
  // Each operator owns its OpRef (captured by value: freed with the function).
  auto def_binary = [&](const char* dunder, const char* name, bool reflected) {
    tensor.attr(dunder) = py::cpp_function(
        [op = OpRef(name), reflected](py::handle self, py::handle other) { return binary(op, self, other, reflected); },
        py::is_method(tensor), py::arg("other"));
  };
  auto def_unary = [&](const char* dunder, const char* name) {
    tensor.attr(dunder) = py::cpp_function([op = OpRef(name)](py::handle self) { return unary(op, self); },
                                           py::is_method(tensor));
  };
  const std::pair<const char*, const char*> forward[] = {
      {"__add__", "add"}, {"__sub__", "sub"}, {"__mul__", "mul"}, {"__truediv__", "div"}, {"__pow__", "pow"},
      {"__matmul__", "matmul"}, {"__eq__", "eq"}, {"__ne__", "ne"}, {"__lt__", "lt"}, {"__le__", "le"},
      {"__gt__", "gt"}, {"__ge__", "ge"}, {"__and__", "logical_and"}, {"__or__", "logical_or"}};
  for (const auto& [dunder, op] : forward) def_binary(dunder, op, false);
  const std::pair<const char*, const char*> reflected[] = {
      {"__radd__", "add"}, {"__rsub__", "sub"}, {"__rmul__", "mul"}, {"__rtruediv__", "div"},
      {"__rpow__", "pow"}, {"__rmatmul__", "matmul"}, {"__rand__", "logical_and"}, {"__ror__", "logical_or"}};
  for (const auto& [dunder, op] : reflected) def_binary(dunder, op, true);
  def_unary("__neg__", "neg");
  def_unary("__abs__", "abs");
  def_unary("__invert__", "logical_not");
  // Elementwise __eq__ would otherwise make tensors unhashable.
  tensor.attr("__hash__") = py::cpp_function([](py::handle self) { return reinterpret_cast<intptr_t>(self.ptr()); },
                                             py::is_method(tensor));

  m.def("launch_kernel", &raw_launch, py::arg("op"), py::arg("inputs"), py::arg("outputs"),
        py::arg("attributes") = py::dict(), py::arg("signature") = py::none(),
        "Runs the device's kernel for `op` on the current stream with caller-allocated outputs. "
        "No shape inference and no attribute defaults: the raw ABI call, for kernel tests.");
}

}  // namespace chipdock::python
