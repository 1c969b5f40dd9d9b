// The double's reductions: aclnnReduceSum, aclnnMean, aclnnAmax, aclnnAmin,
// aclnnProdDim, aclnnArgMax, aclnnArgMin, as hicann/ops-math's docs describe
// them (math/reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod,
// arg_max_v2, arg_min): an empty `dim` array reduces every dimension, an
// empty input sums to 0, multiplies to 1 and averages to NaN; Amax, Amin,
// ArgMax and ArgMin refuse a reduced dimension of size 0. The NaN and tie
// rules are torch's (these are torch_npu's reductions; CANN's docs state
// none): NaN propagates through Amax/Amin, ArgMax/ArgMin return the first
// extreme, a NaN counting as the extreme.
//
// Each op asks for a workspace (one accumulator per output) and keeps its
// accumulators there, so the backend's workspace path carries real data.
// Floating results are long double sums and products, rounded once; integer
// ones wrap in the output's width, as the device's integer units do.
#include <cmath>
#include <limits>
#include <new>

#include "reduce_common.h"

namespace cdsim {
namespace reduce_ops {
namespace {

enum class Red { sum, mean, prod, max, min, argmax, argmin };

// One output's running state, in the workspace.
struct Acc {
  long double f;    // floating sum / product / extreme
  uint64_t u;       // integer sum / product (wrapping)
  int64_t i;        // integer extreme
  int64_t index;    // arg*: position along the reduced dimension
  bool nan;         // a NaN was seen
  bool seen;        // an element was seen
};

constexpr std::initializer_list<aclDataType> kNumeric = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT8,
                                                         ACL_INT16, ACL_INT32,   ACL_INT64, ACL_UINT8};
constexpr std::initializer_list<aclDataType> kNumericBool = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16,  ACL_DOUBLE,
                                                             ACL_INT8,  ACL_INT16,   ACL_INT32, ACL_INT64,
                                                             ACL_UINT8, ACL_BOOL};

struct Job {
  Red op;
  TensorInfo self, out;
  std::vector<bool> mask;  // reduced dimensions of self
  int64_t count = 1;       // elements per output
};

// Output element of input `index`: row-major over the kept dimensions.
std::vector<int64_t> out_strides(const std::vector<int64_t>& shape, const std::vector<bool>& mask) {
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (mask[d]) continue;
    strides[d] = step;
    step *= shape[d];
  }
  return strides;
}

bool wants_max(Red op) { return op == Red::max || op == Red::argmax; }
bool better(Red op, long double v, long double best) { return wants_max(op) ? v > best : v < best; }
bool better(Red op, int64_t v, int64_t best) { return wants_max(op) ? v > best : v < best; }

void accumulate(const Job& job, const HostTensor& in, Acc& a, int64_t linear, int64_t position) {
  const bool floating_out = is_floating(job.out.dtype);
  switch (job.op) {
    case Red::sum: case Red::mean:
      if (floating_out) a.f += in.get(linear); else a.u += static_cast<uint64_t>(in.get_int(linear));
      break;
    case Red::prod:
      if (floating_out) a.f *= in.get(linear); else a.u *= static_cast<uint64_t>(in.get_int(linear));
      break;
    default: {  // the extremes and their positions, in the input's own domain
      if (a.nan) break;
      if (is_floating(job.self.dtype)) {
        const long double v = in.get(linear);
        if (std::isnan(v)) {
          a.nan = true;
          a.index = position;
        } else if (!a.seen || better(job.op, v, a.f)) {
          a.f = v;
          a.index = position;
        }
      } else {
        const int64_t v = in.get_int(linear);
        if (!a.seen || better(job.op, v, a.i)) {
          a.i = v;
          a.index = position;
        }
      }
      a.seen = true;
    }
  }
}

