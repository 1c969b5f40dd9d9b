#include "opset.hpp"

#include <algorithm>

namespace chipdock {

const AttrSpec* OpSpec::attribute(const std::string& attr) const {
  for (const AttrSpec& a : attributes) {
    if (a.name == attr) return &a;
  }
  return nullptr;
}

Opset& Opset::instance() {
  static Opset* opset = new Opset();  // leaked: used until the process exits
  return *opset;
}

void Opset::add(OpSpec spec) {
  spec.rule = find_shape_rule(spec.shape_rule);
  if (spec.rule == nullptr) {
    throw_invalid("register_op", "op '" + spec.name + "' names unknown shape rule '" + spec.shape_rule + "'");
  }
  for (const ArgSpec& arg : spec.inputs) {
    if (!spec.types.count(arg.type_var)) {
      throw_invalid("register_op", "op '" + spec.name + "': input '" + arg.name + "' has no type '" + arg.type_var + "'");
    }
  }
  spec.newest_attr = spec.since;
  for (const AttrSpec& a : spec.attributes) {
    if (a.since < spec.since) {
      throw_invalid("register_op", "op '" + spec.name + "' (since opset " + std::to_string(spec.since) +
                                       "): attribute '" + a.name + "' says since " + std::to_string(a.since) +
                                       ", before the op existed");
    }
    spec.newest_attr = std::max(spec.newest_attr, a.since);
  }
  const std::string name = spec.name;
  ops_[name] = std::make_shared<const OpSpec>(std::move(spec));
}

const OpSpec* Opset::find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

std::vector<std::string> Opset::names() const {
  std::vector<std::string> out;
  for (const auto& entry : ops_) out.push_back(entry.first);
  return out;
}

}  // namespace chipdock
