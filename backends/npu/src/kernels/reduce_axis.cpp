// softmax, log_softmax and cumsum along one axis (shape rule `same_axis`) on
// aclnnSoftmax, aclnnLogSoftmax and aclnnCumsumV2 (which takes chipdock's
// `exclusive` and `reverse` as they are). aclnn wants at least one dimension
// here ([-self.dim(), self.dim()) in the docs), so a 0-d tensor goes as (1).
#include "chipdock/support/error.h"
#include "reduce_common.h"

namespace chipdock_npu {
namespace reduce {
namespace {

using chipdock::support::fail;

CD_NPU_ACLNN(Softmax);
CD_NPU_ACLNN(LogSoftmax);
CD_NPU_ACLNN(CumsumV2);

enum class AxisOp { softmax, log_softmax, cumsum };

void along_axis(const cd_kernel_context* ctx, AxisOp op) {
  check_operands(ctx, 1, 1);
  const cd_tensor_view& x = *ctx->inputs[0];
  const cd_tensor_view& out = *ctx->outputs[0];
  if (out.dtype != x.dtype || out.ndim != x.ndim) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output 0 must have the input's dtype and shape");
  }
  const int64_t axis = one_axis(ctx, x.ndim);
  const bool exclusive = op == AxisOp::cumsum && flag(ctx, "exclusive");
  const bool reverse = op == AxisOp::cumsum && flag(ctx, "reverse");
  if (numel(out) == 0) return;
  TensorDesc self = shaped_desc(ctx, x);
  TensorDesc o = out.ndim == 0 ? reshaped_output(ctx, out, {1}) : TensorDesc(ctx, out);
  switch (op) {
    case AxisOp::softmax: run_aclnn(ctx, Softmax, self.get(), axis, o.get()); break;
    case AxisOp::log_softmax: run_aclnn(ctx, LogSoftmax, self.get(), axis, o.get()); break;
    case AxisOp::cumsum: run_aclnn(ctx, CumsumV2, self.get(), axis, exclusive, reverse, o.get()); break;
  }
}

cd_error* softmax_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("softmax", [ctx] { along_axis(ctx, AxisOp::softmax); });
}
cd_error* log_softmax_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("log_softmax", [ctx] { along_axis(ctx, AxisOp::log_softmax); });
}
cd_error* cumsum_kernel(const cd_kernel_context* ctx) noexcept {
  return chipdock::support::guard("cumsum", [ctx] { along_axis(ctx, AxisOp::cumsum); });
}

}  // namespace

// Dtypes: softmax and log_softmax FLOAT16, FLOAT32, DOUBLE, BFLOAT16 (ops-nn
// aclnnSoftmax / aclnnLogSoftmax, Atlas A2); cumsum every numeric dtype
// (ops-math math/cumsum/docs/aclnnCumsumV2.md).
void register_axis_ops(Registrar& r) {
  if (r.resolve(Softmax, "softmax")) add_each(r, "softmax", float_dtypes(), 2, softmax_kernel);
  if (r.resolve(LogSoftmax, "log_softmax")) add_each(r, "log_softmax", float_dtypes(), 2, log_softmax_kernel);
  if (r.resolve(CumsumV2, "cumsum")) add_each(r, "cumsum", numeric_dtypes(), 2, cumsum_kernel);
}

}  // namespace reduce
}  // namespace chipdock_npu
