// OpenBLAS beside oneDNN (see blas.h).
#include "blas.h"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <mutex>

#include "../config.h"
#include "../core_link.h"
#include "../error.h"
#include "isa.h"

namespace chipdock_cpu {
namespace blas {
namespace {

// The reference CBLAS interface (netlib), which OpenBLAS implements; LP64:
// Debian's libopenblas0 has 32-bit integers.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using SgemmFn = void (*)(int layout, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
using GetParallelFn = int (*)();
using GetCorenameFn = char* (*)();

struct OpenBlas {
  SgemmFn sgemm = nullptr;
  std::string core;     // its kernels, e.g. "Haswell"
  std::string problem;  // non-empty: not usable, and why
};

// OPENBLAS_CORETYPE names OpenBLAS's kernel set; when the kernels are held
// beneath what the CPU offers, hold OpenBLAS there too (it reads the
// variable when it loads, and has no other control).
void cap_openblas(const IsaChoice& isa) {
  if (isa.kernel_level >= isa.hardware_level) return;
  if (isa.kernel_level == Isa::avx2) setenv("OPENBLAS_CORETYPE", "Haswell", 1);
}

OpenBlas open_openblas() {
  OpenBlas lib;
  const IsaChoice& isa = isa_choice();
  if (isa.kernel_level < Isa::avx2) {
    // Its kernels for older CPUs are not faster than oneDNN's, and
    // OPENBLAS_CORETYPE cannot hold it to the x86-64 baseline.
    lib.problem = "the kernels run beneath avx2";
    return lib;
  }
  cap_openblas(isa);
  void* handle = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    lib.problem = format("libopenblas.so.0 did not open (%s; Debian: libopenblas0-openmp)", why ? why : "?");
    return lib;
  }
  lib.sgemm = reinterpret_cast<SgemmFn>(dlsym(handle, "cblas_sgemm"));
  auto parallel = reinterpret_cast<GetParallelFn>(dlsym(handle, "openblas_get_parallel"));
  auto corename = reinterpret_cast<GetCorenameFn>(dlsym(handle, "openblas_get_corename"));
  if (lib.sgemm == nullptr || parallel == nullptr) {
    lib.problem = "libopenblas.so.0 lacks cblas_sgemm or openblas_get_parallel";
    lib.sgemm = nullptr;
    return lib;
  }
  if (parallel() == 1) {
    // The pthreads build keeps its own spinning thread pool beside the
    // kernels' OpenMP one: on a 2-core machine they fight.
    lib.problem = "libopenblas.so.0 is OpenBLAS's pthreads build; chipdock uses the OpenMP build "
                  "(Debian: libopenblas0-openmp)";
    lib.sgemm = nullptr;
    return lib;
  }
  const char* core = corename != nullptr ? corename() : nullptr;
  lib.core = core != nullptr ? core : "?";
  return lib;  // the handle stays open for the process
}

const OpenBlas& openblas() {
  static const OpenBlas lib = open_openblas();
  return lib;
}

std::mutex& call_mutex() {
  static std::mutex m;
  return m;
}

struct Decision {
  Engine engine = Engine::onednn;
  std::string why;
};

Decision decide(const std::function<double()>& rate_onednn, const std::function<double()>& rate_openblas) {
  Decision d;
  const Config::Gemm setting = config().gemm;
  if (setting == Config::Gemm::onednn) {
    d.why = "oneDNN (CHIPDOCK_CPU_GEMM=onednn)";
    return d;
  }
  const OpenBlas& lib = openblas();
  if (!lib.problem.empty()) {
    d.why = "oneDNN (OpenBLAS unused: " + lib.problem + ")";
    if (setting == Config::Gemm::openblas) log_message(CD_LOG_WARNING, "cpu: CHIPDOCK_CPU_GEMM=openblas: " + lib.problem);
    return d;
  }
  if (setting == Config::Gemm::openblas) {
    d.engine = Engine::openblas;
    d.why = "OpenBLAS " + lib.core + " (CHIPDOCK_CPU_GEMM=openblas)";
    return d;
  }
  const double onednn = rate_onednn(), ob = rate_openblas();
  d.engine = ob > 1.15 * onednn ? Engine::openblas : Engine::onednn;
  d.why = format("%s (timed at 512^3: oneDNN %.0f GFLOP/s, OpenBLAS %s %.0f GFLOP/s)",
                 d.engine == Engine::openblas ? "OpenBLAS" : "oneDNN", onednn, lib.core.c_str(), ob);
  return d;
}

std::mutex g_decision_mu;
bool g_decided = false;
Decision g_decision;

}  // namespace

void sgemm(bool a_trans, bool b_trans, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const OpenBlas& lib = openblas();
  if (lib.sgemm == nullptr) fail(CD_STATUS_INTERNAL, "OpenBLAS is not usable: %s", lib.problem.c_str());
  for (int64_t v : {M, N, K, lda, ldb, ldc}) {
    if (v > INT_MAX) fail(CD_STATUS_INTERNAL, "OpenBLAS takes dimensions up to %d, got %lld", INT_MAX,
                          static_cast<long long>(v));
  }
  std::lock_guard<std::mutex> lock(call_mutex());
  lib.sgemm(kRowMajor, a_trans ? kTrans : kNoTrans, b_trans ? kTrans : kNoTrans, static_cast<int>(M),
            static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb),
            beta, C, static_cast<int>(ldc));
}

Engine engine(const std::function<double()>& rate_onednn, const std::function<double()>& rate_openblas) {
  std::lock_guard<std::mutex> lock(g_decision_mu);
  if (!g_decided) {
    g_decision = decide(rate_onednn, rate_openblas);
    g_decided = true;
    log_message(CD_LOG_INFO, "cpu: float32 GEMM at 256^3 and above: " + g_decision.why);
  }
  return g_decision.engine;
}

std::string describe() {
  std::lock_guard<std::mutex> lock(g_decision_mu);
  return g_decided ? g_decision.why : "not decided yet (no large float32 product so far)";
}

}  // namespace blas
}  // namespace chipdock_cpu
