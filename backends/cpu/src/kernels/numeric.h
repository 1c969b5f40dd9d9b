// Element types and the small numeric toolkit every CPU kernel shares:
// storage types for the ten ABI dtypes, float16/bfloat16 conversion (those
// are computed in float32 and rounded once, round-to-nearest-even), a dtype
// switch, and a parallel loop over OpenMP threads.
#ifndef CHIPDOCK_CPU_KERNELS_NUMERIC_H_
#define CHIPDOCK_CPU_KERNELS_NUMERIC_H_

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "chipdock/cd_base.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace chipdock_cpu {

// IEEE binary16, as GCC and Clang implement it on x86-64 and aarch64.
using float16_t = _Float16;

// bfloat16: the upper half of a float32.
struct bfloat16_t {
  uint16_t bits;
};

inline float bf16_to_float(bfloat16_t v) {
  uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline bfloat16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((u >> 16) | 0x40u)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return {static_cast<uint16_t>(u >> 16)};
}

// The type arithmetic happens in: float for the 16-bit floats, else itself.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<float16_t> { using type = float; };
template <> struct compute_type<bfloat16_t> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

// Loads and stores through the compute type (the only rounding is the store).
template <class T> inline compute_t<T> load(const T& v) { return static_cast<compute_t<T>>(v); }
template <> inline float load<bfloat16_t>(const bfloat16_t& v) { return bf16_to_float(v); }
template <class T, class C> inline T store(C v) { return static_cast<T>(v); }
template <> inline bfloat16_t store<bfloat16_t, float>(float v) { return float_to_bf16(v); }
template <> inline bfloat16_t store<bfloat16_t, double>(double v) { return float_to_bf16(static_cast<float>(v)); }

template <class T> constexpr bool is_floating_v =
    std::is_floating_point_v<T> || std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

// Calls fn(T{}) with T the storage type of `dtype`; returns false for an
// unknown dtype. Usage: dispatch_dtype(dt, [&](auto tag) { using T = decltype(tag); ... });
template <class F> bool dispatch_dtype(cd_dtype_t dtype, F&& fn) {
  switch (dtype) {
    case CD_DTYPE_FLOAT32: fn(float{}); return true;
    case CD_DTYPE_FLOAT16: fn(float16_t{}); return true;
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

// Runs fn(begin, end) over [0, n) in chunks on the OpenMP threads, or inline
// when the work is smaller than `grain` elements (threads cost ~µs to wake).
template <class F> void parallel_for(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
#ifdef _OPENMP
  if (n > grain) {
#pragma omp parallel
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

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_NUMERIC_H_
