// Binary elementwise ops over one dtype: add, sub, mul, div, pow, maximum,
// minimum, logical_and, logical_or.
//
// Integers wrap around (two's complement); integer division truncates
// toward zero, x / 0 is 0 and MIN / -1 wraps to MIN. float16 and bfloat16
// compute in float32 and round once. maximum and minimum follow
// numpy.maximum/minimum: NaN if either operand is NaN, and of two equal
// values (-0 and +0) the second.
#include <cmath>
#include <limits>

#include "elementwise.h"
#include "elementwise_math.h"

namespace chipdock_cpu {
namespace {

using namespace elementwise;

#define CD_EW_ARITH(NAME, FLOAT_EXPR, INT_EXPR)                      \
  template <class T> struct NAME {                                   \
    static constexpr bool enabled = kIsNumeric<T>;                   \
    explicit NAME(const Params& /*p*/) {}                            \
    CD_EW_INLINE T operator()(T a, T b) const {                                   \
      if constexpr (is_floating_v<T>) {                              \
        const auto x = load(a), y = load(b);                         \
        return store<T>(FLOAT_EXPR);                                 \
      } else {                                                       \
        return INT_EXPR;                                             \
      }                                                              \
    }                                                                \
  };

CD_EW_ARITH(Add, x + y, wrap_add(a, b))
CD_EW_ARITH(Sub, x - y, wrap_sub(a, b))
CD_EW_ARITH(Mul, x * y, wrap_mul(a, b))
#undef CD_EW_ARITH

template <class T> struct Div {
  static constexpr bool enabled = kIsNumeric<T>;
  explicit Div(const Params& /*p*/) {}
  CD_EW_INLINE T operator()(T a, T b) const {
    if constexpr (is_floating_v<T>) {
      return store<T>(load(a) / load(b));
    } else {
      if (b == 0) return T{0};
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return wrap_neg(a);  // MIN / -1 overflows
      }
      return static_cast<T>(a / b);
    }
  }
};

// float64: libm. The narrower floats: e^(b log a) in float64 (vectorizes;
// relative error ~1e-13), and libm for what that does not cover: a <= 0,
// inf or NaN operands.
template <class T> struct Pow {
  static constexpr bool enabled = is_floating_v<T>;
  static constexpr bool kFixup = !std::is_same_v<T, double>;
  explicit Pow(const Params& /*p*/) {}
  CD_EW_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, double>) {
      return std::pow(a, b);
    } else {
      return store<T>(vmath::exp(static_cast<double>(load(b)) * vmath::log(static_cast<double>(load(a)))));
    }
  }
  bool outside(T a, T b) const {
    const double x = load(a), y = load(b);
    constexpr double kInf = std::numeric_limits<double>::infinity();
    return !(x > 0.0 && x < kInf && y > -kInf && y < kInf);
  }
  T slow(T a, T b) const { return store<T>(std::pow(static_cast<double>(load(a)), static_cast<double>(load(b)))); }
};

template <class T> struct Maximum {
  static constexpr bool enabled = kIsNumeric<T>;
  explicit Maximum(const Params& /*p*/) {}
  CD_EW_INLINE T operator()(T a, T b) const {
    if constexpr (is_floating_v<T>) {
      const auto x = load(a), y = load(b);  // select in float: vectorizes for every width
      return store<T>((x > y || is_nan(x)) ? x : y);
    } else {
      return a > b ? a : b;
    }
  }
};

template <class T> struct Minimum {
  static constexpr bool enabled = kIsNumeric<T>;
  explicit Minimum(const Params& /*p*/) {}
  CD_EW_INLINE T operator()(T a, T b) const {
    if constexpr (is_floating_v<T>) {
      const auto x = load(a), y = load(b);
      return store<T>((x < y || is_nan(x)) ? x : y);
    } else {
      return a < b ? a : b;
    }
  }
};

template <class T> struct LogicalAnd {
  static constexpr bool enabled = std::is_same_v<T, bool>;
  explicit LogicalAnd(const Params& /*p*/) {}
  CD_EW_INLINE bool operator()(bool a, bool b) const { return a && b; }
};

template <class T> struct LogicalOr {
  static constexpr bool enabled = std::is_same_v<T, bool>;
  explicit LogicalOr(const Params& /*p*/) {}
  CD_EW_INLINE bool operator()(bool a, bool b) const { return a || b; }
};

template <template <class> class Op, int64_t Grain>
Plan plain(const cd_kernel_context* /*ctx*/, const cd_dtype_t* dtypes) {
  return same_dtype_plan<Op, 2>(dtypes, Grain);
}

CD_EW_KERNEL(add, 2, (plain<Add, kGrainCheap>))
CD_EW_KERNEL(sub, 2, (plain<Sub, kGrainCheap>))
CD_EW_KERNEL(mul, 2, (plain<Mul, kGrainCheap>))
CD_EW_KERNEL(div, 2, (plain<Div, kGrainCheap>))
CD_EW_KERNEL(pow, 2, (plain<Pow, kGrainMath>))
CD_EW_KERNEL(maximum, 2, (plain<Maximum, kGrainCheap>))
CD_EW_KERNEL(minimum, 2, (plain<Minimum, kGrainCheap>))
CD_EW_KERNEL(logical_and, 2, (plain<LogicalAnd, kGrainCheap>))
CD_EW_KERNEL(logical_or, 2, (plain<LogicalOr, kGrainCheap>))

}  // namespace

void register_elementwise_binary(cd_kernel_registry* registry) {
  static const cd_dtype_t kBool[] = {CD_DTYPE_BOOL};
  register_group(registry, "add", add_kernel, kNumeric, 2);
  register_group(registry, "sub", sub_kernel, kNumeric, 2);
  register_group(registry, "mul", mul_kernel, kNumeric, 2);
  register_group(registry, "div", div_kernel, kNumeric, 2);
  register_group(registry, "pow", pow_kernel, kFloat, 2);
  register_group(registry, "maximum", maximum_kernel, kNumeric, 2);
  register_group(registry, "minimum", minimum_kernel, kNumeric, 2);
  register_group(registry, "logical_and", logical_and_kernel, kBool, 2);
  register_group(registry, "logical_or", logical_or_kernel, kBool, 2);
}

}  // namespace chipdock_cpu
