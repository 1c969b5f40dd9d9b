// sort, argsort and topk along one axis, all on aclnnSort with stable=true.
//
// chipdock's order is stable (equal values keep their index order, the lower
// index first, in both directions) with NaN greatest (last ascending, first
// descending). aclnnSort's `stable` is the only tie rule CANN documents:
// aclnnArgsort has no such flag and aclnnTopk's docs promise no tie order, so
// neither is used. Hence
//   sort:    aclnnSort -> values = out, indices into workspace;
//   argsort: aclnnSort -> values into workspace, indices = out;
//   topk:    aclnnSort of the whole axis (largest: descending) into
//            workspace, then the first k along the axis copied into the
//            outputs with aclnnInplaceCopy (k = the axis length: straight
//            into the outputs). Slower than a selection for small k; exact.
// NaN's place is not in CANN's docs either; aclnnSort is torch_npu's sort and
// chipdock relies on torch's rule (verified on the test double only).
// aclnnSort takes 1-8 dimensions and, for bfloat16, no sort along dim 1: a 0-d
// tensor goes as shape (1), and a bfloat16 sort along axis 1 gets a size-1
// dimension in front (the same memory, the axis then dim 2).
#include "chipdock/support/error.h"
#include "reduce_common.h"

namespace chipdock_npu {
namespace reduce {
namespace {

using chipdock::support::fail;

CD_NPU_ACLNN(Sort);
CD_NPU_ACLNN(InplaceCopy);

enum class SortOp { sort, argsort, topk };

// How the input is shown to aclnnSort: `shape` (with `lead` leading 1s, 0-d
// as (1)) sorted along `dim`.
struct SortLayout {
  std::vector<int64_t> shape;
  size_t lead = 0;
  int64_t dim = 0;
};

SortLayout sort_layout(const cd_tensor_view& x, int64_t axis) {
  SortLayout l;
  l.shape = x.ndim == 0 ? std::vector<int64_t>{1} : shape_of(x);
  l.lead = x.dtype == CD_DTYPE_BFLOAT16 && axis == 1 ? 1 : 0;
  l.shape.insert(l.shape.begin(), l.lead, 1);
  l.dim = axis + static_cast<int64_t>(l.lead);
  return l;
}

void run_sort(const cd_kernel_context* ctx, const TensorDesc& self, const SortLayout& l, bool descending,
              const TensorDesc& values, const TensorDesc& indices) {
  run_aclnn(ctx, Sort, self.get(), true, l.dim, descending, values.get(), indices.get());
}

void sort_kernel_body(const cd_kernel_context* ctx, SortOp op) {
  check_operands(ctx, 1, op == SortOp::topk ? 2 : 1);
  const cd_tensor_view& x = *ctx->inputs[0];
  const int64_t axis = one_axis(ctx, x.ndim);
  const int64_t n = x.ndim == 0 ? 1 : x.shape[axis];
  const bool descending = flag(ctx, op == SortOp::topk ? "largest" : "descending");
  int64_t k = n;
  if (op == SortOp::topk) {
    k = number(ctx, "k");
    if (k < 0 || k > n) {
      fail(CD_STATUS_INVALID_ARGUMENT, "k = %lld is not in [0, %lld]", static_cast<long long>(k),
           static_cast<long long>(n));
    }
    (void)flag(ctx, "sorted");  // the result is always sorted
  }
  for (int32_t i = 0; i < ctx->num_outputs; ++i) {
    const cd_tensor_view& o = *ctx->outputs[i];
    const bool is_index = op == SortOp::argsort || (op == SortOp::topk && i == 1);
    if (o.dtype != (is_index ? CD_DTYPE_INT64 : x.dtype) || o.ndim != x.ndim) {
      fail(CD_STATUS_INVALID_ARGUMENT, "output %d must be %s with the input's rank", i,
           is_index ? "int64" : "of the input's dtype");
    }
    require_contiguous(o, "output");
  }
  if (numel(x) == 0 || k == 0) return;

  const SortLayout l = sort_layout(x, axis);
  TensorDesc self = shaped_desc(ctx, x, l.lead);
  std::vector<int64_t> picked = l.shape;  // the outputs' shape in that layout
  picked[static_cast<size_t>(l.dim)] = k;
  const cd_tensor_view& first = *ctx->outputs[0];
  if (op == SortOp::sort || op == SortOp::argsort) {
    int64_t count = 1;
    for (int64_t s : l.shape) count *= s;
    const cd_dtype_t scratch_dtype = op == SortOp::sort ? CD_DTYPE_INT64 : x.dtype;
    void* scratch = workspace(ctx, static_cast<uint64_t>(count) * dtype_size(scratch_dtype),
                              op == SortOp::sort ? "sort (indices)" : "argsort (values)");
    TensorDesc out = reshaped_output(ctx, first, l.shape);
    TensorDesc other = TensorDesc::contiguous(scratch, scratch_dtype, l.shape);
    if (op == SortOp::sort) {
      run_sort(ctx, self, l, descending, out, other);
    } else {
      run_sort(ctx, self, l, descending, other, out);
    }
    return;
  }
  TensorDesc values_out = reshaped_output(ctx, first, picked);
  TensorDesc indices_out = reshaped_output(ctx, *ctx->outputs[1], picked);
  if (k == n) {
    run_sort(ctx, self, l, descending, values_out, indices_out);
    return;
  }
  int64_t count = 1;
  for (int64_t s : l.shape) count *= s;
  void* values = workspace(ctx, static_cast<uint64_t>(count) * dtype_size(x.dtype), "topk (sorted values)");
  void* indices = workspace(ctx, static_cast<uint64_t>(count) * dtype_size(CD_DTYPE_INT64), "topk (sorted indices)");
  TensorDesc sorted_values = TensorDesc::contiguous(values, x.dtype, l.shape);
  TensorDesc sorted_indices = TensorDesc::contiguous(indices, CD_DTYPE_INT64, l.shape);
  run_sort(ctx, self, l, descending, sorted_values, sorted_indices);
  // The first k along the axis: the sorted buffers' strides, k entries.
  const std::vector<int64_t> strides = contiguous_strides(l.shape);
  TensorDesc head_values = TensorDesc::make(values, x.dtype, picked, strides, 0, {count});
  TensorDesc head_indices = TensorDesc::make(indices, CD_DTYPE_INT64, picked, strides, 0, {count});
  run_aclnn(ctx, InplaceCopy, values_out.get(), head_values.get());
  run_aclnn(ctx, InplaceCopy, indices_out.get(), head_indices.get());
}

cd_error* sort_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("sort", [ctx] { sort_kernel_body(ctx, SortOp::sort); });
}
cd_error* argsort_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("argsort", [ctx] { sort_kernel_body(ctx, SortOp::argsort); });
}
cd_error* topk_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("topk", [ctx] { sort_kernel_body(ctx, SortOp::topk); });
}

