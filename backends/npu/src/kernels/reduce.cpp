// Reductions over axes (sum, mean, max, min, prod; shape rule `reduce`) and
// along one axis (argmax, argmin; `reduce_axis`), on aclnnReduceSum,
// aclnnMean, aclnnAmax, aclnnAmin, aclnnProdDim, aclnnArgMax, aclnnArgMin;
// plus the helpers of reduce_common.h and register_reduce, which registers
// the whole family (reduce_axis.cpp and reduce_sort.cpp too).
//
// Where chipdock and aclnn differ:
// - "no axes" is every axis in chipdock; the kernels always pass the axes
//   explicitly, so no aclnn reading of an empty array is relied on.
// - A 0-d input is given to aclnn as shape (1) reduced over dim 0.
// - prod over several axes: aclnn has ProdDim (one axis) and Prod (all axes,
//   output shape (1)), so the product runs axis by axis, innermost first,
//   through workspace intermediates in the accumulation dtype (float32 for
//   16-bit floats, as chipdock's opset asks; the integers wrap, so their
//   intermediates stay in their own width, exactly).
// - sum/mean of float16 and bfloat16 accumulate in float32 (aclnn's `dtype`
//   argument, then a rounding pass), see accumulate_wide.
// - max/min/argmax/argmin of an empty extent has no value: refused here
//   (the core refuses it too) rather than left to aclnn's 161002.
// - NaN and ties: aclnnAmax/Amin/ArgMax/ArgMin are torch_npu's amax, amin,
//   argmax, argmin; CANN's docs state no NaN or tie rule, and chipdock relies
//   on torch's (NaN propagates, the first extreme wins). Verified on the test
//   double only (backends/npu/README.md).
#include <algorithm>
#include <string>

#include "chipdock/support/attributes.h"
#include "chipdock/support/error.h"
#include "reduce_common.h"

namespace chipdock_npu {
namespace reduce {

using chipdock::support::fail;

// --- helpers (reduce_common.h) ------------------------------------------------------

void add_each(Registrar& r, const char* op, const std::vector<cd_dtype_t>& dtypes, int arity, cd_kernel_fn fn,
              int index_outputs) {
  for (cd_dtype_t dt : dtypes) {
    std::vector<cd_dtype_t> sig(static_cast<size_t>(arity), dt);
    for (int i = 0; i < index_outputs; ++i) sig[static_cast<size_t>(arity - 1 - i)] = CD_DTYPE_INT64;
    r.add(op, sig, fn);
  }
}

void check_operands(const cd_kernel_context* ctx, int32_t inputs, int32_t outputs) {
  chipdock::support::require_non_null(ctx, "ctx");
  if (ctx->num_inputs != inputs || ctx->num_outputs != outputs) {
    fail(CD_STATUS_INVALID_ARGUMENT, "expected %d input(s) and %d output(s), got %d and %d", inputs, outputs,
         ctx->num_inputs, ctx->num_outputs);
  }
  for (int32_t i = 0; i < inputs; ++i) chipdock::support::require_non_null(ctx->inputs[i], "input view");
  for (int32_t i = 0; i < outputs; ++i) chipdock::support::require_non_null(ctx->outputs[i], "output view");
}

std::vector<int64_t> reduce_axes(const cd_kernel_context* ctx, int32_t ndim) {
  std::vector<int64_t> axes = chipdock::support::ints_attribute(ctx, "axes");
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= ndim || (i > 0 && axes[i] <= axes[i - 1])) {
      fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'axes' must be sorted, unique and in [0, %d) (normalized)", ndim);
    }
  }
  if (axes.empty()) {  // the opset's meaning of "no axes"
    for (int64_t d = 0; d < ndim; ++d) axes.push_back(d);
  }
  return axes;
}

int64_t one_axis(const cd_kernel_context* ctx, int32_t ndim) {
  const int64_t axis = chipdock::support::int_attribute(ctx, "axis");
  if (ndim == 0 && (axis == 0 || axis == -1)) return 0;
  if (axis < 0 || axis >= ndim) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'axis' = %lld is out of range for %d dims (expected normalized)",
         static_cast<long long>(axis), ndim);
  }
  return axis;
}

bool flag(const cd_kernel_context* ctx, const char* name) { return chipdock::support::bool_attribute(ctx, name); }

int64_t number(const cd_kernel_context* ctx, const char* name) {
  return chipdock::support::int_attribute(ctx, name);
}

