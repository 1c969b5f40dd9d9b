// The opset as the core holds it: specs registered from
// device_api/opset/opset.yaml (the Python package reads the YAML and
// registers each op at import), looked up by name on every dispatch.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launch.hpp"

namespace chipdock {

enum class AttrKind { Int, Float, Bool, String, Ints, Floats, DType };

struct AttrSpec {
  std::string name;
  AttrKind kind = AttrKind::Int;
  bool required = false;
  Attribute default_value;          // valid unless `required`
  std::optional<double> min;        // for Int, Float, Ints, Floats: the smallest value allowed
  bool allow_nan = true;            // for Float, Floats: `nan: false` refuses NaN (so does a `min`)
  bool finite = false;              // for Float, Floats: `finite: true` refuses NaN and +-inf
  int64_t length = -1;              // for Ints/Floats: exact length, -1 any
  std::vector<std::string> choices;  // for String
  int32_t since = 1;                 // the opset version that introduced it (opset.yaml `since`)
};

struct ArgSpec {
  std::string name;
  std::string type_var;
  bool optional = false;
  bool variadic = false;
  // `indexes: {input: <name>, axis: <attribute or int>}`: the values are
  // indices into that dim of that input (negatives count from the end).
  std::string indexes_input;      // empty: not an index argument
  std::string indexes_axis_attr;  // empty: the fixed `indexes_axis`
  int64_t indexes_axis = 0;
};

struct OpSpec;
class ShapeContext;
using ShapeRule = void (*)(ShapeContext& ctx);

struct OpSpec {
  std::string name;
  std::vector<ArgSpec> inputs;
  std::vector<ArgSpec> outputs;
  std::map<std::string, std::vector<cd_dtype_t>> types;      // type var -> allowed dtypes
  std::vector<AttrSpec> attributes;
  std::map<std::string, std::string> output_dtype_from_attr;  // output -> attribute
  std::string shape_rule;
  ShapeRule rule = nullptr;
  bool view = false;
  bool nonempty = false;
  int32_t since = 1;        // the opset version that introduced the op
  int32_t newest_attr = 1;  // the largest `since` of its attributes (set by Opset::add)

  const AttrSpec* attribute(const std::string& attr) const;
};

class Opset {
 public:
  static Opset& instance();
  // Adds (or replaces) an op; throws INVALID_ARGUMENT for an unknown shape rule.
  void add(OpSpec spec);
  // nullptr when unknown.
  const OpSpec* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, std::shared_ptr<const OpSpec>> ops_;
};

// The shape rule registered under `name`, or nullptr.
ShapeRule find_shape_rule(const std::string& name);

}  // namespace chipdock
