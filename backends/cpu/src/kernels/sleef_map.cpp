// SLEEF's float32 functions at this process's ISA level (see sleef_map.h).
#include "sleef_map.h"

#include <sleef.h>

#include "isa.h"

namespace chipdock_cpu {
namespace sleef {

#if CD_HAVE_X86_TARGETS

void map(Fn fn, float* x, int64_t n) {
  switch (kernel_isa()) {
    case Isa::baseline: return map_sse2(fn, x, n);
    case Isa::avx2: return map_avx2(fn, x, n);
    default: return map_avx512(fn, x, n);
  }
}

void pow(float* x, const float* y, int64_t n) {
  switch (kernel_isa()) {
    case Isa::baseline: return pow_sse2(x, y, n);
    case Isa::avx2: return pow_avx2(x, y, n);
    default: return pow_avx512(x, y, n);
  }
}

#else  // SLEEF's scalar build (the functions its vector builds compute lane by lane)

namespace {
template <decltype(&Sleef_expf1_u10purec) F> void apply(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = F(x[i]);
}
}  // namespace

void map(Fn fn, float* x, int64_t n) {
  switch (fn) {
    case Fn::exp: return apply<Sleef_expf1_u10purec>(x, n);
    case Fn::log: return apply<Sleef_logf1_u10purec>(x, n);
    case Fn::sin: return apply<Sleef_sinf1_u10purec>(x, n);
    case Fn::cos: return apply<Sleef_cosf1_u10purec>(x, n);
    case Fn::tanh: return apply<Sleef_tanhf1_u35purec>(x, n);
    case Fn::erf: return apply<Sleef_erff1_u10purec>(x, n);
    case Fn::erfc: return apply<Sleef_erfcf1_u15purec>(x, n);
  }
}

void pow(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = Sleef_powf1_u10purec(x[i], y[i]);
}

#endif

}  // namespace sleef
}  // namespace chipdock_cpu
