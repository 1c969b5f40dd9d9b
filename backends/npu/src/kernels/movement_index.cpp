// gather (aclnnGatherV2: numpy.take along an axis), embedding (aclnnGatherV2
// on axis 0: the same lookup aclnnEmbedding does), gather_elements
// (aclnnGather: torch.gather) and scatter (aclnnScatter for none/add/mul,
// aclnnScatterReduce for max/min). Indices are read back, checked and
// normalized on the host first (movement_common.h says why): a negative
// index counts from the end, one out of range is OUT_OF_RANGE before
// anything is enqueued.
#include <string>
#include <utility>
#include <vector>

#include "chipdock/support/attributes.h"
#include "movement_common.h"

namespace chipdock_npu::movement {
namespace {

using chipdock::support::fail;

void check_index_dtype(const cd_tensor_view& idx) {
  if (idx.dtype != CD_DTYPE_INT32 && idx.dtype != CD_DTYPE_INT64) {
    fail(CD_STATUS_INVALID_ARGUMENT, "input 1 (indices) must be int32 or int64, got %s", dtype_name(idx.dtype));
  }
}

// out = data gathered along `axis` by the index view (numpy.take); out has
// shape data[:axis] + idx + data[axis+1:].
void take(const cd_kernel_context* ctx, const cd_tensor_view& data, const cd_tensor_view& idx,
          const cd_tensor_view& out, int64_t axis) {
  const std::vector<int64_t> values = read_indices(ctx, idx, data.shape[axis], axis);
  // aclnnGatherV2 treats a 0-d index as a 1-element 1-d one: then out is seen
  // with that extra dim of size 1.
  std::vector<int64_t> idx_shape = shape_of(idx);
  TensorDesc dst;
  if (idx_shape.empty()) {
    idx_shape = {1};
    std::vector<int64_t> shape = shape_of(out), strides = strides_of(out);
    shape.insert(shape.begin() + axis, 1);
    strides.insert(strides.begin() + axis, 1);
    dst = TensorDesc(ctx, out, shape, strides);
  } else {
    dst = TensorDesc(ctx, out);
  }
  TensorDesc index = upload_indices(ctx, values, idx_shape);
  TensorDesc src(ctx, data);
  run_aclnn(ctx, GatherV2, src.get(), axis, index.get(), dst.get());
}

void enqueue_gather(const cd_kernel_context* ctx) {
  check_arity(ctx, 2, 1);
  const cd_tensor_view& data = *ctx->inputs[0];
  const cd_tensor_view& idx = *ctx->inputs[1];
  const cd_tensor_view& out = *ctx->outputs[0];
  require_dtype(out, data.dtype, "output 0");
  require_writable(out, "output 0");
  check_index_dtype(idx);
  const size_t nd = static_cast<size_t>(data.ndim);
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot gather from a 0-d tensor");
  const int64_t axis = axis_attribute(ctx, "axis", nd);
  std::vector<int64_t> expected(data.shape, data.shape + axis);
  expected.insert(expected.end(), idx.shape, idx.shape + idx.ndim);
  expected.insert(expected.end(), data.shape + axis + 1, data.shape + nd);
  require_shape(out, expected, "output 0");
  if (numel(expected) == 0) return;
  if (data.shape[axis] == 0) {
    fail(CD_STATUS_OUT_OF_RANGE, "cannot gather along axis %lld of size 0", static_cast<long long>(axis));
  }
  take(ctx, data, idx, out, axis);
}

cd_error* gather_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("gather", [ctx] { enqueue_gather(ctx); });
}

void enqueue_embedding(const cd_kernel_context* ctx) {
  check_arity(ctx, 2, 1);
  const cd_tensor_view& weight = *ctx->inputs[0];
  const cd_tensor_view& idx = *ctx->inputs[1];
  const cd_tensor_view& out = *ctx->outputs[0];
  require_dtype(out, weight.dtype, "output 0");
  require_writable(out, "output 0");
  check_index_dtype(idx);
  if (weight.ndim != 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "weight must be 2-d (V, D), got %s", shape_string(shape_of(weight)).c_str());
  }
  std::vector<int64_t> expected = shape_of(idx);
  expected.push_back(weight.shape[1]);
  require_shape(out, expected, "output 0");
  if (numel(expected) == 0) return;
  if (weight.shape[0] == 0) fail(CD_STATUS_OUT_OF_RANGE, "the weight has no rows");
  take(ctx, weight, idx, out, 0);
}

cd_error* embedding_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("embedding", [ctx] { enqueue_embedding(ctx); });
}

// idx.shape against data.shape: same ndim, no larger off the axis.
void check_elementwise_shapes(const cd_tensor_view& data, const cd_tensor_view& idx, int64_t axis) {
  bool ok = idx.ndim == data.ndim;
  for (int32_t d = 0; ok && d < idx.ndim; ++d) ok = d == axis || idx.shape[d] <= data.shape[d];
  if (!ok) {
    fail(CD_STATUS_INVALID_ARGUMENT, "indices shape %s does not fit data %s along axis %lld (same ndim; no larger "
         "off the axis)", shape_string(shape_of(idx)).c_str(), shape_string(shape_of(data)).c_str(),
         static_cast<long long>(axis));
  }
}

