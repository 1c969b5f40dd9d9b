// SLEEF at the avx2 level: its AVX build, which uses no FMA, so that it
// gives the bits of the SSE2 build (see sleef_map_body.h). Compiled with
// -mavx (CMakeLists.txt); called only where kernel_isa() is avx2.
#if defined(__x86_64__)
#include <immintrin.h>
#include <sleef.h>

#define CD_SLEEF_LEVEL avx
#define CD_SLEEF_VEC __m256
#define CD_SLEEF_LANES 8
#define CD_SLEEF_LOAD _mm256_loadu_ps
#define CD_SLEEF_STORE _mm256_storeu_ps
#define CD_SLEEF(f, u) Sleef_##f##f8_##u##avx
#include "sleef_map_body.h"
#endif
