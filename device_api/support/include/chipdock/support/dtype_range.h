// Backend support library, part of the chipdock backend kit (C++17, header only).
//
// Whether a float attribute (fill values, arange bounds) converts to a dtype
// without leaving its range. The core refuses such a value in the shape rule,
// where even an empty output is checked; a backend checks it again in its
// kernel. One definition, so the two never disagree.
#ifndef CHIPDOCK_SUPPORT_DTYPE_RANGE_H_
#define CHIPDOCK_SUPPORT_DTYPE_RANGE_H_

#include <cmath>

#include "chipdock/cd_base.h"

namespace chipdock::support {

// True when an integer dtype holds v once truncated toward zero (NaN never);
// true for the float and bool dtypes, whose conversion has no range to leave.
inline bool dtype_holds(cd_dtype_t dtype, double v) noexcept {
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

}  // namespace chipdock::support

#endif  // CHIPDOCK_SUPPORT_DTYPE_RANGE_H_
