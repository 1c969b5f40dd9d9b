// SLEEF at the avx2 level: its AVX2 build (with FMA; see sleef_map_body.h).
// Compiled with -mavx2 -mfma (CMakeLists.txt); called only where
// kernel_isa() is avx2.
#if defined(__x86_64__)
#include <immintrin.h>
#include <sleef.h>

#define CD_SLEEF_LEVEL avx2
#define CD_SLEEF_VEC __m256
#define CD_SLEEF_LANES 8
#define CD_SLEEF_LOAD _mm256_loadu_ps
#define CD_SLEEF_STORE _mm256_storeu_ps
#define CD_SLEEF(f, u) Sleef_##f##f8_##u##avx2
#include "sleef_map_body.h"
#endif
