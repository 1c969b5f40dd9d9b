// Pinned host memory (see pinned.h).
#include "pinned.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "error.h"

namespace chipdock_cpu {
namespace {

struct Pinned {
  size_t bytes;  // rounded up to whole pages
  bool locked;   // mlock succeeded, so munlock on free
};

struct PinnedTable {
  std::mutex mu;
  std::unordered_map<void*, Pinned> live;
};

PinnedTable& pinned_table() {
  static PinnedTable t;
  return t;
}

size_t page_size() {
  const long p = sysconf(_SC_PAGE_SIZE);
  return p > 0 ? static_cast<size_t>(p) : 4096;
}

}  // namespace

void* host_memory_allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t page = page_size();
  if (bytes > SIZE_MAX - page) fail(CD_STATUS_OUT_OF_MEMORY, "%zu bytes is too large", bytes);
  const size_t rounded = (bytes + page - 1) / page * page;
  void* ptr = nullptr;
  if (posix_memalign(&ptr, page, rounded) != 0) {
    fail(CD_STATUS_OUT_OF_MEMORY, "the host could not provide %zu bytes", bytes);
  }
  const bool locked = mlock(ptr, rounded) == 0;  // best effort, see pinned.h
  try {
    std::lock_guard<std::mutex> lock(pinned_table().mu);
    pinned_table().live.emplace(ptr, Pinned{rounded, locked});
  } catch (...) {
    if (locked) munlock(ptr, rounded);
    std::free(ptr);
    throw;
  }
  return ptr;
}

void host_memory_free(void* ptr) {
  if (ptr == nullptr) return;
  Pinned p{};
  {
    std::lock_guard<std::mutex> lock(pinned_table().mu);
    auto it = pinned_table().live.find(ptr);
    if (it == pinned_table().live.end()) {
      fail(CD_STATUS_INVALID_ARGUMENT, "%p is not pinned memory from host_memory_allocate "
           "(unknown, interior or already freed)", ptr);
    }
    p = it->second;
    pinned_table().live.erase(it);
  }
  if (p.locked) munlock(ptr, p.bytes);
  std::free(ptr);
}

}  // namespace chipdock_cpu
