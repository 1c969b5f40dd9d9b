// The double's aclnnSort (ops-math math/sort/docs/aclnnSort.md): self of 1-8
// dimensions, BFLOAT16, FLOAT16, FLOAT32, INT8, INT16, INT32, INT64, UINT8 or
// BOOL on Atlas A2 (no DOUBLE), and for BFLOAT16 no sort along dim 1;
// valuesOut of self's dtype and indicesOut INT64, both of self's shape.
// `stable` keeps equal keys in index order (the sort below is always stable,
// which a non-stable sort may be too). NaN is the greatest value (torch's
// rule; aclnnSort is torch_npu's sort), -0 equals +0. Values are copied bit
// for bit from self.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "reduce_common.h"

namespace cdsim {
namespace reduce_ops {
namespace {

constexpr std::initializer_list<aclDataType> kSortDtypes = {ACL_BF16,  ACL_FLOAT16, ACL_FLOAT, ACL_INT8, ACL_INT16,
                                                            ACL_INT32, ACL_INT64,   ACL_UINT8, ACL_BOOL};

struct Key {
  double f;   // floats (every sortable float is exact in double)
  int64_t i;  // integers and bool
  int64_t index;
};

void sort_rows(const TensorInfo& self_info, const TensorInfo& values_info, const TensorInfo& indices_info, size_t dim,
               bool descending) {
  HostTensor in(self_info), values(values_info), indices(indices_info);
  const bool floating = is_floating(self_info.dtype);
  const size_t item = dtype_bytes(self_info.dtype);
  const int64_t n = self_info.shape[dim];
  // NaN greatest: ascending puts it last, descending first.
  auto less = [floating](const Key& a, const Key& b) {
    if (!floating) return a.i < b.i;
    return (!std::isnan(a.f) && std::isnan(b.f)) || a.f < b.f;
  };
  std::vector<Key> row(static_cast<size_t>(n));
  for_each_row(self_info.shape, dim, [&](std::vector<int64_t>& at) {
    for (int64_t j = 0; j < n; ++j) {
      at[dim] = j;
      const char* p = in.element_at(at);
      row[static_cast<size_t>(j)] = Key{floating ? load_double(p, in.dtype()) : 0.0,
                                        floating ? 0 : load_int(p, in.dtype()), j};
    }
    if (descending) {
      std::stable_sort(row.begin(), row.end(), [&](const Key& a, const Key& b) { return less(b, a); });
    } else {
      std::stable_sort(row.begin(), row.end(), less);
    }
    std::vector<int64_t> from = at;
    for (int64_t j = 0; j < n; ++j) {
      at[dim] = j;
      from[dim] = row[static_cast<size_t>(j)].index;
      std::memcpy(values.element_at(at), in.element_at(from), item);
      store_int(indices.element_at(at), ACL_INT64, row[static_cast<size_t>(j)].index);
    }
  });
}

}  // namespace
}  // namespace reduce_ops
}  // namespace cdsim

using namespace cdsim;
using namespace cdsim::reduce_ops;

extern "C" aclnnStatus aclnnSortGetWorkspaceSize(const aclTensor* self, bool stable, int64_t dim, bool descending,
                                                 aclTensor* valuesOut, aclTensor* indicesOut, uint64_t* workspaceSize,
                                                 aclOpExecutor** executor) {
  (void)stable;  // a stable sort is also a valid non-stable one
  return guarded_op([&] {
    const char* op = "aclnnSort";
    const TensorInfo x = info(self, "self"), v = info(valuesOut, "valuesOut"), i = info(indicesOut, "indicesOut");
    check_dtype(op, "self", x.dtype, kSortDtypes);
    check_rank(op, "self", x, 1);
    const size_t d = static_cast<size_t>(one_dim(op, x.shape.size(), dim, false));
    if (x.dtype == ACL_BF16 && d == 1) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: a BFLOAT16 self cannot be sorted along dim 1 on this SoC", op);
    }
    if (v.dtype != x.dtype) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: valuesOut is %s, self %s", op, dtype_name(v.dtype), dtype_name(x.dtype));
    }
    check_dtype(op, "indicesOut", i.dtype, {ACL_INT64});
    check_shape(op, "valuesOut", v, x.shape);
    check_shape(op, "indicesOut", i, x.shape);
    return plan(Plan{op, 0, [x, v, i, d, descending](char*) { sort_rows(x, v, i, d, descending); }}, workspaceSize,
                executor);
  });
}
CDSIM_ACLNN_RUN(Sort)
