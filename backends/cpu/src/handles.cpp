// Handle values (see handles.h).
#include "handles.h"

#include <atomic>

namespace chipdock_cpu {

uintptr_t next_handle_value() noexcept {
  static std::atomic<uintptr_t> counter{0};
  const uintptr_t id = counter.fetch_add(1) + 1;
  // Ids spaced by 16 so handles look like aligned pointers in a debugger. On
  // 64-bit hosts a tag in bits 48..55 puts them outside the user address
  // space (non-canonical on x86-64, beyond the 48-bit VA on aarch64), so a
  // core that dereferenced one would fault at once. The tag differs from the
  // strict-mode memory tag (memory.cpp).
  if (sizeof(uintptr_t) >= 8) {
    return (static_cast<uintptr_t>(0x5A) << (sizeof(uintptr_t) * 8 - 16)) | (id << 4);
  }
  return id << 4;
}

}  // namespace chipdock_cpu
