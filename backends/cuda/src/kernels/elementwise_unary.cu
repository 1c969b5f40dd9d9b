// neg, abs, relu, leaky_relu, clip, logical_not and the float math exp,
// log, sqrt, rsqrt, sin, cos, tanh, erf, sigmoid, gelu, silu. float32,
// float16 and bfloat16 compute in float32 with CUDA's math (gelu in
// float64), rounded once; float64 in double; integers wrap (neg and abs of the minimum).
#include <cmath>
#include <limits>
#include <string>

#include "elementwise.cuh"

namespace chipdock_cuda {
namespace ew {
namespace {

template <class T> using U = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

template <class T> __device__ __forceinline__ T wrap_neg(T x) {
  return static_cast<T>(static_cast<U<T>>(U<T>(0) - static_cast<U<T>>(x)));
}

template <class T> struct Neg : Sig<T, T> {
  __device__ T operator()(T x) const {
    if constexpr (kIsFloat<T>) return store<T>(-load(x));
    else return wrap_neg(x);
  }
};

template <class T> struct Abs : Sig<T, T> {
  __device__ T operator()(T x) const {
    if constexpr (kIsFloat<T>) return store<T>(fabs(load(x)));
    else if constexpr (std::is_signed_v<T>) return x < 0 ? wrap_neg(x) : x;
    else return x;
  }
};

template <class T> struct Relu : Sig<T, T> {
  __device__ T operator()(T x) const {
    if constexpr (kIsFloat<T>) {
      const auto v = load(x);
      return (v > 0 || v != v) ? x : store<T>(compute_t<T>{0});
    } else {
      return x > 0 ? x : T{0};
    }
  }
};

// x if x >= 0 else alpha * x, the product in float64 (as the CPU reference).
template <class T> struct LeakyRelu : Sig<T, T> {
  double alpha;
  __device__ T operator()(T x) const {
    const double v = static_cast<double>(load(x));
    return v >= 0 ? x : store<T>(alpha * v);
  }
};

// min(max(x, lo), hi) with the bounds as T holds them (see clip_bounds).
template <class T> struct Clip : Sig<T, T> {
  compute_t<T> lo, hi;
  __device__ T operator()(T x) const {
    if constexpr (kIsFloat<T>) {
      auto v = load(x);
      v = v < lo ? lo : v;
      v = v > hi ? hi : v;
      return store<T>(v);
    } else {
      const T v = x < lo ? lo : x;
      return v > hi ? hi : v;
    }
  }
};

template <class T> struct LogicalNot : Sig<bool, bool> {
  __device__ bool operator()(bool x) const { return !x; }
};

// The float math, per compute type.
__device__ __forceinline__ float sigmoid_(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}
__device__ __forceinline__ double sigmoid_(double x) {
  if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
  const double e = exp(x);
  return e / (1.0 + e);
}
// x * s where s -> 0 gives a signed zero (not NaN) at x = -inf.
template <class C> __device__ __forceinline__ C times_vanishing(C x, C s) {
  return s == C(0) ? copysign(C(0), x) : x * s;
}

#define CD_EW_FMATH(Name, FEXPR, DEXPR)                                      \
  struct Name##M {                                                           \
    __device__ static float f(float x) { return FEXPR; }                     \
    __device__ static double f(double x) { return DEXPR; }                   \
  };
CD_EW_FMATH(Exp, expf(x), exp(x))
CD_EW_FMATH(Log, logf(x), log(x))
CD_EW_FMATH(Sqrt, sqrtf(x), sqrt(x))
CD_EW_FMATH(Rsqrt, rsqrtf(x), rsqrt(x))
CD_EW_FMATH(Sin, sinf(x), sin(x))
CD_EW_FMATH(Cos, cosf(x), cos(x))
CD_EW_FMATH(Tanh, tanhf(x), tanh(x))
CD_EW_FMATH(Erf, erff(x), erf(x))
CD_EW_FMATH(Sigmoid, sigmoid_(x), sigmoid_(x))
CD_EW_FMATH(Silu, times_vanishing(x, sigmoid_(x)), times_vanishing(x, sigmoid_(x)))
// gelu's tails are ill-conditioned in the argument (erfc(t) and e^2u change
// by ~t^2 ulp per ulp of t), so the float types compute it in float64, as
// the CPU reference does. Phi(x) = erfc(-x / sqrt 2) / 2.
__device__ __forceinline__ double gelu_(double x) {
  return times_vanishing(x, 0.5 * erfc(-x * 0.70710678118654752440));
}
// 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
__device__ __forceinline__ double gelu_tanh_(double x) {
  return times_vanishing(x, sigmoid_(2.0 * (0.79788456080286535588 * (x + 0.044715 * x * x * x))));
}
// f(float) returns the double: FMap rounds it once to T.
struct GeluM {
  __device__ static double f(float x) { return gelu_(x); }
  __device__ static double f(double x) { return gelu_(x); }
};
struct GeluTanhM {
  __device__ static double f(float x) { return gelu_tanh_(x); }
  __device__ static double f(double x) { return gelu_tanh_(x); }
};
#undef CD_EW_FMATH

template <class T, class M> struct FMap : Sig<T, T> {
  __device__ T operator()(T x) const { return store<T>(M::f(load(x))); }
};

template <class M> struct Math {
  template <class T> using Op = FMap<T, M>;
};

template <class Fn> cd_error* run(const cd_kernel_context* ctx, Fn&& body) noexcept {
  return guard(ctx != nullptr && ctx->op != nullptr ? ctx->op : "elementwise", [ctx, &body] {
    require_non_null(ctx, "ctx");
    if (ctx->num_inputs < 1 || ctx->inputs == nullptr || ctx->inputs[0] == nullptr) {
      fail(CD_STATUS_INVALID_ARGUMENT, "missing input 0");
    }
    body(ctx->inputs[0]->dtype);
  });
}

template <template <class> class Op, uint32_t Mask> cd_error* kernel(const cd_kernel_context* ctx) noexcept {
  return run(ctx, [ctx](cd_dtype_t d) {
    dispatch<Mask>(d, [ctx](auto tag) { launch(ctx, Op<typename decltype(tag)::type>{}, "launching a unary kernel"); });
  });
}

cd_error* leaky_relu_kernel(const cd_kernel_context* ctx) noexcept {
  return run(ctx, [ctx](cd_dtype_t d) {
    const double alpha = float_attribute(ctx, "alpha", 0.01);
    dispatch<kFloatMask>(d, [&](auto tag) {
      LeakyRelu<typename decltype(tag)::type> op;
      op.alpha = alpha;
      launch(ctx, op, "launching leaky_relu");
    });
  });
}

cd_error* gelu_kernel(const cd_kernel_context* ctx) noexcept {
  return run(ctx, [ctx](cd_dtype_t d) {
    const cd_attribute* a = find_attribute(ctx, "approximate");
    bool tanh_form = false;
    if (a != nullptr) {
      if (a->type != CD_ATTR_STRING || a->value.s == nullptr) {
        fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'approximate' must be a string");
      }
      const std::string s = a->value.s;
      if (s == "tanh") tanh_form = true;
      else if (s != "none") fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'approximate' is '%s', not none or tanh", a->value.s);
    }
    dispatch<kFloatMask>(d, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (tanh_form) launch(ctx, FMap<T, GeluTanhM>{}, "launching gelu");
      else launch(ctx, FMap<T, GeluM>{}, "launching gelu");
    });
  });
}

// A clip bound as an integer of T: truncated toward zero and saturated to
// T's range; a NaN bound does not apply (as the CPU reference).
template <class T> T int_bound(double v, bool lower) {
  constexpr T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  if (std::isnan(v)) return lower ? lo : hi;
  if (v <= static_cast<double>(lo)) return lo;
  if (v >= static_cast<double>(hi)) return hi;
  return static_cast<T>(v);
}

// A float bound rounded once to T, as T holds it, widened back.
template <class T> compute_t<T> float_bound(double v) {
  if constexpr (std::is_same_v<T, double>) return v;
  else if constexpr (std::is_same_v<T, float>) return static_cast<float>(v);
  else if constexpr (std::is_same_v<T, half>) return __half2float(__double2half(v));
  else return __bfloat162float(__double2bfloat16(v));
}

cd_error* clip_kernel(const cd_kernel_context* ctx) noexcept {
  return run(ctx, [ctx](cd_dtype_t d) {
    const double lo = float_attribute(ctx, "min", -std::numeric_limits<double>::infinity());
    const double hi = float_attribute(ctx, "max", std::numeric_limits<double>::infinity());
    dispatch<kNumericMask>(d, [&](auto tag) {
      using T = typename decltype(tag)::type;
      Clip<T> op;
      if constexpr (kIsFloat<T>) {
        op.lo = float_bound<T>(lo);
        op.hi = float_bound<T>(hi);
      } else {
        op.lo = int_bound<T>(lo, true);
        op.hi = int_bound<T>(hi, false);
      }
      launch(ctx, op, "launching clip");
    });
  });
}

}  // namespace

