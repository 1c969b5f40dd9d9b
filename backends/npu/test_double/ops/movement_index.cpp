// The double's aclnnGatherV2 (index_select along dim), aclnnGather
// (torch.gather), aclnnScatter (reduce 0 none, 1 add, 2 mul) and
// aclnnScatterReduce (3 max, 4 min, 5 mean; includeSelf), per hicann ops-nn's
// docs. CANN documents index values in [0, size) and no behaviour outside; the
// double makes such an index a device fault (ACL_ERROR_RT_AICORE_EXCEPTION on
// the stream, reported by the next synchronization), so a backend that
// forgets to check its indices is caught.
#include <algorithm>

#include "movement_support.h"

using namespace cdsim;
using namespace cdsim::movement;

namespace {

constexpr int32_t kAicoreException = 507015;  // ACL_ERROR_RT_AICORE_EXCEPTION

const std::vector<aclDataType> kIndexDtypes = {ACL_INT32, ACL_INT64};

int64_t index_at(const HostTensor& idx, int64_t linear, int64_t size, const char* op) {
  const int64_t v = idx.get_int(linear);
  if (v < 0 || v >= size) {
    raise(kAicoreException, "%s: index %lld is outside [0, %lld) (aicore exception)", op, static_cast<long long>(v),
          static_cast<long long>(size));
  }
  return v;
}

// index.size(d) <= limit.size(d) for d != dim, same rank (Gather, Scatter).
void check_index_fits(const char* op, const TensorInfo& index, const TensorInfo& limit, int64_t dim,
                      const char* what) {
  if (index.shape.size() != limit.shape.size()) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: index has %zu dims, %s has %zu", op, index.shape.size(), what,
          limit.shape.size());
  }
  for (size_t d = 0; d < index.shape.size(); ++d) {
    if (static_cast<int64_t>(d) != dim && index.shape[d] > limit.shape[d]) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: index shape %s exceeds %s shape %s off dim %lld", op,
            shape_text(index.shape).c_str(), what, shape_text(limit.shape).c_str(), static_cast<long long>(dim));
    }
  }
}

}  // namespace

