// neg abs exp log sqrt rsqrt sin cos tanh erf sigmoid relu leaky_relu gelu
// silu clip logical_not.
//
// One aclnn call each, on the dtypes the Atlas A2 docs list (hicann/ops-math
// math/<op>/docs, ops-nn activation/<op>/docs); what they lack is declared
// in unsupported/elementwise.json. Where chipdock's semantics differ:
//  - gelu: approximate='tanh' is aclnnGelu (its documented formula is the
//    tanh form), 'none' aclnnGeluV2(approximate 0); gelu is registered only
//    when both exist.
//  - silu and gelu at -inf: chipdock gives the limit -0; the documented
//    formulas (self / (1 + e^-self), x * Phi(x)) give -inf / inf and
//    -inf * 0, NaN. Those elements are set to -0 with
//    aclnnInplaceMaskedFillScalar, the mask (aclnnEqScalar of the input with
//    -inf) taken before the output is written (it may alias the input).
//  - clip: aclnnClamp computes max(min(x, max), min), which gives min
//    everywhere when min > max; chipdock gives max there (NumPy, PyTorch),
//    so such a call clamps to [max, max]. The bounds are rounded to T first,
//    and for integers truncated toward zero and saturated to T's range (what
//    truncating clip's float result gives), so aclnn's conversion of the
//    scalars to T has nothing left to round. A bound left at its default
//    (+-inf) is passed as is for floats and as T's limit for integers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "chipdock/support/attributes.h"
#include "elementwise.h"