int64_t numel(const cd_tensor_view& view) {
  int64_t n = 1;
  for (int32_t d = 0; d < view.ndim; ++d) n *= view.shape[d];
  return n;
}

std::vector<int64_t> shape_of(const cd_tensor_view& view) {
  return std::vector<int64_t>(view.shape, view.shape + view.ndim);
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<int64_t>(shape[d], 1);
  return strides;
}

namespace {

int64_t extent(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t offset) {
  int64_t last = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    last += (shape[d] - 1) * strides[d];
  }
  return last + 1;
}

}  // namespace

TensorDesc shaped_desc(const cd_kernel_context* ctx, const cd_tensor_view& view, size_t lead) {
  if (view.ndim > 0 && lead == 0) return TensorDesc(ctx, view);
  if (view.format != CD_FORMAT_STRIDED) {
    fail(CD_STATUS_INVALID_ARGUMENT, "tensor format %d is not CD_FORMAT_STRIDED", view.format);
  }
  std::vector<int64_t> shape = shape_of(view);
  std::vector<int64_t> strides(view.strides, view.strides + view.ndim);
  if (shape.empty()) {
    shape = {1};
    strides = {1};
  }
  void* data = view.data;
  int64_t offset = 0;
  if (std::any_of(strides.begin(), strides.end(), [](int64_t s) { return s < 0; })) {
    data = materialize_positive_strides(ctx, view, &strides);  // a flipped copy, offset 0
  } else {
    const int64_t item = static_cast<int64_t>(dtype_size(view.dtype));
    if (view.byte_offset % item != 0) {
      fail(CD_STATUS_INVALID_ARGUMENT, "byte_offset %lld is not a multiple of the %lld-byte element",
           static_cast<long long>(view.byte_offset), static_cast<long long>(item));
    }
    offset = view.byte_offset / item;
  }
  // Size-1 dimensions in front, with the stride a contiguous layout would give them.
  const int64_t outer_stride = shape[0] * strides[0] > 0 ? shape[0] * strides[0] : 1;
  shape.insert(shape.begin(), lead, 1);
  strides.insert(strides.begin(), lead, outer_stride);
  return TensorDesc::make(data, view.dtype, shape, strides, offset, {extent(shape, strides, offset)});
}

void require_contiguous(const cd_tensor_view& view, const char* what) {
  int64_t expected = 1;
  for (int32_t d = view.ndim; d-- > 0;) {
    if (view.shape[d] != 1 && view.strides[d] != expected) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%s is not C-contiguous", what);
    }
    expected *= view.shape[d];
  }
}

TensorDesc reshaped_output(const cd_kernel_context* ctx, const cd_tensor_view& view,
                           const std::vector<int64_t>& shape) {
  require_contiguous(view, "output 0");
  return TensorDesc(ctx, view, shape, contiguous_strides(shape));
}

// --- the kernels ----------------------------------------------------------------------

