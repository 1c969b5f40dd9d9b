// Element types and the small numeric toolkit every CPU kernel shares:
// storage types for the ten ABI dtypes, float16/bfloat16 conversion (those
// are computed in float32 and rounded once, round-to-nearest-even), a dtype
// switch, and a parallel loop over OpenMP threads.
#ifndef CHIPDOCK_CPU_KERNELS_NUMERIC_H_
#define CHIPDOCK_CPU_KERNELS_NUMERIC_H_

#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <type_traits>
#include <utility>

#include "chipdock/cd_base.h"
#include "threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace chipdock_cpu {

// For the small conversions below: inlined even into large kernel files,
// where the compiler's unit-growth limits would otherwise leave a call in
// the middle of a loop that could vectorize.
#define CD_ALWAYS_INLINE inline __attribute__((always_inline))

// IEEE binary16, as GCC and Clang implement it on x86-64 and aarch64.
using float16_t = _Float16;

// bfloat16: the upper half of a float32.
struct bfloat16_t {
  uint16_t bits;
};

CD_ALWAYS_INLINE float bf16_to_float(bfloat16_t v) {
  uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

CD_ALWAYS_INLINE bfloat16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((u >> 16) | 0x40u)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return {static_cast<uint16_t>(u >> 16)};
}

// float16 <-> float32 in integer arithmetic, exact (round to nearest even,
// NaN kept and quieted as F16C does). Compilers vectorize the _bits forms
// over uint16_t arrays (built with -fno-trapping-math, which lets the
// selects if-convert), while they leave _Float16 conversions scalar: a
// libgcc call per element on the x86-64 baseline, a scalar vcvtph2ps with
// F16C. Loops over _Float16 arrays themselves vectorize poorly (GCC 12).
CD_ALWAYS_INLINE float f16_bits_to_float(uint16_t h) {
  const uint32_t em = h & 0x7fffu;  // exponent and mantissa
  // Normal numbers, inf and NaN: rebias the exponent by 112 (255 - 31 - 112 for inf/NaN).
  uint32_t u = (em << 13) + (em >= 0x7c00u ? 0x70000000u : 0x38000000u);
  const float subnormal = static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f;  // exact
  uint32_t s;
  std::memcpy(&s, &subnormal, sizeof(s));
  u = (em < 0x0400u ? s : u) | (static_cast<uint32_t>(h & 0x8000u) << 16);
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

CD_ALWAYS_INLINE uint16_t float_to_f16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  const uint32_t a = u & 0x7fffffffu;
  // Normal range: round the mantissa to 10 bits (ties to even) and rebias;
  // a carry out of the mantissa bumps the exponent, up to inf (clamped).
  uint32_t normal = ((a + 0x0fffu + ((a >> 13) & 1u)) >> 13) - 0x1c000u;
  normal = normal > 0x7c00u ? 0x7c00u : normal;
  // Below 2^-14: adding 0.5 rounds |f| to a multiple of 2^-24 (a subnormal step).
  float t;
  std::memcpy(&t, &a, sizeof(t));
  t += 0.5f;
  uint32_t sub;
  std::memcpy(&sub, &t, sizeof(sub));
  sub -= 0x3f000000u;
  uint32_t h = a < 0x38800000u ? sub : normal;
  h = a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x3ffu)) : h;  // NaN
  return static_cast<uint16_t>(h | ((u >> 16) & 0x8000u));
}

CD_ALWAYS_INLINE float f16_to_float(float16_t v) {
  uint16_t h;
  std::memcpy(&h, &v, sizeof(h));
  return f16_bits_to_float(h);
}

