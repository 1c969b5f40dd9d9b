// Backend support library, part of the chipdock backend kit (C++17, header only).
//
// The name and element size of each cd_dtype_t, once for every backend (the
// names are the opset's and the Python API's).
#ifndef CHIPDOCK_SUPPORT_DTYPE_INFO_H_
#define CHIPDOCK_SUPPORT_DTYPE_INFO_H_

#include <cstddef>

#include "chipdock/cd_base.h"

namespace chipdock::support {

// "float32", "bfloat16", ...; NULL for a value cd_base.h does not define.
inline const char* dtype_name(cd_dtype_t dtype) noexcept {
  switch (dtype) {
    case CD_DTYPE_FLOAT32: return "float32";
    case CD_DTYPE_FLOAT16: return "float16";
    case CD_DTYPE_BFLOAT16: return "bfloat16";
    case CD_DTYPE_FLOAT64: return "float64";
    case CD_DTYPE_INT8: return "int8";
    case CD_DTYPE_INT16: return "int16";
    case CD_DTYPE_INT32: return "int32";
    case CD_DTYPE_INT64: return "int64";
    case CD_DTYPE_UINT8: return "uint8";
    case CD_DTYPE_BOOL: return "bool";
    default: return nullptr;
  }
}

// Bytes per element; 0 for a value cd_base.h does not define.
inline size_t dtype_size(cd_dtype_t dtype) noexcept {
  switch (dtype) {
    case CD_DTYPE_INT8: case CD_DTYPE_UINT8: case CD_DTYPE_BOOL: return 1;
    case CD_DTYPE_FLOAT16: case CD_DTYPE_BFLOAT16: case CD_DTYPE_INT16: return 2;
    case CD_DTYPE_FLOAT32: case CD_DTYPE_INT32: return 4;
    case CD_DTYPE_FLOAT64: case CD_DTYPE_INT64: return 8;
    default: return 0;
  }
}

}  // namespace chipdock::support

#endif  // CHIPDOCK_SUPPORT_DTYPE_INFO_H_