namespace {

CD_NPU_ACLNN(ReduceSum);
CD_NPU_ACLNN(Mean);
CD_NPU_ACLNN(Amax);
CD_NPU_ACLNN(Amin);
CD_NPU_ACLNN(ProdDim);
CD_NPU_ACLNN(ArgMax);
CD_NPU_ACLNN(ArgMin);

enum class Kind { sum, mean, max, min, prod, argmax, argmin };

const char* extreme_name(Kind kind) {
  return kind == Kind::max || kind == Kind::argmax ? "maximum" : "minimum";
}

void require_dtype(const cd_tensor_view& view, cd_dtype_t dtype, const char* what) {
  if (view.dtype != dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s has dtype %d, expected %d", what, view.dtype, dtype);
  }
}

// The dtype products accumulate in: at least float32 (opset.yaml's tolerance
// tables); integers in their own width (wrapping is exact modulo 2^bits).
cd_dtype_t accumulation_dtype(cd_dtype_t dtype) {
  switch (dtype) {
    case CD_DTYPE_FLOAT16: case CD_DTYPE_BFLOAT16: case CD_DTYPE_FLOAT32: return CD_DTYPE_FLOAT32;
    default: return dtype;
  }
}

// prod over `axes` (sorted, at least two): ProdDim axis by axis, the last
// axis first, keeping each reduced axis as 1; two workspace buffers in turn
// hold the intermediates; the last call writes `out` seen with the kept shape.
void prod_chain(const cd_kernel_context* ctx, const TensorDesc& self, std::vector<int64_t> shape,
                const std::vector<int64_t>& axes) {
  const cd_tensor_view& out = *ctx->outputs[0];
  const cd_dtype_t acc = accumulation_dtype(out.dtype);
  shape[static_cast<size_t>(axes.back())] = 1;
  int64_t first = 1;
  for (int64_t s : shape) first *= s;
  const uint64_t bytes = static_cast<uint64_t>(first) * dtype_size(acc);
  void* buffers[2] = {workspace(ctx, bytes, "prod (intermediate)"),
                      axes.size() > 2 ? workspace(ctx, bytes, "prod (intermediate)") : nullptr};
  TensorDesc current = TensorDesc::contiguous(buffers[0], acc, shape);
  run_aclnn(ctx, ProdDim, self.get(), axes.back(), true, acl_dtype(acc), current.get());
  for (size_t i = axes.size() - 1; i-- > 1;) {
    shape[static_cast<size_t>(axes[i])] = 1;
    TensorDesc next = TensorDesc::contiguous(buffers[(axes.size() - 1 - i) % 2], acc, shape);
    run_aclnn(ctx, ProdDim, current.get(), axes[i], true, acl_dtype(acc), next.get());
    current = std::move(next);
  }
  shape[static_cast<size_t>(axes.front())] = 1;
  TensorDesc result = reshaped_output(ctx, out, shape);
  run_aclnn(ctx, ProdDim, current.get(), axes.front(), true, acl_dtype(out.dtype), result.get());
}

// sum and mean of 16-bit floats: aclnn casts self to `dtype` before it
// reduces (ops-math reduce_sum / reduce_mean), so asking for FLOAT makes the
// accumulation float32, as chipdock's opset requires, into a workspace
// intermediate with the reduced axes kept; a ReduceSum over those size-1 axes
// with the 16-bit dtype then rounds each result once into `out`.
void accumulate_wide(const cd_kernel_context* ctx, Kind kind, const TensorDesc& self, std::vector<int64_t> shape,
                     const std::vector<int64_t>& axes, bool keepdims) {
  const cd_tensor_view& out = *ctx->outputs[0];
  for (int64_t a : axes) shape[static_cast<size_t>(a)] = 1;
  const uint64_t bytes = static_cast<uint64_t>(numel(out)) * dtype_size(CD_DTYPE_FLOAT32);
  void* data = workspace(ctx, bytes, kind == Kind::sum ? "sum (float32)" : "mean (float32)");
  TensorDesc wide = TensorDesc::contiguous(data, CD_DTYPE_FLOAT32, shape);
  IntArrayDesc dims(axes);
  if (kind == Kind::sum) {
    run_aclnn(ctx, ReduceSum, self.get(), dims.get(), true, ACL_FLOAT, wide.get());
  } else {
    run_aclnn(ctx, Mean, self.get(), dims.get(), true, ACL_FLOAT, wide.get());
  }
  TensorDesc o(ctx, out);
  run_aclnn(ctx, ReduceSum, wide.get(), dims.get(), keepdims, acl_dtype(out.dtype), o.get());
}

void reduce_over_axes(const cd_kernel_context* ctx, Kind kind) {
  check_operands(ctx, 1, 1);
  const cd_tensor_view& x = *ctx->inputs[0];
  const cd_tensor_view& out = *ctx->outputs[0];
  require_dtype(out, x.dtype, "output 0");
  std::vector<int64_t> axes = reduce_axes(ctx, x.ndim);
  bool keepdims = flag(ctx, "keepdims");
  if (numel(out) == 0) return;  // nothing to write
  if (kind == Kind::max || kind == Kind::min) {
    for (int64_t a : axes) {
      if (x.shape[a] == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot reduce an empty extent (it has no %s)",
                                extreme_name(kind));
    }
  }
  std::vector<int64_t> shape = shape_of(x);
  if (x.ndim == 0) {  // as shape (1) reduced over dim 0: aclnn's 0-d paths differ per op
    axes = {0};
    shape = {1};
    keepdims = false;
  }
  TensorDesc self = shaped_desc(ctx, x);
  TensorDesc o(ctx, out);
  const aclDataType dtype = acl_dtype(x.dtype);
  if (kind == Kind::prod) {
    if (axes.size() == 1) {
      run_aclnn(ctx, ProdDim, self.get(), axes[0], keepdims, dtype, o.get());
    } else {
      prod_chain(ctx, self, shape, axes);
    }
    return;
  }
  IntArrayDesc dims(axes);
  if ((kind == Kind::sum || kind == Kind::mean) &&
      (x.dtype == CD_DTYPE_FLOAT16 || x.dtype == CD_DTYPE_BFLOAT16)) {
    accumulate_wide(ctx, kind, self, shape, axes, keepdims);
    return;
  }
  switch (kind) {
    case Kind::sum: run_aclnn(ctx, ReduceSum, self.get(), dims.get(), keepdims, dtype, o.get()); break;
    case Kind::mean: run_aclnn(ctx, Mean, self.get(), dims.get(), keepdims, dtype, o.get()); break;
    case Kind::max: run_aclnn(ctx, Amax, self.get(), dims.get(), keepdims, o.get()); break;
    case Kind::min: run_aclnn(ctx, Amin, self.get(), dims.get(), keepdims, o.get()); break;
    default: fail(CD_STATUS_INTERNAL, "reduce_over_axes: kind %d", static_cast<int>(kind));
  }
}

void reduce_along_axis(const cd_kernel_context* ctx, Kind kind) {
  check_operands(ctx, 1, 1);
  const cd_tensor_view& x = *ctx->inputs[0];
  const cd_tensor_view& out = *ctx->outputs[0];
  require_dtype(out, CD_DTYPE_INT64, "output 0");
  const int64_t axis = one_axis(ctx, x.ndim);
  const bool keepdims = flag(ctx, "keepdims") && x.ndim > 0;  // a 0-d input gives a 0-d output
  if (numel(out) == 0) return;
  if (x.ndim > 0 && x.shape[axis] == 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "cannot reduce an empty extent (it has no %s)", extreme_name(kind));
  }
  TensorDesc self = shaped_desc(ctx, x);
  TensorDesc o(ctx, out);
  run_aclnn(ctx, kind == Kind::argmax ? ArgMax : ArgMin, self.get(), axis, keepdims, o.get());
}

