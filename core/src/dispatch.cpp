#include "dispatch.hpp"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "dtype.hpp"
#include "launch.hpp"
#include "shape_rules.hpp"

namespace chipdock {

namespace {

std::atomic<int> g_policy{static_cast<int>(FallbackPolicy::Warn)};
std::mutex g_fallback_mutex;
std::map<std::string, std::set<std::string>> g_denied;  // device type -> ops
std::atomic<bool> g_any_denied{false};
std::map<std::string, std::vector<DeclaredUnsupported>> g_declared;  // device type -> the manifest's list
std::map<std::tuple<std::string, std::string, std::string>, FallbackRecord> g_records;

[[noreturn]] void fail(const OpSpec& op, const std::string& what, const std::string& reason) {
  throw Error(CD_STATUS_INVALID_ARGUMENT, "core", op.name, what + ": " + reason);
}

std::string describe_dtypes(const DtypeList& dtypes) {
  std::string text = "(";
  for (size_t i = 0; i < dtypes.size(); ++i) text += (i ? ", " : "") + std::string(dtype_name(dtypes[i]));
  return text + ")";
}

cd_dtype_t dtype_by_name(const std::string& name) {
  for (cd_dtype_t d = 1; d < CD_DTYPE_COUNT; ++d) {
    if (name == dtype_name(d)) return d;
  }
  return CD_DTYPE_INVALID;
}

// ------------------------------------------------------------ attributes --

std::string describe_number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e18) return std::to_string(static_cast<int64_t>(v));
  char text[32];  // %g: std::to_string would print every digit of 1e300
  std::snprintf(text, sizeof text, "%g", v);
  return std::isnan(v) ? "nan" : text;
}

// The spec's range of an attribute (opset.yaml `min`, `nan`, `finite`): every value,
// list entries included. An int is compared exactly (a double would round
// int64 values near 2^63); NaN is out of any range, and refused anyway
// where the spec says `nan: false`.
void check_range(const OpSpec& op, const AttrSpec& spec, const Attribute& a) {
  auto check_int = [&](int64_t v, const std::string& where) {
    if (!spec.min) return;
    const double lo = *spec.min;
    const bool below = std::fabs(lo) < 4e18 ? v < static_cast<int64_t>(std::ceil(lo)) : static_cast<double>(v) < lo;
    if (below) fail(op, spec.name, where + std::to_string(v) + " is below the minimum " + describe_number(lo));
  };
  auto check_float = [&](double v, const std::string& where) {
    if (std::isnan(v) && (spec.min || !spec.allow_nan || spec.finite)) fail(op, spec.name, where + "NaN is not allowed");
    if (std::isinf(v) && spec.finite) fail(op, spec.name, where + "must be finite, got " + (v > 0 ? "inf" : "-inf"));
    // Kernels may compute with a float attribute in float32 (all of float16,
    // bfloat16 and float32 do, as torch's do): past its range it would turn
    // into an infinity there, which `finite` rules out.
    if (spec.finite && std::fabs(v) > static_cast<double>(FLT_MAX)) {
      fail(op, spec.name, where + describe_number(v) + " is beyond float32's range (|value| <= 3.4e38)");
    }
    if (spec.min && v < *spec.min) {
      fail(op, spec.name, where + describe_number(v) + " is below the minimum " + describe_number(*spec.min));
    }
  };
  auto entry = [](size_t i) { return "entry " + std::to_string(i) + ": "; };
  if (a.type == CD_ATTR_INT && spec.kind == AttrKind::Int) check_int(a.i, "");
  if (a.type == CD_ATTR_FLOAT) check_float(a.f, "");
  if (a.type == CD_ATTR_INTS) {
    for (size_t i = 0; i < a.ints.size(); ++i) check_int(a.ints[i], a.ints.size() > 1 ? entry(i) : "");
  }
  if (a.type == CD_ATTR_FLOATS) {
    for (size_t i = 0; i < a.floats.size(); ++i) check_float(a.floats[i], a.floats.size() > 1 ? entry(i) : "");
  }
}

