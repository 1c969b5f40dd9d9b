// The double's aclnnCat, aclnnSplitWithSize, aclnnConstantPadNd and
// aclnnRepeat, with the validation their CANN docs list (hicann ops-math).
#include "movement_support.h"

using namespace cdsim;
using namespace cdsim::movement;

// ---- Cat: tensors joined along dim; empty tensors are skipped (as CANN does).
extern "C" aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList* tensors, int64_t dim, aclTensor* out,
                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnCat";
    const TensorInfo res = info(out, "out");
    check_dtype(op, "out", res, all_dtypes());
    check_rank(op, "out", res, 1, 8);
    const int64_t axis = check_dim(op, dim, res.shape.size());
    std::vector<TensorInfo> parts;
    int64_t total = 0;
    for (const aclTensor* t : tensor_list(tensors, "tensors")) {
      const TensorInfo in = info(t, "tensors[i]");
      check_same_dtype(op, "a tensor", in, "out", res);
      std::vector<int64_t> expected = res.shape;
      expected[axis] = in.shape.size() == res.shape.size() ? in.shape[axis] : -1;
      check_shape(op, "a tensor", in, expected);
      total += in.shape[axis];
      if (in.numel() != 0) parts.push_back(in);
    }
    if (total != res.shape[axis]) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: the tensors add up to %lld along dim %lld, out has %lld", op,
            static_cast<long long>(total), static_cast<long long>(axis), static_cast<long long>(res.shape[axis]));
    }
    return plan({op, 0,
                 [parts, res, axis](char*) {
                   HostTensor dst(res);
                   const size_t item = dtype_bytes(res.dtype);
                   int64_t base = 0;  // where the current part starts along axis
                   for (const TensorInfo& part : parts) {
                     HostTensor src(part);
                     for (Index it(part.shape); it.valid(); it.next()) {
                       std::vector<int64_t> at = it.index();
                       at[axis] += base;
                       std::memcpy(dst.element_at(at), src.element(it.linear()), item);
                     }
                     base += part.shape[axis];
                   }
                 }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Cat)

// ---- SplitWithSize: self cut along dim into pieces of splitSize.
extern "C" aclnnStatus aclnnSplitWithSizeGetWorkspaceSize(const aclTensor* self, const aclIntArray* splitSize,
                                                          int64_t dim, aclTensorList* out, uint64_t* workspaceSize,
                                                          aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnSplitWithSize";
    const TensorInfo in = info(self, "self");
    check_dtype(op, "self", in, all_dtypes());
    check_rank(op, "self", in, 1, 8);
    const int64_t axis = check_dim(op, dim, in.shape.size());
    const std::vector<int64_t> sizes = int_array(splitSize, "splitSize");
    const std::vector<const aclTensor*> outs = tensor_list(out, "out");
    if (sizes.size() != outs.size()) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %zu split sizes for %zu outputs", op, sizes.size(), outs.size());
    }
    std::vector<TensorInfo> pieces;
    int64_t total = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      const TensorInfo piece = info(outs[i], "out[i]");
      check_same_dtype(op, "self", in, "an output", piece);
      if (sizes[i] < 0) raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: splitSize[%zu] is negative", op, i);
      std::vector<int64_t> expected = in.shape;
      expected[axis] = sizes[i];
      check_shape(op, "an output", piece, expected);
      total += sizes[i];
      pieces.push_back(piece);
    }
    if (total != in.shape[axis]) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: splitSize adds up to %lld, self has %lld along dim %lld", op,
            static_cast<long long>(total), static_cast<long long>(in.shape[axis]), static_cast<long long>(axis));
    }
    return plan({op, 0,
                 [in, pieces, axis](char*) {
                   HostTensor src(in);
                   const size_t item = dtype_bytes(in.dtype);
                   int64_t base = 0;
                   for (const TensorInfo& piece : pieces) {
                     HostTensor dst(piece);
                     for (Index it(piece.shape); it.valid(); it.next()) {
                       std::vector<int64_t> at = it.index();
                       at[axis] += base;
                       std::memcpy(dst.element(it.linear()), src.element_at(at), item);
                     }
                     base += piece.shape[axis];
                   }
                 }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(SplitWithSize)

// ---- ConstantPadNd: pad = (begin, end) pairs from the last dim backwards;
// negative entries crop (torch semantics); the rest is value.
extern "C" aclnnStatus aclnnConstantPadNdGetWorkspaceSize(const aclTensor* self, const aclIntArray* pad,
                                                          const aclScalar* value, aclTensor* out,
                                                          uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnConstantPadNd";
    const TensorInfo in = info(self, "self");
    const TensorInfo res = info(out, "out");
    check_dtype(op, "self", in, all_dtypes());
    check_same_dtype(op, "self", in, "out", res);
    check_rank(op, "self", in, 0, 8);
    const std::vector<int64_t> pads = int_array(pad, "pad");
    const size_t nd = in.shape.size();
    if (pads.size() % 2 != 0 || pads.size() / 2 > nd) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: pad has %zu entries for %zu dims (an even count, at most 2 per dim)",
            op, pads.size(), nd);
    }
    std::vector<int64_t> begin(nd, 0), expected = in.shape;
    for (size_t k = 0; k < pads.size() / 2; ++k) {
      const size_t d = nd - 1 - k;
      begin[d] = pads[2 * k];
      expected[d] += pads[2 * k] + pads[2 * k + 1];
      if (expected[d] < 0) raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: dim %zu would have a negative size", op, d);
    }
    check_shape(op, "out", res, expected);
    const double fill = scalar_double(value, "value");
    const int64_t fill_int = is_floating(scalar_dtype(value, "value")) ? 0 : scalar_int(value, "value");
    const bool int_fill = !is_floating(scalar_dtype(value, "value"));
    return plan({op, 0,
                 [in, res, begin, fill, fill_int, int_fill](char*) {
                   HostTensor src(in), dst(res);
                   const std::vector<char> bytes = snapshot(src);
                   const size_t item = dtype_bytes(in.dtype);
                   for (Index it(res.shape); it.valid(); it.next()) {
                     int64_t linear = 0;
                     bool inside = true;
                     for (size_t d = 0; d < res.shape.size(); ++d) {
                       const int64_t i = it.index()[d] - begin[d];
                       if (i < 0 || i >= in.shape[d]) inside = false;
                       linear = linear * in.shape[d] + i;
                     }
                     if (inside) {
                       std::memcpy(dst.element(it.linear()), bytes.data() + linear * item, item);
                     } else if (int_fill && !is_floating(res.dtype)) {
                       dst.set_int(it.linear(), res.dtype == ACL_BOOL ? fill_int != 0 : fill_int);
                     } else {
                       dst.set(it.linear(), fill);
                     }
                   }
                 }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(ConstantPadNd)

// ---- Repeat: torch.Tensor.repeat (repeats may have more entries than dims).
extern "C" aclnnStatus aclnnRepeatGetWorkspaceSize(const aclTensor* self, const aclIntArray* repeats, aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnRepeat";
    const TensorInfo in = info(self, "self");
    const TensorInfo res = info(out, "out");
    check_dtype(op, "self", in, all_dtypes());
    check_same_dtype(op, "self", in, "out", res);
    check_rank(op, "self", in, 0, 8);
    const std::vector<int64_t> times = int_array(repeats, "repeats");
    if (times.size() < in.shape.size() || times.size() > 8) {
      raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: %zu repeats for %zu dims (at least as many, at most 8)", op,
            times.size(), in.shape.size());
    }
    const size_t lead = times.size() - in.shape.size();
    std::vector<int64_t> src_shape(lead, 1), expected(times.size());
    src_shape.insert(src_shape.end(), in.shape.begin(), in.shape.end());
    for (size_t d = 0; d < times.size(); ++d) {
      if (times[d] < 0) raise(CD_ACLNN_ERR_PARAM_INVALID, "%s: repeats[%zu] is negative", op, d);
      expected[d] = src_shape[d] * times[d];
    }
    check_shape(op, "out", res, expected);
    return plan({op, 0,
                 [in, res, src_shape](char*) {
                   HostTensor src(in), dst(res);
                   const std::vector<char> bytes = snapshot(src);
                   const size_t item = dtype_bytes(in.dtype);
                   for (Index it(res.shape); it.valid(); it.next()) {
                     int64_t linear = 0;
                     for (size_t d = 0; d < res.shape.size(); ++d) {
                       linear = linear * src_shape[d] + it.index()[d] % src_shape[d];
                     }
                     std::memcpy(dst.element(it.linear()), bytes.data() + linear * item, item);
                   }
                 }},
                workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Repeat)
