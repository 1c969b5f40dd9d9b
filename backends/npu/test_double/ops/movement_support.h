// Helpers of the double's data-movement ops (ops/movement_*.cpp): the
// validation aclnn's GetWorkspaceSize does (dtype lists, ranks, shapes ->
// ACLNN_ERR_PARAM_INVALID with a message) and element moves between
// HostTensors. Plain loops; nothing here is CANN's code.
#ifndef CDSIM_OPS_MOVEMENT_SUPPORT_H_
#define CDSIM_OPS_MOVEMENT_SUPPORT_H_

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "sim.h"

namespace cdsim::movement {

// The chipdock-visible dtypes every movement op of CANN's docs lists for the
// Atlas A2 family (FLOAT, FLOAT16, BFLOAT16, DOUBLE, INT8/16/32/64, UINT8, BOOL).
inline const std::vector<aclDataType>& all_dtypes() {
  static const std::vector<aclDataType> kAll = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16,  ACL_DOUBLE, ACL_INT8,
                                                ACL_INT16, ACL_INT32,   ACL_INT64, ACL_UINT8,  ACL_BOOL};
  return kAll;
}

inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

inline void check_dtype(const char* op, const char* what, const TensorInfo& t, const std::vector<aclDataType>& ok) {
  for (aclDataType d : ok) {
    if (t.dtype == d) return;
  }
  raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %s has dtype %s, which is not supported", op, what, dtype_name(t.dtype));
}

inline void check_same_dtype(const char* op, const char* a, const TensorInfo& x, const char* b, const TensorInfo& y) {
  if (x.dtype != y.dtype) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %s is %s but %s is %s", op, a, dtype_name(x.dtype), b, dtype_name(y.dtype));
  }
}

inline void check_shape(const char* op, const char* what, const TensorInfo& t, const std::vector<int64_t>& shape) {
  if (t.shape != shape) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %s has shape %s, expected %s", op, what, shape_text(t.shape).c_str(),
          shape_text(shape).c_str());
  }
}

inline void check_rank(const char* op, const char* what, const TensorInfo& t, size_t lo, size_t hi) {
  if (t.shape.size() < lo || t.shape.size() > hi) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %s has %zu dims, supported are %zu to %zu", op, what, t.shape.size(), lo,
          hi);
  }
}

// dim in [-rank, rank - 1] (rank 0 takes [-1, 0]), returned non-negative.
inline int64_t check_dim(const char* op, int64_t dim, size_t rank) {
  const int64_t r = rank == 0 ? 1 : static_cast<int64_t>(rank);
  if (dim < -r || dim >= r) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: dim %lld is not in [%lld, %lld]", op, static_cast<long long>(dim),
          static_cast<long long>(-r), static_cast<long long>(r - 1));
  }
  return dim < 0 ? dim + r : dim;
}

// The elements of `t` as raw bytes, C order (read before any write: the
// output may overlap the input).
inline std::vector<char> snapshot(const HostTensor& t) {
  const size_t item = dtype_bytes(t.dtype());
  std::vector<char> bytes(static_cast<size_t>(t.numel()) * item);
  for (int64_t i = 0; i < t.numel(); ++i) std::memcpy(bytes.data() + i * item, t.element(i), item);
  return bytes;
}

// dst element i = value converted from src's dtype (torch's copy_ rules:
// float -> integer truncates toward zero, NaN and out-of-range wrap as the
// integer conversion does; anything -> bool is != 0).
inline void convert(const HostTensor& dst, int64_t i, const void* src, aclDataType src_dtype) {
  if (dst.dtype() == src_dtype) {
    std::memcpy(dst.element(i), src, dtype_bytes(src_dtype));
  } else if (dst.dtype() == ACL_BOOL) {
    dst.set_int(i, is_floating(src_dtype) ? load_double(src, src_dtype) != 0.0 : load_int(src, src_dtype) != 0);
  } else if (is_floating(dst.dtype())) {
    dst.set(i, is_floating(src_dtype) ? load_double(src, src_dtype) : static_cast<double>(load_int(src, src_dtype)));
  } else if (is_floating(src_dtype)) {
    const double v = std::trunc(load_double(src, src_dtype));
    dst.set_int(i, std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<int64_t>(v) : 0);
  } else {
    dst.set_int(i, load_int(src, src_dtype));
  }
}

}  // namespace cdsim::movement

#endif  // CDSIM_OPS_MOVEMENT_SUPPORT_H_
