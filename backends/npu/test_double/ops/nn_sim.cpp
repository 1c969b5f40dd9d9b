// Shared pieces of the double's nn ops (see nn_sim.h).
#include "nn_sim.h"

#include <cstdarg>
#include <cstdio>

namespace cdsim {
namespace nn {

void invalid(const char* op, const char* fmt, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %s", op, buffer);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(shape[d]);
  }
  return s + "]";
}

bool is_a2_float(aclDataType dtype) { return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16; }

void require_a2_float(const char* op, const TensorInfo& t, const char* what) {
  if (!is_a2_float(t.dtype)) {
    invalid(op, "%s has dtype %s; Atlas A2 supports FLOAT, FLOAT16, BFLOAT16", what, dtype_name(t.dtype));
  }
}

void require_same_dtype(const char* op, const TensorInfo& a, const char* what_a, const TensorInfo& b,
                        const char* what_b) {
  if (a.dtype != b.dtype) {
    invalid(op, "%s (%s) and %s (%s) must have the same dtype", what_a, dtype_name(a.dtype), what_b,
            dtype_name(b.dtype));
  }
}

void require_shape(const char* op, const TensorInfo& t, const std::vector<int64_t>& shape, const char* what) {
  if (t.shape != shape) {
    invalid(op, "%s has shape %s, expected %s", what, shape_string(t.shape).c_str(), shape_string(shape).c_str());
  }
}

void require_ndim(const char* op, const TensorInfo& t, int64_t lo, int64_t hi, const char* what) {
  const int64_t n = static_cast<int64_t>(t.shape.size());
  if (n < lo || n > hi) {
    invalid(op, "%s has %lld dims; %lld to %lld are supported", what, static_cast<long long>(n),
            static_cast<long long>(lo), static_cast<long long>(hi));
  }
}

std::vector<double> load(const HostTensor& t) {
  std::vector<double> values(static_cast<size_t>(t.numel()));
  for (Index it(t.shape()); it.valid(); it.next()) {
    values[static_cast<size_t>(it.linear())] = load_double(t.element_at(it.index()), t.dtype());
  }
  return values;
}

void store(const HostTensor& t, const std::vector<double>& values) {
  for (Index it(t.shape()); it.valid(); it.next()) {
    store_double(t.element_at(it.index()), t.dtype(), values[static_cast<size_t>(it.linear())]);
  }
}

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

bool broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out) {
  const size_t n = std::max(a.size(), b.size());
  out->assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    (*out)[i] = x == 1 ? y : x;
  }
  return true;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& target) {
  const std::vector<int64_t> own = row_major_strides(shape);
  std::vector<int64_t> strides(target.size(), 0);
  const size_t lead = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) strides[lead + d] = shape[d] == 1 ? 0 : own[d];
  return strides;
}

std::vector<int64_t> pair(const char* op, const std::vector<int64_t>& values, const char* what, bool allow_empty,
                          const std::vector<int64_t>& fallback) {
  if (values.empty() && allow_empty) return fallback;
  if (values.size() == 1) return {values[0], values[0]};
  if (values.size() == 2) return values;
  invalid(op, "%s has %zu values; %s1 or 2 are supported", what, values.size(), allow_empty ? "0, " : "");
}

}  // namespace nn
}  // namespace cdsim
