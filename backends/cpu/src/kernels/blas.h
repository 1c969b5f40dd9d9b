// OpenBLAS as a second float32 GEMM engine beside oneDNN.
//
// oneDNN 2.6's float32 GEMM is Intel's; on AMD's Zen cores OpenBLAS's
// kernels are much faster (Zen 3, 2048^3: OpenBLAS 141 GFLOP/s, oneDNN 90).
// Which engine runs a large float32 product is decided once per process by
// timing both on this CPU (choose below), or by CHIPDOCK_CPU_GEMM.
//
// OpenBLAS (Debian: libopenblas0-openmp, the OpenMP build, so it shares the
// kernels' thread pool and settings) is opened with dlopen on first use:
// loading the backend costs nothing for it, a machine without it runs
// oneDNN alone, and OPENBLAS_CORETYPE can hold it to the process's ISA
// level (it reads that when it loads).
#ifndef CHIPDOCK_CPU_KERNELS_BLAS_H_
#define CHIPDOCK_CPU_KERNELS_BLAS_H_

#include <cstdint>
#include <functional>
#include <string>

namespace chipdock_cpu {
namespace blas {

enum class Engine : int32_t { onednn, openblas };

// Smallest per-matrix M*N*K that OpenBLAS may take: beneath it oneDNN's
// JIT small-matrix kernels win on every CPU measured (bench/ops).
constexpr double kMinWork = 256.0 * 256.0 * 256.0;

// C (row-major, ldc) = alpha * op(A) @ op(B) + beta * C in float32 through
// OpenBLAS. `a_trans`: A is stored (K, M) with leading dimension lda; else
// (M, K). Likewise B. Serialized: OpenBLAS's OpenMP build must not run two
// calls at once (it is built without NUM_PARALLEL).
void sgemm(bool a_trans, bool b_trans, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The engine for large float32 products in this process. The first call
// decides: CHIPDOCK_CPU_GEMM=onednn|openblas, else (auto) OpenBLAS only if
// it opens, the kernels run at avx2 or above, and it is at least 15% faster
// than oneDNN here (`rate_onednn` / `rate_openblas`: GFLOP/s of one and the
// same product), so that a near tie never flips between runs.
Engine engine(const std::function<double()>& rate_onednn, const std::function<double()>& rate_openblas);

// One line for the log: the choice and why.
std::string describe();

}  // namespace blas
}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_BLAS_H_
