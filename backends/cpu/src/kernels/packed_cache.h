// Data a kernel derives from a constant input, kept across calls: weights
// reordered into oneDNN's blocked layouts, which would otherwise be redone on
// every call (for ResNet-50 that is all 100 MB of its weights per inference).
//
// An entry is keyed by where the input lies (the core's cd_tensor_version:
// a storage id that is never reused, and the address of the view) and by the
// layout the kernel derived (shape, strides, dtype, target format), and it
// is valid for one version of that storage: a write through the core changes
// the version, and the next lookup derives the data again and replaces the
// entry. Inputs without a version (memory shared through DLPack, an older
// core) are never cached.
//
// Entries live in host memory outside the device's accounting, up to
// CHIPDOCK_CPU_PACKED_CACHE bytes (least recently used go first). An entry
// whose tensor died is not noticed until it is pushed out, which is why the
// budget is bounded.
#ifndef CHIPDOCK_CPU_KERNELS_PACKED_CACHE_H_
#define CHIPDOCK_CPU_KERNELS_PACKED_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "chipdock/cd_kernel.h"

namespace chipdock_cpu {
namespace packed_cache {

// Where an input's bytes come from, as far as a cache needs to know.
struct Source {
  uint64_t storage_id = 0;
  uint64_t version = 0;
  uintptr_t address = 0;  // data + byte_offset
};

// The source of an input view, or nothing when the core gave no version.
std::optional<Source> source_of(const cd_tensor_view& view);

// 64-byte aligned memory holding one derived copy.
class Packed {
 public:
  explicit Packed(size_t bytes);
  ~Packed();
  Packed(const Packed&) = delete;
  Packed& operator=(const Packed&) = delete;
  void* data() const { return p_; }
  size_t size() const { return size_; }

 private:
  void* p_ = nullptr;
  size_t size_ = 0;
};

// The data derived from `source` in `layout` (a description of what `fill`
// makes, unique per layout): cached, or made by `fill` into `bytes` of fresh
// memory. Thread-safe; `fill` runs outside the lock. With the cache off or
// `bytes` over its budget, the result is made and not kept.
std::shared_ptr<const Packed> get(const Source& source, const std::string& layout, size_t bytes,
                                  const std::function<void(void*)>& fill);

// Bytes held now (for tests and diagnostics).
size_t held_bytes();

}  // namespace packed_cache
}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_PACKED_CACHE_H_
