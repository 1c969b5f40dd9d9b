// CPU features and the process's instruction-set level (see isa.h).
#include "isa.h"

#include <cctype>

#include "../error.h"

namespace chipdock_cpu {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if CD_HAVE_X86_TARGETS
  __builtin_cpu_init();
  f.sse41 = __builtin_cpu_supports("sse4.1");
  f.avx = __builtin_cpu_supports("avx");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.f16c = __builtin_cpu_supports("f16c");
  f.bmi2 = __builtin_cpu_supports("bmi2");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  f.amx = __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16");
#endif
  return f;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Clears one named feature; false if the name is unknown.
bool hide_one(CpuFeatures& f, const std::string& name) {
  struct Named {
    const char* name;
    bool CpuFeatures::*flag;
  };
  static const Named kNames[] = {
      {"sse4.1", &CpuFeatures::sse41},         {"sse41", &CpuFeatures::sse41},
      {"avx", &CpuFeatures::avx},              {"avx2", &CpuFeatures::avx2},
      {"fma", &CpuFeatures::fma},              {"f16c", &CpuFeatures::f16c},
      {"bmi2", &CpuFeatures::bmi2},            {"avx512f", &CpuFeatures::avx512f},
      {"avx512bw", &CpuFeatures::avx512bw},    {"avx512vl", &CpuFeatures::avx512vl},
      {"avx512dq", &CpuFeatures::avx512dq},    {"avx512_vnni", &CpuFeatures::avx512_vnni},
      {"avx512vnni", &CpuFeatures::avx512_vnni}, {"avx512_bf16", &CpuFeatures::avx512_bf16},
      {"avx512bf16", &CpuFeatures::avx512_bf16}, {"amx", &CpuFeatures::amx},
  };
  if (name == "avx512") {
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512_vnni = f.avx512_bf16 = false;
    f.amx = false;
    return true;
  }
  for (const Named& n : kNames) {
    if (name == n.name) {
      f.*(n.flag) = false;
      return true;
    }
  }
  return false;
}

// A feature implies the ones beneath it (AVX-512 needs AVX2, AVX2 needs AVX
// ...): hiding one hides those built on it.
void close_downwards(CpuFeatures& f) {
  if (!f.sse41) f.avx = false;
  if (!f.avx) f.avx2 = f.fma = f.f16c = false;
  if (!f.avx2) f.avx512f = false;
  if (!f.avx512f) f.avx512bw = f.avx512vl = f.avx512dq = false;
  if (!(f.avx512bw && f.avx512vl && f.avx512dq)) f.avx512_vnni = f.avx512_bf16 = false;
  if (!f.avx512_bf16) f.amx = false;
}

}  // namespace

Isa feature_level(const CpuFeatures& f) {
  if (!(f.avx2 && f.fma && f.f16c && f.bmi2)) return Isa::baseline;
  if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) return Isa::avx2;
  return Isa::avx512;
}

bool hide_features(CpuFeatures& f, const std::string& names, std::string* bad) {
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = names.find(',', start);
    if (comma == std::string::npos) comma = names.size();
    const std::string name = lower(trim(names.substr(start, comma - start)));
    if (!name.empty() && !hide_one(f, name)) {
      if (bad != nullptr) *bad = name;
      return false;
    }
    start = comma + 1;
  }
  close_downwards(f);
  return true;
}

const char* isa_name(Isa level) noexcept {
  switch (level) {
    case Isa::baseline: return "baseline";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    default: return "best";
  }
}

IsaChoice choose_isa(const CpuFeatures& cpu, Isa hardware, Isa cap, const std::string& cap_text) {
  IsaChoice c;
  c.cpu = cpu;
  c.cpu_level = feature_level(cpu);
  c.hardware_level = hardware;
  c.kernel_level = cap < c.cpu_level ? cap : c.cpu_level;
  if (cap != Isa::best && cap > c.cpu_level) {
    // Never run an instruction the CPU lacks: clamp, and say so.
    c.warnings.push_back(format("%s asks for %s, but this CPU offers only %s: kernels and oneDNN run at %s",
                                cap_text.c_str(), isa_name(cap), isa_name(c.cpu_level),
                                isa_name(c.kernel_level)));
  }
  return c;
}

const IsaChoice& isa_choice() {
  static const IsaChoice choice = [] {
    const Config& cfg = config();
    CpuFeatures cpu = detect();
    const Isa hardware = feature_level(cpu);
    if (!cfg.hidden_features.empty()) hide_features(cpu, cfg.hidden_features, nullptr);
    return choose_isa(cpu, hardware, cfg.isa_cap, cfg.isa_cap_text);
  }();
  return choice;
}

}  // namespace chipdock_cpu
