// Typed attribute reading (see attributes.h).
#include "chipdock/support/attributes.h"

#include <cstring>

#include "chipdock/support/error.h"

namespace chipdock::support {
namespace {

const char* type_name(cd_attr_type_t type) {
  switch (type) {
    case CD_ATTR_INT: return "int";
    case CD_ATTR_FLOAT: return "float";
    case CD_ATTR_STRING: return "string";
    case CD_ATTR_INTS: return "ints";
    case CD_ATTR_FLOATS: return "floats";
    default: return "unknown";
  }
}

[[noreturn]] void wrong_type(const cd_attribute& a, const char* expected) {
  fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' must be %s, got %s (type %d)", a.name, expected,
       type_name(a.type), a.type);
}

// An array attribute's count and pointer agree (a count of 0 may have NULL).
void check_array(const cd_attribute& a, const void* values) {
  if (a.count < 0 || (a.count > 0 && values == nullptr)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' has a bad count %d", a.name, a.count);
  }
}

}  // namespace

const cd_attribute* find_attribute(const cd_kernel_context* ctx, const char* name) {
  if (ctx->num_attributes > 0 && ctx->attributes == nullptr) {
    fail(CD_STATUS_INVALID_ARGUMENT, "ctx->attributes is NULL with %d attributes", ctx->num_attributes);
  }
  for (int32_t i = 0; i < ctx->num_attributes; ++i) {
    const cd_attribute* a = ctx->attributes[i];
    if (a != nullptr && a->name != nullptr && std::strcmp(a->name, name) == 0) return a;
  }
  return nullptr;
}

const cd_attribute& required_attribute(const cd_kernel_context* ctx, const char* name) {
  const cd_attribute* a = find_attribute(ctx, name);
  if (a == nullptr) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' is missing (the dispatcher passes every declared one)", name);
  }
  return *a;
}

int64_t int_attribute(const cd_kernel_context* ctx, const char* name) {
  const cd_attribute& a = required_attribute(ctx, name);
  if (a.type != CD_ATTR_INT) wrong_type(a, "an int");
  return a.value.i;
}

int64_t int_attribute(const cd_kernel_context* ctx, const char* name, int64_t fallback) {
  return find_attribute(ctx, name) == nullptr ? fallback : int_attribute(ctx, name);
}

bool bool_attribute(const cd_kernel_context* ctx, const char* name) {
  const int64_t v = int_attribute(ctx, name);
  if (v != 0 && v != 1) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' must be 0 or 1, got %lld", name, static_cast<long long>(v));
  }
  return v != 0;
}

double float_attribute(const cd_kernel_context* ctx, const char* name) {
  const cd_attribute& a = required_attribute(ctx, name);
  if (a.type == CD_ATTR_FLOAT) return a.value.f;
  if (a.type == CD_ATTR_INT) return static_cast<double>(a.value.i);
  wrong_type(a, "a float");
}

double float_attribute(const cd_kernel_context* ctx, const char* name, double fallback) {
  return find_attribute(ctx, name) == nullptr ? fallback : float_attribute(ctx, name);
}

std::string string_attribute(const cd_kernel_context* ctx, const char* name) {
  const cd_attribute& a = required_attribute(ctx, name);
  if (a.type != CD_ATTR_STRING) wrong_type(a, "a string");
  if (a.value.s == nullptr) fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' is NULL", name);
  return a.value.s;
}

size_t choice_attribute(const cd_kernel_context* ctx, const char* name,
                        std::initializer_list<const char*> choices) {
  if (find_attribute(ctx, name) == nullptr) return 0;
  const std::string value = string_attribute(ctx, name);
  std::string listed;
  size_t index = 0;
  for (const char* c : choices) {
    if (value == c) return index;
    listed += (index++ ? ", " : "") + std::string(c);
  }
  fail(CD_STATUS_INVALID_ARGUMENT, "%s '%s' is not one of %s", name, value.c_str(), listed.c_str());
}

std::vector<int64_t> ints_attribute(const cd_kernel_context* ctx, const char* name) {
  const cd_attribute& a = required_attribute(ctx, name);
  if (a.type != CD_ATTR_INTS) wrong_type(a, "a list of ints");
  check_array(a, a.value.ints);
  return std::vector<int64_t>(a.value.ints, a.value.ints + a.count);
}

std::vector<int64_t> ints_attribute(const cd_kernel_context* ctx, const char* name,
                                    const std::vector<int64_t>& fallback) {
  return find_attribute(ctx, name) == nullptr ? fallback : ints_attribute(ctx, name);
}

std::vector<int64_t> ints_attribute(const cd_kernel_context* ctx, const char* name,
                                    const std::vector<int64_t>& fallback, size_t length) {
  std::vector<int64_t> v = ints_attribute(ctx, name, fallback);
  if (v.size() != length) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' must have %zu values, got %zu", name, length, v.size());
  }
  return v;
}

std::vector<double> floats_attribute(const cd_kernel_context* ctx, const char* name) {
  const cd_attribute& a = required_attribute(ctx, name);
  if (a.type == CD_ATTR_INTS) {
    check_array(a, a.value.ints);
    return std::vector<double>(a.value.ints, a.value.ints + a.count);
  }
  if (a.type != CD_ATTR_FLOATS) wrong_type(a, "a list of floats");
  check_array(a, a.value.floats);
  return std::vector<double>(a.value.floats, a.value.floats + a.count);
}

Window2d window2d_attributes(const cd_kernel_context* ctx, const std::vector<int64_t>& default_stride,
                             bool has_dilation) {
  std::vector<int64_t> stride = ints_attribute(ctx, "stride", default_stride);
  if (stride.empty()) stride = default_stride;
  if (stride.size() != 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'stride' must have 2 values, got %zu", stride.size());
  }
  const std::vector<int64_t> pad = ints_attribute(ctx, "padding", {0, 0, 0, 0}, 4);
  const std::vector<int64_t> dil = has_dilation ? ints_attribute(ctx, "dilation", {1, 1}, 2)
                                                : std::vector<int64_t>{1, 1};
  Window2d w;
  w.sh = stride[0];
  w.sw = stride[1];
  w.dh = dil[0];
  w.dw = dil[1];
  w.pt = pad[0];
  w.pl = pad[1];
  w.pb = pad[2];
  w.pr = pad[3];
  if (w.sh < 1 || w.sw < 1 || w.dh < 1 || w.dw < 1) {
    fail(CD_STATUS_INVALID_ARGUMENT, "stride and dilation must be >= 1");
  }
  if (w.pt < 0 || w.pl < 0 || w.pb < 0 || w.pr < 0) fail(CD_STATUS_INVALID_ARGUMENT, "padding must be >= 0");
  return w;
}

}  // namespace chipdock::support