// aclnnSort's self dtypes on Atlas A2 (ops-math math/sort/docs/aclnnSort.md):
// BFLOAT16, FLOAT16, FLOAT32, INT8, INT16, INT32, INT64, UINT8 (BOOL too, which
// chipdock does not sort). No DOUBLE: float64 is declared in unsupported/reduce.json.
const std::vector<cd_dtype_t>& sortable_dtypes() {
  static const std::vector<cd_dtype_t> v = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                            CD_DTYPE_INT8,    CD_DTYPE_INT16,   CD_DTYPE_INT32,
                                            CD_DTYPE_INT64,   CD_DTYPE_UINT8};
  return v;
}

}  // namespace

void register_sort_ops(Registrar& r) {
  // Resolved once per chipdock op, so that a missing symbol names each op it costs.
  if (r.resolve(Sort, "sort")) add_each(r, "sort", sortable_dtypes(), 2, sort_kernel);
  if (r.resolve(Sort, "argsort")) add_each(r, "argsort", sortable_dtypes(), 2, argsort_kernel, 1);
  if (r.resolve(Sort, "topk") && r.resolve(InplaceCopy, "topk")) {
    add_each(r, "topk", sortable_dtypes(), 3, topk_kernel, 1);
  }
}

}  // namespace reduce
}  // namespace chipdock_npu