void finish(const Job& job, const HostTensor& out, const Acc& a, int64_t j) {
  const bool floating_out = is_floating(out.dtype());
  switch (job.op) {
    case Red::sum: case Red::prod:
      if (floating_out) {
        out.set(j, static_cast<double>(a.f));
      } else if (out.dtype() == ACL_BOOL) {  // a bool "sum" is an any (ReduceSum's docs)
        out.set_int(j, a.u != 0);
      } else {
        out.set_int(j, static_cast<int64_t>(a.u));
      }
      break;
    case Red::mean: {
      const long double total = floating_out ? a.f : static_cast<long double>(static_cast<int64_t>(a.u));
      const long double m = job.count == 0 ? std::numeric_limits<long double>::quiet_NaN() : total / job.count;
      if (floating_out) out.set(j, static_cast<double>(m)); else out.set_int(j, static_cast<int64_t>(std::trunc(m)));
      break;
    }
    case Red::max: case Red::min:
      if (a.nan) {
        out.set(j, std::numeric_limits<double>::quiet_NaN());
      } else if (is_floating(job.self.dtype)) {
        out.set(j, static_cast<double>(a.f));
      } else {
        out.set_int(j, a.i);
      }
      break;
    case Red::argmax: case Red::argmin: out.set_int(j, a.index); break;
  }
}

// The body run on the stream: accumulators in `workspace`, then the outputs.
void run(const Job& job, char* workspace) {
  HostTensor in(job.self), out(job.out);
  if (out.numel() == 0) return;
  Acc* acc = reinterpret_cast<Acc*>(workspace);
  for (int64_t j = 0; j < out.numel(); ++j) {
    new (&acc[j]) Acc{job.op == Red::prod ? 1.0L : 0.0L, job.op == Red::prod ? 1u : 0u, 0, 0, false, false};
  }
  const std::vector<int64_t> strides = out_strides(job.self.shape, job.mask);
  size_t arg_dim = 0;  // the one reduced dimension of ArgMax/ArgMin
  while (arg_dim < job.mask.size() && !job.mask[arg_dim]) ++arg_dim;
  for_each_index(job.self.shape, [&](int64_t linear, const std::vector<int64_t>& index) {
    int64_t j = 0;
    for (size_t d = 0; d < index.size(); ++d) j += index[d] * strides[d];
    accumulate(job, in, acc[j], linear, arg_dim < index.size() ? index[arg_dim] : 0);
  });
  for (int64_t j = 0; j < out.numel(); ++j) finish(job, out, acc[j], j);
}

// Shared checks and the plan. `dims` as the op received it; `dtype` is the
// requested output dtype (or the output's own where the op has none).
aclnnStatus plan_reduction(const char* op, Red kind, const aclTensor* self, const std::vector<int64_t>& dims,
                           bool keep, const aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor) {
  Job job;
  job.op = kind;
  job.self = info(self, "self");
  job.out = info(out, "out");
  check_rank(op, "self", job.self);
  check_rank(op, "out", job.out);
  job.mask = dim_mask(op, job.self.shape.size(), dims);
  for (size_t d = 0; d < job.mask.size(); ++d) {
    if (!job.mask[d]) continue;
    job.count *= job.self.shape[d];
    const bool extreme = kind != Red::sum && kind != Red::mean && kind != Red::prod;
    if (extreme && job.self.shape[d] == 0) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: the reduced dimension %zu of self has size 0", op, d);
    }
  }
  check_shape(op, "out", job.out, reduced_shape(job.self.shape, job.mask, keep));
  const uint64_t bytes = static_cast<uint64_t>(job.out.numel()) * sizeof(Acc);
  return plan(Plan{op, bytes, [job](char* workspace) { run(job, workspace); }}, workspace_size, executor);
}

void check_output_dtype(const char* op, aclDataType dtype, const aclTensor* out) {
  if (info(out, "out").dtype != dtype) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: out is %s but dtype asks for %s", op, dtype_name(info(out, "out").dtype),
          dtype_name(dtype));
  }
}

}  // namespace
}  // namespace reduce_ops
}  // namespace cdsim

using namespace cdsim;
using namespace cdsim::reduce_ops;