// Coerces one given attribute to its spec's kind and checks its range.
Attribute coerce(const OpSpec& op, const AttrSpec& spec, Attribute a) {
  auto bad_type = [&](const char* expected) {
    fail(op, spec.name, std::string("expected ") + expected);
  };
  switch (spec.kind) {
    case AttrKind::Int:
    case AttrKind::Bool:
      if (a.type != CD_ATTR_INT) bad_type(spec.kind == AttrKind::Int ? "an int" : "a bool");
      if (spec.kind == AttrKind::Bool && a.i != 0 && a.i != 1) bad_type("a bool");
      break;
    case AttrKind::Float:
      if (a.type == CD_ATTR_INT) a.f = static_cast<double>(a.i);
      else if (a.type != CD_ATTR_FLOAT) bad_type("a number");
      a.type = CD_ATTR_FLOAT;
      break;
    case AttrKind::String:
      if (a.type != CD_ATTR_STRING) bad_type("a string");
      break;
    case AttrKind::Ints:
      if (a.type == CD_ATTR_INT) a.ints = {a.i};
      else if (a.type == CD_ATTR_FLOATS && a.floats.empty()) a.ints = {};
      else if (a.type != CD_ATTR_INTS) bad_type("a list of ints");
      a.type = CD_ATTR_INTS;
      break;
    case AttrKind::Floats:
      if (a.type == CD_ATTR_INTS) a.floats.assign(a.ints.begin(), a.ints.end());
      else if (a.type == CD_ATTR_FLOAT) a.floats = {a.f};
      else if (a.type != CD_ATTR_FLOATS) bad_type("a list of numbers");
      a.type = CD_ATTR_FLOATS;
      break;
    case AttrKind::DType:
      if (a.type == CD_ATTR_STRING) a.i = dtype_by_name(a.s);
      else if (a.type != CD_ATTR_INT) bad_type("a dtype");
      if (!dtype_valid(static_cast<cd_dtype_t>(a.i))) bad_type("a dtype");
      a.type = CD_ATTR_INT;
      break;
  }
  check_range(op, spec, a);
  if (spec.length >= 0) {
    const size_t n = a.type == CD_ATTR_INTS ? a.ints.size() : a.floats.size();
    if (static_cast<int64_t>(n) != spec.length) {
      fail(op, spec.name, "expected " + std::to_string(spec.length) + " values, got " + std::to_string(n));
    }
  }
  if (!spec.choices.empty() && std::find(spec.choices.begin(), spec.choices.end(), a.s) == spec.choices.end()) {
    std::string options;
    for (const auto& c : spec.choices) options += (options.empty() ? "" : ", ") + c;
    fail(op, spec.name, "'" + a.s + "' is not one of " + options);
  }
  a.name = spec.name;
  return a;
}

std::map<std::string, Attribute> normalize_attributes(const OpSpec& op, const std::vector<Attribute>& given) {
  std::map<std::string, Attribute> out;
  for (const Attribute& a : given) {
    const AttrSpec* spec = op.attribute(a.name);
    if (spec == nullptr) {
      std::string known;
      for (const AttrSpec& s : op.attributes) known += (known.empty() ? "" : ", ") + s.name;
      fail(op, a.name, "unknown attribute (" + op.name + " takes: " + (known.empty() ? "none" : known) + ")");
    }
    out[a.name] = coerce(op, *spec, a);
  }
  for (const AttrSpec& spec : op.attributes) {
    if (out.count(spec.name)) continue;
    if (spec.required) fail(op, spec.name, "required attribute missing");
    out[spec.name] = spec.default_value;
    out[spec.name].name = spec.name;
  }
  return out;
}

// ------------------------------------------------------- opset versions --

