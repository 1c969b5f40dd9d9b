// Shared helpers of the data-movement kernels (movement_*.cpp): context and
// attribute access, strided walking and copying, exception-safe parallel
// loops, index normalization and value conversion.
//
// Conventions: every kernel validates what is cheap before enqueueing (shapes,
// dtypes, attributes), resolves its views with resolve_view, and enqueues one
// lambda that owns copies of everything it needs. Outputs are C-contiguous
// (the contract); inputs may have any strides. Work that finds a bad index
// throws Error(CD_STATUS_OUT_OF_RANGE) on the stream's worker, which the next
// synchronization reports.
#ifndef CHIPDOCK_CPU_KERNELS_MOVEMENT_COMMON_H_
#define CHIPDOCK_CPU_KERNELS_MOVEMENT_COMMON_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "chipdock/support/attributes.h"
#include "../error.h"
#include "../stream.h"
#include "kernels.h"
#include "numeric.h"
#include "tensor.h"

namespace chipdock_cpu {
namespace movement {

// --- registration, one per file -------------------------------------------------
void register_layout(cd_kernel_registry* registry);  // movement_layout.cpp
void register_resize(cd_kernel_registry* registry);  // movement_resize.cpp
void register_index(cd_kernel_registry* registry);   // movement_index.cpp
void register_sort(cd_kernel_registry* registry);    // movement_sort.cpp
void register_fill(cd_kernel_registry* registry);    // movement_fill.cpp

// Every dtype of the opset's groups, in ABI order.
extern const cd_dtype_t kAllDtypes[10];      // all
extern const cd_dtype_t kNumericDtypes[9];   // numeric (all but bool)
extern const cd_dtype_t kFloatDtypes[4];     // float
extern const cd_dtype_t kIndexDtypes[2];     // int32, int64


// resolve_view of input / output `i`; outputs must be C-contiguous.
HostTensor input_tensor(const cd_kernel_context* ctx, int32_t i);
HostTensor output_tensor(const cd_kernel_context* ctx, int32_t i);

std::shared_ptr<Stream> kernel_stream(const cd_kernel_context* ctx);

// --- attributes (all required: the dispatcher fills defaults) ---------------------
// The backend kit's typed readers (chipdock/support/attributes.h).
using chipdock::support::find_attribute;
inline int64_t int_attr(const cd_kernel_context* ctx, const char* name) {
  return chipdock::support::int_attribute(ctx, name);
}
inline double float_attr(const cd_kernel_context* ctx, const char* name) {  // FLOAT or INT
  return chipdock::support::float_attribute(ctx, name);
}
inline std::string string_attr(const cd_kernel_context* ctx, const char* name) {
  return chipdock::support::string_attribute(ctx, name);
}
inline std::vector<int64_t> ints_attr(const cd_kernel_context* ctx, const char* name) {
  return chipdock::support::ints_attribute(ctx, name);
}
inline std::vector<double> floats_attr(const cd_kernel_context* ctx, const char* name) {  // or INTS
  return chipdock::support::floats_attribute(ctx, name);
}
// An axis attribute, normalized by the dispatcher: 0 <= axis < ndim.
int64_t axis_attr(const cd_kernel_context* ctx, const char* name, size_t ndim);

// --- shapes ----------------------------------------------------------------------------
int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end);
std::string shape_string(const std::vector<int64_t>& shape);
bool is_contiguous(const HostTensor& t);  // C order (size-1 dims ignored)
void require_dtype(const HostTensor& t, cd_dtype_t dtype, const char* what);
void require_shape(const HostTensor& t, const std::vector<int64_t>& shape, const char* what);
inline void check_live(const HostTensor& t, const char* what) {
  if (t.numel != 0) t.range.check_live(what);
}

// --- parallel loops ------------------------------------------------------------------

// Bytes above which a copy-like loop goes parallel.
constexpr int64_t kParallelBytes = int64_t{1} << 18;

// Calls fn(row, offsets) for every row in [begin, end) of the C-ordered index
// space `shape` (nd dims; nd 0 is one row), where offsets[k] is the dot
// product of the row's multi-index with strides[k] (any unit).
template <size_t K, class F>
void walk_rows(size_t nd, const int64_t* shape, const int64_t* const (&strides)[K],
               int64_t begin, int64_t end, F&& fn) {
  int64_t index[kMaxDims];
  int64_t off[K] = {};
  int64_t r = begin;
  for (size_t d = nd; d-- > 0;) {
    index[d] = r % shape[d];
    r /= shape[d];
    for (size_t k = 0; k < K; ++k) off[k] += index[d] * strides[k][d];
  }
  for (int64_t row = begin; row < end; ++row) {
    fn(row, static_cast<const int64_t*>(off));
    for (size_t d = nd; d-- > 0;) {
      for (size_t k = 0; k < K; ++k) off[k] += strides[k][d];
      if (++index[d] < shape[d]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
  }
}

// The offsets (in the strides' unit) of every position of `shape`, C order.
std::vector<int64_t> offset_table(const std::vector<int64_t>& shape,
                                  const std::vector<int64_t>& strides);

// Copies an nd block: element i of `shape` goes from src + i.src_strides to
// dst + i.dst_strides (strides in BYTES, any sign, zero allowed on src).
// Dims are merged where both sides allow; rows that are contiguous on both
// sides are memcpy'd. Goes parallel above kParallelBytes if `parallel`.
void copy_strided(char* dst, const int64_t* dst_strides, const char* src,
                  const int64_t* src_strides, const int64_t* shape, size_t nd, size_t item,
                  bool parallel = true);

// Byte strides of a HostTensor (element strides * itemsize).
std::vector<int64_t> byte_strides(const HostTensor& t);
std::vector<int64_t> contiguous_byte_strides(const std::vector<int64_t>& shape, size_t item);

// Copies `n` elements of `item` bytes from a strided source to contiguous dst.
void gather_row(char* dst, const char* src, int64_t src_stride_bytes, int64_t n, size_t item);

// Fills `n` elements of `item` bytes at dst with the element at `value`.
void fill_bytes(char* dst, const void* value, int64_t n, size_t item);

// --- indices ----------------------------------------------------------------------
inline int64_t read_index(const char* p, bool is64) {
  if (is64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Throws Error(OUT_OF_RANGE) naming the argument (`indices`), the index, the
// size and the axis.
[[noreturn]] void index_error(int64_t index, int64_t size, int64_t axis);

// `index` normalized into [0, size) (negatives count from the end), or throws.
inline int64_t wrap_index(int64_t index, int64_t size, int64_t axis) {
  const int64_t i = index < 0 ? index + size : index;
  if (i < 0 || i >= size) index_error(index, size, axis);
  return i;
}

// --- value conversion -----------------------------------------------------------
// float16 <-> float32 by bit manipulation (exact; round to nearest even).
// _Float16 conversions compile to libgcc calls on baseline x86-64 (no F16C),
// ~10x slower; these are branch-light and vectorize.
inline float half_to_float(float16_t v) {
  uint16_t h;
  std::memcpy(&h, &v, 2);
  uint32_t u = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t exp = u & (0x7c00u << 13);
  u += (127u - 15u) << 23;
  float f;
  if (exp == (0x7c00u << 13)) {  // inf, NaN
    u += (128u - 16u) << 23;
    std::memcpy(&f, &u, 4);
  } else if (exp == 0) {  // zero, subnormal: renormalize through a float subtraction
    u += 1u << 23;
    std::memcpy(&f, &u, 4);
    const uint32_t magic_bits = 113u << 23;
    float magic;
    std::memcpy(&magic, &magic_bits, 4);
    f -= magic;
  } else {
    std::memcpy(&f, &u, 4);
  }
  uint32_t r;
  std::memcpy(&r, &f, 4);
  r |= static_cast<uint32_t>(h & 0x8000u) << 16;
  std::memcpy(&f, &r, 4);
  return f;
}

inline float16_t float_to_half(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t o;
  if (u >= (127u + 16u) << 23) {  // overflow, inf, NaN
    o = u > (255u << 23) ? 0x7e00u : 0x7c00u;
  } else if (u < (113u << 23)) {  // subnormal or zero: let the float adder round
    const uint32_t magic_bits = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    float magic, f;
    std::memcpy(&magic, &magic_bits, 4);
    std::memcpy(&f, &u, 4);
    f += magic;
    std::memcpy(&o, &f, 4);
    o -= magic_bits;
  } else {
    const uint32_t odd = (u >> 13) & 1u;
    u += ((15u - 127u) << 23) + 0xfffu + odd;
    o = u >> 13;
  }
  o |= sign >> 16;
  const uint16_t h = static_cast<uint16_t>(o);
  float16_t v;
  std::memcpy(&v, &h, 2);
  return v;
}

// load/store of numeric.h, with the fast float16 conversions.
template <class T>
inline compute_t<T> fast_load(const T& v) {
  if constexpr (std::is_same_v<T, float16_t>) {
    return half_to_float(v);
  } else {
    return load(v);
  }
}
template <class T>
inline T fast_store(compute_t<T> v) {
  if constexpr (std::is_same_v<T, float16_t>) {
    return float_to_half(v);
  } else {
    return store<T>(v);
  }
}

// double -> float rounded to odd: the float nearest below or above v whose
// last bit is 1 when v is not exactly representable. A second rounding of
// that float to any format at least 2 bits narrower (bfloat16, float16) is
// then the correct single rounding of v.
float round_to_odd_float(double v);

// double -> bfloat16 / float16 rounded once (unlike float_to_bf16(float(v)),
// which rounds twice).
inline bfloat16_t double_to_bf16(double v) { return float_to_bf16(round_to_odd_float(v)); }
inline float16_t double_to_half(double v) { return float_to_half(round_to_odd_float(v)); }

// A double converted to T, rounded once for floats; integers truncate toward
// zero and saturate (NaN -> 0); bool is v != 0. Callers that must refuse
// out-of-range values check with fits_integer first.
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    return double_to_bf16(v);
  } else if constexpr (std::is_same_v<T, float16_t>) {
    return double_to_half(v);
  } else if constexpr (is_floating_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T{0};
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
    // 2^(bits) as a double: the first value above the range, exactly.
    constexpr double hi_excl = static_cast<double>(std::numeric_limits<T>::max() / 2 + 1) * 2.0;
    if (v <= lo) return std::numeric_limits<T>::min();
    if (v >= hi_excl) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// True if `v` truncated toward zero is a value of the integer dtype `dtype`
// (always true for float and bool dtypes).
bool fits_dtype(double v, cd_dtype_t dtype);

}  // namespace movement
}  // namespace chipdock_cpu

#endif  // CHIPDOCK_CPU_KERNELS_MOVEMENT_COMMON_H_
