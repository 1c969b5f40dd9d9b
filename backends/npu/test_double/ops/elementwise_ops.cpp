// The simulated elementwise ops' shared machinery (see elementwise_ops.h).
#include "elementwise_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace cdsim {
namespace ew {

namespace {
constexpr size_t kMaxDims = 8;  // aclnn: "不超过8维"

int rank(aclDataType t) {  // torch's promotion lattice within a kind
  switch (t) {
    case ACL_BOOL: return 0;
    case ACL_UINT8: case ACL_INT8: return 1;
    case ACL_INT16: return 2;
    case ACL_INT32: return 3;
    case ACL_INT64: return 4;
    case ACL_FLOAT16: case ACL_BF16: return 5;
    case ACL_FLOAT: return 6;
    case ACL_DOUBLE: return 7;
    default: return -1;
  }
}
}  // namespace

void invalid(const char* op, const char* fmt, ...) {
  char buffer[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %s", op, buffer);
}

const TensorInfo& tensor(const aclTensor* t, const char* op, const char* name, Dtypes allowed) {
  if (t == nullptr) raise(CD_ACLNN_ERR_PARAM_NULLPTR, "%s: %s is a null pointer", op, name);
  const TensorInfo& i = info(t, name);
  if (std::find(allowed.begin(), allowed.end(), i.dtype) == allowed.end()) {
    invalid(op, "%s has dtype %s, not in the supported list", name, dtype_name(i.dtype));
  }
  if (i.shape.size() > kMaxDims) invalid(op, "%s has %zu dims (at most %zu)", name, i.shape.size(), kMaxDims);
  return i;
}

bool is_integral(aclDataType t) noexcept {
  return t == ACL_INT8 || t == ACL_INT16 || t == ACL_INT32 || t == ACL_INT64 || t == ACL_UINT8;
}

aclDataType promote(aclDataType a, aclDataType b) {
  if (a == b) return a;
  if ((a == ACL_FLOAT16 && b == ACL_BF16) || (a == ACL_BF16 && b == ACL_FLOAT16)) return ACL_FLOAT;
  if ((a == ACL_UINT8 && b == ACL_INT8) || (a == ACL_INT8 && b == ACL_UINT8)) return ACL_INT16;
  return rank(a) >= rank(b) ? a : b;
}

bool can_cast(aclDataType from, aclDataType to) noexcept {
  if (is_floating(from)) return is_floating(to);
  if (is_integral(from)) return to != ACL_BOOL;
  return true;
}

std::vector<int64_t> broadcast(const char* op, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t k = 0; k < n; ++k) {
    const int64_t x = k < n - a.size() ? 1 : a[k - (n - a.size())];
    const int64_t y = k < n - b.size() ? 1 : b[k - (n - b.size())];
    if (x != y && x != 1 && y != 1) invalid(op, "shapes do not broadcast (%lld vs %lld in dim %zu)",
                                             static_cast<long long>(x), static_cast<long long>(y), k);
    out[k] = x == 1 ? y : x;
  }
  return out;
}

void require_shape(const char* op, const char* name, const TensorInfo& out, const std::vector<int64_t>& shape) {
  if (out.shape != shape) {
    std::string want, got;
    for (int64_t s : shape) want += std::to_string(s) + ",";
    for (int64_t s : out.shape) got += std::to_string(s) + ",";
    invalid(op, "%s has shape [%s], the broadcast shape is [%s]", name, got.c_str(), want.c_str());
  }
}

bool is_contiguous(const TensorInfo& t) noexcept {
  int64_t expected = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] == 1) continue;
    if (t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

Value of_double(double v) { return Value{true, v, 0}; }
Value of_int(int64_t v) { return Value{false, 0.0, v}; }

Value load(const char* p, aclDataType dtype) {
  if (is_floating(dtype)) return of_double(load_double(p, dtype));
  return of_int(load_int(p, dtype));
}

int64_t wrap(int64_t v, aclDataType dtype) {
  switch (dtype) {
    case ACL_BOOL: return v != 0 ? 1 : 0;
    case ACL_INT8: return static_cast<int8_t>(static_cast<uint64_t>(v));
    case ACL_UINT8: return static_cast<uint8_t>(static_cast<uint64_t>(v));
    case ACL_INT16: return static_cast<int16_t>(static_cast<uint64_t>(v));
    case ACL_INT32: return static_cast<int32_t>(static_cast<uint64_t>(v));
    default: return v;
  }
}

void store(char* p, aclDataType dtype, const Value& v) {
  if (is_floating(dtype)) {
    store_double(p, dtype, v.as_double());
  } else if (dtype == ACL_BOOL) {
    store_int(p, dtype, v.truthy() ? 1 : 0);
  } else if (v.floating) {
    // A float into an integer: truncated toward zero, NaN 0, saturated.
    double t = std::trunc(v.f);
    if (std::isnan(t)) t = 0.0;
    const double lo = dtype == ACL_UINT8 ? 0.0 : -std::ldexp(1.0, static_cast<int>(dtype_bytes(dtype)) * 8 - 1);
    const double hi = dtype == ACL_UINT8 ? 255.0 : std::ldexp(1.0, static_cast<int>(dtype_bytes(dtype)) * 8 - 1) - 1;
    if (t <= lo) {
      store_int(p, dtype, static_cast<int64_t>(lo));
    } else if (t >= hi) {
      store_int(p, dtype, dtype == ACL_INT64 ? INT64_MAX : static_cast<int64_t>(hi));
    } else {
      store_int(p, dtype, static_cast<int64_t>(t));
    }
  } else {
    store_int(p, dtype, wrap(v.i, dtype));
  }
}

Value scalar_as(const aclScalar* scalar, const char* what, aclDataType dtype) {
  if (scalar == nullptr) raise(CD_ACLNN_ERR_PARAM_NULLPTR, "%s is a null pointer", what);
  const aclDataType from = scalar_dtype(scalar, what);
  const Value v = is_floating(from) ? of_double(scalar_double(scalar, what)) : of_int(scalar_int(scalar, what));
  alignas(8) char buffer[8] = {};
  store(buffer, dtype, v);
  return load(buffer, dtype);
}

aclnnStatus plan_elementwise(const char* name, std::vector<TensorInfo> inputs, TensorInfo output, ElementFn body,
                             uint64_t* workspace_size, aclOpExecutor** executor) {
  auto run = [inputs = std::move(inputs), output = std::move(output), body = std::move(body)](char*) {
    if (output.numel() == 0) return;
    const HostTensor out(output);
    std::vector<HostTensor> in;
    for (const TensorInfo& i : inputs) in.emplace_back(i);
    const size_t n = output.shape.size();
    std::vector<std::vector<int64_t>> index(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k) index[k].assign(inputs[k].shape.size(), 0);
    std::vector<const char*> pointers(inputs.size());
    for (Index it(output.shape); it.valid(); it.next()) {
      const std::vector<int64_t>& o = it.index();
      for (size_t k = 0; k < inputs.size(); ++k) {
        const std::vector<int64_t>& shape = inputs[k].shape;
        const size_t lead = n - shape.size();  // right-aligned; extent 1 reads index 0
        for (size_t d = 0; d < shape.size(); ++d) index[k][d] = shape[d] == 1 ? 0 : o[lead + d];
        pointers[k] = in[k].element_at(index[k]);
      }
      body(pointers, out.element(it.linear()));
    }
  };
  return plan(Plan{name, 0, std::move(run)}, workspace_size, executor);
}

}  // namespace ew
}  // namespace cdsim