bool same_value(const Attribute& a, const Attribute& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case CD_ATTR_INT: return a.i == b.i;
    case CD_ATTR_FLOAT: return a.f == b.f || (std::isnan(a.f) && std::isnan(b.f));
    case CD_ATTR_STRING: return a.s == b.s;
    case CD_ATTR_INTS: return a.ints == b.ints;
    default: return a.floats == b.floats;
  }
}

std::string describe_value(const Attribute& a) {
  switch (a.type) {
    case CD_ATTR_INT: return std::to_string(a.i);
    case CD_ATTR_FLOAT: return describe_number(a.f);
    case CD_ATTR_STRING: return "'" + a.s + "'";
    case CD_ATTR_INTS: {
      std::string text = "[";
      for (size_t i = 0; i < a.ints.size(); ++i) text += (i ? ", " : "") + std::to_string(a.ints[i]);
      return text + "]";
    }
    default: {
      std::string text = "[";
      for (size_t i = 0; i < a.floats.size(); ++i) text += (i ? ", " : "") + describe_number(a.floats[i]);
      return text + "]";
    }
  }
}

// Why the kernel of a backend built against an older opset cannot run this
// call, or "" when it can: the op itself, or an attribute holding anything
// but its default, is newer than the backend (opset.yaml `since`). An
// attribute at its default keeps the op's earlier meaning (the opset's bump
// rule), so the backend's kernel runs and is not handed the attribute.
std::string predated_by(const OpSpec& op, const std::map<std::string, Attribute>& attrs, const Plugin& plugin) {
  const int32_t built = plugin.opset_version();
  const std::string backend = "backend '" + plugin.name() + "' was built against opset " + std::to_string(built);
  if (op.since > built) {
    return backend + " and predates the op " + op.name + " (opset " + std::to_string(op.since) +
           "); its kernel of that name is not used";
  }
  for (const AttrSpec& spec : op.attributes) {
    if (spec.since <= built) continue;
    const Attribute& given = attrs.at(spec.name);
    if (!spec.required && same_value(given, spec.default_value)) continue;
    return backend + " and predates attribute '" + spec.name + "' of " + op.name + " (opset " +
           std::to_string(spec.since) + "), given " + describe_value(given) +
           (spec.required ? "" : " instead of its default " + describe_value(spec.default_value));
  }
  return "";
}

// ----------------------------------------------------------------- types --

// The dtype bound to each type variable of the call (few: a flat list).
class TypeBindings {
 public:
  const cd_dtype_t* find(const std::string& var) const {
    for (const auto& b : bound_) {
      if (b.var == &var || *b.var == var) return &b.dtype;
    }
    return nullptr;
  }
  // Binds `var` unless bound already; returns the bound dtype.
  cd_dtype_t emplace(const std::string& var, cd_dtype_t dtype) {
    if (const cd_dtype_t* d = find(var)) return *d;
    bound_.push_back({&var, dtype});
    return dtype;
  }

 private:
  struct Bound {
    const std::string* var;  // the OpSpec's string: lives as long as the opset
    cd_dtype_t dtype;
  };
  SmallVector<Bound, 4> bound_;
};

struct Binding {
  TypeBindings types;
  Device* device = nullptr;
  std::string device_arg;
};

