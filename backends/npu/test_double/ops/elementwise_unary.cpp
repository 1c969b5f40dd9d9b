// The simulated unary elementwise aclnn ops: Neg Abs Exp Log Sqrt Rsqrt Sin
// Cos Tanh Erf Sigmoid Relu LeakyRelu Gelu GeluV2 Silu Clamp LogicalNot and
// Cast, with the Atlas A2 dtype lists and formulas of hicann/ops-math
// (math/<op>/docs/aclnn<Op>.md, conversion/clip_by_value_v2, math/cast) and
// hicann/ops-nn (activation/<op>/docs).
//
// The documented formulas are taken literally, limits included, so that the
// backend's own handling of them runs: Silu is self / (1 + e^-self) and the
// Gelus x * Phi(x) (or its tanh form), which give NaN at -inf; Clamp is
// max(min(self, max), min), which gives min everywhere when min > max.
//
// aclnnCast's documented limits are modelled, so a caller that ignores them
// gets visibly wrong values instead of silently right ones (the values are a
// stand-in: the docs say "not exact", not what comes out):
//  - a BOOL input must be contiguous (else ACLNN_ERR_PARAM_INVALID);
//  - INT32 to INT8 is exact only for inputs in (-2048, 1920): outside, the
//    double saturates to [-128, 127] instead of wrapping;
//  - DOUBLE to UINT8 is exact only for non-negative inputs: a negative input
//    is floored, then wrapped (-0.5 gives 255).
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "elementwise_ops.h"

namespace cdsim {
namespace ew {
namespace {

#define CDSIM_EW_HALF_AND_SINGLE ACL_FLOAT, ACL_FLOAT16, ACL_BF16

using UnaryFn = std::function<Value(const Value& x)>;

// Checks self/out as aclnn does (out of self's shape, of a type self's may be
// cast to) and plans out = f(self). Floats reach `f` as doubles; integers as
// exact int64, wrapped to self's width after `f`.
aclnnStatus plan_unary(const char* op, const aclTensor* self, const aclTensor* out, Dtypes types, UnaryFn f,
                       uint64_t* workspace_size, aclOpExecutor** executor) {
  const TensorInfo& a = tensor(self, op, "self", types);
  const TensorInfo& o = tensor(out, op, "out", types);
  if (!can_cast(a.dtype, o.dtype)) {
    invalid(op, "self's type %s cannot be cast to out's %s", dtype_name(a.dtype), dtype_name(o.dtype));
  }
  require_shape(op, "out", o, a.shape);
  const aclDataType ta = a.dtype, to = o.dtype;
  return plan_elementwise(
      op, {a}, o,
      [=](const std::vector<const char*>& in, char* dst) {
        Value r = f(load(in[0], ta));
        if (!r.floating) r.i = wrap(r.i, ta);
        store(dst, to, r);
      },
      workspace_size, executor);
}

// A float-only op: f on the double value.
UnaryFn on_double(double (*f)(double)) {
  return [f](const Value& x) { return of_double(f(x.f)); };
}

double rsqrt(double x) { return 1.0 / std::sqrt(x); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x / (1.0 + std::exp(-x)); }
// The Gelus in forms without cancellation in the negative tail (the value of
// the documented formula, not of 1 + erf(...) rounded to 0 first):
// 1 + erf(x / sqrt 2) = erfc(-x / sqrt 2) and 1 + tanh(z) = 2 / (1 + e^-2z).
// Both still give -inf * 0 or -inf / inf, NaN, at -inf.
double gelu_erf(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return x / (1.0 + std::exp(-2.0 * k * (x + 0.044715 * x * x * x)));
}
double relu(double x) { return std::isnan(x) ? x : x > 0 ? x : 0.0; }

uint64_t bits(int64_t v) { return static_cast<uint64_t>(v); }

Value negate(const Value& x) { return x.floating ? of_double(-x.f) : of_int(static_cast<int64_t>(0 - bits(x.i))); }
Value absolute(const Value& x) {
  if (x.floating) return of_double(std::fabs(x.f));
  return x.i < 0 ? negate(x) : x;  // the most negative value wraps to itself
}

// aclnnClamp: max(min(self, max), min); an absent (NULL) bound does not apply.
Value clamp(const Value& x, const Value* lo, const Value* hi) {
  if (x.floating) {
    if (std::isnan(x.f)) return x;
    double r = x.f;
    if (hi != nullptr) r = std::isnan(hi->f) ? hi->f : (r < hi->f ? r : hi->f);
    if (lo != nullptr) r = std::isnan(lo->f) ? lo->f : (r > lo->f ? r : lo->f);
    return of_double(r);
  }
  int64_t r = x.i;
  if (hi != nullptr && r > hi->i) r = hi->i;
  if (lo != nullptr && r < lo->i) r = lo->i;
  return of_int(r);
}

// One element of aclnnCast from `from` to `to` (the file comment's limits).
Value cast_value(const Value& x, aclDataType from, aclDataType to) {
  if (from == ACL_INT32 && to == ACL_INT8 && (x.i <= -2048 || x.i >= 1920)) {
    return of_int(x.i < 0 ? INT8_MIN : INT8_MAX);
  }
  if (from == ACL_DOUBLE && to == ACL_UINT8 && x.f < 0 && std::isfinite(x.f)) {
    return of_int(wrap(static_cast<int64_t>(std::floor(std::fmax(x.f, -1e18))), ACL_UINT8));
  }
  return x;  // store() converts: floats rounded once, truncated into integers; integers wrapped
}

}  // namespace
}  // namespace ew
}  // namespace cdsim

