#include "dtype.hpp"

#include <cmath>

namespace chipdock {

namespace {
struct DtypeInfo {
  const char* name;
  size_t size;
};
// Indexed by cd_dtype_t.
constexpr DtypeInfo kDtypes[CD_DTYPE_COUNT] = {
    {"invalid", 0}, {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"float64", 8}, {"int8", 1},
    {"int16", 2},   {"int32", 4},   {"int64", 8},   {"uint8", 1},    {"bool", 1},
};
}  // namespace

bool dtype_valid(cd_dtype_t dtype) noexcept { return dtype > CD_DTYPE_INVALID && dtype < CD_DTYPE_COUNT; }

size_t dtype_size(cd_dtype_t dtype) noexcept { return dtype_valid(dtype) ? kDtypes[dtype].size : 0; }

const char* dtype_name(cd_dtype_t dtype) noexcept {
  return dtype_valid(dtype) ? kDtypes[dtype].name : "invalid";
}

bool dtype_holds(cd_dtype_t dtype, double v) noexcept {
  double lo = 0.0, hi = 0.0;  // [lo, hi) after truncation
  switch (dtype) {
    case CD_DTYPE_INT8: lo = -128.0; hi = 128.0; break;
    case CD_DTYPE_INT16: lo = -32768.0; hi = 32768.0; break;
    case CD_DTYPE_INT32: lo = -2147483648.0; hi = 2147483648.0; break;
    case CD_DTYPE_INT64: lo = -9223372036854775808.0; hi = 9223372036854775808.0; break;
    case CD_DTYPE_UINT8: lo = 0.0; hi = 256.0; break;
    default: return true;
  }
  if (std::isnan(v)) return false;
  const double t = std::trunc(v);
  return t >= lo && t < hi;
}

}  // namespace chipdock
