// Configuration read from the environment, once per process.
//
//   CHIPDOCK_CPU_DEVICES       number of devices, 0..64 (default 1); all of
//                              them are backed by host memory
//   CHIPDOCK_CPU_MEMORY_LIMIT  bytes per device, optional K/M/G/T suffix
//                              (powers of 1024); default: physical RAM
//   CHIPDOCK_CPU_STRICT        1/true/yes/on: device pointers are not host
//                              addresses (see memory.h); default off
//   CHIPDOCK_CPU_ISA           the highest instruction set kernels and
//                              oneDNN may use: baseline, avx2, avx512 or auto
//                              (default: what the CPU supports). A level above
//                              the CPU's is clamped to it, with a warning in
//                              the core's log (kernels/isa.h)
//   CHIPDOCK_CPU_HIDE_FEATURES for tests: act as if the CPU lacked these
//                              features (comma-separated, e.g. avx512f,f16c;
//                              kernels/isa.h lists the names). It only ever
//                              removes a feature, never adds one
//   CHIPDOCK_CPU_BF16          how bfloat16 matmul, gemm, convolutions and
//                              average pools run: auto (default: oneDNN's
//                              bfloat16 primitives where it has fast ones,
//                              else through float32), float32 (always
//                              through float32) or native (always oneDNN's
//                              bfloat16; where it has none, a matmul or gemm
//                              call fails and says why, a convolution runs
//                              the direct loops)
//   CHIPDOCK_CPU_GEMM          the engine of large float32 products: auto
//                              (default: the faster of oneDNN and OpenBLAS on
//                              this CPU, timed once; kernels/blas.h), onednn
//                              or openblas
//   CHIPDOCK_CPU_PACKED_CACHE  bytes of weights kept reordered into oneDNN's
//                              blocked layouts across calls, K/M/G/T suffix;
//                              0 turns the cache off (default 512M; see
//                              kernels/packed_cache.h)
//
// An invalid value does not crash anything: the backend then has zero
// devices and device_get_count reports why (CD_STATUS_UNAVAILABLE).
#ifndef CHIPDOCK_CPU_CONFIG_H_
#define CHIPDOCK_CPU_CONFIG_H_

#include <cstdint>
#include <string>

namespace chipdock_cpu {

constexpr int32_t kMaxDevices = 64;

// Instruction-set levels of kernel loops, ordered (see kernels/isa.h).
enum class Isa : int32_t { baseline = 0, avx2 = 1, avx512 = 2, best = 3 };

struct Config {
  int32_t device_count = 1;
  uint64_t memory_limit = 0;  // bytes, per device
  const char* memory_limit_source = "physical RAM";  // for messages
  bool strict = false;
  Isa isa_cap = Isa::best;    // CHIPDOCK_CPU_ISA; `best` caps nothing
  std::string isa_cap_text;   // its text, for messages
  std::string hidden_features;  // CHIPDOCK_CPU_HIDE_FEATURES
  enum class Bf16 : int32_t { automatic, float32, native } bf16 = Bf16::automatic;  // CHIPDOCK_CPU_BF16
  enum class Gemm : int32_t { automatic, onednn, openblas } gemm = Gemm::automatic;  // CHIPDOCK_CPU_GEMM
  uint64_t packed_cache_bytes = uint64_t{512} << 20;  // CHIPDOCK_CPU_PACKED_CACHE
  std::string problem;        // non-empty: the environment was invalid
};

// The process-wide configuration (parsed on first use, thread-safe).
const Config& config();

// Parses "1048576", "512K", "64M", "2G", "1T" (case-insensitive, optional
// trailing "B"/"iB"). Returns false on anything else or on overflow.
bool parse_byte_size(const std::string& text, uint64_t* bytes);

}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_CONFIG_H_
