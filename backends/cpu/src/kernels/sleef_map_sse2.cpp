// SLEEF at the x86-64 baseline: its SSE2 build (see sleef_map_body.h).
#if defined(__x86_64__)
#include <emmintrin.h>
#include <sleef.h>

#define CD_SLEEF_LEVEL sse2
#define CD_SLEEF_VEC __m128
#define CD_SLEEF_LANES 4
#define CD_SLEEF_LOAD _mm_loadu_ps
#define CD_SLEEF_STORE _mm_storeu_ps
#define CD_SLEEF(f, u) Sleef_##f##f4_##u##sse2
#include "sleef_map_body.h"
#endif
