// Normalizations (float dtypes): batch_norm (inference, over dim 1),
// layer_norm and rms_norm (over the trailing len(scale.shape) dims; bias
// optional for layer_norm), group_norm (x (N, C, ...), C / num_groups
// channels per group) and local_response_norm (ONNX LRN across channels).
// The loops are in norm_ops.h.
#include <limits>

#include "chipdock/support/attributes.h"
#include "chipdock/support/checked_math.h"
#include "reduce_common.h"

namespace chipdock_cpu {
namespace red {

enum class NormOp { batch_norm, layer_norm, rms_norm, group_norm, lrn };

// The work as rows: `rows` enumerates them (coalesced input dims) and `row`
// lays out one (coalesced input dims, row_len elements, contiguous in the
// output at r * row_len).
struct NormPlan {
  NormOp op = NormOp::layer_norm;
  HostTensor x, out;
  std::vector<HostTensor> params;  // scale, bias[, mean, var] as given
  double epsilon = 0, alpha = 0, beta = 0, bias = 0;
  int64_t size = 1, groups = 1;
  bool relu = false;  // batch_norm's activation
  std::vector<Dim> rows, row;
  int64_t row_count = 0, row_len = 0;
  // (N, C, spatial...) ops
  int64_t batch = 0, channels = 0, spatial = 1, batch_stride = 0, channel_stride = 0;
  std::vector<Dim> spatial_dims;
  bool row_channels = false;  // batch_norm: a row is a whole sample
};

// The hot loops, once per instruction-set level.
#define CD_RED_OPS_HEADER "norm_ops.h"
#include "reduce_levels.h"
#undef CD_RED_OPS_HEADER

namespace {

int64_t product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

double non_negative(const cd_kernel_context* ctx, const char* name) {
  const double v = attr_float(ctx, name);
  if (!(v >= 0)) fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' = %g must be >= 0", name, v);
  return v;
}

// x, params of x's dtype, the output like x.
NormPlan plan_common(const cd_kernel_context* ctx, NormOp op, int32_t min_in, int32_t max_in) {
  check_context(ctx, min_in, max_in, 1);
  NormPlan p;
  p.op = op;
  p.x = input_tensor(ctx, 0);
  p.out = output_tensor(ctx, 0);
  require_dtype_in(p.x, kFloatDtypes, "input 0");
  for (int32_t i = 1; i < ctx->num_inputs; ++i) {
    p.params.push_back(input_tensor(ctx, i));
    require_dtype(p.params.back(), p.x.dtype, i == 1 ? "input 1" : i == 2 ? "input 2" : "input");
  }
  require_dtype(p.out, p.x.dtype, "output 0");
  require_shape(p.out, p.x.shape, "output 0");
  require_contiguous(p.out, "output 0");
  return p;
}

// x (N, C, spatial...): batch, channels, spatial and their strides.
void plan_nc(NormPlan& p, const char* op) {
  const size_t ndim = p.x.shape.size();
  if (ndim < 2) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s expects x of shape (N, C, ...), got %zu dims", op, ndim);
  }
  p.batch = p.x.shape[0];
  p.channels = p.x.shape[1];
  p.spatial = product(p.x.shape, 2, ndim);
  p.batch_stride = p.x.strides[0];
  p.channel_stride = p.x.strides[1];
  p.spatial_dims = coalesce(dims_of(p.x, 2, ndim));
}

void require_channels(const NormPlan& p, size_t first, size_t last) {
  for (size_t i = first; i < last && i < p.params.size(); ++i) {
    static const char* const names[] = {"input 0", "input 1", "input 2", "input 3", "input 4"};
    require_shape(p.params[i], {p.channels}, names[i + 1]);
  }
}

NormPlan plan_layer_norm(const cd_kernel_context* ctx, NormOp op) {
  NormPlan p = op == NormOp::layer_norm ? plan_common(ctx, op, 2, 3) : plan_common(ctx, op, 2, 2);
  p.epsilon = non_negative(ctx, "epsilon");
  const size_t ndim = p.x.shape.size(), k = p.params[0].shape.size();
  if (k > ndim) {
    fail(CD_STATUS_INVALID_ARGUMENT, "scale has %zu dims but x only %zu", k, ndim);
  }
  const std::vector<int64_t> trailing(p.x.shape.end() - static_cast<std::ptrdiff_t>(k),
                                      p.x.shape.end());
  require_shape(p.params[0], trailing, "input 1 (scale)");
  if (p.params.size() > 1) require_shape(p.params[1], trailing, "input 2 (bias)");
  p.rows = coalesce(dims_of(p.x, 0, ndim - k));
  p.row = coalesce(dims_of(p.x, ndim - k, ndim));
  p.row_count = product(p.x.shape, 0, ndim - k);
  p.row_len = product(p.x.shape, ndim - k, ndim);
  return p;
}

NormPlan plan_group_norm(const cd_kernel_context* ctx) {
  NormPlan p = plan_common(ctx, NormOp::group_norm, 3, 3);
  p.epsilon = non_negative(ctx, "epsilon");
  plan_nc(p, "group_norm");
  p.groups = attr_int(ctx, "num_groups");
  if (p.groups < 1 || p.channels % p.groups != 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "num_groups = %lld must be >= 1 and divide C = %lld",
         static_cast<long long>(p.groups), static_cast<long long>(p.channels));
  }
  require_channels(p, 0, 2);
  const int64_t cg = p.channels / p.groups;
  p.rows = coalesce({{p.batch, p.batch_stride}, {p.groups, cg * p.channel_stride}});
  std::vector<Dim> row{{cg, p.channel_stride}};
  for (const Dim& d : dims_of(p.x, 2, p.x.shape.size())) row.push_back(d);
  p.row = coalesce(row);
  p.row_count = p.batch * p.groups;
  p.row_len = cg * p.spatial;
  return p;
}

NormPlan plan_batch_norm(const cd_kernel_context* ctx) {
  NormPlan p = plan_common(ctx, NormOp::batch_norm, 5, 5);
  p.epsilon = non_negative(ctx, "epsilon");
  p.relu = chipdock::support::choice_attribute(ctx, "activation", {"none", "relu"}) == 1;
  plan_nc(p, "batch_norm");
  require_channels(p, 0, 4);
  p.row_channels = p.spatial < 16;
  if (p.row_channels) {
    p.rows = coalesce({{p.batch, p.batch_stride}});
    std::vector<Dim> row{{p.channels, p.channel_stride}};
    for (const Dim& d : dims_of(p.x, 2, p.x.shape.size())) row.push_back(d);
    p.row = coalesce(row);
    p.row_count = p.batch;
    p.row_len = p.channels * p.spatial;
  } else {
    p.rows = coalesce({{p.batch, p.batch_stride}, {p.channels, p.channel_stride}});
    p.row = p.spatial_dims;
    p.row_count = p.batch * p.channels;
    p.row_len = p.spatial;
  }
  return p;
}

NormPlan plan_lrn(const cd_kernel_context* ctx) {
  NormPlan p = plan_common(ctx, NormOp::lrn, 1, 1);
  plan_nc(p, "local_response_norm");
  p.size = attr_int(ctx, "size");
  if (p.size < 1) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'size' = %lld must be >= 1",
         static_cast<long long>(p.size));
  }
  p.alpha = attr_float(ctx, "alpha");
  p.beta = attr_float(ctx, "beta");
  p.bias = attr_float(ctx, "bias");
  return p;
}

