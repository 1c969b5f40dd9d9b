// Shape and dtype inference: the context a shape rule works in. A rule
// checks the inputs and attributes of one call, normalizes the attributes
// (the kernel contract in device_api/opset/README.md), fills the output
// shapes, and may replace inputs by views (broadcast expansion, matmul
// promotion) or answer the whole call with a view (view ops).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "opset.hpp"

namespace chipdock {

class ShapeContext {
 public:
  ShapeContext(const OpSpec& op, std::vector<std::vector<Tensor>>& inputs, std::map<std::string, Attribute>& attrs)
      : op(op), inputs(inputs), attrs(attrs) {}

  const OpSpec& op;
  std::vector<std::vector<Tensor>>& inputs;  // per declared input (empty: absent)
  std::map<std::string, Attribute>& attrs;   // every declared attribute
  std::vector<Shape> output_shapes;          // one per output produced
  std::optional<Shape> reshape_output;       // a view of output 0 to return instead
  std::optional<Tensor> view_result;         // view ops: the answer itself

  bool has(size_t i) const { return i < inputs.size() && !inputs[i].empty(); }
  const Tensor& in(size_t i) const { return inputs[i].front(); }
  const Shape& shape(size_t i) const { return in(i).shape(); }
  int64_t ndim(size_t i) const { return in(i).ndim(); }
  const std::string& arg(size_t i) const { return op.inputs[i].name; }

  int64_t get_int(const std::string& name) const { return attrs.at(name).i; }
  double get_float(const std::string& name) const { return attrs.at(name).f; }
  const std::string& get_string(const std::string& name) const { return attrs.at(name).s; }
  std::vector<int64_t>& get_ints(const std::string& name) { return attrs.at(name).ints; }
  std::vector<double>& get_floats(const std::string& name) { return attrs.at(name).floats; }
  void set_int(const std::string& name, int64_t v) { attrs.at(name).i = v; }
  void set_float(const std::string& name, double v) { attrs.at(name).f = v; }

  // Raises INVALID_ARGUMENT "[core] <op>: <what>: <reason>".
  [[noreturn]] void fail(const std::string& what, const std::string& reason) const;
  // Checks that input i has `n` dims.
  void require_ndim(size_t i, int64_t n) const;
  // axis + ndim when negative; fails naming the attribute when out of range.
  int64_t normalize_axis(const std::string& attr, int64_t axis, int64_t ndim) const;
  // a * b, a + b, a - b; fail naming `what` when the result overflows int64
  // (every rule computes sizes through these: a wrapped size is a short
  // allocation that a kernel then overruns).
  int64_t mul(const std::string& what, int64_t a, int64_t b) const;
  int64_t add(const std::string& what, int64_t a, int64_t b) const;
  int64_t sub(const std::string& what, int64_t a, int64_t b) const;
  // NumPy broadcast of `a` and `b`; fails naming `what`.
  Shape broadcast(const Shape& a, const Shape& b, const std::string& what) const;
};

// `t` as a view of `shape` (NumPy broadcasting: stride 0 on new and size-1 dims).
Tensor expand_view(const Tensor& t, const Shape& shape);

}  // namespace chipdock
