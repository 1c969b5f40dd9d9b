// Unary elementwise ops: neg, abs, relu, leaky_relu, clip, logical_not, and
// the float math exp, log, sqrt, rsqrt, sin, cos, tanh, erf, sigmoid, gelu,
// silu.
//
// float16 and bfloat16 compute in float32 and round once.
// float32/float16/bfloat16: exp, log, sin, cos, tanh and erf are SLEEF's
// u10 functions (1 ulp, sleef_map.h) over staged float32 blocks;
// sigmoid, silu and both gelus build on SLEEF's exp and erfc with their
// arguments in float64 where rounding them would cost accuracy (bounds:
// backends/cpu/README.md); sqrt and rsqrt (1/sqrt(x), two correctly
// rounded steps) in float32; leaky_relu in float64.
// float64: libm, and long double for gelu, whose tails amplify the rounding
// of the argument. sigmoid and the tanh gelu use forms that do not cancel
// for large |x| (e^x / (1 + e^x) below 0; x * sigmoid(2u)); the exact gelu
// is x * erfc(-x / sqrt 2) / 2; at -inf, gelu and silu give their limit -0
// (not -inf * 0).
#include <cmath>
#include <cstring>
#include <limits>

#include "elementwise.h"

namespace chipdock_cpu {
namespace {

using namespace elementwise;

// float64 rows call F::f (libm, or long double, in W). The 32- and 16-bit
// float rows call F::block when F has it (float32 through SLEEF over a
// staged block, see elementwise.h and sleef_map.h), else F::f in their
// compute type.
template <class F, class = void> struct has_block : std::false_type {};
template <class F> struct has_block<F, std::void_t<decltype(&F::block)>> : std::true_type {};

template <class T, class F, class W = double>
struct FloatMap {
  static constexpr bool enabled = is_floating_v<T>;
  static constexpr bool kBlocked = !std::is_same_v<T, double> && has_block<F>::value;
  explicit FloatMap(const Params& /*p*/) {}
  CD_EW_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, double>) {
      return store<T>(F::f(static_cast<W>(x)));
    } else {
      return store<T>(F::f(load(x)));
    }
  }
  CD_EW_INLINE static void block(float* x, int64_t n) { F::block(x, n); }
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

// One SLEEF function over the block, nothing around it.
template <sleef::Fn Fn> struct SleefF {
  CD_EW_INLINE static void block(float* x, int64_t n) { sleef::map(Fn, x, n); }
};

// --- e^-|v| for sigmoid, silu and the tanh gelu -----------------------------------------
//
// Their results are e^-|v| times x or over 1 + e^-|v|. Two things would cost
// accuracy in plain float32: v itself, where it is computed (the tanh gelu's
// 2u), rounds to float, and e^v's relative error is |v| times that; and
// below v = -87 e^v is subnormal, short of bits that x * e^v (normal again)
// would need. So v comes in float64, is shifted by 64 ln 2 where v < -80
// (the result is then E * 2^-64 with E normal down to v = -150), and is
// split into float hi + lo: e^v = e^hi * (1 + lo), the product rounded once.
constexpr double kShiftLn = 44.361419555836499802702855773323;  // 64 ln 2
constexpr float kShiftScale = 0x1p-64f;
constexpr double kShiftBelow = -80.0;

// e[i] (in) holds nothing; on return e[i] = E_i with e^-|v_i| = E_i * scale(v_i).
template <class V>
CD_EW_INLINE void exp_neg_abs(const V& v, float* __restrict e, int64_t n) {
  alignas(64) float lo[kBlock];
  for (int64_t i = 0; i < n; ++i) {
    const double a = -std::fabs(v(i));
    const double w = a < kShiftBelow ? a + kShiftLn : a;
    const float hi = static_cast<float>(w);
    const double d = w - static_cast<double>(hi);  // inf or NaN where hi overflows: no correction
    e[i] = hi;
    lo[i] = std::fabs(d) < 1.0 ? static_cast<float>(d) : 0.0f;
  }
  sleef::map(sleef::Fn::exp, e, n);
  for (int64_t i = 0; i < n; ++i) e[i] = e[i] + e[i] * lo[i];
}

CD_EW_INLINE float shift_scale(double v) { return -std::fabs(v) < kShiftBelow ? kShiftScale : 1.0f; }

struct SigmoidF {
  CD_EW_INLINE static double f(double x) { return sigmoid(x); }
  CD_EW_INLINE static void block(float* x, int64_t n) {
    alignas(64) float e[kBlock];
    exp_neg_abs([x](int64_t i) { return static_cast<double>(x[i]); }, e, n);
    for (int64_t i = 0; i < n; ++i) {
      const float ex = e[i] * shift_scale(x[i]);  // e^-|x|, subnormal where it is
      x[i] = (x[i] >= 0.0f ? 1.0f : ex) / (1.0f + ex);  // NaN: ex is NaN
    }
  }
};

// x * sigmoid(v) with e^-|v| from exp_neg_abs: x / (1 + e) for x >= 0, else
// (x E) 2^-k / (1 + e), and -0 where E is 0 (x -> -inf).
CD_EW_INLINE float x_sigmoid(float x, float big_e, float scale) {
  const float ex = big_e * scale;
  const float neg = big_e == 0.0f ? -0.0f : (x * big_e) * scale / (1.0f + ex);
  return x >= 0.0f ? x / (1.0f + ex) : neg;  // -0 >= 0: -0 / 2 keeps the sign; NaN: neg is NaN
}

struct SiluF {
  CD_EW_INLINE static double f(double x) { return times_vanishing(x, sigmoid(x)); }
  CD_EW_INLINE static void block(float* x, int64_t n) {
    alignas(64) float e[kBlock];
    exp_neg_abs([x](int64_t i) { return static_cast<double>(x[i]); }, e, n);
    for (int64_t i = 0; i < n; ++i) x[i] = x_sigmoid(x[i], e[i], shift_scale(x[i]));
  }
};

// gelu's tails are ill-conditioned in the argument (erfc(t) and e^2u change
// by ~t^2 ulp per ulp of t), so float64 computes them in long double, and
// the float32 blocks carry the argument's rounding error as a correction.
struct GeluF {
  template <class W> CD_EW_INLINE static W f(W x) {
    const W kSqrtHalf = 0.707106781186547524400844362104849039L;
    return times_vanishing(x, W{0.5} * std::erfc(-x * kSqrtHalf));
  }
  // K(t) = exp(-t^2) / (sqrt(pi) erfc(t)) for t >= 6, by erfc's continued
  // fraction (relative error < 3e-10 there).
  CD_EW_INLINE static float erfc_cf(float t) {
    return t + 0.5f / (t + 1.0f / (t + 1.5f / (t + 2.0f / (t + 2.5f / (t + 3.0f / t)))));
  }
  // K(t) within 2 % for every t >= 0: (t + sqrt(t^2 + 4 / pi)) / 2, exact at
  // 0, an upper bound of K (it only scales a correction of a few float ulp
  // per unit of t^2).
  CD_EW_INLINE static float erfc_k_near(float t) { return 0.5f * (t + std::sqrt(t * t + 1.27323954f)); }
  // Phi(x) = erfc(-x / sqrt 2) / 2 with t = |x| / sqrt 2 in float64, split
  // into float hi + lo. Below t = 6: erfc(hi + lo) = erfc(hi) (1 - 2 lo K(hi))
  // with SLEEF's erfc. From 6 on (where erfc(t) heads into the subnormals,
  // short of the bits x * erfc(t) / 2 needs): erfc(t) = e^-t^2 / (sqrt(pi) K(t))
  // with e^-t^2 from exp_neg_abs (which carries t^2's rounding and the 2^-64
  // shift), computed only for blocks that have such an x.
  CD_EW_INLINE static void block(float* x, int64_t n) {
    alignas(64) float e[kBlock];
    alignas(64) float g[kBlock];
    alignas(64) float lo[kBlock];
    bool any_far = false;
    for (int64_t i = 0; i < n; ++i) {
      const double t = std::fabs(static_cast<double>(x[i])) * 0.70710678118654752440;
      const float hi = static_cast<float>(t);
      const double d = t - static_cast<double>(hi);
      e[i] = hi;
      lo[i] = std::fabs(d) < 1.0 ? static_cast<float>(d) : 0.0f;
      any_far |= hi >= 6.0f;
    }
    sleef::map(sleef::Fn::erfc, e, n);
    if (!any_far) {
      for (int64_t i = 0; i < n; ++i) x[i] = combine(x[i], near_erfc(x[i], e[i], lo[i]), 1.0f);
      return;
    }
    exp_neg_abs([x](int64_t i) { return tsq(x[i]); }, g, n);
    constexpr float kSqrtPi = 1.77245385090551602730f;
    for (int64_t i = 0; i < n; ++i) {
      const float t = std::fabs(x[i]) * 0.70710678f;  // only picks the branch
      const bool far = t >= 6.0f && t == t;
      const float ec = far ? g[i] / (kSqrtPi * erfc_cf(t)) : near_erfc(x[i], e[i], lo[i]);
      x[i] = combine(x[i], ec, far ? shift_scale(tsq(x[i])) : 1.0f);
    }
  }
  // erfc(hi + lo) from SLEEF's erfc(hi) = e.
  CD_EW_INLINE static float near_erfc(float x, float e, float lo) {
    const float k = erfc_k_near(std::fabs(x) * 0.70710678f);
    return e > 0.0f ? e - e * (2.0f * lo * k) : e;
  }
  // x Phi(x) from erfc(|x| / sqrt 2) = ec * scale.
  CD_EW_INLINE static float combine(float x, float ec, float scale) {
    const float neg = ec == 0.0f ? -0.0f : ((x * 0.5f) * ec) * scale;
    return x >= 0.0f ? x * (1.0f - 0.5f * (ec * scale)) : neg;
  }
  CD_EW_INLINE static double tsq(float x) {  // (x / sqrt 2)^2
    const double v = x;
    return 0.5 * v * v;
  }
};
struct GeluTanhF {  // 0.5 x (1 + tanh(u)) = x * sigmoid(2u)
  template <class W> CD_EW_INLINE static W f(W x) {
    const W kSqrt2OverPi = 0.797884560802865355879892119868763737L;
    const W u = kSqrt2OverPi * (x + W{0.044715} * x * x * x);
    return times_vanishing(x, sigmoid(W{2} * u));
  }
  CD_EW_INLINE static double two_u(float x) {
    const double v = x;
    return 2.0 * 0.79788456080286535588 * (v + 0.044715 * v * v * v);
  }
  CD_EW_INLINE static void block(float* x, int64_t n) {
    alignas(64) float e[kBlock];
    exp_neg_abs([x](int64_t i) { return two_u(x[i]); }, e, n);
    for (int64_t i = 0; i < n; ++i) x[i] = x_sigmoid(x[i], e[i], shift_scale(two_u(x[i])));
  }
};

struct ExpF : SleefF<sleef::Fn::exp> {
  template <class C> CD_EW_INLINE static C f(C x) { return std::exp(x); }
};
struct LogF : SleefF<sleef::Fn::log> {
  template <class C> CD_EW_INLINE static C f(C x) { return std::log(x); }
};
struct SqrtF { template <class C> CD_EW_INLINE static C f(C x) { return std::sqrt(x); } };
struct RsqrtF { template <class C> CD_EW_INLINE static C f(C x) { return C{1} / std::sqrt(x); } };
struct SinF : SleefF<sleef::Fn::sin> {
  template <class C> CD_EW_INLINE static C f(C x) { return std::sin(x); }
};
struct CosF : SleefF<sleef::Fn::cos> {
  template <class C> CD_EW_INLINE static C f(C x) { return std::cos(x); }
};
struct TanhF : SleefF<sleef::Fn::tanh> {
  template <class C> CD_EW_INLINE static C f(C x) { return std::tanh(x); }
};
struct ErfF : SleefF<sleef::Fn::erf> {
  template <class C> CD_EW_INLINE static C f(C x) { return std::erf(x); }
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