void enqueue_norm(const cd_kernel_context* ctx, NormOp op, const char* label) {
  require_non_null(ctx, "ctx");
  std::shared_ptr<Stream> stream = stream_from_handle(ctx->stream, ctx->device);
  NormPlan p;
  switch (op) {
    case NormOp::layer_norm:
    case NormOp::rms_norm: p = plan_layer_norm(ctx, op); break;
    case NormOp::group_norm: p = plan_group_norm(ctx); break;
    case NormOp::batch_norm: p = plan_batch_norm(ctx); break;
    case NormOp::lrn: p = plan_lrn(ctx); break;
  }
  if (p.out.numel == 0) return;
  stream->enqueue(label, [p = std::move(p)] {
    p.x.range.check_live("input 0");
    for (const HostTensor& t : p.params) t.range.check_live("input");
    p.out.range.check_live("output 0");
    CD_RED_DISPATCH(p.x.dtype, run_norm, p);
  });
}

#define CD_NORM_KERNEL(name, op)                                       \
  cd_error* name##_kernel(const cd_kernel_context* ctx) noexcept {     \
    return guard(#name, [ctx] { enqueue_norm(ctx, op, #name); });      \
  }

CD_NORM_KERNEL(batch_norm, NormOp::batch_norm)
CD_NORM_KERNEL(layer_norm, NormOp::layer_norm)
CD_NORM_KERNEL(rms_norm, NormOp::rms_norm)
CD_NORM_KERNEL(group_norm, NormOp::group_norm)
CD_NORM_KERNEL(local_response_norm, NormOp::lrn)
#undef CD_NORM_KERNEL

}  // namespace

void register_norms(cd_kernel_registry* registry) {
  register_same(registry, "batch_norm", kFloatDtypes, 6, batch_norm_kernel);
  register_same(registry, "layer_norm", kFloatDtypes, 4, layer_norm_kernel);
  register_same(registry, "rms_norm", kFloatDtypes, 3, rms_norm_kernel);
  register_same(registry, "group_norm", kFloatDtypes, 4, group_norm_kernel);
  register_same(registry, "local_response_norm", kFloatDtypes, 2, local_response_norm_kernel);
}

}  // namespace red
}  // namespace chipdock_cpu
