// The double's aclnnArange, aclnnInplaceFillScalar and
// aclnnUpsampleBilinear2d, per hicann ops-math (math/range) and ops-cv
// (image/upsample_bilinear2d) docs.
#include <algorithm>

#include "movement_support.h"

using namespace cdsim;
using namespace cdsim::movement;

// ---- Arange: out[i] = start + i * step, [start, end); out's size must be ceil((end - start) / step).
extern "C" aclnnStatus aclnnArangeGetWorkspaceSize(const aclScalar* start, const aclScalar* end,
                                                   const aclScalar* step, aclTensor* out, uint64_t* workspaceSize,
                                                   aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnArange";
    const TensorInfo res = info(out, "out");
    check_dtype(op, "out", res, {ACL_FLOAT16, ACL_FLOAT, ACL_DOUBLE, ACL_INT32, ACL_INT64, ACL_BF16});
    check_rank(op, "out", res, 1, 1);
    const double s = scalar_double(start, "start"), e = scalar_double(end, "end"), d = scalar_double(step, "step");
    if (d == 0.0 || (d > 0.0 && s > e) || (d < 0.0 && s < e)) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: start %g, end %g and step %g do not make a range", op, s, e, d);
    }
    const int64_t n = static_cast<int64_t>(std::ceil((e - s) / d));
    check_shape(op, "out", res, {n});
    const bool integral = !is_floating(res.dtype);
    const int64_t si = integral ? scalar_int(start, "start") : 0, di = integral ? scalar_int(step, "step") : 0;
    return plan({op, 0,
                 [res, s, d, si, di, integral](char*) {
                   HostTensor dst(res);
                   for (int64_t i = 0; i < dst.numel(); ++i) {
                     if (integral) dst.set_int(i, si + i * di); else dst.set(i, s + static_cast<double>(i) * d);
                   }
                 }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Arange)

// ---- InplaceFillScalar: every element of selfRef = value (converted to its dtype).
extern "C" aclnnStatus aclnnInplaceFillScalarGetWorkspaceSize(aclTensor* selfRef, const aclScalar* value,
                                                              uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnInplaceFillScalar";
    const TensorInfo self = info(selfRef, "selfRef");
    check_dtype(op, "selfRef", self, all_dtypes());
    check_rank(op, "selfRef", self, 0, 8);
    const bool int_value = !is_floating(scalar_dtype(value, "value"));
    const double v = scalar_double(value, "value");
    const int64_t vi = int_value ? scalar_int(value, "value") : 0;
    return plan({op, 0,
                 [self, v, vi, int_value](char*) {
                   HostTensor dst(self);
                   for (int64_t i = 0; i < dst.numel(); ++i) {
                     if (self.dtype == ACL_BOOL) {
                       dst.set_int(i, int_value ? vi != 0 : v != 0.0);
                     } else if (int_value && !is_floating(self.dtype)) {
                       dst.set_int(i, vi);
                     } else if (!is_floating(self.dtype)) {
                       dst.set_int(i, static_cast<int64_t>(std::trunc(v)));
                     } else {
                       dst.set(i, v);
                     }
                   }
                 }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(InplaceFillScalar)

// ---- UpsampleBilinear2d on (N, C, H, W). alignCorners false: src = max((dst + 0.5) * ratio - 0.5, 0) with
// ratio = 1 / scales when scales > 0, else in / out; true: src = dst * (in - 1) / (out - 1).
namespace {

struct Taps {
  int64_t i0, i1;
  double w1;
};

std::vector<Taps> taps(int64_t out, int64_t in, bool align, double scale) {
  std::vector<Taps> t(static_cast<size_t>(out));
  for (int64_t j = 0; j < out; ++j) {
    double src;
    if (align) {
      src = out > 1 ? static_cast<double>(j) * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    } else {
      const double ratio = scale > 0.0 ? 1.0 / scale : static_cast<double>(in) / static_cast<double>(out);
      src = std::max((static_cast<double>(j) + 0.5) * ratio - 0.5, 0.0);
    }
    const int64_t i0 = std::min<int64_t>(static_cast<int64_t>(src), in - 1);
    t[static_cast<size_t>(j)] = {i0, std::min<int64_t>(i0 + 1, in - 1), src - static_cast<double>(i0)};
  }
  return t;
}

}  // namespace

extern "C" aclnnStatus aclnnUpsampleBilinear2dGetWorkspaceSize(const aclTensor* self, const aclIntArray* outputSize,
                                                               bool alignCorners, double scalesH, double scalesW,
                                                               aclTensor* out, uint64_t* workspaceSize,
                                                               aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnUpsampleBilinear2d";
    const TensorInfo in = info(self, "self");
    const TensorInfo res = info(out, "out");
    check_dtype(op, "self", in, {ACL_FLOAT, ACL_FLOAT16, ACL_BF16});
    check_same_dtype(op, "self", in, "out", res);
    check_rank(op, "self", in, 4, 4);
    const std::vector<int64_t> size = int_array(outputSize, "outputSize");
    if (size.size() != 2 || size[0] <= 0 || size[1] <= 0) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: outputSize must be 2 positive sizes", op);
    }
    if (in.numel() == 0) raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: self is empty", op);
    check_shape(op, "out", res, {in.shape[0], in.shape[1], size[0], size[1]});
    const std::vector<Taps> th = taps(size[0], in.shape[2], alignCorners, scalesH);
    const std::vector<Taps> tw = taps(size[1], in.shape[3], alignCorners, scalesW);
    return plan({op, 0,
                 [in, res, th, tw](char*) {
                   HostTensor src(in), dst(res);
                   for (Index it(res.shape); it.valid(); it.next()) {
                     const std::vector<int64_t>& o = it.index();
                     const Taps& h = th[static_cast<size_t>(o[2])];
                     const Taps& w = tw[static_cast<size_t>(o[3])];
                     auto at = [&](int64_t y, int64_t x) { return load_double(src.element_at({o[0], o[1], y, x}), in.dtype); };
                     const double top = (1.0 - w.w1) * at(h.i0, w.i0) + w.w1 * at(h.i0, w.i1);
                     const double bottom = (1.0 - w.w1) * at(h.i1, w.i0) + w.w1 * at(h.i1, w.i1);
                     dst.set(it.linear(), (1.0 - h.w1) * top + h.w1 * bottom);
                   }
                 }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(UpsampleBilinear2d)