// ---- GatherV2: out[.., i.., ..] = self[.., index[i..], ..]; out rank = self + index - 1.
extern "C" aclnnStatus aclnnGatherV2GetWorkspaceSize(const aclTensor* self, int64_t dim, const aclTensor* index,
                                                     aclTensor* out, uint64_t* workspaceSize,
                                                     aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnGatherV2";
    const TensorInfo in = info(self, "self");
    const TensorInfo idx = info(index, "index");
    const TensorInfo res = info(out, "out");
    check_dtype(op, "self", in, all_dtypes());
    check_dtype(op, "index", idx, kIndexDtypes);
    check_same_dtype(op, "self", in, "out", res);
    check_rank(op, "self", in, 1, 8);
    check_rank(op, "index", idx, 1, 8);
    const int64_t axis = check_dim(op, dim, in.shape.size());
    std::vector<int64_t> expected(in.shape.begin(), in.shape.begin() + axis);
    expected.insert(expected.end(), idx.shape.begin(), idx.shape.end());
    expected.insert(expected.end(), in.shape.begin() + axis + 1, in.shape.end());
    if (expected.size() > 8) raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: out would have %zu dims", op, expected.size());
    check_shape(op, "out", res, expected);
    return plan({op, 0,
                 [in, idx, res, axis](char*) {
                   HostTensor src(in), ix(idx), dst(res);
                   const size_t item = dtype_bytes(in.dtype);
                   const size_t k = idx.shape.size();
                   std::vector<int64_t> at(in.shape.size());
                   for (Index it(res.shape); it.valid(); it.next()) {
                     const std::vector<int64_t>& o = it.index();
                     int64_t ilin = 0;
                     for (size_t j = 0; j < k; ++j) ilin = ilin * idx.shape[j] + o[axis + j];
                     for (int64_t d = 0; d < axis; ++d) at[d] = o[d];
                     at[axis] = index_at(ix, ilin, in.shape[axis], "aclnnGatherV2");
                     for (size_t d = axis + 1; d < in.shape.size(); ++d) at[d] = o[d + k - 1];
                     std::memcpy(dst.element(it.linear()), src.element_at(at), item);
                   }
                 }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(GatherV2)

// ---- Gather (torch.gather): out[i][j] = self[index[i][j]][j] for dim 0, ...; out has index's shape.
extern "C" aclnnStatus aclnnGatherGetWorkspaceSize(const aclTensor* self, int64_t dim, const aclTensor* index,
                                                   aclTensor* out, uint64_t* workspaceSize,
                                                   aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnGather";
    const TensorInfo in = info(self, "self");
    const TensorInfo idx = info(index, "index");
    const TensorInfo res = info(out, "out");
    check_dtype(op, "self", in, all_dtypes());
    check_dtype(op, "index", idx, kIndexDtypes);
    check_same_dtype(op, "self", in, "out", res);
    check_rank(op, "self", in, 0, 8);
    const int64_t axis = check_dim(op, dim, in.shape.size());
    check_index_fits(op, idx, in, axis, "self");
    check_shape(op, "out", res, idx.shape);
    if (idx.numel() != 0 && !in.shape.empty() && in.shape[axis] == 0) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: index is not empty but self has size 0 along dim %lld", op,
            static_cast<long long>(axis));
    }
    return plan({op, 0,
                 [in, idx, res, axis](char*) {
                   HostTensor src(in), ix(idx), dst(res);
                   const size_t item = dtype_bytes(in.dtype);
                   const int64_t size = in.shape.empty() ? 1 : in.shape[axis];
                   for (Index it(res.shape); it.valid(); it.next()) {
                     std::vector<int64_t> at = it.index();
                     const int64_t k = index_at(ix, it.linear(), size, "aclnnGather");
                     if (!at.empty()) at[axis] = k;
                     std::memcpy(dst.element(it.linear()), src.element_at(at), item);
                   }
                 }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Gather)

namespace {

// out = self, then every src element combined into out[.. index ..] in C
// order of index (deterministic, as CANN's default). reduce: 0 none, 1 add,
// 2 mul, 3 max, 4 min, 5 mean. Floats combine in double and round once at the
// end; integers wrap; bool add/max are or, mul/min and. NaN wins max and min.
aclnnStatus plan_scatter(const char* op, const aclTensor* self, int64_t dim, const aclTensor* index,
                         const aclTensor* src, int64_t reduce, bool include_self, aclTensor* out,
                         int64_t max_reduce, uint64_t* workspaceSize, aclOpExecutor** executor) {
  const TensorInfo in = info(self, "self");
  const TensorInfo idx = info(index, "index");
  const TensorInfo upd = info(src, "src");
  const TensorInfo res = info(out, "out");
  check_dtype(op, "self", in, all_dtypes());
  check_dtype(op, "index", idx, kIndexDtypes);
  check_same_dtype(op, "self", in, "src", upd);
  check_same_dtype(op, "self", in, "out", res);
  check_rank(op, "self", in, 0, 8);
  check_shape(op, "out", res, in.shape);
  const int64_t axis = check_dim(op, dim, in.shape.size());
  check_index_fits(op, idx, in, axis, "self");
  check_index_fits(op, idx, upd, -1, "src");
  if (reduce < 0 || reduce > max_reduce) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: reduce %lld is not in [0, %lld]", op, static_cast<long long>(reduce),
          static_cast<long long>(max_reduce));
  }
  return plan({op, 0,
               [in, idx, upd, res, axis, reduce, include_self, op](char*) {
                 HostTensor base(in), ix(idx), values(upd), dst(res);
                 const bool floating = is_floating(res.dtype);
                 const int64_t n = base.numel();
                 std::vector<double> acc(static_cast<size_t>(n));
                 std::vector<int64_t> iacc(static_cast<size_t>(n)), hits(static_cast<size_t>(n), 0);
                 for (int64_t i = 0; i < n; ++i) {
                   if (floating) acc[i] = base.get(i); else iacc[i] = base.get_int(i);
                 }
                 const int64_t size = in.shape.empty() ? 1 : in.shape[axis];
                 std::vector<int64_t> out_strides(in.shape.size(), 1);
                 for (size_t d = in.shape.size(); d-- > 1;) out_strides[d - 1] = out_strides[d] * in.shape[d];
                 for (Index it(idx.shape); it.valid(); it.next()) {
                   std::vector<int64_t> at = it.index();
                   const int64_t k = index_at(ix, it.linear(), size, op);
                   int64_t target = 0;
                   for (size_t d = 0; d < at.size(); ++d) {
                     target += (static_cast<int64_t>(d) == axis ? k : at[d]) * out_strides[d];
                   }
                   const char* u = values.element_at(at);
                   const bool first = !include_self && hits[target] == 0;
                   ++hits[target];
                   if (floating) {
                     const double v = load_double(u, upd.dtype);
                     double& a = acc[target];
                     switch (first ? 0 : reduce) {
                       case 0: a = v; break;
                       case 1: case 5: a += v; break;
                       case 2: a *= v; break;
                       case 3: a = (std::isnan(a) || std::isnan(v)) ? NAN : std::max(a, v); break;
                       default: a = (std::isnan(a) || std::isnan(v)) ? NAN : std::min(a, v); break;
                     }
                   } else {
                     const int64_t v = load_int(u, upd.dtype);
                     int64_t& a = iacc[target];
                     const bool is_bool = res.dtype == ACL_BOOL;
                     switch (first ? 0 : reduce) {
                       case 0: a = v; break;
                       case 1: case 5: a = is_bool ? (a || v) : static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(v)); break;
                       case 2: a = is_bool ? (a && v) : static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(v)); break;
                       case 3: a = std::max(a, v); break;
                       default: a = std::min(a, v); break;
                     }
                   }
                 }
                 for (int64_t i = 0; i < n; ++i) {
                   if (reduce == 5 && hits[i] != 0) {  // mean over the combined values
                     const double count = static_cast<double>(hits[i] + (include_self ? 1 : 0));
                     if (floating) acc[i] /= count; else iacc[i] /= static_cast<int64_t>(count);
                   }
                   if (floating) dst.set(i, acc[i]); else dst.set_int(i, iacc[i]);
                 }
               }},
              workspaceSize, executor);
}

}  // namespace

extern "C" aclnnStatus aclnnScatterGetWorkspaceSize(const aclTensor* self, int64_t dim, const aclTensor* index,
                                                    const aclTensor* src, int64_t reduce, aclTensor* out,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    return plan_scatter("aclnnScatter", self, dim, index, src, reduce, true, out, 2, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Scatter)

extern "C" aclnnStatus aclnnScatterReduceGetWorkspaceSize(const aclTensor* self, int64_t dim, const aclTensor* index,
                                                          const aclTensor* src, int64_t reduce, bool includeSelf,
                                                          aclTensor* out, uint64_t* workspaceSize,
                                                          aclOpExecutor** executor) {
  return guarded_op([&] {
    return plan_scatter("aclnnScatterReduce", self, dim, index, src, reduce, includeSelf, out, 5, workspaceSize,
                        executor);
  });
}
CDSIM_ACLNN_RUN(ScatterReduce)
