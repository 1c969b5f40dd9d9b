// The loops of one SLEEF level (included by sleef_map_<level>.cpp, each
// compiled for its instruction set). Those files include nothing of the
// C++ library: an inline function they instantiated would be built with
// that file's instructions and could be the copy the linker keeps for
// baseline code.
//
// CD_SLEEF_LEVEL  suffix of the functions defined (sse2, avx, avx512)
// CD_SLEEF_VEC    vector type; CD_SLEEF_LANES its floats
// CD_SLEEF_LOAD / CD_SLEEF_STORE  unaligned load and store
// CD_SLEEF(f, u)  the SLEEF function f with accuracy suffix u for this level
#include "sleef_map.h"

#define CD_SLEEF_CAT2(a, b) a##_##b
#define CD_SLEEF_CAT(a, b) CD_SLEEF_CAT2(a, b)

namespace chipdock_cpu {
namespace sleef {
namespace {

// (SLEEF declares its functions with a const-qualified return type, hence decltype.)
template <decltype(&CD_SLEEF(exp, u10)) F>
void apply(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += CD_SLEEF_LANES) CD_SLEEF_STORE(x + i, F(CD_SLEEF_LOAD(x + i)));
}

}  // namespace

void CD_SLEEF_CAT(map, CD_SLEEF_LEVEL)(Fn fn, float* x, int64_t n) {
  switch (fn) {
    case Fn::exp: return apply<CD_SLEEF(exp, u10)>(x, n);
    case Fn::log: return apply<CD_SLEEF(log, u10)>(x, n);
    case Fn::sin: return apply<CD_SLEEF(sin, u10)>(x, n);
    case Fn::cos: return apply<CD_SLEEF(cos, u10)>(x, n);
    case Fn::tanh: return apply<CD_SLEEF(tanh, u35)>(x, n);
    case Fn::erf: return apply<CD_SLEEF(erf, u10)>(x, n);
    case Fn::erfc: return apply<CD_SLEEF(erfc, u15)>(x, n);
  }
}

void CD_SLEEF_CAT(pow, CD_SLEEF_LEVEL)(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += CD_SLEEF_LANES) {
    CD_SLEEF_STORE(x + i, CD_SLEEF(pow, u10)(CD_SLEEF_LOAD(x + i), CD_SLEEF_LOAD(y + i)));
  }
}

}  // namespace sleef
}  // namespace chipdock_cpu
