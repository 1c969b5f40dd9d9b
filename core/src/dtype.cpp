#include "dtype.hpp"


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

}  // namespace chipdock