using namespace cdsim;
using namespace cdsim::ew;

// aclnn<Name> over the dtypes after `fn`.
#define CDSIM_EW_UNARY(Name, fn, ...)                                                                       \
  extern "C" aclnnStatus aclnn##Name##GetWorkspaceSize(const aclTensor* self, aclTensor* out,               \
                                                       uint64_t* workspaceSize, aclOpExecutor** executor) { \
    return guarded_op(                                                                                      \
        [&] { return plan_unary("aclnn" #Name, self, out, {__VA_ARGS__}, fn, workspaceSize, executor); });  \
  }                                                                                                         \
  CDSIM_ACLNN_RUN(Name)
CDSIM_EW_UNARY(Neg, negate, CDSIM_EW_FLOAT, ACL_INT8, ACL_INT32, ACL_INT64)
CDSIM_EW_UNARY(Abs, absolute, CDSIM_EW_NUMERIC)
CDSIM_EW_UNARY(Exp, on_double(std::exp), CDSIM_EW_FLOAT)
CDSIM_EW_UNARY(Log, on_double(std::log), CDSIM_EW_FLOAT)
CDSIM_EW_UNARY(Sqrt, on_double(std::sqrt), CDSIM_EW_FLOAT)
CDSIM_EW_UNARY(Rsqrt, on_double(rsqrt), CDSIM_EW_FLOAT)
CDSIM_EW_UNARY(Sin, on_double(std::sin), CDSIM_EW_FLOAT)
CDSIM_EW_UNARY(Cos, on_double(std::cos), CDSIM_EW_FLOAT)
CDSIM_EW_UNARY(Tanh, on_double(std::tanh), CDSIM_EW_HALF_AND_SINGLE)
CDSIM_EW_UNARY(Erf, on_double(std::erf), ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16)  // BF16 on A3 only
CDSIM_EW_UNARY(Sigmoid, on_double(sigmoid), CDSIM_EW_HALF_AND_SINGLE)
CDSIM_EW_UNARY(Silu, on_double(silu), CDSIM_EW_HALF_AND_SINGLE)
CDSIM_EW_UNARY(Gelu, on_double(gelu_tanh), CDSIM_EW_HALF_AND_SINGLE)  // the docs' formula is the tanh form
// Integers take the exact path: max(x, 0).
CDSIM_EW_UNARY(Relu, [](const Value& x) { return x.floating ? of_double(relu(x.f)) : of_int(x.i > 0 ? x.i : 0); },
               ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT8, ACL_INT32, ACL_INT64)
#undef CDSIM_EW_UNARY

extern "C" aclnnStatus aclnnLeakyReluGetWorkspaceSize(const aclTensor* self, const aclScalar* negativeSlope,
                                                      aclTensor* out, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnLeakyRelu";
    if (negativeSlope == nullptr) raise(CD_ACLNN_ERR_PARAM_NULLPTR, "%s: negativeSlope is a null pointer", op);
    if (scalar_dtype(negativeSlope, "negativeSlope") != ACL_FLOAT) {
      invalid(op, "negativeSlope has dtype %s (FLOAT only)", dtype_name(scalar_dtype(negativeSlope, "negativeSlope")));
    }
    const double slope = scalar_double(negativeSlope, "negativeSlope");
    return plan_unary(op, self, out, {CDSIM_EW_HALF_AND_SINGLE},
                      [slope](const Value& x) { return of_double(x.f > 0 ? x.f : x.f * slope); }, workspaceSize,
                      executor);
  });
}
CDSIM_ACLNN_RUN(LeakyRelu)

extern "C" aclnnStatus aclnnGeluV2GetWorkspaceSize(const aclTensor* x, int64_t approximate, aclTensor* y,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnGeluV2";
    if (approximate != 0 && approximate != 1) {
      invalid(op, "approximate %lld is not 0 (none) or 1 (tanh)", static_cast<long long>(approximate));
    }
    return plan_unary(op, x, y, {CDSIM_EW_HALF_AND_SINGLE}, on_double(approximate == 0 ? gelu_erf : gelu_tanh),
                      workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(GeluV2)

extern "C" aclnnStatus aclnnClampGetWorkspaceSize(const aclTensor* self, const aclScalar* clipValueMin,
                                                  const aclScalar* clipValueMax, aclTensor* out,
                                                  uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnClamp";
    if (clipValueMin == nullptr && clipValueMax == nullptr) invalid(op, "clipValueMin and clipValueMax are both null");
    const aclDataType t = tensor(self, op, "self", {CDSIM_EW_NUMERIC}).dtype;
    // The bounds as aclnn converts them to self's type; absent ones stay out.
    const bool has_lo = clipValueMin != nullptr, has_hi = clipValueMax != nullptr;
    const Value lo = has_lo ? scalar_as(clipValueMin, "clipValueMin", t) : of_int(0);
    const Value hi = has_hi ? scalar_as(clipValueMax, "clipValueMax", t) : of_int(0);
    return plan_unary(
        op, self, out, {CDSIM_EW_NUMERIC},
        [=](const Value& x) { return clamp(x, has_lo ? &lo : nullptr, has_hi ? &hi : nullptr); }, workspaceSize,
        executor);
  });
}
CDSIM_ACLNN_RUN(Clamp)

extern "C" aclnnStatus aclnnLogicalNotGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* workspaceSize,
                                                       aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnLogicalNot";
    const TensorInfo& a = tensor(self, op, "self", {CDSIM_EW_ALL});
    const TensorInfo& o = tensor(out, op, "out", {CDSIM_EW_ALL});
    require_shape(op, "out", o, a.shape);
    const aclDataType ta = a.dtype, to = o.dtype;
    return plan_elementwise(
        op, {a}, o,
        [=](const std::vector<const char*>& in, char* dst) { store(dst, to, of_int(!load(in[0], ta).truthy())); },
        workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(LogicalNot)

extern "C" aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor* self, aclDataType dtype, aclTensor* out,
                                                 uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnCast";
    const TensorInfo& a = tensor(self, op, "self", {CDSIM_EW_ALL});
    const TensorInfo& o = tensor(out, op, "out", {CDSIM_EW_ALL});
    if (o.dtype != dtype) {
      invalid(op, "out has dtype %s, the cast asks for %s", dtype_name(o.dtype), dtype_name(dtype));
    }
    if (a.dtype == ACL_BOOL && !is_contiguous(a)) invalid(op, "a BOOL self must be contiguous");
    require_shape(op, "out", o, a.shape);
    const aclDataType ta = a.dtype, to = o.dtype;
    return plan_elementwise(
        op, {a}, o,
        [=](const std::vector<const char*>& in, char* dst) { store(dst, to, cast_value(load(in[0], ta), ta, to)); },
        workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Cast)