Binding bind_inputs(const OpSpec& op, const std::vector<std::vector<Tensor>>& inputs, Device* fallback_device) {
  Binding b;
  if (inputs.size() != op.inputs.size()) {
    fail(op, "inputs", "expected " + std::to_string(op.inputs.size()) + ", got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ArgSpec& arg = op.inputs[i];
    if (inputs[i].empty() && !arg.optional) fail(op, arg.name, arg.variadic ? "needs at least one tensor" : "missing");
    for (size_t j = 0; j < inputs[i].size(); ++j) {
      const Tensor& t = inputs[i][j];
      const std::string name = arg.variadic ? arg.name + "[" + std::to_string(j) + "]" : arg.name;
      if (b.device == nullptr) {
        b.device = &t.device();
        b.device_arg = name;
      } else if (&t.device() != b.device) {
        fail(op, name, "is on " + t.device().label() + " but " + b.device_arg + " is on " + b.device->label());
      }
      const auto& allowed = op.types.at(arg.type_var);
      if (std::find(allowed.begin(), allowed.end(), t.dtype()) == allowed.end()) {
        std::string options;
        for (cd_dtype_t d : allowed) options += (options.empty() ? "" : ", ") + std::string(dtype_name(d));
        fail(op, name, std::string("dtype ") + dtype_name(t.dtype()) + " is not supported (" + arg.type_var + ": " + options + ")");
      }
      const cd_dtype_t bound = b.types.emplace(arg.type_var, t.dtype());
      if (bound != t.dtype()) {
        fail(op, name, std::string("is ") + dtype_name(t.dtype()) + " but an earlier " + arg.type_var + " input is " +
                           dtype_name(bound) + " (no implicit promotion; cast first)");
      }
    }
  }
  if (b.device == nullptr) b.device = fallback_device;
  if (b.device == nullptr) fail(op, "device", "an op without inputs needs a device");
  return b;
}

// The dtype of each declared output.
DtypeList output_dtypes(const OpSpec& op, Binding& b, const std::map<std::string, Attribute>& attrs) {
  DtypeList out;
  for (const ArgSpec& arg : op.outputs) {
    auto from_attr = op.output_dtype_from_attr.find(arg.name);
    cd_dtype_t dt = CD_DTYPE_INVALID;
    if (from_attr != op.output_dtype_from_attr.end()) {
      dt = static_cast<cd_dtype_t>(attrs.at(from_attr->second).i);
      const auto& allowed = op.types.at(arg.type_var);
      if (std::find(allowed.begin(), allowed.end(), dt) == allowed.end()) {
        fail(op, from_attr->second, std::string("dtype ") + dtype_name(dt) + " is not supported");
      }
      b.types.emplace(arg.type_var, dt);
    } else if (const cd_dtype_t* bound = b.types.find(arg.type_var)) {
      dt = *bound;
    } else {
      const auto& allowed = op.types.at(arg.type_var);
      if (allowed.size() != 1) fail(op, arg.name, "its dtype cannot be inferred");
      dt = allowed.front();
      b.types.emplace(arg.type_var, dt);
    }
    out.push_back(dt);
  }
  return out;
}

// One dtype per declared input (absent or variadic: its type's binding), then outputs.
DtypeList kernel_signature(const OpSpec& op, const Binding& b, const DtypeList& outs) {
  DtypeList sig;
  for (const ArgSpec& arg : op.inputs) {
    const cd_dtype_t* bound = b.types.find(arg.type_var);
    sig.push_back(bound != nullptr ? *bound : op.types.at(arg.type_var).front());
  }
  for (cd_dtype_t d : outs) sig.push_back(d);
  return sig;
}

bool is_denied(const std::string& device_type, const std::string& op) {
  if (!g_any_denied.load(std::memory_order_relaxed)) return false;  // the common case, without the lock
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  auto it = g_denied.find(device_type);
  return it != g_denied.end() && it->second.count(op);
}

// Why `op` with `sig` has no kernel on `device_type`: the manifest's reason
// when its unsupported list declares it (see set_declared_unsupported).
std::string missing_kernel_reason(const std::string& device_type, const std::string& op, const DtypeList& sig) {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  auto it = g_declared.find(device_type);
  if (it == g_declared.end()) return "no kernel";
  std::vector<std::string> names;
  std::string label;
  for (cd_dtype_t d : sig) {
    const std::string name = dtype_name(d);
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    label += (names.empty() ? "" : "-") + name;
    names.push_back(name);
  }
  for (const DeclaredUnsupported& entry : it->second) {
    if (entry.op != op) continue;
    bool match = entry.dtypes.empty();
    for (const std::string& d : entry.dtypes) {
      match = match || d == label || std::find(names.begin(), names.end(), d) != names.end();
    }
    if (match) return "declared unsupported: " + entry.reason;
  }
  return "no kernel";
}

// Records a fallback; true the first time this (device, op, signature) falls back.
bool record_fallback(const std::string& device_type, const std::string& op, const std::string& sig, const std::string& reason) {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  auto& rec = g_records[{device_type, op, sig}];
  const bool first = rec.count == 0;
  rec.device_type = device_type;
  rec.op = op;
  rec.signature = sig;
  rec.reason = reason;
  ++rec.count;
  return first;
}

DispatchResult run_on_cpu_reference(const OpSpec& op, std::vector<std::vector<Tensor>> inputs,
                                    const std::vector<Attribute>& given, Device& device, const std::string& sig,
                                    const std::string& reason) {
  const auto policy = static_cast<FallbackPolicy>(g_policy.load());
  if (device.type() == "cpu") {
    throw Error(CD_STATUS_UNIMPLEMENTED, device.plugin().name(), op.name, "the CPU reference has no kernel for " + sig);
  }
  if (policy == FallbackPolicy::Error) {
    throw Error(CD_STATUS_UNIMPLEMENTED, device.plugin().name(), op.name,
                reason + " for " + sig + " on " + device.label() +
                    ", and the fallback policy is 'error' (chipdock.set_fallback_policy('warn') or "
                    "CHIPDOCK_FALLBACK=warn runs it on the CPU reference)");
  }
  Device& cpu = Runtime::instance().device("cpu", 0, op.name.c_str());
  for (auto& group : inputs) {
    for (auto& t : group) t = t.to(cpu);
  }
  DispatchResult result = dispatch(op, std::move(inputs), given, &cpu);
  for (auto& t : result.outputs) t = t.to(device);
  const bool first = record_fallback(device.type(), op.name, sig, reason);
  if (policy == FallbackPolicy::Warn && first) {
    result.warning = "[" + device.plugin().name() + "] " + op.name + ": " + reason + " for " + sig + " on " +
                     device.label() + "; ran on the CPU reference (counted in chipdock.fallback_report())";
  }
  return result;
}

// The input that index input i indexes (the spec's `indexes`) and the
// normalized axis, when i is a given, non-empty index input whose target is
// given; a bad axis is left to the rule to report.
struct IndexedAxis {
  size_t target;
  int64_t axis;
};
std::optional<IndexedAxis> indexed_axis(const OpSpec& op, const ShapeContext& ctx, size_t i) {
  const ArgSpec& arg = op.inputs[i];
  if (arg.indexes_input.empty() || !ctx.has(i) || ctx.in(i).numel() == 0) return std::nullopt;
  size_t target = 0;
  while (target < op.inputs.size() && op.inputs[target].name != arg.indexes_input) ++target;
  if (!ctx.has(target)) return std::nullopt;
  const auto ndim = static_cast<int64_t>(ctx.shape(target).size());
  int64_t axis = arg.indexes_axis_attr.empty() ? arg.indexes_axis : ctx.attrs.at(arg.indexes_axis_attr).i;
  if (axis < 0) axis += ndim;
  if (axis < 0 || axis >= ndim) return std::nullopt;
  return IndexedAxis{target, axis};
}

// An index into an axis of size 0 is out of range whatever its value, so a
// non-empty index tensor there is refused from the shapes alone (no device
// read), also when the output is empty and no kernel would run to find it
// (embedding of a (0, n) weight). Runs after the rule, which has checked
// and normalized the axis attribute.
void check_indices_into_empty_axes(const OpSpec& op, const ShapeContext& ctx) {
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const ArgSpec& arg = op.inputs[i];
    const auto indexed = indexed_axis(op, ctx, i);
    if (!indexed) continue;
    const int64_t axis = indexed->axis;
    const Shape& shape = ctx.shape(indexed->target);
    if (shape[axis] != 0) continue;
    throw Error(CD_STATUS_OUT_OF_RANGE, "core", op.name,
                arg.name + ": every index is out of range for axis " + std::to_string(axis) + " of size 0 of " +
                    arg.indexes_input + " " + describe_shape(shape) + " (" + arg.name + " has " +
                    std::to_string(ctx.in(i).numel()) + " elements)");
  }
}

