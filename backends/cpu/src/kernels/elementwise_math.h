// Vectorizable float64 math for the float32, float16 and bfloat16 rows of
// the elementwise ops: exp, log, sin/cos, tanh, erf/erfc.
//
// libm's functions are scalar calls, which keep a loop from vectorizing.
// These are branch-free (selects, which -fno-trapping-math lets the
// compiler if-convert), use no int<->double conversion instruction (AVX2
// has none for int64) and evaluate in float64, about 1e-13 relative or
// better: the float32 result is then the correctly rounded one but in rare
// near-ties (within 1 ulp), far inside the opset's bounds. They are not
// float64-accurate: float64 rows keep libm. Every build (baseline, AVX2,
// AVX-512) runs the same IEEE operations, so the bits agree.
//
// Domain: what float32 can hold (|x| <= 3.5e38, subnormals included), plus
// inf and NaN; sin/cos reduce exactly only for |x| < kTrigReduceMax (rows
// send larger arguments to libm, see elementwise_unary.cpp).
#ifndef CHIPDOCK_CPU_KERNELS_ELEMENTWISE_MATH_H_
#define CHIPDOCK_CPU_KERNELS_ELEMENTWISE_MATH_H_

#include <cstdint>
#include <cstring>

#include "numeric.h"

namespace chipdock_cpu {
namespace vmath {

CD_ALWAYS_INLINE uint64_t bits(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}

CD_ALWAYS_INLINE double from_bits(uint64_t u) {
  double x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

CD_ALWAYS_INLINE double fabs(double x) { return from_bits(bits(x) & 0x7fffffffffffffffull); }
CD_ALWAYS_INLINE double copysign(double x, double s) {
  return from_bits((bits(x) & 0x7fffffffffffffffull) | (bits(s) & 0x8000000000000000ull));
}

// x + 2^52 * 1.5 rounds x to an integer (|x| < 2^51) that sits in the low
// mantissa bits; subtracting it back gives the integer as a double.
constexpr double kShifter = 0x1.8p52;

// e^x. Relative error ~2e-16 on [-745, 709]; 0 below, inf above, NaN kept.
CD_ALWAYS_INLINE double exp(double x) {
  constexpr double kLog2e = 1.4426950408889634074;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 32 bits: n * hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  // Clamped so that 2^n below stays a normal double; results past the ends
  // round to 0 or overflow to inf in the float types anyway.
  double c = x < -740.0 ? -740.0 : x;
  c = c > 709.0 ? 709.0 : c;
  const double kd = c * kLog2e + kShifter;
  const double n = kd - kShifter;
  const double r = (c - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln2 / 2
  // e^r: Taylor to r^12 (remainder < 3e-17 for |r| <= 0.347).
  double p = 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // 2^n in two halves (n may be -1068: below the normal range of one factor).
  const uint64_t k = bits(kd) - bits(kShifter);  // n, two's complement
  const uint64_t half = static_cast<uint64_t>(static_cast<int64_t>(k) >> 1);
  const double s1 = from_bits((half + 1023) << 52);
  const double s2 = from_bits((k - half + 1023) << 52);
  double y = p * s1 * s2;
  y = x > 709.8 ? from_bits(0x7ff0000000000000ull) : y;  // overflow
  y = x < -745.2 ? 0.0 : y;
  return x != x ? x : y;
}

// log(x): relative error ~2e-16 for x > 0 normal or subnormal as float32
// (normal as double); -inf at 0, NaN below 0 and for NaN, inf at inf.
CD_ALWAYS_INLINE double log(double x) {
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  const uint64_t u = bits(x);
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)).
  const uint64_t t = u - 0x3fe6a09e667f3bcdull;  // bits of sqrt(1/2)
  const uint64_t e_bits = static_cast<uint64_t>(static_cast<int64_t>(t) >> 52);  // e, signed
  const double m = from_bits(u - (e_bits << 52));
  const double e = from_bits(0x4338000000000000ull + e_bits) - kShifter;  // e as a double, exact
  // log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716.
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double p = 1.0 / 19.0;
  p = p * s2 + 1.0 / 17.0;
  p = p * s2 + 1.0 / 15.0;
  p = p * s2 + 1.0 / 13.0;
  p = p * s2 + 1.0 / 11.0;
  p = p * s2 + 1.0 / 9.0;
  p = p * s2 + 1.0 / 7.0;
  p = p * s2 + 1.0 / 5.0;
  p = p * s2 + 1.0 / 3.0;
  const double log_m = 2.0 * s + 2.0 * s * s2 * p;
  double y = e * kLn2Hi + (log_m + e * kLn2Lo);
  y = x == 0.0 ? -from_bits(0x7ff0000000000000ull) : y;
  y = x < 0.0 ? from_bits(0x7ff8000000000000ull) : y;
  y = x == from_bits(0x7ff0000000000000ull) ? x : y;
  return x != x ? x : y;
}

// sin and cos share the reduction x = n pi/2 + r, |r| <= pi/4 (exact for
// |x| < kTrigReduceMax: n * each part of pi/2 is exact).
constexpr double kTrigReduceMax = 1.0e6;

CD_ALWAYS_INLINE double sin_cos(double x, bool cosine) {
  constexpr double k2OverPi = 6.36619772367581382433e-01;
  constexpr double kPio2_1 = 1.57079632673412561417e+00;   // 33 bits
  constexpr double kPio2_2 = 6.07710050630396597660e-11;   // 33 bits
  constexpr double kPio2_3 = 2.02226624879595063154e-21;
  const double kd = x * k2OverPi + kShifter;
  const double n = kd - kShifter;
  const double r = ((x - n * kPio2_1) - n * kPio2_2) - n * kPio2_3;
  const double r2 = r * r;
  double s = -1.0 / 1307674368000.0;  // sin r, Taylor to r^15
  s = s * r2 + 1.0 / 6227020800.0;
  s = s * r2 - 1.0 / 39916800.0;
  s = s * r2 + 1.0 / 362880.0;
  s = s * r2 - 1.0 / 5040.0;
  s = s * r2 + 1.0 / 120.0;
  s = s * r2 - 1.0 / 6.0;
  s = r + r * r2 * s;
  double c = 1.0 / 20922789888000.0;  // cos r, Taylor to r^16
  c = c * r2 - 1.0 / 87178291200.0;
  c = c * r2 + 1.0 / 479001600.0;
  c = c * r2 - 1.0 / 3628800.0;
  c = c * r2 + 1.0 / 40320.0;
  c = c * r2 - 1.0 / 720.0;
  c = c * r2 + 1.0 / 24.0;
  c = c * r2 - 0.5;
  c = 1.0 + r2 * c;
  // The quadrant: sin x = sin r, cos r, -sin r, -cos r for n = 0, 1, 2, 3 mod 4.
  const uint64_t q = (bits(kd) - bits(kShifter) + (cosine ? 1 : 0)) & 3u;
  double y = (q & 1u) ? c : s;
  y = (q & 2u) ? -y : y;
  // sin(-0) is -0, but r + r * r2 * s above is -0 + +0 = +0: the zero itself instead.
  y = (x == 0.0 && !cosine) ? x : y;
  return x - x != 0.0 ? x - x : y;  // inf and NaN give NaN
}

// tanh(x): relative error ~1e-15.
CD_ALWAYS_INLINE double tanh(double x) {
  const double a = fabs(x);
  const double e = exp(-2.0 * (a > 40.0 ? 40.0 : a));
  double t = (1.0 - e) / (1.0 + e);
  // Near 0 the quotient cancels: the series to x^9 instead.
  const double a2 = a * a;
  double p = 62.0 / 2835.0;
  p = p * a2 - 17.0 / 315.0;
  p = p * a2 + 2.0 / 15.0;
  p = p * a2 - 1.0 / 3.0;
  const double series = a + a * a2 * p;
  t = a < 0.004 ? series : t;
  return x != x ? x : copysign(t, x);
}

// erfc(z) for z >= 0, as exp(-z^2 + P(t)) * t with t = 1 / (1 + z / 2)
// (Numerical Recipes' erfcc): relative error < 1.2e-7 everywhere, i.e. a
// few float32 ulp; 0 past z ~ 27.
CD_ALWAYS_INLINE double erfc_nonneg(double z) {
  const double t = 1.0 / (1.0 + 0.5 * z);
  double p = 0.17087277;
  p = p * t - 0.82215223;
  p = p * t + 1.48851587;
  p = p * t - 1.13520398;
  p = p * t + 0.27886807;
  p = p * t - 0.18628806;
  p = p * t + 0.09678418;
  p = p * t + 0.37409196;
  p = p * t + 1.00002368;
  p = p * t - 1.26551223;
  return t * exp(p - z * z);
}

// erf(x): the Maclaurin series below |x| = 1 (relative error ~1e-15), 1 -
// erfc above (erf >= 0.84 there, so erfcc's error is below 3e-8 relative).
CD_ALWAYS_INLINE double erf(double x) {
  const double a = fabs(x);
  const double a2 = a * a;
  // 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)), n <= 16.
  double p = 1.0 / (20922789888000.0 * 33.0);
  p = p * a2 - 1.0 / (1307674368000.0 * 31.0);
  p = p * a2 + 1.0 / (87178291200.0 * 29.0);
  p = p * a2 - 1.0 / (6227020800.0 * 27.0);
  p = p * a2 + 1.0 / (479001600.0 * 25.0);
  p = p * a2 - 1.0 / (39916800.0 * 23.0);
  p = p * a2 + 1.0 / (3628800.0 * 21.0);
  p = p * a2 - 1.0 / (362880.0 * 19.0);
  p = p * a2 + 1.0 / (40320.0 * 17.0);
  p = p * a2 - 1.0 / (5040.0 * 15.0);
  p = p * a2 + 1.0 / (720.0 * 13.0);
  p = p * a2 - 1.0 / (120.0 * 11.0);
  p = p * a2 + 1.0 / (24.0 * 9.0);
  p = p * a2 - 1.0 / (6.0 * 7.0);
  p = p * a2 + 1.0 / (2.0 * 5.0);
  p = p * a2 - 1.0 / 3.0;
  p = p * a2 + 1.0;
  const double series = 1.12837916709551257390 * a * p;
  const double y = a < 1.0 ? series : 1.0 - erfc_nonneg(a > 30.0 ? 30.0 : a);
  return x != x ? x : copysign(y, x);
}

// 1 / (1 + e^-x) without cancellation on either side.
CD_ALWAYS_INLINE double sigmoid(double x) {
  const double e = exp(-fabs(x));
  const double y = (x >= 0.0 ? 1.0 : e) / (1.0 + e);
  return x != x ? x : y;
}

}  // namespace vmath
}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_ELEMENTWISE_MATH_H_