void register_unary(cd_kernel_registry* registry) {
  register_group(registry, "neg", kernel<Neg, kSignedNumericMask>, kSignedNumericMask, 1);
  register_group(registry, "abs", kernel<Abs, kNumericMask>, kNumericMask, 1);
  register_group(registry, "relu", kernel<Relu, kSignedNumericMask>, kSignedNumericMask, 1);
  register_group(registry, "logical_not", kernel<LogicalNot, kBoolMask>, kBoolMask, 1);
  register_group(registry, "exp", kernel<Math<ExpM>::Op, kFloatMask>, kFloatMask, 1);
  register_group(registry, "log", kernel<Math<LogM>::Op, kFloatMask>, kFloatMask, 1);
  register_group(registry, "sqrt", kernel<Math<SqrtM>::Op, kFloatMask>, kFloatMask, 1);
  register_group(registry, "rsqrt", kernel<Math<RsqrtM>::Op, kFloatMask>, kFloatMask, 1);
  register_group(registry, "sin", kernel<Math<SinM>::Op, kFloatMask>, kFloatMask, 1);
  register_group(registry, "cos", kernel<Math<CosM>::Op, kFloatMask>, kFloatMask, 1);
  register_group(registry, "tanh", kernel<Math<TanhM>::Op, kFloatMask>, kFloatMask, 1);
  register_group(registry, "erf", kernel<Math<ErfM>::Op, kFloatMask>, kFloatMask, 1);
  register_group(registry, "sigmoid", kernel<Math<SigmoidM>::Op, kFloatMask>, kFloatMask, 1);
  register_group(registry, "silu", kernel<Math<SiluM>::Op, kFloatMask>, kFloatMask, 1);
  register_group(registry, "leaky_relu", leaky_relu_kernel, kFloatMask, 1);
  register_group(registry, "gelu", gelu_kernel, kFloatMask, 1);
  register_group(registry, "clip", clip_kernel, kNumericMask, 1);
}

}  // namespace ew
}  // namespace chipdock_cuda