// When every output is empty no kernel runs, so nothing would check the
// index values (embedding of a (5, 0) weight): the core reads them (a
// blocking copy, which drops the GIL) and refuses the first out of range.
// Only this degenerate call pays for the read; a launched kernel checks its
// own indices.
void check_indices_without_a_kernel(const OpSpec& op, const ShapeContext& ctx) {
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const ArgSpec& arg = op.inputs[i];
    const auto indexed = indexed_axis(op, ctx, i);
    if (!indexed) continue;
    const int64_t axis = indexed->axis;
    const Shape& shape = ctx.shape(indexed->target);
    const Tensor indices = ctx.in(i).contiguous();
    const cd_dtype_t dt = indices.dtype();
    if (dt != CD_DTYPE_INT32 && dt != CD_DTYPE_INT64) continue;  // the spec's index types
    std::vector<int64_t> values(static_cast<size_t>(indices.numel()));
    if (dt == CD_DTYPE_INT64) {
      indices.copy_to_host(values.data(), indices.nbytes());
    } else {
      std::vector<int32_t> narrow(values.size());
      indices.copy_to_host(narrow.data(), indices.nbytes());
      std::copy(narrow.begin(), narrow.end(), values.begin());
    }
    const int64_t size = shape[axis];
    for (int64_t v : values) {
      if (v < -size || v >= size) {
        throw Error(CD_STATUS_OUT_OF_RANGE, "core", op.name,
                    arg.name + ": index " + std::to_string(v) + " is out of range for axis " + std::to_string(axis) +
                        " of size " + std::to_string(size));
      }
    }
  }
}

}  // namespace

