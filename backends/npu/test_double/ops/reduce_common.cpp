// Checks and index helpers of the double's reduction-family ops (reduce_common.h).
#include "reduce_common.h"

#include <algorithm>

namespace cdsim {
namespace reduce_ops {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

void check_dtype(const char* op, const char* what, aclDataType dtype, std::initializer_list<aclDataType> allowed) {
  if (std::find(allowed.begin(), allowed.end(), dtype) == allowed.end()) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %s dtype %s is not supported", op, what, dtype_name(dtype));
  }
}

void check_rank(const char* op, const char* what, const TensorInfo& t, size_t min_rank) {
  if (t.shape.size() < min_rank || t.shape.size() > kMaxRank) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %s has %zu dimensions, expected %zu to %zu", op, what, t.shape.size(),
          min_rank, kMaxRank);
  }
}

void check_shape(const char* op, const char* what, const TensorInfo& t, const std::vector<int64_t>& shape) {
  if (t.shape != shape) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %s has shape %s, expected %s", op, what, shape_string(t.shape).c_str(),
          shape_string(shape).c_str());
  }
}

int64_t one_dim(const char* op, size_t rank, int64_t dim, bool scalar_ok) {
  const int64_t r = static_cast<int64_t>(rank == 0 && scalar_ok ? 1 : rank);
  if (r == 0) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: dim %lld given for a 0-d self, which has no dimension to take", op,
          static_cast<long long>(dim));
  }
  if (dim < -r || dim >= r) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: dim %lld is out of range [%lld, %lld]", op, static_cast<long long>(dim),
          static_cast<long long>(-r), static_cast<long long>(r - 1));
  }
  return dim < 0 ? dim + r : dim;
}

std::vector<bool> dim_mask(const char* op, size_t rank, const std::vector<int64_t>& dims) {
  std::vector<bool> mask(rank, dims.empty());
  std::vector<bool> seen(std::max<size_t>(rank, 1), false);
  for (int64_t d : dims) {
    const int64_t n = one_dim(op, rank, d, true);
    if (seen[static_cast<size_t>(n)]) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: dim %lld is repeated", op, static_cast<long long>(d));
    }
    seen[static_cast<size_t>(n)] = true;
    if (rank > 0) mask[static_cast<size_t>(n)] = true;
  }
  return mask;
}

std::vector<int64_t> reduced_shape(const std::vector<int64_t>& shape, const std::vector<bool>& mask, bool keep) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) {
      out.push_back(shape[d]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  return out;
}

void for_each_index(const std::vector<int64_t>& shape,
                    const std::function<void(int64_t, const std::vector<int64_t>&)>& fn) {
  for (int64_t s : shape) {
    if (s == 0) return;
  }
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t linear = 0;; ++linear) {
    fn(linear, index);
    size_t d = shape.size();
    for (; d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;  // wrapped around: done (0-d: after one)
  }
}

void for_each_row(const std::vector<int64_t>& shape, size_t dim,
                  const std::function<void(std::vector<int64_t>&)>& fn) {
  std::vector<int64_t> rows = shape;
  if (rows.empty() || rows[dim] == 0) return;
  rows[dim] = 1;
  for_each_index(rows, [&](int64_t, const std::vector<int64_t>& index) {
    std::vector<int64_t> at = index;
    fn(at);
  });
}

}  // namespace reduce_ops
}  // namespace cdsim
