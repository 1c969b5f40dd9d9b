// Dtype facts the core needs (sizes and names); the numbering is the ABI's.
#pragma once

#include <cstddef>
#include <string>

#include "chipdock/cd_base.h"

namespace chipdock {

// Bytes per element; 0 for an unknown dtype.
size_t dtype_size(cd_dtype_t dtype) noexcept;
// "float32", "bfloat16", ...; "invalid" for an unknown dtype.
const char* dtype_name(cd_dtype_t dtype) noexcept;
bool dtype_valid(cd_dtype_t dtype) noexcept;

}  // namespace chipdock
