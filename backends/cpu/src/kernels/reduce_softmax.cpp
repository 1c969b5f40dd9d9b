// softmax, log_softmax (float dtypes) and cumsum (numeric dtypes) along one
// normalized `axis` (shape rule `same_axis`); cumsum also takes `exclusive`
// and `reverse` (0/1). The loops are in reduce_softmax_ops.h.
#include "reduce_common.h"

namespace chipdock_cpu {
namespace red {

enum class AxisOp { softmax, log_softmax, cumsum };

// The input as [outer, n, inner]: `outer` and `inner` are the coalesced
// dimensions before and after the axis (input strides), `s` the axis stride.
struct AxisPlan {
  AxisOp op = AxisOp::softmax;
  HostTensor in, out;
  std::vector<Dim> outer, inner;
  int64_t outer_count = 1, n = 1, s = 0, inner_count = 1;
  bool exclusive = false, reverse = false;
};

// The hot loops, once per instruction-set level.
#define CD_RED_OPS_HEADER "reduce_softmax_ops.h"
#include "reduce_levels.h"
#undef CD_RED_OPS_HEADER

namespace {

AxisPlan plan_axis(const cd_kernel_context* ctx, AxisOp op) {
  check_context(ctx, 1, 1, 1);
  AxisPlan p;
  p.op = op;
  p.in = input_tensor(ctx, 0);
  p.out = output_tensor(ctx, 0);
  if (op == AxisOp::cumsum) {
    require_dtype_in(p.in, kNumericDtypes, "input 0");
    p.exclusive = attr_bool(ctx, "exclusive");
    p.reverse = attr_bool(ctx, "reverse");
  } else {
    require_dtype_in(p.in, kFloatDtypes, "input 0");
  }
  require_dtype(p.out, p.in.dtype, "output 0");
  require_shape(p.out, p.in.shape, "output 0");
  require_contiguous(p.out, "output 0");
  const size_t ndim = p.in.shape.size();
  const int64_t axis = check_axis(attr_int(ctx, "axis"), ndim, "axis");
  if (ndim > 0) {
    const size_t a = static_cast<size_t>(axis);
    p.outer = coalesce(dims_of(p.in, 0, a));
    p.inner = coalesce(dims_of(p.in, a + 1, ndim));
    p.n = p.in.shape[a];
    p.s = p.in.strides[a];
    p.outer_count = numel_of(p.outer);
    p.inner_count = numel_of(p.inner);
  }
  return p;
}

void enqueue_axis(const cd_kernel_context* ctx, AxisOp op, const char* label) {
  require_non_null(ctx, "ctx");
  std::shared_ptr<Stream> stream = stream_from_handle(ctx->stream, ctx->device);
  AxisPlan p = plan_axis(ctx, op);
  if (p.out.numel == 0) return;
  stream->enqueue(label, [p = std::move(p)] {
    p.in.range.check_live("input 0");
    p.out.range.check_live("output 0");
    CD_RED_DISPATCH(p.in.dtype, run_axis, p);
  });
}

cd_error* softmax_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("softmax", [ctx] { enqueue_axis(ctx, AxisOp::softmax, "softmax"); });
}

cd_error* log_softmax_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("log_softmax", [ctx] { enqueue_axis(ctx, AxisOp::log_softmax, "log_softmax"); });
}

cd_error* cumsum_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("cumsum", [ctx] { enqueue_axis(ctx, AxisOp::cumsum, "cumsum"); });
}

}  // namespace

void register_softmax_family(cd_kernel_registry* registry) {
  register_same(registry, "softmax", kFloatDtypes, 2, softmax_kernel);
  register_same(registry, "log_softmax", kFloatDtypes, 2, log_softmax_kernel);
  register_same(registry, "cumsum", kNumericDtypes, 2, cumsum_kernel);
}

}  // namespace red
}  // namespace chipdock_cpu
