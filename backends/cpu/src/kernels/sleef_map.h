// float32 vector math from SLEEF (Debian: libsleef-dev), applied to buffers.
//
// The elementwise kernels stage a block of a row in float32 buffers,
// prepare the arguments there in loops the compiler vectorizes, and call
// one of these to run a SLEEF function over the whole buffer. Each ISA
// level runs SLEEF's build for it: SSE2 at the x86-64 baseline, AVX2 (with
// FMA) at avx2, AVX-512F at avx512. The two FMA builds give the same bits;
// the baseline's (no FMA) may differ from them in the last bit, within the
// same bounds (test_elementwise.py checks both). SLEEF's builds without FMA
// for AVX and AVX-512 would keep every level equal, but evaluate their
// double-float steps with Dekker splits: measured 1.4-1.9x slower for tanh,
// erf and gelu on AVX-512.
// Other architectures run SLEEF's scalar build.
//
// Error bounds (SLEEF's documentation, checked densely in
// backends/cpu/tests/test_elementwise.py): exp, log, sin, cos, erf and pow
// 1.0 ulp (the u10 functions; sin and cos over the whole float range), erfc
// 1.5 ulp (u15), tanh 3.5 ulp (u35: the opset allows 5, and SLEEF's u10
// tanh costs about 1.6x as much). Subnormal arguments and results, +-inf
// and NaN follow C99 Annex F.
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

// The per-level builds (sleef_map_sse2.cpp, _avx2.cpp, _avx512.cpp; sleef_map.cpp elsewhere).
void map_sse2(Fn fn, float* x, int64_t n);
void map_avx2(Fn fn, float* x, int64_t n);
void map_avx512(Fn fn, float* x, int64_t n);
void pow_sse2(float* x, const float* y, int64_t n);
void pow_avx2(float* x, const float* y, int64_t n);
void pow_avx512(float* x, const float* y, int64_t n);

}  // namespace sleef
}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_SLEEF_MAP_H_
