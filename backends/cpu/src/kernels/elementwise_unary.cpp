// Unary elementwise ops: neg, abs, relu, leaky_relu, clip, logical_not, and
// the float math exp, log, sqrt, rsqrt, sin, cos, tanh, erf, sigmoid, gelu,
// silu.
//
// float16 and bfloat16 compute in float32 or float64 and round once.
// float32/float16/bfloat16: exp, log, sin, cos, tanh, erf, sigmoid, silu and
// gelu run in float64 with the vectorizable functions of elementwise_math.h
// (sin/cos of |x| >= 1e6 through libm); sqrt and rsqrt (1/sqrt(x), two
// correctly rounded steps) in float32; leaky_relu in float64.
// float64: libm, and long double for gelu, whose tails amplify the rounding
// of the argument. sigmoid and the tanh gelu use forms that do not cancel
// for large |x| (e^x / (1 + e^x) below 0; x * sigmoid(2u)); the exact gelu
// is x * erfc(-x / sqrt 2) / 2; at -inf, gelu and silu give their limit -0
// (not -inf * 0).
#include <cmath>
#include <cstring>
#include <limits>

#include "elementwise.h"
#include "elementwise_math.h"

namespace chipdock_cpu {
namespace {

using namespace elementwise;

// float64 rows call F::f (libm, or long double, in W); the 32- and 16-bit
// float rows call F::fast when F has it (float64 math that vectorizes,
// elementwise_math.h) and else F::f in their compute type. F::outside and
// F::f patch what F::fast cannot do (see has_fixup in elementwise.h).
template <class F, class = void> struct has_fast : std::false_type {};
template <class F> struct has_fast<F, std::void_t<decltype(&F::fast)>> : std::true_type {};
template <class F, class = void> struct has_outside : std::false_type {};
template <class F> struct has_outside<F, std::void_t<decltype(&F::outside)>> : std::true_type {};

template <class T, class F, class W = double>
struct FloatMap {
  static constexpr bool enabled = is_floating_v<T>;
  static constexpr bool kFast = !std::is_same_v<T, double> && has_fast<F>::value;
  static constexpr bool kFixup = kFast && has_outside<F>::value;
  explicit FloatMap(const Params& /*p*/) {}
  CD_EW_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, double>) {
      return store<T>(F::f(static_cast<W>(x)));
    } else if constexpr (kFast) {
      return store<T>(F::fast(static_cast<double>(load(x))));
    } else {
      return store<T>(F::f(load(x)));
    }
  }
  bool outside(T x) const { return F::outside(static_cast<double>(load(x))); }
  T slow(T x) const { return store<T>(F::f(static_cast<double>(load(x)))); }
};

template <class W> CD_EW_INLINE W sigmoid(W x) {
  if (x >= 0) return W{1} / (W{1} + std::exp(-x));
  const W e = std::exp(x);  // NaN lands here and stays NaN
  return e / (W{1} + e);
}

// x * p where p -> 0 as x -> -inf: the limit, not -inf * 0.
template <class W> CD_EW_INLINE W times_vanishing(W x, W p) {
  return p == W{0} ? std::copysign(W{0}, x) : x * p;
}
CD_EW_INLINE double times_vanishing_fast(double x, double p) {
  return p == 0.0 ? vmath::copysign(0.0, x) : x * p;
}

// Beyond this |x| the vector reduction of sin/cos is not exact: libm.
CD_EW_INLINE bool trig_outside(double x) {
  const double a = vmath::fabs(x);
  return a >= vmath::kTrigReduceMax && a != std::numeric_limits<double>::infinity();
}

