// The double's aclnnSoftmax, aclnnLogSoftmax (ops-nn) and aclnnCumsumV2
// (ops-math math/cumsum), along one dimension, as their docs describe them:
//   softmax(x)_i     = exp(x_i - max) / sum_j exp(x_j - max)
//   log_softmax(x)_i = x_i - max - log(sum_j exp(x_j - max))
//   CumsumV2: the running sum along `dim`; `exclusive` leaves the current
//   element out (the first output is 0), `reverse` runs from the end.
// Softmax and LogSoftmax take dim in [-self.dim(), self.dim()) (so no 0-d
// tensor); CumsumV2 a 0-d tensor with dim in [-1, 0]. Long double throughout,
// each output rounded once. CumsumV2 asks for a workspace (one row) and
// keeps the row's running sums there.
#include <cmath>
#include <limits>

#include "reduce_common.h"

namespace cdsim {
namespace reduce_ops {
namespace {

constexpr std::initializer_list<aclDataType> kSoftmaxDtypes = {ACL_FLOAT16, ACL_FLOAT, ACL_DOUBLE, ACL_BF16};
constexpr std::initializer_list<aclDataType> kCumsumDtypes = {ACL_FLOAT, ACL_FLOAT16, ACL_INT32, ACL_DOUBLE, ACL_UINT8,
                                                              ACL_INT8,  ACL_INT16,   ACL_INT64, ACL_BF16};

void check_same(const char* op, const TensorInfo& self, const TensorInfo& out) {
  if (out.dtype != self.dtype) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: out is %s, self %s", op, dtype_name(out.dtype), dtype_name(self.dtype));
  }
  check_shape(op, "out", out, self.shape);
}

void softmax_rows(const TensorInfo& self_info, const TensorInfo& out_info, size_t dim, bool log) {
  HostTensor in(self_info), out(out_info);
  const int64_t n = self_info.shape[dim];
  for_each_row(self_info.shape, dim, [&](std::vector<int64_t>& at) {
    long double m = -std::numeric_limits<long double>::infinity();
    bool nan = false;
    for (int64_t j = 0; j < n; ++j) {
      at[dim] = j;
      const long double v = load_double(in.element_at(at), in.dtype());
      nan = nan || std::isnan(v);
      if (v > m) m = v;
    }
    long double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      at[dim] = j;
      sum += std::exp(load_double(in.element_at(at), in.dtype()) - m);
    }
    const long double lse = std::log(sum);
    for (int64_t j = 0; j < n; ++j) {
      at[dim] = j;
      const long double d = load_double(in.element_at(at), in.dtype()) - m;
      long double v = log ? d - lse : std::exp(d - lse);
      if (nan) v = std::numeric_limits<long double>::quiet_NaN();
      store_double(out.element_at(at), out.dtype(), static_cast<double>(v));
    }
  });
}

aclnnStatus plan_softmax(const char* op, const aclTensor* self, int64_t dim, aclTensor* out, bool log,
                         uint64_t* workspaceSize, aclOpExecutor** executor) {
  const TensorInfo x = info(self, "self"), o = info(out, "out");
  check_dtype(op, "self", x.dtype, kSoftmaxDtypes);
  check_rank(op, "self", x);
  check_same(op, x, o);
  const size_t d = static_cast<size_t>(one_dim(op, x.shape.size(), dim, false));
  return plan(Plan{op, 0, [x, o, d, log](char*) { softmax_rows(x, o, d, log); }}, workspaceSize, executor);
}

// One row per call; `run` (workspace) holds the running sums, long double for
// floats, wrapping uint64 for integers (the same 16 bytes a slot).
union Running {
  long double f;
  uint64_t u;
};

void cumsum_rows(const TensorInfo& self_info, const TensorInfo& out_info, size_t dim, bool exclusive, bool reverse,
                 Running* run) {
  HostTensor in(self_info), out(out_info);
  std::vector<int64_t> shape = self_info.shape.empty() ? std::vector<int64_t>{1} : self_info.shape;
  const bool scalar = self_info.shape.empty();
  const bool floating = is_floating(self_info.dtype);
  const int64_t n = shape[dim];
  for_each_row(shape, dim, [&](std::vector<int64_t>& at) {
    Running acc{};
    if (floating) acc.f = 0; else acc.u = 0;
    for (int64_t step = 0; step < n; ++step) {
      const int64_t j = reverse ? n - 1 - step : step;
      at[dim] = j;
      const char* p = scalar ? in.element(0) : in.element_at(at);
      if (exclusive) run[j] = acc;
      if (floating) acc.f += load_double(p, in.dtype()); else acc.u += static_cast<uint64_t>(load_int(p, in.dtype()));
      if (!exclusive) run[j] = acc;
    }
    for (int64_t j = 0; j < n; ++j) {
      at[dim] = j;
      char* q = scalar ? out.element(0) : out.element_at(at);
      if (floating) {
        store_double(q, out.dtype(), static_cast<double>(run[j].f));
      } else {
        store_int(q, out.dtype(), static_cast<int64_t>(run[j].u));
      }
    }
  });
}

}  // namespace
}  // namespace reduce_ops
}  // namespace cdsim

using namespace cdsim;
using namespace cdsim::reduce_ops;

extern "C" aclnnStatus aclnnSoftmaxGetWorkspaceSize(const aclTensor* self, int64_t dim, aclTensor* out,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] { return plan_softmax("aclnnSoftmax", self, dim, out, false, workspaceSize, executor); });
}
CDSIM_ACLNN_RUN(Softmax)

extern "C" aclnnStatus aclnnLogSoftmaxGetWorkspaceSize(const aclTensor* self, int64_t dim, aclTensor* out,
                                                       uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] { return plan_softmax("aclnnLogSoftmax", self, dim, out, true, workspaceSize, executor); });
}
CDSIM_ACLNN_RUN(LogSoftmax)

extern "C" aclnnStatus aclnnCumsumV2GetWorkspaceSize(const aclTensor* self, int64_t dim, bool exclusive, bool reverse,
                                                     aclTensor* out, uint64_t* workspaceSize,
                                                     aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnCumsumV2";
    const TensorInfo x = info(self, "self"), o = info(out, "out");
    check_dtype(op, "self", x.dtype, kCumsumDtypes);
    check_rank(op, "self", x);
    check_same(op, x, o);
    const size_t d = static_cast<size_t>(one_dim(op, x.shape.size(), dim, true));
    const int64_t row = x.shape.empty() ? 1 : x.shape[d];
    const uint64_t bytes = x.numel() == 0 ? 0 : static_cast<uint64_t>(row) * sizeof(Running);
    return plan(Plan{op, bytes,
                     [x, o, d, exclusive, reverse](char* workspace) {
                       cumsum_rows(x, o, d, exclusive, reverse, reinterpret_cast<Running*>(workspace));
                     }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(CumsumV2)
