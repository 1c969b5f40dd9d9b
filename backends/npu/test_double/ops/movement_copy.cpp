// The double's aclnnInplaceCopy (torch's copy_: selfRef = src, converting the
// dtype, src broadcast to selfRef's shape) and aclnnFlip (out = self reversed
// along dims). CANN semantics per hicann ops-math's per-op docs.
#include <set>

#include "movement_support.h"

using namespace cdsim;
using namespace cdsim::movement;

namespace {

// src's index for out's multi-index under NumPy broadcasting (src may have fewer dims).
bool broadcastable(const std::vector<int64_t>& src, const std::vector<int64_t>& dst) {
  if (src.size() > dst.size()) return false;
  for (size_t k = 0; k < src.size(); ++k) {
    const int64_t s = src[src.size() - 1 - k], d = dst[dst.size() - 1 - k];
    if (s != d && s != 1) return false;
  }
  return true;
}

}  // namespace

extern "C" aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor* selfRef, const aclTensor* src,
                                                        uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnInplaceCopy";
    const TensorInfo self = info(selfRef, "selfRef");
    const TensorInfo from = info(src, "src");
    check_dtype(op, "selfRef", self, all_dtypes());
    check_dtype(op, "src", from, all_dtypes());
    check_rank(op, "selfRef", self, 0, 8);
    check_rank(op, "src", from, 0, 8);
    if (!broadcastable(from.shape, self.shape)) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: src shape %s cannot broadcast to selfRef shape %s", op,
            shape_text(from.shape).c_str(), shape_text(self.shape).c_str());
    }
    return plan({op, 0,
                 [self, from](char*) {
                   HostTensor dst(self), in(from);
                   const std::vector<char> bytes = snapshot(in);
                   const size_t item = dtype_bytes(from.dtype);
                   const size_t lead = self.shape.size() - from.shape.size();
                   for (Index it(self.shape); it.valid(); it.next()) {
                     int64_t linear = 0;  // src's element for this position
                     for (size_t d = 0; d < from.shape.size(); ++d) {
                       const int64_t k = from.shape[d] == 1 ? 0 : it.index()[lead + d];
                       linear = linear * from.shape[d] + k;
                     }
                     convert(dst, it.linear(), bytes.data() + linear * item, from.dtype);
                   }
                 }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(InplaceCopy)

extern "C" aclnnStatus aclnnFlipGetWorkspaceSize(const aclTensor* self, const aclIntArray* dims, aclTensor* out,
                                                 uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnFlip";
    const TensorInfo in = info(self, "self");
    const TensorInfo res = info(out, "out");
    check_dtype(op, "self", in, all_dtypes());
    check_same_dtype(op, "self", in, "out", res);
    check_rank(op, "self", in, 0, 8);
    check_shape(op, "out", res, in.shape);
    std::set<int64_t> flipped;
    for (int64_t d : int_array(dims, "dims")) {
      if (!flipped.insert(check_dim(op, d, in.shape.size())).second) {
        raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: dim %lld appears twice in dims", op, static_cast<long long>(d));
      }
    }
    return plan({op, 0,
                 [in, res, flipped](char*) {
                   HostTensor src(in), dst(res);
                   const std::vector<char> bytes = snapshot(src);
                   const size_t item = dtype_bytes(in.dtype);
                   for (Index it(res.shape); it.valid(); it.next()) {
                     int64_t linear = 0;
                     for (size_t d = 0; d < res.shape.size(); ++d) {
                       const int64_t i = it.index()[d];
                       linear = linear * res.shape[d] + (flipped.count(static_cast<int64_t>(d)) ? res.shape[d] - 1 - i : i);
                     }
                     std::memcpy(dst.element(it.linear()), bytes.data() + linear * item, item);
                   }
                 }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Flip)
