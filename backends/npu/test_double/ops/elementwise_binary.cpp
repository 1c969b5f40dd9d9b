// The simulated binary elementwise aclnn ops: Add Sub Mul Div DivMod
// PowTensorTensor Maximum Minimum, the comparisons (EqTensor ... GeTensor,
// EqScalar), LogicalAnd LogicalOr, SWhere, InplaceMaskedFillScalar and
// BitwiseAndScalar, with the semantics and Atlas A2 dtype lists of hicann/
// ops-math's docs (math/<op>/docs/aclnn<Op>.md): torch's type promotion,
// NumPy broadcasting, integers wrapping.
//
// Where the docs leave a case open the double takes torch's behaviour (the
// ops are torch's): Maximum/Minimum propagate NaN. One undocumented case is
// made visible on purpose: DivMod of integers by zero gives -1 (all bits
// set, as a hardware divider may), so a caller that needs another value has
// to say so.
#include <cmath>
#include <cstdint>
#include <limits>

#include "elementwise_ops.h"

namespace cdsim {
namespace ew {
namespace {

#define CDSIM_EW_ARITH_TYPES CDSIM_EW_NUMERIC, ACL_BOOL

using BinaryFn = std::function<Value(const Value& a, const Value& b, aclDataType computed)>;

uint64_t bits(int64_t v) { return static_cast<uint64_t>(v); }

// Checks self/other/out as aclnn does and plans out = f(self, other) in the
// promoted type (`compute` overrides it, e.g. true division of integers).
aclnnStatus plan_binary(const char* op, const aclTensor* self, const aclTensor* other, const aclTensor* out,
                        Dtypes in_types, Dtypes out_types, BinaryFn f, uint64_t* workspace_size,
                        aclOpExecutor** executor, aclDataType (*compute)(aclDataType) = nullptr) {
  const TensorInfo& a = tensor(self, op, "self", in_types);
  const TensorInfo& b = tensor(other, op, "other", in_types);
  const TensorInfo& o = tensor(out, op, "out", out_types);
  aclDataType computed = promote(a.dtype, b.dtype);
  if (compute != nullptr) computed = compute(computed);
  if (!can_cast(computed, o.dtype)) {
    invalid(op, "the result type %s cannot be cast to out's %s", dtype_name(computed), dtype_name(o.dtype));
  }
  require_shape(op, "out", o, broadcast(op, a.shape, b.shape));
  const aclDataType ta = a.dtype, tb = b.dtype, to = o.dtype;
  return plan_elementwise(
      op, {a, b}, o,
      [=](const std::vector<const char*>& in, char* dst) {
        Value x = load(in[0], ta), y = load(in[1], tb);
        if (is_floating(computed)) {
          x = of_double(x.as_double());
          y = of_double(y.as_double());
        }
        Value r = f(x, y, computed);
        if (!r.floating) r.i = wrap(r.i, computed);
        store(dst, to, r);
      },
      workspace_size, executor);
}

aclDataType true_division(aclDataType t) { return is_floating(t) ? t : ACL_FLOAT; }

Value add(const Value& a, const Value& b, const Value& alpha, double sign) {
  if (a.floating) return of_double(a.f + sign * alpha.as_double() * b.f);
  const uint64_t scaled = bits(alpha.i) * bits(b.i);
  return of_int(static_cast<int64_t>(sign > 0 ? bits(a.i) + scaled : bits(a.i) - scaled));
}

Value divide(const Value& a, const Value& b, int mode) {
  if (a.floating) {
    const double q = a.f / b.f;
    return of_double(mode == 1 ? std::trunc(q) : mode == 2 ? std::floor(q) : q);
  }
  if (b.i == 0) return of_int(-1);  // undocumented; see the file comment
  if (b.i == -1) return of_int(static_cast<int64_t>(0 - bits(a.i)));  // MIN / -1 wraps
  int64_t q = a.i / b.i;
  if (mode == 2 && (a.i % b.i != 0) && ((a.i < 0) != (b.i < 0))) --q;
  return of_int(q);
}

Value power(const Value& a, const Value& b) {
  if (a.floating) return of_double(std::pow(a.f, b.f));
  if (b.i < 0) return of_int(a.i == 1 ? 1 : a.i == -1 ? ((b.i & 1) ? -1 : 1) : 0);
  uint64_t r = 1, base = bits(a.i);
  for (int64_t e = b.i; e > 0; e >>= 1, base *= base) {
    if (e & 1) r *= base;
  }
  return of_int(static_cast<int64_t>(r));
}

Value extreme(const Value& a, const Value& b, bool larger) {
  if (a.floating) {
    if (std::isnan(a.f) || std::isnan(b.f)) return of_double(std::numeric_limits<double>::quiet_NaN());
    return of_double(larger ? (a.f > b.f ? a.f : b.f) : (a.f < b.f ? a.f : b.f));
  }
  return of_int(larger ? std::max(a.i, b.i) : std::min(a.i, b.i));
}

// The comparisons: out is bool (or any type bool converts to).
aclnnStatus plan_compare(const char* op, const aclTensor* self, const aclTensor* other, const aclTensor* out,
                         int (*sign_test)(int), uint64_t* workspace_size, aclOpExecutor** executor) {
  const TensorInfo& a = tensor(self, op, "self", {CDSIM_EW_ALL});
  const TensorInfo& b = tensor(other, op, "other", {CDSIM_EW_ALL});
  const TensorInfo& o = tensor(out, op, "out", {CDSIM_EW_ALL});
  require_shape(op, "out", o, broadcast(op, a.shape, b.shape));
  const aclDataType ta = a.dtype, tb = b.dtype, to = o.dtype;
  const bool floating = is_floating(promote(ta, tb));
  return plan_elementwise(
      op, {a, b}, o,
      [=](const std::vector<const char*>& in, char* dst) {
        const Value x = load(in[0], ta), y = load(in[1], tb);
        int order;  // -1, 0, 1, or 2 for unordered (NaN)
        if (floating) {
          const double p = x.as_double(), q = y.as_double();
          order = p < q ? -1 : p > q ? 1 : p == q ? 0 : 2;
        } else {
          order = x.i < y.i ? -1 : x.i > y.i ? 1 : 0;
        }
        store(dst, to, of_int(sign_test(order)));
      },
      workspace_size, executor);
}

int eq(int o) { return o == 0; }
int ne(int o) { return o != 0; }
int lt(int o) { return o == -1; }
int le(int o) { return o == -1 || o == 0; }
int gt(int o) { return o == 1; }
int ge(int o) { return o == 1 || o == 0; }

aclnnStatus plan_logical(const char* op, const aclTensor* self, const aclTensor* other, const aclTensor* out,
                         bool conjunction, uint64_t* workspace_size, aclOpExecutor** executor) {
  const TensorInfo& a = tensor(self, op, "self", {CDSIM_EW_ALL});
  const TensorInfo& b = tensor(other, op, "other", {CDSIM_EW_ALL});
  const TensorInfo& o = tensor(out, op, "out", {CDSIM_EW_ALL});
  require_shape(op, "out", o, broadcast(op, a.shape, b.shape));
  const aclDataType ta = a.dtype, tb = b.dtype, to = o.dtype;
  return plan_elementwise(
      op, {a, b}, o,
      [=](const std::vector<const char*>& in, char* dst) {
        const bool x = load(in[0], ta).truthy(), y = load(in[1], tb).truthy();
        store(dst, to, of_int(conjunction ? (x && y) : (x || y)));
      },
      workspace_size, executor);
}

}  // namespace
}  // namespace ew
}  // namespace cdsim

