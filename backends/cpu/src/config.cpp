// Configuration from the environment (see config.h).
#include "config.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "error.h"
#include "kernels/isa.h"

namespace chipdock_cpu {
namespace {

// Physical RAM in bytes; 1 GiB if the system will not say.
uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{1} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Returns false if `text` is not a decimal integer in [lo, hi].
bool parse_int(const std::string& text, long lo, long hi, long* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

void read_devices(Config& c) {
  const char* env = std::getenv("CHIPDOCK_CPU_DEVICES");
  if (env == nullptr || *env == '\0') return;
  long n = 0;
  if (!parse_int(env, 0, kMaxDevices, &n)) {
    c.problem = format("CHIPDOCK_CPU_DEVICES='%s' is not an integer in [0, %d]", env,
                       kMaxDevices);
    return;
  }
  c.device_count = static_cast<int32_t>(n);
}

void read_memory_limit(Config& c) {
  c.memory_limit = physical_memory();
  const char* env = std::getenv("CHIPDOCK_CPU_MEMORY_LIMIT");
  if (env == nullptr || *env == '\0') return;
  uint64_t bytes = 0;
  if (!parse_byte_size(env, &bytes) || bytes == 0) {
    c.problem = format("CHIPDOCK_CPU_MEMORY_LIMIT='%s' is not a positive byte size "
                       "(e.g. 1048576, 512K, 64M, 2G)", env);
    return;
  }
  c.memory_limit = bytes;
  c.memory_limit_source = "CHIPDOCK_CPU_MEMORY_LIMIT";
}

void read_strict(Config& c) {
  const char* env = std::getenv("CHIPDOCK_CPU_STRICT");
  if (env == nullptr) return;
  const std::string v = lower(env);
  if (v == "1" || v == "true" || v == "yes" || v == "on") {
    c.strict = true;
  } else if (!(v.empty() || v == "0" || v == "false" || v == "no" || v == "off")) {
    c.problem = format("CHIPDOCK_CPU_STRICT='%s' is not one of 0/1/true/false/yes/no/on/off",
                       env);
  }
}

void read_isa(Config& c) {
  const char* env = std::getenv("CHIPDOCK_CPU_ISA");
  if (env == nullptr) return;
  const std::string v = lower(env);
  c.isa_cap_text = std::string("CHIPDOCK_CPU_ISA=") + env;
  if (v == "baseline") {
    c.isa_cap = Isa::baseline;
  } else if (v == "avx2") {
    c.isa_cap = Isa::avx2;
  } else if (v == "avx512") {
    c.isa_cap = Isa::avx512;
  } else if (!(v.empty() || v == "auto")) {
    c.problem = format("CHIPDOCK_CPU_ISA='%s' is not one of baseline/avx2/avx512/auto", env);
  }
}

void read_hidden_features(Config& c) {
  const char* env = std::getenv("CHIPDOCK_CPU_HIDE_FEATURES");
  if (env == nullptr || *env == '\0') return;
  CpuFeatures probe;
  std::string bad;
  if (!hide_features(probe, env, &bad)) {
    c.problem = format("CHIPDOCK_CPU_HIDE_FEATURES='%s' names an unknown feature '%s' (known: sse4.1, "
                       "avx, avx2, fma, f16c, bmi2, avx512, avx512f, avx512bw, avx512vl, avx512dq, "
                       "avx512_vnni, avx512_bf16, amx)", env, bad.c_str());
    return;
  }
  c.hidden_features = env;
}

void read_bf16(Config& c) {
  const char* env = std::getenv("CHIPDOCK_CPU_BF16");
  if (env == nullptr) return;
  const std::string v = lower(env);
  if (v == "float32") {
    c.bf16 = Config::Bf16::float32;
  } else if (v == "native") {
    c.bf16 = Config::Bf16::native;
  } else if (!(v.empty() || v == "auto")) {
    c.problem = format("CHIPDOCK_CPU_BF16='%s' is not one of auto/float32/native", env);
  }
}

void read_gemm(Config& c) {
  const char* env = std::getenv("CHIPDOCK_CPU_GEMM");
  if (env == nullptr) return;
  const std::string v = lower(env);
  if (v == "onednn") {
    c.gemm = Config::Gemm::onednn;
  } else if (v == "openblas") {
    c.gemm = Config::Gemm::openblas;
  } else if (!(v.empty() || v == "auto")) {
    c.problem = format("CHIPDOCK_CPU_GEMM='%s' is not one of auto/onednn/openblas", env);
  }
}

void read_packed_cache(Config& c) {
  const char* env = std::getenv("CHIPDOCK_CPU_PACKED_CACHE");
  if (env == nullptr || *env == '\0') return;
  if (!parse_byte_size(env, &c.packed_cache_bytes)) {
    c.problem = format("CHIPDOCK_CPU_PACKED_CACHE='%s' is not a byte size (e.g. 0, 64M, 2G)", env);
  }
}

Config load() {
  Config c;
  read_devices(c);
  read_memory_limit(c);
  read_strict(c);
  read_isa(c);
  read_hidden_features(c);
  read_bf16(c);
  read_gemm(c);
  read_packed_cache(c);
  if (!c.problem.empty()) c.device_count = 0;
  return c;
}

}  // namespace

bool parse_byte_size(const std::string& text, uint64_t* bytes) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return false;
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return false;
  std::string suffix = lower(text.substr(i));
  if (suffix == "b" || suffix.empty()) {
    *bytes = value;
    return true;
  }
  if (suffix.size() == 3 && suffix.compare(1, 2, "ib") == 0) suffix.resize(1);
  if (suffix.size() == 2 && suffix[1] == 'b') suffix.resize(1);
  const std::string units = "kmgt";
  const size_t unit = suffix.size() == 1 ? units.find(suffix[0]) : std::string::npos;
  if (unit == std::string::npos) return false;
  const unsigned shift = 10u * static_cast<unsigned>(unit + 1);
  if (value > (UINT64_MAX >> shift)) return false;
  *bytes = value << shift;
  return true;
}

const Config& config() {
  static const Config c = load();
  return c;
}

}  // namespace chipdock_cpu
