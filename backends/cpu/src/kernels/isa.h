// Instruction-set levels, and what the CPU offers.
//
// The kernel files compile for the x86-64 baseline and mark the loops worth
// it with CD_TARGET_AVX2 / CD_TARGET_AVX512 copies (CD_ISA_BUILDS below
// makes the three and the pick). One level is chosen once per process, from
// what the CPU reports (cpuid, minus CHIPDOCK_CPU_HIDE_FEATURES) capped by
// CHIPDOCK_CPU_ISA (config.h); the same choice caps oneDNN (onednn.h), so a
// run capped to avx2 on an AVX-512 machine sees what an AVX2 machine would.
// Other architectures have only the baseline.
#ifndef CHIPDOCK_CPU_KERNELS_ISA_H_
#define CHIPDOCK_CPU_KERNELS_ISA_H_

#include <string>
#include <vector>

#include "../config.h"

namespace chipdock_cpu {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CD_HAVE_X86_TARGETS 1
// AVX2 with FMA and F16C (Haswell and later, Zen); AVX-512 F/BW/VL/DQ
// (Skylake-SP and later, Zen 4). Kernel files build with -ffp-contract=off
// or write no a*b+c, so FMA never changes a result between levels.
#define CD_TARGET_AVX2 __attribute__((target("avx2,fma,f16c,bmi,bmi2,popcnt")))
#define CD_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,popcnt")))
#else
#define CD_HAVE_X86_TARGETS 0
#define CD_TARGET_AVX2
#define CD_TARGET_AVX512
#endif

// What the CPU offers, as far as the kernels and oneDNN's levels care.
struct CpuFeatures {
  bool sse41 = false, avx = false, avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, amx = false;  // amx: AMX-TILE and AMX-BF16
};

// The level the kernels may use with these features: avx2 needs AVX2, FMA,
// F16C and BMI2; avx512 needs that and AVX-512 F/BW/VL/DQ.
Isa feature_level(const CpuFeatures& f);

// Removes the features named in `names` (comma-separated, case-insensitive:
// sse4.1, avx, avx2, fma, f16c, bmi2, avx512f, avx512bw, avx512vl,
// avx512dq, avx512_vnni, avx512_bf16, amx; "avx512" hides all AVX-512).
// Returns false, with the unknown name in *bad, if a name is not one of them.
bool hide_features(CpuFeatures& f, const std::string& names, std::string* bad);

// The ISA levels this process runs at, and why.
struct IsaChoice {
  CpuFeatures cpu;            // what cpuid reports, minus the hidden features
  Isa cpu_level = Isa::baseline;
  Isa hardware_level = Isa::baseline;  // what cpuid reports, nothing hidden
  Isa kernel_level = Isa::baseline;  // min(cpu_level, CHIPDOCK_CPU_ISA)
  std::vector<std::string> warnings;  // e.g. a cap above what the CPU has
};

// Pure: the choice for `cpu` (with `hardware` the level before any feature
// was hidden) under the cap `cap` (Isa::best: none), with `cap_text` the
// setting's text for the messages.
IsaChoice choose_isa(const CpuFeatures& cpu, Isa hardware, Isa cap, const std::string& cap_text);

// The process-wide choice (cpuid and the environment, read once).
const IsaChoice& isa_choice();

// "baseline", "avx2", "avx512".
const char* isa_name(Isa level) noexcept;

// The level kernels run at in this process.
inline Isa kernel_isa() noexcept {
  static const Isa level = isa_choice().kernel_level;
  return level;
}

// Defines NAME(PARAMS) running NAME##_impl, an inline (template or
// CD_ALWAYS_INLINE) function, built for each level and picked by
// kernel_isa() on every call (a predictable branch). Use it in place of
// target_clones, whose ifunc resolver reads cpuid and ignores the cap.
#define CD_ISA_BUILDS(RET, NAME, PARAMS, ARGS)                        \
  CD_TARGET_AVX512 RET NAME##_avx512 PARAMS { return NAME##_impl ARGS; } \
  CD_TARGET_AVX2 RET NAME##_avx2 PARAMS { return NAME##_impl ARGS; }     \
  RET NAME##_base PARAMS { return NAME##_impl ARGS; }                    \
  RET NAME PARAMS {                                                      \
    switch (::chipdock_cpu::kernel_isa()) {                              \
      case ::chipdock_cpu::Isa::baseline: return NAME##_base ARGS;       \
      case ::chipdock_cpu::Isa::avx2: return NAME##_avx2 ARGS;           \
      default: return NAME##_avx512 ARGS;                                \
    }                                                                    \
  }

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_ISA_H_
