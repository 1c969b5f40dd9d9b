// Backend support library, part of the chipdock backend kit (C++17).
//
// Reading the extension chains the core hangs off ABI structs (`next`).
// Header-only: nothing here allocates or throws.
#ifndef CHIPDOCK_SUPPORT_EXTENSIONS_H_
#define CHIPDOCK_SUPPORT_EXTENSIONS_H_

#include <cstdint>

#include "chipdock/cd_kernel.h"

namespace chipdock::support {

// The first extension of `type` in `chain` that is at least `min_size` bytes
// (a shorter one comes from a writer that predates the fields the reader
// needs), or NULL.
inline const cd_extension* find_extension(const cd_extension* chain, int32_t type,
                                          size_t min_size) noexcept {
  for (const cd_extension* e = chain; e != nullptr; e = e->next) {
    if (e->type == type && e->struct_size >= min_size) return e;
  }
  return nullptr;
}

// The identity and write version of an input view's memory, or NULL when the
// core gave none (memory shared through DLPack, an older core): then data
// derived from the input must not be reused across calls.
inline const cd_tensor_version* tensor_version(const cd_tensor_view& view) noexcept {
  return reinterpret_cast<const cd_tensor_version*>(
      find_extension(view.next, CD_EXTENSION_TENSOR_VERSION, sizeof(cd_tensor_version)));
}

}  // namespace chipdock::support

#endif  // CHIPDOCK_SUPPORT_EXTENSIONS_H_