using namespace cdsim;
using namespace cdsim::ew;

extern "C" aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other, const aclScalar* alpha,
                                                aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const aclDataType computed = promote(info(self, "self").dtype, info(other, "other").dtype);
    const Value a = scalar_as(alpha, "alpha", computed);
    return plan_binary("aclnnAdd", self, other, out, {CDSIM_EW_ARITH_TYPES}, {CDSIM_EW_ARITH_TYPES},
                       [a](const Value& x, const Value& y, aclDataType) { return add(x, y, a, 1.0); }, workspaceSize,
                       executor);
  });
}
CDSIM_ACLNN_RUN(Add)

extern "C" aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor* self, const aclTensor* other, const aclScalar* alpha,
                                                aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const aclDataType computed = promote(info(self, "self").dtype, info(other, "other").dtype);
    const Value a = scalar_as(alpha, "alpha", computed);
    return plan_binary("aclnnSub", self, other, out, {CDSIM_EW_ARITH_TYPES}, {CDSIM_EW_ARITH_TYPES},
                       [a](const Value& x, const Value& y, aclDataType) { return add(x, y, a, -1.0); }, workspaceSize,
                       executor);
  });
}
CDSIM_ACLNN_RUN(Sub)

extern "C" aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    return plan_binary(
        "aclnnMul", self, other, out, {CDSIM_EW_ARITH_TYPES}, {CDSIM_EW_ARITH_TYPES},
        [](const Value& x, const Value& y, aclDataType) {
          return x.floating ? of_double(x.f * y.f) : of_int(static_cast<int64_t>(bits(x.i) * bits(y.i)));
        },
        workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Mul)

