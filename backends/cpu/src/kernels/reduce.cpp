// Reductions: sum, mean, prod, max, min (shape rule `reduce`: `axes` sorted,
// unique, non-negative, all axes when empty; `keepdims` 0/1) and argmax,
// argmin (`reduce_axis`: one normalized `axis`, int64 output). Also the
// instruction-set dispatch shared by the reduction and normalization files,
// and register_reductions, which registers the whole family.
#include "isa.h"
#include "reduce_common.h"

namespace chipdock_cpu {
namespace red {

// --- instruction-set level ----------------------------------------------------------

// The backend's shared level (kernels/isa.h: CPU features, capped by
// CHIPDOCK_CPU_ISA through config.h).
int active_isa() { return static_cast<int>(kernel_isa()); }

// --- the plan ---------------------------------------------------------------------------

enum class RedOp { sum, mean, prod, max, min, argmax, argmin };

// A reduction, with the input's dimensions split into kept and reduced ones
// (each group coalesced; kept in output order). `columns`: the innermost
// kept dimension has stride 1 (the column driver); else the row driver.
struct ReducePlan {
  RedOp op = RedOp::sum;
  HostTensor in, out;
  std::vector<Dim> kept, reduced;
  int64_t outputs = 0, count = 0;
  bool columns = false;
};

// --- the per-level kernels ----------------------------------------------------------------

// The hot loops, once per instruction-set level.
#define CD_RED_OPS_HEADER "reduce_ops.h"
#include "reduce_levels.h"
#undef CD_RED_OPS_HEADER

// --- the kernels -------------------------------------------------------------------------

namespace {

bool is_arg(RedOp op) { return op == RedOp::argmax || op == RedOp::argmin; }

ReducePlan plan_reduce(const cd_kernel_context* ctx, RedOp op) {
  check_context(ctx, 1, 1, 1);
  ReducePlan p;
  p.op = op;
  p.in = input_tensor(ctx, 0);
  p.out = output_tensor(ctx, 0);
  if (op == RedOp::mean) {
    require_dtype_in(p.in, kFloatDtypes, "input 0");
  } else {
    require_dtype_in(p.in, kNumericDtypes, "input 0");
  }
  require_dtype(p.out, is_arg(op) ? CD_DTYPE_INT64 : p.in.dtype, "output 0");
  const size_t ndim = p.in.shape.size();
  std::vector<bool> reduced(ndim, false);
  if (is_arg(op)) {
    const int64_t axis = check_axis(attr_int(ctx, "axis"), ndim, "axis");
    if (ndim > 0) reduced[static_cast<size_t>(axis)] = true;
  } else {
    const std::vector<int64_t> axes = attr_ints(ctx, "axes");
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(ndim) ||
          (i > 0 && axes[i] <= axes[i - 1])) {
        fail(CD_STATUS_INVALID_ARGUMENT,
             "attribute 'axes' must be sorted, unique and in [0, %zu) (normalized)", ndim);
      }
      reduced[static_cast<size_t>(axes[i])] = true;
    }
    if (axes.empty()) reduced.assign(ndim, true);  // the op's meaning of "no axes"
  }
  const bool keepdims = attr_bool(ctx, "keepdims");
  std::vector<int64_t> out_shape;
  std::vector<Dim> kept, reduced_dims;
  p.count = 1;
  for (size_t d = 0; d < ndim; ++d) {
    const Dim dim{p.in.shape[d], p.in.strides[d]};
    if (reduced[d]) {
      if (keepdims) out_shape.push_back(1);
      reduced_dims.push_back(dim);
      p.count *= dim.size;
    } else {
      out_shape.push_back(dim.size);
      kept.push_back(dim);
    }
  }
  require_shape(p.out, out_shape, "output 0");
  require_contiguous(p.out, "output 0");
  p.outputs = p.out.numel;
  if (p.count == 0 && p.outputs > 0 && op != RedOp::sum && op != RedOp::mean &&
      op != RedOp::prod) {
    fail(CD_STATUS_INVALID_ARGUMENT, "cannot reduce an empty extent (it has no %s)",
         op == RedOp::max || op == RedOp::argmax ? "maximum" : "minimum");
  }
  p.kept = coalesce(kept);
  p.reduced = coalesce(reduced_dims);
  p.columns = !p.kept.empty() && p.kept.back().stride == 1 && p.kept.back().size >= 16 &&
              p.count > 1;
  return p;
}

void enqueue_reduce(const cd_kernel_context* ctx, RedOp op, const char* label) {
  require_non_null(ctx, "ctx");
  std::shared_ptr<Stream> stream = stream_from_handle(ctx->stream, ctx->device);
  ReducePlan p = plan_reduce(ctx, op);
  if (p.outputs == 0) return;
  stream->enqueue(label, [p = std::move(p)] {
    p.in.range.check_live("input 0");
    p.out.range.check_live("output 0");
    CD_RED_DISPATCH(p.in.dtype, run_reduce, p);
  });
}

#define CD_RED_KERNEL(name, op)                                        \
  cd_error* name##_kernel(const cd_kernel_context* ctx) noexcept {     \
    return guard(#name, [ctx] { enqueue_reduce(ctx, op, #name); });    \
  }

CD_RED_KERNEL(sum, RedOp::sum)
CD_RED_KERNEL(mean, RedOp::mean)
CD_RED_KERNEL(prod, RedOp::prod)
CD_RED_KERNEL(max, RedOp::max)
CD_RED_KERNEL(min, RedOp::min)
CD_RED_KERNEL(argmax, RedOp::argmax)
CD_RED_KERNEL(argmin, RedOp::argmin)
#undef CD_RED_KERNEL

}  // namespace
}  // namespace red

void register_reductions(cd_kernel_registry* registry) {
  using namespace red;
  register_same(registry, "sum", kNumericDtypes, 2, sum_kernel);
  register_same(registry, "mean", kFloatDtypes, 2, mean_kernel);
  register_same(registry, "prod", kNumericDtypes, 2, prod_kernel);
  register_same(registry, "max", kNumericDtypes, 2, max_kernel);
  register_same(registry, "min", kNumericDtypes, 2, min_kernel);
  register_same(registry, "argmax", kNumericDtypes, 2, argmax_kernel, CD_DTYPE_INT64);
  register_same(registry, "argmin", kNumericDtypes, 2, argmin_kernel, CD_DTYPE_INT64);
  register_softmax_family(registry);
  register_norms(registry);
}

}  // namespace chipdock_cpu