void enqueue_gather_elements(const cd_kernel_context* ctx) {
  check_arity(ctx, 2, 1);
  const cd_tensor_view& data = *ctx->inputs[0];
  const cd_tensor_view& idx = *ctx->inputs[1];
  const cd_tensor_view& out = *ctx->outputs[0];
  require_dtype(out, data.dtype, "output 0");
  require_writable(out, "output 0");
  check_index_dtype(idx);
  const size_t nd = static_cast<size_t>(data.ndim);
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot gather from a 0-d tensor");
  const int64_t axis = axis_attribute(ctx, "axis", nd);
  check_elementwise_shapes(data, idx, axis);
  require_shape(out, shape_of(idx), "output 0");
  if (numel(shape_of(out)) == 0) return;
  const std::vector<int64_t> values = read_indices(ctx, idx, data.shape[axis], axis);
  TensorDesc index = upload_indices(ctx, values, shape_of(idx));
  TensorDesc src(ctx, data);
  TensorDesc dst(ctx, out);
  run_aclnn(ctx, Gather, src.get(), axis, index.get(), dst.get());
}

cd_error* gather_elements_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("gather_elements", [ctx] { enqueue_gather_elements(ctx); });
}

// aclnnScatter's reduce codes (0 none, 1 add, 2 mul) and aclnnScatterReduce's (3 max, 4 min).
int64_t reduce_code(const std::string& reduction) {
  static const char* const kNames[] = {"none", "add", "mul", "max", "min"};
  for (int64_t i = 0; i < 5; ++i) {
    if (reduction == kNames[i]) return i;
  }
  fail(CD_STATUS_INVALID_ARGUMENT, "reduction '%s' is not one of none, add, mul, max, min", reduction.c_str());
}

void enqueue_scatter(const cd_kernel_context* ctx) {
  check_arity(ctx, 3, 1);
  const cd_tensor_view& data = *ctx->inputs[0];
  const cd_tensor_view& idx = *ctx->inputs[1];
  const cd_tensor_view& upd = *ctx->inputs[2];
  const cd_tensor_view& out = *ctx->outputs[0];
  require_dtype(out, data.dtype, "output 0");
  require_dtype(upd, data.dtype, "input 2 (updates)");
  require_writable(out, "output 0");
  check_index_dtype(idx);
  const size_t nd = static_cast<size_t>(data.ndim);
  if (nd == 0) fail(CD_STATUS_INVALID_ARGUMENT, "cannot scatter into a 0-d tensor");
  const int64_t axis = axis_attribute(ctx, "axis", nd);
  check_elementwise_shapes(data, idx, axis);
  require_shape(upd, shape_of(idx), "input 2 (updates)");
  require_shape(out, shape_of(data), "output 0");
  const int64_t reduce = reduce_code(chipdock::support::string_attribute(ctx, "reduction"));
  if (reduce >= 3 && ScatterReduce.run == nullptr) {
    fail(CD_STATUS_UNIMPLEMENTED, "reduction max/min needs aclnnScatterReduce, which the op library lacks");
  }
  if (numel(shape_of(out)) == 0) return;
  TensorDesc src(ctx, data);
  TensorDesc dst(ctx, out);
  if (numel(shape_of(idx)) == 0) {  // nothing scattered: out = data
    run_aclnn(ctx, InplaceCopy, dst.get(), src.get());
    return;
  }
  const std::vector<int64_t> values = read_indices(ctx, idx, data.shape[axis], axis);
  TensorDesc index = upload_indices(ctx, values, shape_of(idx));
  TensorDesc updates(ctx, upd);
  if (reduce < 3) {
    run_aclnn(ctx, Scatter, src.get(), axis, index.get(), updates.get(), reduce, dst.get());
  } else {
    run_aclnn(ctx, ScatterReduce, src.get(), axis, index.get(), updates.get(), reduce, true, dst.get());
  }
}

cd_error* scatter_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("scatter", [ctx] { enqueue_scatter(ctx); });
}

}  // namespace

void register_index(Registrar& r) {
  const bool gather_v2 = r.resolve(GatherV2, "gather");
  const bool gather = r.resolve(Gather, "gather_elements");
  const bool scatter = r.resolve(Scatter, "scatter");
  // Optional: without it scatter's max/min reductions fail with the reason.
  r.resolve(ScatterReduce, "scatter (max, min)");
  for (cd_dtype_t t : kAllDtypes) {
    for (cd_dtype_t i : kIndexDtypes) {
      if (gather_v2) {
        r.add("gather", {t, i, t}, gather_kernel);
        r.add("embedding", {t, i, t}, embedding_kernel);
      }
      if (gather) r.add("gather_elements", {t, i, t}, gather_elements_kernel);
      if (scatter) r.add("scatter", {t, i, t, t}, scatter_kernel);
    }
  }
}

}  // namespace chipdock_npu::movement