namespace chipdock_npu {
namespace ew {
namespace {

using chipdock::support::fail;

CD_NPU_ACLNN(Neg);
CD_NPU_ACLNN(Abs);
CD_NPU_ACLNN(Exp);
CD_NPU_ACLNN(Log);
CD_NPU_ACLNN(Sqrt);
CD_NPU_ACLNN(Rsqrt);
CD_NPU_ACLNN(Sin);
CD_NPU_ACLNN(Cos);
CD_NPU_ACLNN(Tanh);
CD_NPU_ACLNN(Erf);
CD_NPU_ACLNN(Sigmoid);
CD_NPU_ACLNN(Relu);
CD_NPU_ACLNN(LeakyRelu);
CD_NPU_ACLNN(Gelu);
CD_NPU_ACLNN(GeluV2);
CD_NPU_ACLNN(Silu);
CD_NPU_ACLNN(Clamp);
CD_NPU_ACLNN(LogicalNot);
CD_NPU_ACLNN(EqScalar);
CD_NPU_ACLNN(InplaceMaskedFillScalar);

constexpr int64_t kGeluV2None = 0;  // aclnnGeluV2's approximate: 0 none (erf), 1 tanh

#define CD_NPU_EW_UNARY(name, Op)                                                              \
  cd_error* name##_kernel(const cd_kernel_context* ctx) {                                      \
    return run_kernel(ctx, 1, [&](const Operands& o) { run_aclnn(ctx, Op, o.in(0), o.out()); }); \
  }
CD_NPU_EW_UNARY(neg, Neg)
CD_NPU_EW_UNARY(abs, Abs)
CD_NPU_EW_UNARY(exp, Exp)
CD_NPU_EW_UNARY(log, Log)
CD_NPU_EW_UNARY(sqrt, Sqrt)
CD_NPU_EW_UNARY(rsqrt, Rsqrt)
CD_NPU_EW_UNARY(sin, Sin)
CD_NPU_EW_UNARY(cos, Cos)
CD_NPU_EW_UNARY(tanh, Tanh)
CD_NPU_EW_UNARY(erf, Erf)
CD_NPU_EW_UNARY(sigmoid, Sigmoid)
CD_NPU_EW_UNARY(relu, Relu)
CD_NPU_EW_UNARY(logical_not, LogicalNot)
#undef CD_NPU_EW_UNARY

cd_error* leaky_relu_kernel(const cd_kernel_context* ctx) {
  return run_kernel(ctx, 1, [&](const Operands& o) {
    // aclnnLeakyRelu takes negativeSlope as FLOAT only.
    const ScalarDesc slope(chipdock::support::float_attribute(ctx, "alpha", 0.01), ACL_FLOAT);
    run_aclnn(ctx, LeakyRelu, o.in(0), slope.get(), o.out());
  });
}

// Runs the step `plan_compute()` plans (writing o.out()) between taking the
// mask of the -inf inputs and filling -0 there (see the file comment). The
// scalars and the mask live until every step has been launched.
template <typename PlanCompute>
void with_negative_infinity_limit(const cd_kernel_context* ctx, const Operands& o, const char* what,
                                  PlanCompute&& plan_compute) {
  const TensorDesc mask = o.scratch(CD_DTYPE_BOOL, what);
  const ScalarDesc negative_infinity(-std::numeric_limits<double>::infinity(), acl_dtype(o.in_dtype(0)));
  const ScalarDesc negative_zero(-0.0, acl_dtype(o.out_dtype()));
  const Step find = plan_step(ctx, EqScalar, o.in(0), negative_infinity.get(), mask.get());
  const Step compute = plan_compute();
  const Step fill = plan_step(ctx, InplaceMaskedFillScalar, o.out(), mask.get(), negative_zero.get());
  launch_steps(ctx, {find, compute, fill});
}

cd_error* silu_kernel(const cd_kernel_context* ctx) {
  return run_kernel(ctx, 1, [&](const Operands& o) {
    with_negative_infinity_limit(ctx, o, "silu (-inf mask)", [&] { return plan_step(ctx, Silu, o.in(0), o.out()); });
  });
}

cd_error* gelu_kernel(const cd_kernel_context* ctx) {
  return run_kernel(ctx, 1, [&](const Operands& o) {
    const size_t mode = chipdock::support::choice_attribute(ctx, "approximate", {"none", "tanh"});
    with_negative_infinity_limit(ctx, o, "gelu (-inf mask)", [&] {
      return mode == 0 ? plan_step(ctx, GeluV2, o.in(0), kGeluV2None, o.out()) : plan_step(ctx, Gelu, o.in(0), o.out());
    });
  });
}

// `v` rounded to the float dtype `t` (to nearest even), as a double.
double round_to(double v, cd_dtype_t t) {
  if (t == CD_DTYPE_FLOAT64 || !std::isfinite(v)) return v;
  if (t == CD_DTYPE_FLOAT32) return static_cast<double>(static_cast<float>(v));
  // float16: 11 significant bits, normal exponents from -14 to 15;
  // bfloat16: 8 bits, -126 to 127. One rounding, at the precision the
  // exponent gives (subnormals included).
  const int bits = t == CD_DTYPE_FLOAT16 ? 11 : 8;
  const int min_exponent = t == CD_DTYPE_FLOAT16 ? -14 : -126;
  const int max_exponent = t == CD_DTYPE_FLOAT16 ? 15 : 127;
  const double a = std::fabs(v);
  if (a == 0.0) return v;
  const int exponent = std::max(std::ilogb(a), min_exponent);
  const double quantum = std::ldexp(1.0, exponent - (bits - 1));
  double r = std::nearbyint(a / quantum) * quantum;
  const double largest = std::ldexp(2.0 - std::ldexp(1.0, 1 - bits), max_exponent);
  if (r > largest) r = std::numeric_limits<double>::infinity();
  return std::copysign(r, v);
}

// An integer clip bound: truncated toward zero, saturated to [lo, hi]; a
// NaN bound does not apply.
int64_t int_bound(double v, bool lower, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return lower ? lo : hi;
  if (v <= static_cast<double>(lo)) return lo;
  if (v >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(v);
}

void int_range(cd_dtype_t t, int64_t* lo, int64_t* hi) {
  switch (t) {
    case CD_DTYPE_INT8: *lo = INT8_MIN; *hi = INT8_MAX; return;
    case CD_DTYPE_INT16: *lo = INT16_MIN; *hi = INT16_MAX; return;
    case CD_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return;
    case CD_DTYPE_INT64: *lo = INT64_MIN; *hi = INT64_MAX; return;
    case CD_DTYPE_UINT8: *lo = 0; *hi = UINT8_MAX; return;
    default: fail(CD_STATUS_INTERNAL, "clip: dtype %d is not an integer", t);
  }
}

cd_error* clip_kernel(const cd_kernel_context* ctx) {
  return run_kernel(ctx, 1, [&](const Operands& o) {
    const double inf = std::numeric_limits<double>::infinity();
    const double min = chipdock::support::float_attribute(ctx, "min", -inf);
    const double max = chipdock::support::float_attribute(ctx, "max", inf);
    const cd_dtype_t t = o.out_dtype();
    if (is_float(t)) {
      const double hi = std::isnan(max) ? inf : round_to(max, t);
      double lo = std::isnan(min) ? -inf : round_to(min, t);
      if (lo > hi) lo = hi;  // chipdock: max everywhere
      const ScalarDesc lo_scalar(lo, acl_dtype(t)), hi_scalar(hi, acl_dtype(t));
      run_aclnn(ctx, Clamp, o.in(0), lo_scalar.get(), hi_scalar.get(), o.out());
    } else {
      int64_t t_min = 0, t_max = 0;
      int_range(t, &t_min, &t_max);
      const int64_t hi = int_bound(max, false, t_min, t_max);
      int64_t lo = int_bound(min, true, t_min, t_max);
      if (lo > hi) lo = hi;
      const ScalarDesc lo_scalar(lo, acl_dtype(t)), hi_scalar(hi, acl_dtype(t));
      run_aclnn(ctx, Clamp, o.in(0), lo_scalar.get(), hi_scalar.get(), o.out());
    }
  });
}

// The Atlas A2 dtype lists, where they are narrower than chipdock's groups.
const DtypeList kHalfAndSingle = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16};  // no DOUBLE

}  // namespace

void register_unary(Registrar& r) {
  // aclnnNeg: INT8 INT32 INT64 FLOAT16 BFLOAT16 FLOAT32 DOUBLE (no INT16).
  if (r.resolve(Neg, "neg")) add_same(r, "neg", without(kSignedNumeric, {CD_DTYPE_INT16}), 1, neg_kernel);
  if (r.resolve(Abs, "abs")) add_same(r, "abs", kNumeric, 1, abs_kernel);
  if (r.resolve(Exp, "exp")) add_same(r, "exp", kFloat, 1, exp_kernel);
  if (r.resolve(Log, "log")) add_same(r, "log", kFloat, 1, log_kernel);
  if (r.resolve(Sqrt, "sqrt")) add_same(r, "sqrt", kFloat, 1, sqrt_kernel);
  if (r.resolve(Rsqrt, "rsqrt")) add_same(r, "rsqrt", kFloat, 1, rsqrt_kernel);
  if (r.resolve(Sin, "sin")) add_same(r, "sin", kFloat, 1, sin_kernel);
  if (r.resolve(Cos, "cos")) add_same(r, "cos", kFloat, 1, cos_kernel);
  if (r.resolve(Tanh, "tanh")) add_same(r, "tanh", kHalfAndSingle, 1, tanh_kernel);
  // aclnnErf on A2: DOUBLE FLOAT32 FLOAT16 (BFLOAT16 on A3 only).
  if (r.resolve(Erf, "erf")) add_same(r, "erf", without(kFloat, {CD_DTYPE_BFLOAT16}), 1, erf_kernel);
  if (r.resolve(Sigmoid, "sigmoid")) add_same(r, "sigmoid", kHalfAndSingle, 1, sigmoid_kernel);
  // aclnnRelu: FLOAT FLOAT16 INT8 INT32 INT64 BFLOAT16.
  if (r.resolve(Relu, "relu")) {
    add_same(r, "relu", without(kSignedNumeric, {CD_DTYPE_FLOAT64, CD_DTYPE_INT16}), 1, relu_kernel);
  }
  if (r.resolve(LeakyRelu, "leaky_relu")) add_same(r, "leaky_relu", kHalfAndSingle, 1, leaky_relu_kernel);
  if (resolve_all(r, "gelu", Gelu, GeluV2, EqScalar, InplaceMaskedFillScalar)) {
    add_same(r, "gelu", kHalfAndSingle, 1, gelu_kernel);
  }
  if (resolve_all(r, "silu", Silu, EqScalar, InplaceMaskedFillScalar)) {
    add_same(r, "silu", kHalfAndSingle, 1, silu_kernel);
  }
  if (r.resolve(Clamp, "clip")) add_same(r, "clip", kNumeric, 1, clip_kernel);
  if (r.resolve(LogicalNot, "logical_not")) add_same(r, "logical_not", {CD_DTYPE_BOOL}, 1, logical_not_kernel);
}

}  // namespace ew
}  // namespace chipdock_npu
