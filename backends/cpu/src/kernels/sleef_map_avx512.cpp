// SLEEF at the avx512 level: its AVX-512F build (with FMA, as the avx2
// level's: the two give the same bits; see sleef_map_body.h). Compiled with
// -mavx512f (CMakeLists.txt); called only where kernel_isa() is avx512.
#if defined(__x86_64__)
#include <immintrin.h>
#include <sleef.h>

#define CD_SLEEF_LEVEL avx512
#define CD_SLEEF_VEC __m512
#define CD_SLEEF_LANES 16
#define CD_SLEEF_LOAD _mm512_loadu_ps
#define CD_SLEEF_STORE _mm512_storeu_ps
#define CD_SLEEF(f, u) Sleef_##f##f16_##u##avx512f
#include "sleef_map_body.h"
#endif
