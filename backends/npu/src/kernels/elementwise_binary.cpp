// add sub mul div pow maximum minimum logical_and logical_or.
//
// One aclnn call each (the dtypes are the Atlas A2 lists of hicann/ops-math
// math/<op>/docs), except integer div: chipdock truncates toward zero and
// makes x / 0 zero. aclnnDivMod(mode 1, trunc) truncates; what it gives for
// a zero divisor is not documented, so those elements are replaced by the
// divisor itself (which is 0 there) with aclnnSWhere, the mask taken with
// aclnnLogicalNot of the divisor before anything is written.
// maximum and minimum propagate NaN as chipdock's do (aclnnMaximum and
// aclnnMinimum are torch.maximum/minimum); integers wrap in aclnn as in
// chipdock.
#include "elementwise.h"

namespace chipdock_npu {
namespace ew {
namespace {

CD_NPU_ACLNN(Add);
CD_NPU_ACLNN(Sub);
CD_NPU_ACLNN(Mul);
CD_NPU_ACLNN(Div);
CD_NPU_ACLNN(DivMod);
CD_NPU_ACLNN(PowTensorTensor);
CD_NPU_ACLNN(Maximum);
CD_NPU_ACLNN(Minimum);
CD_NPU_ACLNN(LogicalAnd);
CD_NPU_ACLNN(LogicalOr);
CD_NPU_ACLNN(LogicalNot);
CD_NPU_ACLNN(SWhere);

constexpr int kDivModTrunc = 1;  // aclnnDivMod's mode: 0 none, 1 trunc, 2 floor

// add and sub: out = self + alpha * other with alpha 1 of the operands' type.
template <AclnnOp<decltype(&aclnnAddGetWorkspaceSize)>& Op>
cd_error* add_like_kernel(const cd_kernel_context* ctx) {
  return run_kernel(ctx, 2, [&](const Operands& o) {
    const cd_dtype_t t = o.out_dtype();
    if (is_float(t)) {
      const ScalarDesc alpha(1.0, acl_dtype(t));
      run_aclnn(ctx, Op, o.in(0), o.in(1), alpha.get(), o.out());
    } else {
      const ScalarDesc alpha(int64_t{1}, acl_dtype(t));
      run_aclnn(ctx, Op, o.in(0), o.in(1), alpha.get(), o.out());
    }
  });
}

// The ops that are one (self, other, out) call.
#define CD_NPU_EW_BINARY(name, Op)                                                 \
  cd_error* name##_kernel(const cd_kernel_context* ctx) {                          \
    return run_kernel(ctx, 2, [&](const Operands& o) { run_aclnn(ctx, Op, o.in(0), o.in(1), o.out()); }); \
  }
CD_NPU_EW_BINARY(mul, Mul)
CD_NPU_EW_BINARY(pow, PowTensorTensor)
CD_NPU_EW_BINARY(maximum, Maximum)
CD_NPU_EW_BINARY(minimum, Minimum)
CD_NPU_EW_BINARY(logical_and, LogicalAnd)
CD_NPU_EW_BINARY(logical_or, LogicalOr)
CD_NPU_EW_BINARY(float_div, Div)
#undef CD_NPU_EW_BINARY

cd_error* int_div_kernel(const cd_kernel_context* ctx) {
  return run_kernel(ctx, 2, [&](const Operands& o) {
    const TensorDesc zero_divisor = o.scratch(CD_DTYPE_BOOL, "div (zero-divisor mask)");
    const TensorDesc quotient = o.scratch(o.out_dtype(), "div (quotient)");
    launch_steps(ctx, {plan_step(ctx, LogicalNot, o.in(1), zero_divisor.get()),
                       plan_step(ctx, DivMod, o.in(0), o.in(1), kDivModTrunc, quotient.get()),
                       plan_step(ctx, SWhere, zero_divisor.get(), o.in(1), quotient.get(), o.out())});
  });
}

}  // namespace

void register_binary(Registrar& r) {
  if (r.resolve(Add, "add")) add_same(r, "add", kNumeric, 2, add_like_kernel<Add>);
  if (r.resolve(Sub, "sub")) add_same(r, "sub", kNumeric, 2, add_like_kernel<Sub>);
  if (r.resolve(Mul, "mul")) add_same(r, "mul", kNumeric, 2, mul_kernel);
  if (r.resolve(Div, "div")) add_same(r, "div", kFloat, 2, float_div_kernel);
  if (resolve_all(r, "div", DivMod, LogicalNot, SWhere)) {
    add_same(r, "div", without(kNumeric, {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16, CD_DTYPE_FLOAT64}),
             2, int_div_kernel);
  }
  if (r.resolve(PowTensorTensor, "pow")) add_same(r, "pow", kFloat, 2, pow_kernel);
  if (r.resolve(Maximum, "maximum")) add_same(r, "maximum", kNumeric, 2, maximum_kernel);
  if (r.resolve(Minimum, "minimum")) add_same(r, "minimum", kNumeric, 2, minimum_kernel);
  if (r.resolve(LogicalAnd, "logical_and")) add_same(r, "logical_and", {CD_DTYPE_BOOL}, 2, logical_and_kernel);
  if (r.resolve(LogicalOr, "logical_or")) add_same(r, "logical_or", {CD_DTYPE_BOOL}, 2, logical_or_kernel);
}

}  // namespace ew
}  // namespace chipdock_npu