extern "C" aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor* self, const aclIntArray* dims, bool keepDims,
                                                      aclDataType dtype, aclTensor* out, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnReduceSum";
    check_dtype(op, "self", info(self, "self").dtype, kNumericBool);
    check_dtype(op, "dtype", dtype, kNumericBool);
    check_output_dtype(op, dtype, out);
    return plan_reduction(op, Red::sum, self, int_array(dims, "dims"), keepDims, out, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(ReduceSum)

extern "C" aclnnStatus aclnnMeanGetWorkspaceSize(const aclTensor* self, const aclIntArray* dim, bool keepDim,
                                                 aclDataType dtype, aclTensor* out, uint64_t* workspaceSize,
                                                 aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnMean";
    check_dtype(op, "self", info(self, "self").dtype, kNumeric);
    check_dtype(op, "dtype", dtype, kNumeric);
    check_output_dtype(op, dtype, out);
    return plan_reduction(op, Red::mean, self, int_array(dim, "dim"), keepDim, out, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Mean)

namespace {

aclnnStatus extreme(const char* op, Red kind, const aclTensor* self, const aclIntArray* dim, bool keepDim,
                    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  check_dtype(op, "self", info(self, "self").dtype, kNumericBool);
  if (info(out, "out").dtype != info(self, "self").dtype) {
    raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: out must have self's dtype", op);
  }
  return plan_reduction(op, kind, self, int_array(dim, "dim"), keepDim, out, workspaceSize, executor);
}

aclnnStatus arg_extreme(const char* op, Red kind, const aclTensor* self, int64_t dim, bool keepdim, aclTensor* out,
                        uint64_t* workspaceSize, aclOpExecutor** executor) {
  check_dtype(op, "self", info(self, "self").dtype, kNumeric);
  check_dtype(op, "out", info(out, "out").dtype, {ACL_INT32, ACL_INT64});
  // [-self.dim(), self.dim()): a 0-d self has no dimension to reduce.
  one_dim(op, info(self, "self").shape.size(), dim, false);
  return plan_reduction(op, kind, self, {dim}, keepdim, out, workspaceSize, executor);
}

}  // namespace

extern "C" aclnnStatus aclnnAmaxGetWorkspaceSize(const aclTensor* self, const aclIntArray* dim, bool keepDim,
                                                 aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] { return extreme("aclnnAmax", Red::max, self, dim, keepDim, out, workspaceSize, executor); });
}
CDSIM_ACLNN_RUN(Amax)

extern "C" aclnnStatus aclnnAminGetWorkspaceSize(const aclTensor* self, const aclIntArray* dim, bool keepDim,
                                                 aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] { return extreme("aclnnAmin", Red::min, self, dim, keepDim, out, workspaceSize, executor); });
}
CDSIM_ACLNN_RUN(Amin)

extern "C" aclnnStatus aclnnProdDimGetWorkspaceSize(const aclTensor* self, int64_t dim, bool keepDim,
                                                    aclDataType dtype, aclTensor* out, uint64_t* workspaceSize,
                                                    aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnProdDim";
    check_dtype(op, "self", info(self, "self").dtype, kNumericBool);
    check_dtype(op, "dtype", dtype, kNumericBool);
    check_output_dtype(op, dtype, out);
    return plan_reduction(op, Red::prod, self, {dim}, keepDim, out, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(ProdDim)

extern "C" aclnnStatus aclnnArgMaxGetWorkspaceSize(const aclTensor* self, int64_t dim, bool keepdim, aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op(
      [&] { return arg_extreme("aclnnArgMax", Red::argmax, self, dim, keepdim, out, workspaceSize, executor); });
}
CDSIM_ACLNN_RUN(ArgMax)

extern "C" aclnnStatus aclnnArgMinGetWorkspaceSize(const aclTensor* self, int64_t dim, bool keepdim, aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op(
      [&] { return arg_extreme("aclnnArgMin", Red::argmin, self, dim, keepdim, out, workspaceSize, executor); });
}
CDSIM_ACLNN_RUN(ArgMin)
