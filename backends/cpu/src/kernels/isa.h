// Instruction-set levels for kernels that carry several builds of their hot
// loops: the kernel files compile for the x86-64 baseline, and mark the
// loops worth it with CD_TARGET_AVX2 / CD_TARGET_AVX512 copies that are
// chosen once per process from what the CPU supports, capped by
// CHIPDOCK_CPU_ISA (see config.h). Other architectures have only the
// baseline.
#ifndef CHIPDOCK_CPU_KERNELS_ISA_H_
#define CHIPDOCK_CPU_KERNELS_ISA_H_

#include "../config.h"

namespace chipdock_cpu {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CD_HAVE_X86_TARGETS 1
// AVX2 with FMA and F16C (Haswell and later, Zen); AVX-512 F/BW/VL/DQ
// (Skylake-SP and later, Zen 4). Kernel files build with -ffp-contract=off,
// so FMA never changes a result between levels.
#define CD_TARGET_AVX2 __attribute__((target("avx2,fma,f16c,bmi,bmi2,popcnt")))
#define CD_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,popcnt")))
#else
#define CD_HAVE_X86_TARGETS 0
#define CD_TARGET_AVX2
#define CD_TARGET_AVX512
#endif

// The level kernels run at in this process (decided on first use).
inline Isa kernel_isa() noexcept {
  static const Isa level = [] {
    Isa cpu = Isa::baseline;
#if CD_HAVE_X86_TARGETS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2")) {
      cpu = Isa::avx2;
      if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
        cpu = Isa::avx512;
      }
    }
#endif
    const Isa cap = config().isa_cap;
    return cap < cpu ? cap : cpu;
  }();
  return level;
}

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_ISA_H_
