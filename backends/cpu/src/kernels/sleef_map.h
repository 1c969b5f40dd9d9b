// float32 vector math from SLEEF (Debian: libsleef-dev), applied to buffers.
//
// The elementwise kernels stage a block of a row in float32 buffers,
// prepare the arguments there in loops the compiler vectorizes, and call
// one of these to run a SLEEF function over the whole buffer. Each ISA
// level runs SLEEF's build for it: SSE2 at the x86-64 baseline, AVX at the
// avx2 level, AVX-512F at avx512 — the variants without FMA (sse2, avx,
// avx512fnofma), which evaluate the same operations in the same order, so
// every level gives the same bits (isa.h; test_elementwise.py checks).
// Other architectures run SLEEF's scalar build.
//
// Error bounds (SLEEF's documentation, checked densely in
// backends/cpu/tests/test_sleef_math.py): exp, log, sin, cos, tanh, erf and
// pow 1.0 ulp (the u10 functions; sin and cos over the whole float range),
// erfc 1.5 ulp (u15). Subnormal arguments and results, +-inf and NaN follow
// C99 Annex F.
#ifndef CHIPDOCK_CPU_KERNELS_SLEEF_MAP_H_
#define CHIPDOCK_CPU_KERNELS_SLEEF_MAP_H_

#include <cstdint>

namespace chipdock_cpu {
namespace sleef {

// Buffers handed to map()/pow() hold a multiple of this many floats (the
// widest vector): callers pad the tail (with any finite value).
constexpr int64_t kPad = 16;

enum class Fn : int32_t { exp, log, sin, cos, tanh, erf, erfc };

// x[i] = fn(x[i]) for i < n (n a multiple of kPad), at this process's ISA level.
void map(Fn fn, float* x, int64_t n);

// x[i] = pow(x[i], y[i]) for i < n (n a multiple of kPad).
void pow(float* x, const float* y, int64_t n);

// The per-level builds (sleef_map_sse2.cpp, _avx.cpp, _avx512.cpp; sleef_map.cpp elsewhere).
void map_sse2(Fn fn, float* x, int64_t n);
void map_avx(Fn fn, float* x, int64_t n);
void map_avx512(Fn fn, float* x, int64_t n);
void pow_sse2(float* x, const float* y, int64_t n);
void pow_avx(float* x, const float* y, int64_t n);
void pow_avx512(float* x, const float* y, int64_t n);

}  // namespace sleef
}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_SLEEF_MAP_H_