extern "C" aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    return plan_binary(
        "aclnnDiv", self, other, out, {CDSIM_EW_ARITH_TYPES}, {CDSIM_EW_ARITH_TYPES},
        [](const Value& x, const Value& y, aclDataType) { return divide(x, y, 0); }, workspaceSize, executor,
        true_division);
  });
}
CDSIM_ACLNN_RUN(Div)

extern "C" aclnnStatus aclnnDivModGetWorkspaceSize(const aclTensor* self, const aclTensor* other, int mode,
                                                   aclTensor* out, uint64_t* workspaceSize,
                                                   aclOpExecutor** executor) {
  return guarded_op([&] {
    if (mode < 0 || mode > 2) invalid("aclnnDivMod", "mode %d is not 0 (none), 1 (trunc) or 2 (floor)", mode);
    return plan_binary(
        "aclnnDivMod", self, other, out, {CDSIM_EW_ARITH_TYPES}, {CDSIM_EW_ARITH_TYPES},
        [mode](const Value& x, const Value& y, aclDataType) { return divide(x, y, mode); }, workspaceSize, executor,
        mode == 0 ? true_division : nullptr);
  });
}
CDSIM_ACLNN_RUN(DivMod)

extern "C" aclnnStatus aclnnPowTensorTensorGetWorkspaceSize(const aclTensor* self, const aclTensor* exponent,
                                                            aclTensor* out, uint64_t* workspaceSize,
                                                            aclOpExecutor** executor) {
  return guarded_op([&] {
    if (info(self, "self").dtype == ACL_BOOL && info(exponent, "exponent").dtype == ACL_BOOL) {
      invalid("aclnnPowTensorTensor", "self and exponent are both BOOL");
    }
    return plan_binary(
        "aclnnPowTensorTensor", self, exponent, out, {CDSIM_EW_ARITH_TYPES}, {CDSIM_EW_ARITH_TYPES},
        [](const Value& x, const Value& y, aclDataType) { return power(x, y); }, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(PowTensorTensor)

extern "C" aclnnStatus aclnnMaximumGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    return plan_binary(
        "aclnnMaximum", self, other, out, {CDSIM_EW_ARITH_TYPES}, {CDSIM_EW_ARITH_TYPES},
        [](const Value& x, const Value& y, aclDataType) { return extreme(x, y, true); }, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Maximum)

extern "C" aclnnStatus aclnnMinimumGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                                    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    return plan_binary(
        "aclnnMinimum", self, other, out, {CDSIM_EW_ARITH_TYPES}, {CDSIM_EW_ARITH_TYPES},
        [](const Value& x, const Value& y, aclDataType) { return extreme(x, y, false); }, workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(Minimum)

#define CDSIM_EW_COMPARE(Name, test)                                                                          \
  extern "C" aclnnStatus aclnn##Name##GetWorkspaceSize(const aclTensor* self, const aclTensor* other,         \
                                                       aclTensor* out, uint64_t* workspaceSize,               \
                                                       aclOpExecutor** executor) {                            \
    return guarded_op([&] { return plan_compare("aclnn" #Name, self, other, out, test, workspaceSize, executor); }); \
  }                                                                                                           \
  CDSIM_ACLNN_RUN(Name)
CDSIM_EW_COMPARE(EqTensor, eq)
CDSIM_EW_COMPARE(NeTensor, ne)
CDSIM_EW_COMPARE(LtTensor, lt)
CDSIM_EW_COMPARE(LeTensor, le)
CDSIM_EW_COMPARE(GtTensor, gt)
CDSIM_EW_COMPARE(GeTensor, ge)
#undef CDSIM_EW_COMPARE

extern "C" aclnnStatus aclnnEqScalarGetWorkspaceSize(const aclTensor* self, const aclScalar* other, aclTensor* out,
                                                     uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnEqScalar";
    const TensorInfo& a = tensor(self, op, "self", {CDSIM_EW_ALL});
    const TensorInfo& o = tensor(out, op, "out", {CDSIM_EW_ALL});
    require_shape(op, "out", o, a.shape);
    if (other == nullptr) raise(CD_ACLNN_ERR_PARAM_NULLPTR, "%s: other is a null pointer", op);
    const bool floating = is_floating(scalar_dtype(other, "other")) || is_floating(a.dtype);
    const double fv = scalar_double(other, "other");
    const int64_t iv = floating ? 0 : scalar_int(other, "other");
    const aclDataType ta = a.dtype, to = o.dtype;
    return plan_elementwise(
        op, {a}, o,
        [=](const std::vector<const char*>& in, char* dst) {
          const Value x = load(in[0], ta);
          store(dst, to, of_int(floating ? x.as_double() == fv : x.i == iv));
        },
        workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(EqScalar)

extern "C" aclnnStatus aclnnLogicalAndGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                                       uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] { return plan_logical("aclnnLogicalAnd", self, other, out, true, workspaceSize, executor); });
}
CDSIM_ACLNN_RUN(LogicalAnd)

extern "C" aclnnStatus aclnnLogicalOrGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                                      uint64_t* workspaceSize, aclOpExecutor** executor) {
  return guarded_op([&] { return plan_logical("aclnnLogicalOr", self, other, out, false, workspaceSize, executor); });
}
CDSIM_ACLNN_RUN(LogicalOr)

extern "C" aclnnStatus aclnnSWhereGetWorkspaceSize(const aclTensor* condition, const aclTensor* self,
                                                   const aclTensor* other, aclTensor* out, uint64_t* workspaceSize,
                                                   aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnSWhere";
    const TensorInfo& c = tensor(condition, op, "condition", {ACL_BOOL, ACL_UINT8});
    const TensorInfo& a = tensor(self, op, "self", {CDSIM_EW_ALL});
    const TensorInfo& b = tensor(other, op, "other", {CDSIM_EW_ALL});
    const TensorInfo& o = tensor(out, op, "out", {CDSIM_EW_ALL});
    const aclDataType computed = promote(a.dtype, b.dtype);
    if (!can_cast(computed, o.dtype)) {
      invalid(op, "the result type %s cannot be cast to out's %s", dtype_name(computed), dtype_name(o.dtype));
    }
    require_shape(op, "out", o, broadcast(op, broadcast(op, c.shape, a.shape), b.shape));
    const aclDataType tc = c.dtype, ta = a.dtype, tb = b.dtype, to = o.dtype;
    return plan_elementwise(
        op, {c, a, b}, o,
        [=](const std::vector<const char*>& in, char* dst) {
          const Value v = load(in[0], tc).truthy() ? load(in[1], ta) : load(in[2], tb);
          store(dst, to, is_floating(computed) ? of_double(v.as_double()) : v);
        },
        workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(SWhere)

extern "C" aclnnStatus aclnnInplaceMaskedFillScalarGetWorkspaceSize(aclTensor* selfRef, const aclTensor* mask,
                                                                    const aclScalar* value, uint64_t* workspaceSize,
                                                                    aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnInplaceMaskedFillScalar";
    const TensorInfo& s = tensor(selfRef, op, "selfRef",
                                 {ACL_BOOL, ACL_INT8, ACL_INT32, ACL_INT64, ACL_FLOAT, ACL_FLOAT16, ACL_BF16});
    const TensorInfo& m = tensor(mask, op, "mask", {ACL_BOOL});
    require_shape(op, "selfRef", s, broadcast(op, s.shape, m.shape));
    const Value fill = scalar_as(value, "value", s.dtype);
    const aclDataType ts = s.dtype;
    return plan_elementwise(
        op, {m}, s,
        [=](const std::vector<const char*>& in, char* dst) {
          if (load(in[0], ACL_BOOL).truthy()) store(dst, ts, fill);
        },
        workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(InplaceMaskedFillScalar)

extern "C" aclnnStatus aclnnBitwiseAndScalarGetWorkspaceSize(const aclTensor* self, const aclScalar* other,
                                                             aclTensor* out, uint64_t* workspaceSize,
                                                             aclOpExecutor** executor) {
  return guarded_op([&] {
    const char* op = "aclnnBitwiseAndScalar";
    const TensorInfo& a = tensor(self, op, "self", {ACL_INT16, ACL_INT32, ACL_INT64, ACL_INT8, ACL_UINT8, ACL_BOOL});
    const TensorInfo& o = tensor(out, op, "out", {CDSIM_EW_ALL});
    require_shape(op, "out", o, a.shape);
    if (other == nullptr) raise(CD_ACLNN_ERR_PARAM_NULLPTR, "%s: other is a null pointer", op);
    if (is_floating(scalar_dtype(other, "other"))) invalid(op, "other is a floating-point scalar");
    const int64_t bits_of_other = scalar_int(other, "other");
    const aclDataType ta = a.dtype, to = o.dtype;
    return plan_elementwise(
        op, {a}, o,
        [=](const std::vector<const char*>& in, char* dst) {
          store(dst, to, of_int(wrap(load(in[0], ta).i & bits_of_other, ta)));
        },
        workspaceSize, executor);
  });
}
CDSIM_ACLNN_RUN(BitwiseAndScalar)
