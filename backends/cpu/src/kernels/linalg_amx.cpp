// bfloat16 GEMM on AMX tiles for large, plain, 32-aligned problems.
//
// oneDNN 2.6's AMX matmul reaches about 0.75x of PyTorch 2.13's (oneDNN 3.x)
// on this machine; this kernel covers the common large case (row-major a
// and b, M, N, K multiples of 32) and leaves everything else to oneDNN.
// b is packed once per call into VNNI panels (pairs of k interleaved, 16
// columns per panel); a is read in place. Each thread computes 32x32 blocks
// of C in four fp32 accumulator tiles (TDPBF16PS: bf16 pairs, fp32
// accumulation, as oneDNN), and rounds the result to bfloat16 once
// (round-to-nearest-even; NaN stays NaN).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "linalg_common.h"
#include "numeric.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace chipdock_cpu {
namespace linalg {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

bool detect_amx() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = (d >> 24) & 1, bf16 = (d >> 22) & 1;
  const bool avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1;
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  if (!__get_cpuid(1, &a1, &b1, &c1, &d1)) return false;
  const bool osxsave = (c1 >> 27) & 1;
  if (!(tile && bf16 && avx512f && avx512bw && osxsave)) return false;
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const uint64_t xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  const uint64_t need = (1ull << 1) | (1ull << 2) | (7ull << 5) | (3ull << 17);  // SSE, AVX, AVX-512, tiles
  if ((xcr0 & need) != need) return false;
  // Linux gives a process the tile data state only on request.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

struct Problem {
  int64_t M, N, K;
  const uint16_t* A;
  int64_t lda;
  const uint16_t* B;
  int64_t ldb;
  uint16_t* C;
  int64_t ldc;
  uint16_t* packed;  // N/16 panels of K/2 x 16 x 2
  uint16_t* a_blocks;  // A as 32-row blocks, tile by tile: [M/32][K/32][32][32]
  float alpha, beta;
  bool sum;
};

// Panel p: for each k pair, 16 columns x (k even, k odd).
__attribute__((target("avx512f,avx512bw")))
void pack_panel(const Problem& pr, int64_t p) {
  // out[2c] = row0[c], out[2c + 1] = row1[c] (indices >= 32 pick the second operand).
  const __m512i idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
                                       39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  uint16_t* dst = pr.packed + p * 16 * pr.K;
  const uint16_t* src = pr.B + p * 16;
  for (int64_t kp = 0; kp < pr.K / 2; ++kp) {
    const __m512i r0 = _mm512_maskz_loadu_epi16(0xffff, src + (2 * kp) * pr.ldb);
    const __m512i r1 = _mm512_maskz_loadu_epi16(0xffff, src + (2 * kp + 1) * pr.ldb);
    const __m512i out = _mm512_permutex2var_epi16(r0, idx, r1);
    _mm512_storeu_si512(dst + kp * 32, out);
  }
}

// 32 fp32 values -> bfloat16 (alpha, beta * old when `sum`), RNE, NaN kept.
__attribute__((target("avx512f,avx512bw")))
void store_row(const float* acc, uint16_t* out, float alpha, float beta, bool sum) {
  for (int c = 0; c < 32; ++c) {
    float v = alpha * acc[c];
    if (sum) {
      const uint32_t ob = static_cast<uint32_t>(out[c]) << 16;
      float o;
      std::memcpy(&o, &ob, sizeof(o));
      v += beta * o;
    }
    uint32_t u;
    std::memcpy(&u, &v, sizeof(u));
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = (u >> 16) | 0x40u;
    out[c] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

// Rows [32i, 32i + 32) of A as consecutive 16x32 tiles: [k step][half][row][32].
__attribute__((target("avx512f,avx512bw")))
void pack_a_block(const Problem& pr, int64_t i, uint16_t* dst) {
  const uint16_t* a = pr.A + (i * 32) * pr.lda;
  for (int64_t ks = 0; ks < pr.K / 32; ++ks) {
    for (int64_t r = 0; r < 32; ++r) {
      _mm512_storeu_si512(dst + ks * 1024 + r * 32, _mm512_loadu_si512(a + r * pr.lda + ks * 32));
    }
  }
}

// One thread's share: row blocks [i0, i1) x column blocks [j0, j1) of 32.
__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw")))
void compute(const Problem& pr, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  TileConfig cfg{};
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  __asm__ volatile("" : : "r"(&cfg) : "memory");  // GCC 12 may drop stores only ldtilecfg reads
  _tile_loadconfig(&cfg);
  alignas(64) float acc[32 * 32];
  const int64_t panel = 16 * pr.K;
  constexpr int64_t kChunk = 16;  // column blocks per pass: b's share stays in L2
  for (int64_t jc = j0; jc < j1; jc += kChunk) {
    const int64_t jc_end = jc + kChunk < j1 ? jc + kChunk : j1;
    for (int64_t i = i0; i < i1; ++i) {
      const uint16_t* ablk = pr.a_blocks + i * 32 * pr.K;
      for (int64_t j = jc; j < jc_end; ++j) {
        const uint16_t* b0 = pr.packed + (2 * j) * panel;
        const uint16_t* b1 = b0 + panel;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t k = 0; k < pr.K; k += 32) {
          // The next step's b tiles (read once per block) into L1; tile
          // registers are not renamed, so loads are interleaved with the
          // products that free them.
          if (k + 32 < pr.K) {
            const char* n0 = reinterpret_cast<const char*>(b0 + (k + 32) * 16);
            const char* n1 = reinterpret_cast<const char*>(b1 + (k + 32) * 16);
            for (int l = 0; l < 16; ++l) {
              _mm_prefetch(n0 + l * 64, _MM_HINT_T0);
              _mm_prefetch(n1 + l * 64, _MM_HINT_T0);
            }
          }
          _tile_loadd(4, ablk + k * 32, 64);
          _tile_loadd(6, b0 + k * 16, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_loadd(7, b1 + k * 16, 64);
          _tile_dpbf16ps(1, 4, 7);
          _tile_loadd(5, ablk + k * 32 + 512, 64);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, acc, 128);
        _tile_stored(1, acc + 16, 128);
        _tile_stored(2, acc + 16 * 32, 128);
        _tile_stored(3, acc + 16 * 32 + 16, 128);
        uint16_t* c = pr.C + (i * 32) * pr.ldc + j * 32;
        for (int r = 0; r < 32; ++r) store_row(acc + r * 32, c + r * pr.ldc, pr.alpha, pr.beta, pr.sum);
      }
    }
  }
  _tile_release();
}

}  // namespace

bool amx_bf16_usable() {
  static const bool ok = detect_amx();
  return ok;
}

bool amx_bf16_gemm(int64_t M, int64_t N, int64_t K, const void* A, int64_t lda, const void* B,
                   int64_t ldb, void* C, int64_t ldc, float alpha, bool sum, float beta) {
  if (M <= 0 || N <= 0 || K <= 0 || M % 32 != 0 || N % 32 != 0 || K % 32 != 0) return false;
  if (lda < K || ldb < N || ldc < N || !amx_bf16_usable()) return false;
  const int64_t mb = M / 32, nb = N / 32;
  const int threads = static_cast<int>(std::min<int64_t>(max_threads(), std::max(mb, nb)));
  // Both operands are packed once, cooperatively, then each thread computes
  // a share of the 32x32 blocks of C (columns when there are enough).
  Buffer packed(static_cast<size_t>(N) * static_cast<size_t>(K) * sizeof(uint16_t));
  Buffer ablocks(static_cast<size_t>(M) * static_cast<size_t>(K) * sizeof(uint16_t));
  const Problem pr{M, N, K, static_cast<const uint16_t*>(A), lda, static_cast<const uint16_t*>(B), ldb,
                   static_cast<uint16_t*>(C), ldc, packed.as<uint16_t>(), ablocks.as<uint16_t>(),
                   alpha, beta, sum};
#pragma omp parallel num_threads(threads)
  {
#ifdef _OPENMP
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    const int64_t t = 0, nt = 1;
#endif
    for (int64_t i = t; i < mb; i += nt) pack_a_block(pr, i, pr.a_blocks + i * 32 * K);
    for (int64_t p = t; p < 2 * nb; p += nt) pack_panel(pr, p);
#pragma omp barrier
    if (nb >= nt) {
      compute(pr, 0, mb, t * nb / nt, (t + 1) * nb / nt);
    } else {
      compute(pr, t * mb / nt, (t + 1) * mb / nt, 0, nb);
    }
  }
  return true;
}

}  // namespace linalg
}  // namespace chipdock_cpu
