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

// pow. float64: libm. The narrower floats compute in float32 blocks
// (elementwise.h): with one broadcast exponent that is an integer or an
// integer + 1/2 of magnitude <= kPowFastMax (x^2, x^-1, sqrt, x^1.5 ...),
// exactly rounded-once sequences in float64 (multiplies by repeated
// squaring, one sqrt, one division: errors of a few float64 ulp, so the
// float result is the correctly rounded one but in rare near-ties); every
// other exponent through SLEEF's powf (1 ulp). Both follow C99 / NumPy:
// x^0 = 1 (NaN too), negative bases with integer exponents keep the sign of
// odd powers, NaN for negative bases with other exponents, pow(-0, y) and
// pow(-inf, y) for non-integer y as for +0 and +inf (C99, and NumPy's pow
// of two arrays; NumPy's shortcut for a scalar 0.5 is sqrt, NaN at -inf).
constexpr float kPowFastMax = 64.0f;

// x^k for an integer k >= 0, in float64, by repeated squaring.
CD_EW_INLINE void pow_uint(const float* __restrict x, double* __restrict acc, int64_t n, int32_t k) {
  alignas(64) double base[kBlock];
  for (int64_t i = 0; i < n; ++i) {
    acc[i] = 1.0;
    base[i] = x[i];
  }
  for (; k > 0; k >>= 1) {
    if (k & 1) {
      for (int64_t i = 0; i < n; ++i) acc[i] *= base[i];
    }
    if (k > 1) {
      for (int64_t i = 0; i < n; ++i) base[i] *= base[i];
    }
  }
}

// x^y for a broadcast y = m or m + 1/2 (|y| <= kPowFastMax).
CD_EW_INLINE void pow_fast(float* __restrict x, float y, int64_t n) {
  alignas(64) double acc[kBlock];
  const float ay = std::fabs(y);
  const bool half = ay != std::floor(ay);
  pow_uint(x, acc, n, static_cast<int32_t>(half ? ay - 0.5f : ay));
  if (half) {
    // sqrt(x + 0) is +0 at -0 and NaN below; -inf is the one base it misses.
    for (int64_t i = 0; i < n; ++i) {
      const double root = std::sqrt(static_cast<double>(x[i]) + 0.0);
      const double p = std::fabs(acc[i]) * root;  // x^m * sqrt(x): -0 gives +0, x < 0 NaN
      acc[i] = x[i] == -std::numeric_limits<float>::infinity() ? std::numeric_limits<double>::infinity() : p;
    }
  }
  if (y < 0.0f) {
    for (int64_t i = 0; i < n; ++i) acc[i] = 1.0 / acc[i];
  }
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(acc[i]);
}

CD_EW_INLINE bool pow_has_fast_path(float y) {
  const float twice = 2.0f * y;
  return std::fabs(y) <= kPowFastMax && twice == std::floor(twice);
}

template <class T> struct Pow {
  static constexpr bool enabled = is_floating_v<T>;
  static constexpr bool kBlocked = !std::is_same_v<T, double>;
  explicit Pow(const Params& /*p*/) {}
  CD_EW_INLINE T operator()(T a, T b) const { return store<T>(std::pow(load(a), load(b))); }
  CD_EW_INLINE static void block(float* a, const float* b, int64_t n) { sleef::pow(a, b, n); }
  CD_EW_INLINE static void block_scalar(float* a, float b, int64_t n) {
    if (pow_has_fast_path(b)) {
      pow_fast(a, b, n);
      return;
    }
    alignas(64) float y[kBlock];
    for (int64_t i = 0; i < n; ++i) y[i] = b;
    sleef::pow(a, y, n);
  }
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