struct ExpF {
  template <class C> CD_EW_INLINE static C f(C x) { return std::exp(x); }
  CD_EW_INLINE static double fast(double x) { return vmath::exp(x); }
};
struct LogF {
  template <class C> CD_EW_INLINE static C f(C x) { return std::log(x); }
  CD_EW_INLINE static double fast(double x) { return vmath::log(x); }
};
struct SqrtF { template <class C> CD_EW_INLINE static C f(C x) { return std::sqrt(x); } };
struct RsqrtF { template <class C> CD_EW_INLINE static C f(C x) { return C{1} / std::sqrt(x); } };
struct SinF {
  template <class C> CD_EW_INLINE static C f(C x) { return std::sin(x); }
  CD_EW_INLINE static double fast(double x) { return vmath::sin_cos(x, false); }
  static bool outside(double x) { return trig_outside(x); }
};
struct CosF {
  template <class C> CD_EW_INLINE static C f(C x) { return std::cos(x); }
  CD_EW_INLINE static double fast(double x) { return vmath::sin_cos(x, true); }
  static bool outside(double x) { return trig_outside(x); }
};
struct TanhF {
  template <class C> CD_EW_INLINE static C f(C x) { return std::tanh(x); }
  CD_EW_INLINE static double fast(double x) { return vmath::tanh(x); }
};
struct ErfF {
  template <class C> CD_EW_INLINE static C f(C x) { return std::erf(x); }
  CD_EW_INLINE static double fast(double x) { return vmath::erf(x); }
};
struct SigmoidF {
  CD_EW_INLINE static double f(double x) { return sigmoid(x); }
  CD_EW_INLINE static double fast(double x) { return vmath::sigmoid(x); }
};
struct SiluF {
  CD_EW_INLINE static double f(double x) { return times_vanishing(x, sigmoid(x)); }
  CD_EW_INLINE static double fast(double x) { return times_vanishing_fast(x, vmath::sigmoid(x)); }
};
// gelu's tails are ill-conditioned in the argument (erfc(t) and e^2u change
// by ~t^2 ulp per ulp of t), so float64 computes them in long double.
struct GeluF {
  template <class W> CD_EW_INLINE static W f(W x) {
    const W kSqrtHalf = 0.707106781186547524400844362104849039L;
    return times_vanishing(x, W{0.5} * std::erfc(-x * kSqrtHalf));
  }
  CD_EW_INLINE static double fast(double x) {  // Phi(x) = erfc(-x / sqrt 2) / 2
    const double half_erfc = 0.5 * vmath::erfc_nonneg(vmath::fabs(x) * 0.70710678118654752440);
    const double phi = x >= 0.0 ? 1.0 - half_erfc : half_erfc;
    return x != x ? x : times_vanishing_fast(x, phi);
  }
};
struct GeluTanhF {  // 0.5 x (1 + tanh(u)) = x * sigmoid(2u)
  template <class W> CD_EW_INLINE static W f(W x) {
    const W kSqrt2OverPi = 0.797884560802865355879892119868763737L;
    const W u = kSqrt2OverPi * (x + W{0.044715} * x * x * x);
    return times_vanishing(x, sigmoid(W{2} * u));
  }
  CD_EW_INLINE static double fast(double x) {
    const double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
    return times_vanishing_fast(x, vmath::sigmoid(2.0 * u));
  }
};

template <class T> using Exp = FloatMap<T, ExpF>;
template <class T> using Log = FloatMap<T, LogF>;
template <class T> using Sqrt = FloatMap<T, SqrtF>;
template <class T> using Sin = FloatMap<T, SinF>;
template <class T> using Cos = FloatMap<T, CosF>;
template <class T> using Tanh = FloatMap<T, TanhF>;
template <class T> using Erf = FloatMap<T, ErfF>;
template <class T> using Rsqrt = FloatMap<T, RsqrtF>;
template <class T> using Sigmoid = FloatMap<T, SigmoidF>;
template <class T> using Silu = FloatMap<T, SiluF>;
template <class T> using Gelu = FloatMap<T, GeluF, long double>;
template <class T> using GeluTanh = FloatMap<T, GeluTanhF, long double>;