DispatchResult dispatch(const OpSpec& op, std::vector<std::vector<Tensor>> inputs, const std::vector<Attribute>& given,
                        Device* device) {
  std::map<std::string, Attribute> attrs = normalize_attributes(op, given);
  Binding binding = bind_inputs(op, inputs, device);
  Device& dev = *binding.device;
  DtypeList out_dtypes = output_dtypes(op, binding, attrs);
  const DtypeList sig = kernel_signature(op, binding, out_dtypes);

  // The kernel is chosen before the shape rule runs, so that a fallback
  // gets the caller's tensors (the rule may replace inputs by views).
  Kernel kernel;
  if (!op.view) {
    const bool denied = is_denied(dev.type(), op.name);
    kernel = denied ? Kernel{} : dev.plugin().kernels().find(op.name, sig);
    // A backend built against an older opset: one comparison unless the op changed since.
    std::string predated;
    if (kernel.fn != nullptr && op.newest_attr > dev.plugin().opset_version()) {
      predated = predated_by(op, attrs, dev.plugin());
      if (!predated.empty() && dev.type() == "cpu") {
        throw Error(CD_STATUS_UNIMPLEMENTED, dev.plugin().name(), op.name,
                    predated + ", and the CPU reference has nothing to fall back to");
      }
      if (!predated.empty()) kernel = Kernel{};
    }
    if (kernel.fn == nullptr) {
      // Arguments are checked on the device first: a bad call fails the same way everywhere.
      ShapeContext check(op, inputs, attrs);
      std::vector<std::vector<Tensor>> original = inputs;
      op.rule(check);
      check_indices_into_empty_axes(op, check);
      return run_on_cpu_reference(op, std::move(original), given, dev, describe_dtypes(sig),
                                  denied             ? "the op is denied on " + dev.type()
                                  : !predated.empty() ? predated
                                                      : missing_kernel_reason(dev.type(), op.name, sig));
    }
  }
  ShapeContext ctx(op, inputs, attrs);
  op.rule(ctx);
  check_indices_into_empty_axes(op, ctx);
  DispatchResult result;
  result.outputs.reserve(std::max<size_t>(ctx.output_shapes.size(), 1));
  if (ctx.view_result) {
    result.outputs.push_back(*ctx.view_result);
    return result;
  }

  // Outputs: one per produced shape; a variadic output repeats its dtype.
  // Each shape is checked here, naming the op, whatever its rule did: a
  // negative dim or a size past int64 is refused before any allocation.
  StreamPtr stream = dev.current_stream();
  for (size_t i = 0; i < ctx.output_shapes.size(); ++i) {
    const cd_dtype_t dt = out_dtypes[std::min(i, out_dtypes.size() - 1)];
    shape_nbytes(ctx.output_shapes[i], dt, op.name.c_str());
    try {
      result.outputs.push_back(Tensor::empty(dev, ctx.output_shapes[i], dt, *stream));
    } catch (const Error& e) {
      if (e.code() != CD_STATUS_OUT_OF_MEMORY) throw;
      // Name the op and the output that did not fit, not only the allocator's slot.
      const ArgSpec& out = op.outputs[std::min(i, op.outputs.size() - 1)];
      throw Error(e.code(), e.backend(), op.name,
                  "output '" + out.name + "' " + dtype_name(dt) + " " + describe_shape(ctx.output_shapes[i]) + ": " +
                      e.call() + ": " + e.reason());
    }
  }
  TensorRefs in_ptrs, out_ptrs;
  for (const auto& group : inputs) {
    for (const Tensor& t : group) in_ptrs.push_back(&t);
  }
  for (const Tensor& t : result.outputs) out_ptrs.push_back(&t);
  // A kernel is not launched when every output is empty. It may still see
  // empty inputs (a sum over a zero-size axis fills its output with 0).
  const bool all_empty =
      std::all_of(result.outputs.begin(), result.outputs.end(), [](const Tensor& t) { return t.numel() == 0; });
  if (all_empty) check_indices_without_a_kernel(op, ctx);
  if (!all_empty) {
    std::vector<Attribute> ordered;
    ordered.reserve(op.attributes.size());
    // A backend built against an older opset is handed the attributes it knows (the newer ones hold their
    // defaults here: predated_by sent any other value to the fallback).
    const int32_t known = dev.plugin().opset_version();
    for (const AttrSpec& spec : op.attributes) {
      if (spec.since <= known) ordered.push_back(attrs.at(spec.name));
    }
    for (const Tensor* t : in_ptrs) t->storage()->record_stream(stream);
    launch_kernel(*stream, op.name, in_ptrs, out_ptrs, ordered, &sig, &kernel);
  }
  if (ctx.reshape_output) {
    Tensor& out = result.outputs.front();
    out = out.as_strided(*ctx.reshape_output, contiguous_strides(*ctx.reshape_output), out.offset());
  }
  return result;
}

void set_fallback_policy(FallbackPolicy policy) { g_policy = static_cast<int>(policy); }
FallbackPolicy fallback_policy() { return static_cast<FallbackPolicy>(g_policy.load()); }

void set_denied_ops(const std::string& device_type, const std::vector<std::string>& ops) {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  g_denied[device_type] = std::set<std::string>(ops.begin(), ops.end());
  bool any = false;
  for (const auto& entry : g_denied) any = any || !entry.second.empty();
  g_any_denied = any;
}

void set_declared_unsupported(const std::string& device_type, const std::vector<DeclaredUnsupported>& entries) {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  g_declared[device_type] = entries;
}

std::vector<std::string> denied_ops(const std::string& device_type) {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  auto it = g_denied.find(device_type);
  return it == g_denied.end() ? std::vector<std::string>{} : std::vector<std::string>(it->second.begin(), it->second.end());
}

std::vector<FallbackRecord> fallback_records() {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  std::vector<FallbackRecord> out;
  for (const auto& entry : g_records) out.push_back(entry.second);
  return out;
}

void reset_fallback_records() {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  g_records.clear();
}

}  // namespace chipdock
