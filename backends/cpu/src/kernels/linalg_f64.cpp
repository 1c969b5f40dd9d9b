// float64 GEMM (oneDNN has no f64 matmul): cache-blocked, packed panels and
// a 4x16 register-tile micro-kernel the compiler vectorizes (cloned for
// AVX-512 and AVX2, with a plain x86-64 fallback).
#include <algorithm>
#include <cstring>

#include "linalg_common.h"
#include "isa.h"
#include "numeric.h"

namespace chipdock_cpu {
namespace linalg {
namespace {

constexpr int64_t MR = 4, NR = 16;         // register tile
constexpr int64_t MC = 128, KC = 256, NC = 512;  // cache blocks (A: 256 KiB, B: 1 MiB)

// Packs A[m0:m0+mc, k0:k0+kc] into MR-row strips, k-major inside a strip:
// dst[strip][k][r]; rows past mc are zero.
void pack_a(const double* A, int64_t rs, int64_t cs, int64_t mc, int64_t kc, double* dst) {
  for (int64_t i = 0; i < mc; i += MR) {
    const int64_t mr = std::min(MR, mc - i);
    for (int64_t k = 0; k < kc; ++k) {
      for (int64_t r = 0; r < MR; ++r) {
        dst[k * MR + r] = r < mr ? A[(i + r) * rs + k * cs] : 0.0;
      }
    }
    dst += kc * MR;
  }
}

// Packs B[k0:k0+kc, n0:n0+nc] into NR-column strips: dst[strip][k][c].
void pack_b(const double* B, int64_t rs, int64_t cs, int64_t kc, int64_t nc, double* dst) {
  for (int64_t j = 0; j < nc; j += NR) {
    const int64_t nr = std::min(NR, nc - j);
    if (nr == NR && cs == 1) {
      for (int64_t k = 0; k < kc; ++k) std::memcpy(dst + k * NR, B + k * rs + j, NR * sizeof(double));
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t c = 0; c < NR; ++c) dst[k * NR + c] = c < nr ? B[k * rs + (j + c) * cs] : 0.0;
      }
    }
    dst += kc * NR;
  }
}

// C[0:mr, 0:nr] += alpha * a_strip @ b_strip over kc.
CD_ALWAYS_INLINE void micro_kernel_impl(int64_t kc, const double* __restrict a, const double* __restrict b,
                  double* __restrict c, int64_t ldc, int64_t mr, int64_t nr, double alpha) {
  double acc[MR][NR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const double* bk = b + k * NR;
    const double* ak = a + k * MR;
    for (int64_t r = 0; r < MR; ++r) {
      const double av = ak[r];
#pragma omp simd
      for (int64_t j = 0; j < NR; ++j) acc[r][j] += av * bk[j];
    }
  }
  if (mr == MR && nr == NR) {
    for (int64_t r = 0; r < MR; ++r) {
#pragma omp simd
      for (int64_t j = 0; j < NR; ++j) c[r * ldc + j] += alpha * acc[r][j];
    }
    return;
  }
  for (int64_t r = 0; r < mr; ++r) {
    for (int64_t j = 0; j < nr; ++j) c[r * ldc + j] += alpha * acc[r][j];
  }
}
CD_ISA_BUILDS(void, micro_kernel,
              (int64_t kc, const double* __restrict a, const double* __restrict b, double* __restrict c, int64_t ldc,
               int64_t mr, int64_t nr, double alpha),
              (kc, a, b, c, ldc, mr, nr, alpha))

// One (mc x nc) tile of C over all of K.
void tile(int64_t mc, int64_t nc, int64_t K, double alpha, const double* A, int64_t a_rs,
          int64_t a_cs, const double* B, int64_t b_rs, int64_t b_cs, double* C, int64_t ldc,
          double* pa, double* pb) {
  for (int64_t k0 = 0; k0 < K; k0 += KC) {
    const int64_t kc = std::min(KC, K - k0);
    pack_a(A + k0 * a_cs, a_rs, a_cs, mc, kc, pa);
    pack_b(B + k0 * b_rs, b_rs, b_cs, kc, nc, pb);
    for (int64_t j = 0; j < nc; j += NR) {
      const double* bs = pb + (j / NR) * kc * NR;
      for (int64_t i = 0; i < mc; i += MR) {
        micro_kernel(kc, pa + (i / MR) * kc * MR, bs, C + i * ldc + j, ldc, std::min(MR, mc - i),
                     std::min(NR, nc - j), alpha);
      }
    }
  }
}

}  // namespace

void gemm_f64(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t a_rs,
              int64_t a_cs, const double* B, int64_t b_rs, int64_t b_cs, double beta, double* C,
              int64_t ldc, bool parallel) {
  if (M <= 0 || N <= 0) return;
  // C = beta * C first (beta == 0 overwrites, so NaN there does not survive).
  for (int64_t i = 0; i < M; ++i) {
    double* row = C + i * ldc;
    if (beta == 0.0) {
      std::fill(row, row + N, 0.0);
    } else if (beta != 1.0) {
      for (int64_t j = 0; j < N; ++j) row[j] *= beta;
    }
  }
  if (K <= 0) return;
  const int64_t mt = (M + MC - 1) / MC, nt = (N + NC - 1) / NC;
  const int64_t tiles = mt * nt;
  auto run = [&](int64_t begin, int64_t end) {
    Buffer pa(sizeof(double) * MC * KC), pb(sizeof(double) * KC * (NC + NR));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t ti = t / nt, tj = t % nt;
      const int64_t m0 = ti * MC, n0 = tj * NC;
      tile(std::min(MC, M - m0), std::min(NC, N - n0), K, alpha, A + m0 * a_rs, a_rs, a_cs,
           B + n0 * b_cs, b_rs, b_cs, C + m0 * ldc + n0, ldc, pa.as<double>(), pb.as<double>());
    }
  };
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  if (parallel && tiles > 1 && flops > 1e6) {
    parallel_guarded(tiles, 1, run);
  } else {
    run(0, tiles);
  }
}

}  // namespace linalg
}  // namespace chipdock_cpu