template <class T> struct Neg {
  static constexpr bool enabled = kIsSignedNumeric<T>;
  explicit Neg(const Params& /*p*/) {}
  CD_EW_INLINE T operator()(T x) const {
    if constexpr (is_floating_v<T>) {
      return store<T>(-load(x));
    } else {
      return wrap_neg(x);
    }
  }
};

template <class T> struct Abs {
  static constexpr bool enabled = kIsNumeric<T>;
  explicit Abs(const Params& /*p*/) {}
  CD_EW_INLINE T operator()(T x) const {
    if constexpr (is_floating_v<T>) {
      return store<T>(std::fabs(load(x)));
    } else if constexpr (std::is_signed_v<T>) {
      return x < 0 ? wrap_neg(x) : x;
    } else {
      return x;
    }
  }
};

// max(x, 0) as numpy.maximum: NaN stays NaN, -0 becomes +0.
template <class T> struct Relu {
  static constexpr bool enabled = kIsSignedNumeric<T>;
  explicit Relu(const Params& /*p*/) {}
  CD_EW_INLINE T operator()(T x) const {
    if constexpr (is_floating_v<T>) {
      const auto v = load(x);
      return (v > 0 || is_nan(v)) ? x : store<T>(compute_t<T>{0});
    } else {
      return x > 0 ? x : T{0};
    }
  }
};

template <class T> struct LeakyRelu {
  static constexpr bool enabled = is_floating_v<T>;
  explicit LeakyRelu(const Params& p) : alpha(p.a) {}
  CD_EW_INLINE T operator()(T x) const {
    const double v = static_cast<double>(load(x));
    return v >= 0 ? x : store<T>(alpha * v);
  }
  double alpha;
};

// A clip bound as an integer of T: truncated toward zero (what converting
// the float64 result of the clip would give) and saturated to T's range; a
// NaN bound does not apply.
template <class T> T int_bound(double v, bool lower) {
  constexpr T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  if (std::isnan(v)) return lower ? lo : hi;
  if (v <= static_cast<double>(lo)) return lo;
  if (v >= static_cast<double>(hi)) return hi;
  return static_cast<T>(v);
}

// min(max(x, lo), hi); NaN stays NaN; the default bounds (-inf, inf) do nothing.
template <class T> struct Clip {
  static constexpr bool enabled = kIsNumeric<T>;
  using Bound = std::conditional_t<is_floating_v<T>, compute_t<T>, T>;
  explicit Clip(const Params& p) {
    if constexpr (is_floating_v<T>) {  // the bounds as T holds them
      lo = load(store<T>(p.a));
      hi = load(store<T>(p.b));
    } else {
      lo = int_bound<T>(p.a, true);
      hi = int_bound<T>(p.b, false);
    }
  }
  CD_EW_INLINE T operator()(T x) const {
    if constexpr (is_floating_v<T>) {
      auto v = load(x);
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
      return store<T>(v);
    } else {
      T v = x < lo ? lo : x;
      return v > hi ? hi : v;
    }
  }
  Bound lo, hi;
};

template <class T> struct LogicalNot {
  static constexpr bool enabled = std::is_same_v<T, bool>;
  explicit LogicalNot(const Params& /*p*/) {}
  CD_EW_INLINE bool operator()(bool x) const { return !x; }
};

template <template <class> class Op, int64_t Grain>
Plan plain(const cd_kernel_context* /*ctx*/, const cd_dtype_t* dtypes) {
  return same_dtype_plan<Op, 1>(dtypes, Grain);
}

Plan leaky_relu_plan(const cd_kernel_context* ctx, const cd_dtype_t* dtypes) {
  Params p;
  p.a = float_attribute(ctx, "alpha", 0.01);
  return same_dtype_plan<LeakyRelu, 1>(dtypes, kGrainCheap, p);
}

Plan clip_plan(const cd_kernel_context* ctx, const cd_dtype_t* dtypes) {
  Params p;
  p.a = float_attribute(ctx, "min", -std::numeric_limits<double>::infinity());
  p.b = float_attribute(ctx, "max", std::numeric_limits<double>::infinity());
  return same_dtype_plan<Clip, 1>(dtypes, kGrainCheap, p);
}

