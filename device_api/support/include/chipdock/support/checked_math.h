// Backend support library, part of the chipdock backend kit (C++17, header only).
//
// Overflow-checked size and shape arithmetic. Shapes, strides and offsets
// are int64 and come from users (attributes, as_strided, DLPack, ONNX
// files), so every product or sum of them can wrap; a wrapped size is a
// short allocation and then an out-of-bounds access. The core and every
// backend compute shapes, byte sizes and view extents with these helpers
// and turn an empty result into an error naming the call.
//
// Each helper returns std::nullopt when the exact result does not fit
// (GCC/Clang __builtin_*_overflow: exact, branch-cheap).
#ifndef CHIPDOCK_SUPPORT_CHECKED_MATH_H_
#define CHIPDOCK_SUPPORT_CHECKED_MATH_H_

#include <cstddef>
#include <cstdint>
#include <optional>

namespace chipdock::support {

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> checked_sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The number of elements of `shape` (1 for 0-d); nullopt when a dim is
// negative or the product of the dims, zeros counted as 1, overflows: that
// product is the largest contiguous stride, which must be representable
// even when the tensor is empty.
inline std::optional<int64_t> checked_numel(const int64_t* shape, size_t ndim) {
  int64_t span = 1;
  bool empty = false;
  for (size_t d = 0; d < ndim; ++d) {
    if (shape[d] < 0) return std::nullopt;
    empty = empty || shape[d] == 0;
    if (shape[d] > 1 && __builtin_mul_overflow(span, shape[d], &span)) return std::nullopt;
  }
  return empty ? 0 : span;
}

// numel * itemsize bytes, when that fits both size_t and int64 (byte
// offsets are int64 in the ABI).
inline std::optional<size_t> checked_nbytes(int64_t numel, size_t itemsize) {
  if (numel < 0 || itemsize > static_cast<size_t>(INT64_MAX)) return std::nullopt;
  std::optional<int64_t> bytes = checked_mul(numel, static_cast<int64_t>(itemsize));
  if (!bytes) return std::nullopt;
  return static_cast<size_t>(*bytes);
}

// The element offsets a strided view reaches, relative to its origin:
// [lo, hi], lo <= 0 <= hi (negative strides reach below the origin). Only
// meaningful for a non-empty view (every dim >= 1); nullopt on overflow.
struct ViewExtent {
  int64_t lo = 0;
  int64_t hi = 0;
};

inline std::optional<ViewExtent> checked_view_extent(const int64_t* shape, const int64_t* strides, size_t ndim) {
  ViewExtent e;
  for (size_t d = 0; d < ndim; ++d) {
    std::optional<int64_t> reach = checked_mul(shape[d] - 1, strides[d]);
    if (!reach) return std::nullopt;
    std::optional<int64_t> moved = checked_add(*reach < 0 ? e.lo : e.hi, *reach);
    if (!moved) return std::nullopt;
    (*reach < 0 ? e.lo : e.hi) = *moved;
  }
  return e;
}

// The byte range [lo, hi) of its storage that a non-empty view starting
// `offset` elements into the storage touches; nullopt on overflow.
struct ByteSpan {
  int64_t lo = 0;
  int64_t hi = 0;
};

inline std::optional<ByteSpan> checked_view_span(const int64_t* shape, const int64_t* strides, size_t ndim,
                                                 int64_t offset, size_t itemsize) {
  std::optional<ViewExtent> e = checked_view_extent(shape, strides, ndim);
  if (!e) return std::nullopt;
  const std::optional<int64_t> first = checked_add(offset, e->lo), last = checked_add(offset, e->hi);
  if (!first || !last) return std::nullopt;
  const auto item = static_cast<int64_t>(itemsize);
  const std::optional<int64_t> end = checked_add(*last, 1);
  if (!end) return std::nullopt;
  const std::optional<int64_t> lo = checked_mul(*first, item), hi = checked_mul(*end, item);
  if (!lo || !hi) return std::nullopt;
  return ByteSpan{*lo, *hi};
}

}  // namespace chipdock::support

#endif  // CHIPDOCK_SUPPORT_CHECKED_MATH_H_