CD_ALWAYS_INLINE float16_t float_to_f16(float f) {
  const uint16_t bits = float_to_f16_bits(f);
  float16_t out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// float64 -> float32 rounded to odd (truncate, then set the last bit if
// anything was lost): a second rounding to a type at least 2 bits narrower
// (float16) is then the correctly rounded result of the float64.
CD_ALWAYS_INLINE float round_to_odd(double d) {
  const float f = static_cast<float>(d);
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  const double back = static_cast<double>(f);
  if (back != d && d == d) {
    if ((back < 0 ? -back : back) > (d < 0 ? -d : d)) u -= 1;  // rounded away from zero (or to inf)
    u |= 1u;
  }
  float r;
  std::memcpy(&r, &u, sizeof(r));
  return r;
}

// The type arithmetic happens in: float for the 16-bit floats, else itself.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<float16_t> { using type = float; };
template <> struct compute_type<bfloat16_t> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

// Loads and stores through the compute type (the only rounding is the store).
template <class T> CD_ALWAYS_INLINE compute_t<T> load(const T& v) { return static_cast<compute_t<T>>(v); }
template <> CD_ALWAYS_INLINE float load<bfloat16_t>(const bfloat16_t& v) { return bf16_to_float(v); }
template <> CD_ALWAYS_INLINE float load<float16_t>(const float16_t& v) { return f16_to_float(v); }
template <class T, class C> CD_ALWAYS_INLINE T store(C v) { return static_cast<T>(v); }
template <> CD_ALWAYS_INLINE bfloat16_t store<bfloat16_t, float>(float v) { return float_to_bf16(v); }
// From double through float rounded to odd: one correct rounding overall.
template <> CD_ALWAYS_INLINE bfloat16_t store<bfloat16_t, double>(double v) { return float_to_bf16(round_to_odd(v)); }
template <> CD_ALWAYS_INLINE float16_t store<float16_t, float>(float v) { return float_to_f16(v); }
template <> CD_ALWAYS_INLINE float16_t store<float16_t, double>(double v) { return float_to_f16(round_to_odd(v)); }

template <class T> constexpr bool is_floating_v =
    std::is_floating_point_v<T> || std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

// Calls fn(T{}) with T the storage type of `dtype`, Half standing for
// float16 (a kernel family may keep float16 as bits); returns false for an
// unknown dtype.
template <class Half, class F> bool dispatch_dtype_as(cd_dtype_t dtype, F&& fn) {
  switch (dtype) {
    case CD_DTYPE_FLOAT32: fn(float{}); return true;
    case CD_DTYPE_FLOAT16: fn(Half{}); return true;
    case CD_DTYPE_BFLOAT16: fn(bfloat16_t{}); return true;
    case CD_DTYPE_FLOAT64: fn(double{}); return true;
    case CD_DTYPE_INT8: fn(int8_t{}); return true;
    case CD_DTYPE_INT16: fn(int16_t{}); return true;
    case CD_DTYPE_INT32: fn(int32_t{}); return true;
    case CD_DTYPE_INT64: fn(int64_t{}); return true;
    case CD_DTYPE_UINT8: fn(uint8_t{}); return true;
    case CD_DTYPE_BOOL: fn(bool{}); return true;
    default: return false;
  }
}

// Calls fn(T{}) with T the storage type of `dtype`; returns false for an
// unknown dtype. Usage: dispatch_dtype(dt, [&](auto tag) { using T = decltype(tag); ... });
template <class F> bool dispatch_dtype(cd_dtype_t dtype, F&& fn) {
  return dispatch_dtype_as<float16_t>(dtype, std::forward<F>(fn));
}

// Runs fn(begin, end) over [0, n) in chunks on the OpenMP threads (as many
// as threads.h allows), or inline when the work is smaller than `grain`
// elements (threads cost ~µs to wake).
template <class F> void parallel_for(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
#ifdef _OPENMP
  if (n > grain * grain_scale()) {
#pragma omp parallel num_threads(kernel_threads())
    {
      const int64_t threads = omp_get_num_threads();
      const int64_t id = omp_get_thread_num();
      const int64_t chunk = (n + threads - 1) / threads;
      const int64_t begin = id * chunk;
      const int64_t end = begin + chunk < n ? begin + chunk : n;
      if (begin < end) fn(begin, end);
    }
    return;
  }
#endif
  (void)grain;
  fn(int64_t{0}, n);
}

// parallel_for whose body may throw: the first exception is rethrown after
// every thread finished (an exception must never leave an OpenMP region).
template <class F> void parallel_guarded(int64_t n, int64_t grain, F&& fn) {
  std::exception_ptr error;
  std::mutex mu;
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    try {
      fn(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  });
  if (error) std::rethrow_exception(error);
}

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_NUMERIC_H_