Plan gelu_plan(const cd_kernel_context* ctx, const cd_dtype_t* dtypes) {
  const cd_attribute* a = find_attribute(ctx, "approximate");
  const char* mode = "none";
  if (a != nullptr) {
    if (a->type != CD_ATTR_STRING || a->value.s == nullptr) {
      fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'approximate' must be a string");
    }
    mode = a->value.s;
  }
  if (std::strcmp(mode, "none") == 0) return same_dtype_plan<Gelu, 1>(dtypes, kGrainMath);
  if (std::strcmp(mode, "tanh") == 0) return same_dtype_plan<GeluTanh, 1>(dtypes, kGrainMath);
  fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'approximate' is '%s', not 'none' or 'tanh'",
       mode);
}

CD_EW_KERNEL(neg, 1, (plain<Neg, kGrainCheap>))
CD_EW_KERNEL(abs, 1, (plain<Abs, kGrainCheap>))
CD_EW_KERNEL(exp, 1, (plain<Exp, kGrainMath>))
CD_EW_KERNEL(log, 1, (plain<Log, kGrainMath>))
CD_EW_KERNEL(sqrt, 1, (plain<Sqrt, kGrainMath>))
CD_EW_KERNEL(rsqrt, 1, (plain<Rsqrt, kGrainMath>))
CD_EW_KERNEL(sin, 1, (plain<Sin, kGrainMath>))
CD_EW_KERNEL(cos, 1, (plain<Cos, kGrainMath>))
CD_EW_KERNEL(tanh, 1, (plain<Tanh, kGrainMath>))
CD_EW_KERNEL(erf, 1, (plain<Erf, kGrainMath>))
CD_EW_KERNEL(sigmoid, 1, (plain<Sigmoid, kGrainMath>))
CD_EW_KERNEL(relu, 1, (plain<Relu, kGrainCheap>))
CD_EW_KERNEL(leaky_relu, 1, leaky_relu_plan)
CD_EW_KERNEL(gelu, 1, gelu_plan)
CD_EW_KERNEL(silu, 1, (plain<Silu, kGrainMath>))
CD_EW_KERNEL(clip, 1, clip_plan)
CD_EW_KERNEL(logical_not, 1, (plain<LogicalNot, kGrainCheap>))

}  // namespace

void register_elementwise_unary(cd_kernel_registry* registry) {
  static const cd_dtype_t kBool[] = {CD_DTYPE_BOOL};
  register_group(registry, "neg", neg_kernel, kSignedNumeric, 1);
  register_group(registry, "abs", abs_kernel, kNumeric, 1);
  register_group(registry, "exp", exp_kernel, kFloat, 1);
  register_group(registry, "log", log_kernel, kFloat, 1);
  register_group(registry, "sqrt", sqrt_kernel, kFloat, 1);
  register_group(registry, "rsqrt", rsqrt_kernel, kFloat, 1);
  register_group(registry, "sin", sin_kernel, kFloat, 1);
  register_group(registry, "cos", cos_kernel, kFloat, 1);
  register_group(registry, "tanh", tanh_kernel, kFloat, 1);
  register_group(registry, "erf", erf_kernel, kFloat, 1);
  register_group(registry, "sigmoid", sigmoid_kernel, kFloat, 1);
  register_group(registry, "relu", relu_kernel, kSignedNumeric, 1);
  register_group(registry, "leaky_relu", leaky_relu_kernel, kFloat, 1);
  register_group(registry, "gelu", gelu_kernel, kFloat, 1);
  register_group(registry, "silu", silu_kernel, kFloat, 1);
  register_group(registry, "clip", clip_kernel, kNumeric, 1);
  register_group(registry, "logical_not", logical_not_kernel, kBool, 1);
}

}  // namespace chipdock_cpu
