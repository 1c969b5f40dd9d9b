// Other families' ops that the nn kernels compose with (aclnnMuls:
// elementwise; aclnnSoftmax: reduce; aclnnConstantPadNd: movement), defined
// WEAK here so that the nn ops run before those families' own definitions
// exist, and step aside (the linker takes the strong definition) once they
// do. (aclnnRelu and aclnnCast are elementwise_unary.cpp's.) Semantics as CANN documents them,
// without their full dtype tables: what the nn kernels pass.
#include <algorithm>
#include <cmath>
#include <limits>

#include "nn_sim.h"

#define CDSIM_NN_WEAK __attribute__((weak))
#define CDSIM_NN_WEAK_RUN(Name)                                                                       \
  extern "C" CDSIM_NN_WEAK aclnnStatus aclnn##Name(void* workspace, uint64_t workspaceSize,            \
                                                   aclOpExecutor* executor, aclrtStream stream) {     \
    return cdsim::launch("aclnn" #Name, workspace, workspaceSize, executor, stream);                  \
  }

namespace cdsim {
namespace {

using nn::invalid;

void require_numeric(const char* op, const TensorInfo& t, const char* what) {
  if (dtype_bytes(t.dtype) == 0 || t.dtype == ACL_BOOL) invalid(op, "%s has dtype %s", what, dtype_name(t.dtype));
}

// out[i] = f(self[i]) over same-shaped tensors, read fully before writing (in place is fine).
template <typename F>
aclnnStatus plan_map(const char* op, const aclTensor* self, const aclTensor* out, F f, uint64_t* workspace_size,
                     aclOpExecutor** executor) {
  const TensorInfo x = info(self, "self"), o = info(out, "out");
  require_numeric(op, x, "self");
  require_numeric(op, o, "out");
  nn::require_shape(op, o, x.shape, "out");
  Plan p{op, 0, [x, o, f](char*) {
           std::vector<double> v = nn::load(HostTensor(x));
           for (double& e : v) e = f(e);
           nn::store(HostTensor(o), v);
         }};
  return plan(std::move(p), workspace_size, executor);
}

}  // namespace
}  // namespace cdsim

extern "C" CDSIM_NN_WEAK aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor* self, const aclScalar* other,
                                                               aclTensor* out, uint64_t* workspaceSize,
                                                               aclOpExecutor** executor) {
  return cdsim::guarded_op([&] {
    const double factor = cdsim::scalar_double(other, "other");
    return cdsim::plan_map("aclnnMuls", self, out, [factor](double x) { return x * factor; }, workspaceSize,
                           executor);
  });
}
CDSIM_NN_WEAK_RUN(Muls)

extern "C" CDSIM_NN_WEAK aclnnStatus aclnnSoftmaxGetWorkspaceSize(const aclTensor* self, int64_t dim, aclTensor* out,
                                                                  uint64_t* workspaceSize, aclOpExecutor** executor) {
  return cdsim::guarded_op([&] {
    const char* op = "aclnnSoftmax";
    const cdsim::TensorInfo x = cdsim::info(self, "self"), o = cdsim::info(out, "out");
    if (!cdsim::is_floating(x.dtype) || !cdsim::is_floating(o.dtype)) cdsim::nn::invalid(op, "self and out must be floating");
    cdsim::nn::require_shape(op, o, x.shape, "out");
    const int64_t nd = static_cast<int64_t>(x.shape.size());
    const int64_t axis = dim < 0 ? dim + std::max<int64_t>(nd, 1) : dim;
    if (axis < 0 || axis >= std::max<int64_t>(nd, 1)) cdsim::nn::invalid(op, "dim %lld is out of range", static_cast<long long>(dim));
    cdsim::Plan p{op, 0, [x, o, axis, nd](char*) {
                    if (x.numel() == 0) return;
                    std::vector<double> v = cdsim::nn::load(cdsim::HostTensor(x));
                    const int64_t n = nd == 0 ? 1 : x.shape[static_cast<size_t>(axis)];
                    int64_t inner = 1;
                    for (int64_t d = axis + 1; d < nd; ++d) inner *= x.shape[static_cast<size_t>(d)];
                    const int64_t outer = x.numel() / (n * inner);
                    for (int64_t a = 0; a < outer; ++a) {
                      for (int64_t b = 0; b < inner; ++b) {
                        double* base = v.data() + a * n * inner + b;
                        double m = -std::numeric_limits<double>::infinity();
                        bool nan = false;
                        for (int64_t i = 0; i < n; ++i) {
                          nan = nan || std::isnan(base[i * inner]);
                          m = std::max(m, base[i * inner]);
                        }
                        double sum = 0.0;
                        for (int64_t i = 0; i < n; ++i) sum += std::exp(base[i * inner] - m);
                        for (int64_t i = 0; i < n; ++i) {
                          base[i * inner] = nan ? std::numeric_limits<double>::quiet_NaN()
                                                : std::exp(base[i * inner] - m) / sum;
                        }
                      }
                    }
                    cdsim::nn::store(cdsim::HostTensor(o), v);
                  }};
    return cdsim::plan(std::move(p), workspaceSize, executor);
  });
}
CDSIM_NN_WEAK_RUN(Softmax)

extern "C" CDSIM_NN_WEAK aclnnStatus aclnnConstantPadNdGetWorkspaceSize(const aclTensor* self, const aclIntArray* pad,
                                                                        const aclScalar* value, aclTensor* out,
                                                                        uint64_t* workspaceSize,
                                                                        aclOpExecutor** executor) {
  return cdsim::guarded_op([&] {
    const char* op = "aclnnConstantPadNd";
    const cdsim::TensorInfo x = cdsim::info(self, "self"), o = cdsim::info(out, "out");
    cdsim::nn::require_same_dtype(op, x, "self", o, "out");
    const std::vector<int64_t> pads = cdsim::int_array(pad, "pad");
    const size_t nd = x.shape.size();
    if (pads.size() % 2 != 0 || pads.size() > 2 * nd) cdsim::nn::invalid(op, "pad has %zu values", pads.size());
    // before[d], after[d]: the pairs run from the last dim backwards.
    std::vector<int64_t> before(nd, 0), expected = x.shape;
    for (size_t i = 0; i < pads.size() / 2; ++i) {
      const size_t d = nd - 1 - i;
      before[d] = pads[2 * i];
      expected[d] += pads[2 * i] + pads[2 * i + 1];
      if (expected[d] < 0) cdsim::nn::invalid(op, "pad makes dim %zu negative", d);
    }
    cdsim::nn::require_shape(op, o, expected, "out");
    const double fill = cdsim::scalar_double(value, "value");
    cdsim::Plan p{op, 0, [x, o, before, fill](char*) {
                    if (o.numel() == 0) return;
                    const cdsim::HostTensor tx(x), tout(o);
                    std::vector<int64_t> src(x.shape.size());
                    for (cdsim::Index it(o.shape); it.valid(); it.next()) {
                      bool inside = true;
                      for (size_t d = 0; d < src.size(); ++d) {
                        src[d] = it.index()[d] - before[d];
                        inside = inside && src[d] >= 0 && src[d] < x.shape[d];
                      }
                      const double v = inside ? cdsim::load_double(tx.element_at(src), x.dtype) : fill;
                      cdsim::store_double(tout.element_at(it.index()), o.dtype, v);
                    }
                  }};
    return cdsim::plan(std::move(p), workspaceSize, executor);
  });
}
CDSIM_NN_WEAK_RUN(ConstantPadNd)