#define CD_NPU_REDUCE_KERNEL(name, body)                                                     \
  cd_error* name##_kernel(const cd_kernel_context* ctx) noexcept {                           \
    return chipdock::support::guard(#name, [ctx] { body(ctx, Kind::name); });                \
  }
CD_NPU_REDUCE_KERNEL(sum, reduce_over_axes)
CD_NPU_REDUCE_KERNEL(mean, reduce_over_axes)
CD_NPU_REDUCE_KERNEL(max, reduce_over_axes)
CD_NPU_REDUCE_KERNEL(min, reduce_over_axes)
CD_NPU_REDUCE_KERNEL(prod, reduce_over_axes)
CD_NPU_REDUCE_KERNEL(argmax, reduce_along_axis)
CD_NPU_REDUCE_KERNEL(argmin, reduce_along_axis)
#undef CD_NPU_REDUCE_KERNEL

}  // namespace
}  // namespace reduce

// Dtypes: the Atlas A2 lists of hicann/ops-math math/reduce_sum, reduce_mean,
// reduce_max, reduce_min, reduce_prod, arg_max_v2, arg_min docs (every
// chipdock numeric dtype; mean: the float ones, as chipdock's opset).
void register_reduce(Registrar& r) {
  using namespace reduce;
  if (r.resolve(ReduceSum, "sum")) add_each(r, "sum", numeric_dtypes(), 2, sum_kernel);
  if (r.resolve(Mean, "mean")) add_each(r, "mean", float_dtypes(), 2, mean_kernel);
  if (r.resolve(Amax, "max")) add_each(r, "max", numeric_dtypes(), 2, max_kernel);
  if (r.resolve(Amin, "min")) add_each(r, "min", numeric_dtypes(), 2, min_kernel);
  if (r.resolve(ProdDim, "prod")) add_each(r, "prod", numeric_dtypes(), 2, prod_kernel);
  if (r.resolve(ArgMax, "argmax")) add_each(r, "argmax", numeric_dtypes(), 2, argmax_kernel, 1);
  if (r.resolve(ArgMin, "argmin")) add_each(r, "argmin", numeric_dtypes(), 2, argmin_kernel, 1);
  register_axis_ops(r);
  register_sort_ops(r);
}

}  // namespace chipdock_npu
