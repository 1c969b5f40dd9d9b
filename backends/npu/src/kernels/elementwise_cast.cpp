// cast: every chipdock dtype to every chipdock dtype with aclnnCast
// (hicann/ops-math math/cast/docs/aclnnCast.md lists all ten on Atlas A2).
//
// Where its documented limits touch chipdock's semantics (floats to
// integers truncate toward zero, integers wrap modulo 2^bits):
//  - "BOOL input does not support non-contiguous tensors": casts from bool
//    are registered with CD_KERNEL_CONTIGUOUS_INPUTS.
//  - "int32 to int8 is exact only for inputs in (-2048, 1920)": the input
//    is first reduced to its low byte (aclnnBitwiseAndScalar with 255, into
//    0..255, inside that range), which the cast to int8 then wraps exactly.
//  - "float64 to uint8 is exact only for non-negative inputs": chipdock
//    defines (-1, 0) -> 0, so float64 goes to int32 first (truncating), then
//    to uint8. (Below -1 the result is undefined in the opset either way.)
// NaN to an integer is 0 in aclnnCast, and undefined in the opset.
#include "chipdock/support/attributes.h"
#include "elementwise.h"

namespace chipdock_npu {
namespace ew {
namespace {

using chipdock::support::fail;

CD_NPU_ACLNN(Cast);
CD_NPU_ACLNN(BitwiseAndScalar);

void check_to_attribute(const cd_kernel_context* ctx) {
  const cd_attribute* to = chipdock::support::find_attribute(ctx, "to");
  const cd_dtype_t out = ctx->outputs[0]->dtype;
  if (to != nullptr && (to->type != CD_ATTR_INT || to->value.i != out)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'to' (%lld) is not the output's dtype %d",
         to->type == CD_ATTR_INT ? static_cast<long long>(to->value.i) : -1LL, out);
  }
}

cd_error* cast_kernel(const cd_kernel_context* ctx) {
  return run_kernel(ctx, 1, [&](const Operands& o) {
    check_to_attribute(ctx);
    const cd_dtype_t in = o.in_dtype(0), out = o.out_dtype();
    if (in == CD_DTYPE_INT32 && out == CD_DTYPE_INT8) {
      const TensorDesc low_byte = o.scratch(CD_DTYPE_INT32, "cast int32->int8 (low byte)");
      const ScalarDesc mask(int64_t{0xff}, ACL_INT32);
      launch_steps(ctx, {plan_step(ctx, BitwiseAndScalar, o.in(0), mask.get(), low_byte.get()),
                         plan_step(ctx, Cast, low_byte.get(), ACL_INT8, o.out())});
    } else if (in == CD_DTYPE_FLOAT64 && out == CD_DTYPE_UINT8) {
      const TensorDesc truncated = o.scratch(CD_DTYPE_INT32, "cast float64->uint8 (truncated)");
      launch_steps(ctx, {plan_step(ctx, Cast, o.in(0), ACL_INT32, truncated.get()),
                         plan_step(ctx, Cast, truncated.get(), ACL_UINT8, o.out())});
    } else {
      run_aclnn(ctx, Cast, o.in(0), acl_dtype(out), o.out());
    }
  });
}

}  // namespace

void register_cast(Registrar& r) {
  if (!r.resolve(Cast, "cast")) return;
  const bool bitwise_and = r.resolve(BitwiseAndScalar, "cast");
  for (cd_dtype_t in : kAll) {
    for (cd_dtype_t out : kAll) {
      if (in == CD_DTYPE_INT32 && out == CD_DTYPE_INT8 && !bitwise_and) continue;
      // aclnnCast: "BOOL ... input does not support non-contiguous tensors".
      r.add("cast", {in, out}, cast_kernel, in == CD_DTYPE_BOOL ? CD_KERNEL_CONTIGUOUS_INPUTS : 0u);
    }
  }
}

}  // namespace ew
}  // namespace chipdock_npu
