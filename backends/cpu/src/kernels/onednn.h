// The oneDNN side of the CPU kernels: one cached CPU engine, dtype mapping,
// memory descriptors from strided views, a primitive cache keyed by the
// problem description, and execution with a user-provided scratchpad (so
// one primitive may run on several stream threads at once).
#ifndef CHIPDOCK_CPU_KERNELS_ONEDNN_H_
#define CHIPDOCK_CPU_KERNELS_ONEDNN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "chipdock/cd_base.h"
#include "threads.h"

namespace chipdock_cpu {
namespace onednn {

// --- the ISA oneDNN runs at, and the routes it allows ----------------------------------

// Caps oneDNN to the process's ISA choice (isa.h: CHIPDOCK_CPU_ISA, hidden
// features; the lower of that and ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA when
// those are set), then probes which dtypes oneDNN runs natively. Runs once,
// when the kernels are registered (before any primitive: oneDNN fixes its ISA
// at first use); later calls do nothing.
void configure();

// How a dtype reaches oneDNN for each primitive family, as configure() found.
// bfloat16 is native only where oneDNN has a primitive for it that is not
// its reference code (oneDNN 2.6 needs AVX-512 for any bfloat16 primitive);
// elsewhere it is converted to float32, run in float32 and rounded once,
// which is the same arithmetic (float32 accumulation, one rounding).
// float16 always goes through float32 (oneDNN 2.6 has no float16 on CPU).
// CHIPDOCK_CPU_BF16=float32 / native (config.h) force one way.
struct Routes {
  bool bf16_matmul = false, bf16_conv = false, bf16_deconv = false, bf16_pool = false;
};
const Routes& routes();

// The dtype oneDNN computes `dtype` in for a family whose native-bf16 flag
// is `bf16_native`: float32 or bfloat16.
cd_dtype_t compute_dtype(cd_dtype_t dtype, bool bf16_native);

// oneDNN's effective ISA in its own words ("Intel AVX2"), plus the kernel
// level: "oneDNN 2.6.3 at Intel AVX2, kernels at avx2".
const std::string& isa_summary();

// Throws UNIMPLEMENTED for a primitive oneDNN would not create: names the
// problem (`what`: op, dtypes, shapes), the ISA summary and oneDNN's reason.
[[noreturn]] void refuse(const std::string& what, const dnnl::error& e);

// "(2, 3, 4)".
std::string shape_text(const std::vector<int64_t>& shape);

// The process-wide CPU engine (created on first use; thread-safe).
const dnnl::engine& engine();

// float32 / bfloat16 map to oneDNN types (float16 and float64 are not run
// through oneDNN 2.6 on CPU); int8/uint8/int32 too. Throws INTERNAL otherwise.
dnnl::memory::data_type to_dnnl(cd_dtype_t dtype);

// A plain descriptor with explicit strides (elements). Throws on failure.
dnnl::memory::desc strided_desc(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                                cd_dtype_t dtype);

// Primitive attributes with a user-managed scratchpad.
dnnl::primitive_attr user_scratchpad_attr();

// True if the implementation is oneDNN's slow reference code ("ref:any").
bool is_reference(const char* impl_info);

// A cache key built from integers, doubles and tags.
class Key {
 public:
  explicit Key(const char* kind) : text_(kind) {}
  Key& add(int64_t v);
  Key& add(double v);
  Key& add(const std::vector<int64_t>& v);
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

// A text naming `md` exactly (dims, data type, blocking): equal texts mean
// equal layouts, so it can key data stored in that layout.
std::string describe(const dnnl::memory::desc& md);

// Process-wide LRU cache of type-erased entries (primitives with what they
// need). `make` runs outside the lock; two threads may build the same entry
// and the later one wins, which is harmless.
std::shared_ptr<void> cached(const Key& key, const std::function<std::shared_ptr<void>()>& make);

template <class T>
std::shared_ptr<T> cached_as(const Key& key, const std::function<std::shared_ptr<T>()>& make) {
  return std::static_pointer_cast<T>(cached(key, [&]() -> std::shared_ptr<void> { return make(); }));
}

// Runs `prim` on a fresh stream of the calling thread and waits; provides a
// scratchpad of `scratch` (the primitive's scratchpad_desc) when non-empty.
void execute(const dnnl::primitive& prim, std::unordered_map<int, dnnl::memory> args,
             const dnnl::memory::desc& scratch);

// A memory object over host `data` (no ownership).
dnnl::memory wrap(const dnnl::memory::desc& md, const void* data);

// Work below this many flops runs on the calling thread alone: an OpenMP
// barrier costs more than the work, and far more on a loaded machine.
constexpr double kSmallWork = 4e6;
inline bool small_work(double flops) { return flops < kSmallWork * static_cast<double>(grain_scale()); }

// While alive, oneDNN, OpenBLAS (and OpenMP) on this thread use one thread
// when `single` is true, else kernel_threads() (threads.h: at most the CPU
// quota). Create and execute a primitive under the same setting
// (oneDNN fixes some thread partitions when it creates a primitive), and
// put `single` in its cache key.
class ThreadScope {
 public:
  explicit ThreadScope(bool single);
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int saved_ = 0;
};

}  // namespace onednn
}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_ONEDNN_H_
