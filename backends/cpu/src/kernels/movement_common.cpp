// Shared helpers of the data-movement kernels (see movement_common.h), and
// register_movement, which registers the whole family.
#include "movement_common.h"

#include <algorithm>
#include <string>

#include "chipdock/support/dtype_range.h"

namespace chipdock_cpu {

void register_movement(cd_kernel_registry* registry) {
  movement::register_layout(registry);
  movement::register_resize(registry);
  movement::register_index(registry);
  movement::register_sort(registry);
  movement::register_fill(registry);
}

namespace movement {

const cd_dtype_t kAllDtypes[10] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                   CD_DTYPE_FLOAT64, CD_DTYPE_INT8,    CD_DTYPE_INT16,
                                   CD_DTYPE_INT32,   CD_DTYPE_INT64,   CD_DTYPE_UINT8,
                                   CD_DTYPE_BOOL};
const cd_dtype_t kNumericDtypes[9] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                      CD_DTYPE_FLOAT64, CD_DTYPE_INT8,    CD_DTYPE_INT16,
                                      CD_DTYPE_INT32,   CD_DTYPE_INT64,   CD_DTYPE_UINT8};
const cd_dtype_t kFloatDtypes[4] = {CD_DTYPE_FLOAT32, CD_DTYPE_FLOAT16, CD_DTYPE_BFLOAT16,
                                    CD_DTYPE_FLOAT64};
const cd_dtype_t kIndexDtypes[2] = {CD_DTYPE_INT32, CD_DTYPE_INT64};

// --- the kernel context ------------------------------------------------------------


HostTensor input_tensor(const cd_kernel_context* ctx, int32_t i) {
  const std::string what = format("input %d", i);
  return resolve_view(*ctx->inputs[i], ctx->device, what.c_str());
}

HostTensor output_tensor(const cd_kernel_context* ctx, int32_t i) {
  const std::string what = format("output %d", i);
  HostTensor t = resolve_view(*ctx->outputs[i], ctx->device, what.c_str());
  if (!is_contiguous(t)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s is not C-contiguous (outputs must be)", what.c_str());
  }
  return t;
}

std::shared_ptr<Stream> kernel_stream(const cd_kernel_context* ctx) {
  return stream_from_handle(ctx->stream, ctx->device);
}

// --- attributes --------------------------------------------------------------------

int64_t axis_attr(const cd_kernel_context* ctx, const char* name, size_t ndim) {
  const int64_t axis = int_attr(ctx, name);
  if (axis < 0 || axis >= static_cast<int64_t>(ndim)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "attribute '%s' = %lld is not in [0, %zu) (the dispatcher "
         "normalizes axes)", name, static_cast<long long>(axis), ndim);
  }
  return axis;
}

// --- shapes ------------------------------------------------------------------------

int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < v.size(); ++i) p *= v[i];
  return p;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += format("%s%lld", i ? ", " : "", static_cast<long long>(shape[i]));
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

bool is_contiguous(const HostTensor& t) {
  if (t.numel == 0) return true;
  int64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] == 1) continue;
    if (t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

void require_dtype(const HostTensor& t, cd_dtype_t dtype, const char* what) {
  if (t.dtype != dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s is %s, expected %s", what, dtype_name(t.dtype),
         dtype_name(dtype));
  }
}

void require_shape(const HostTensor& t, const std::vector<int64_t>& shape, const char* what) {
  if (t.shape != shape) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s has shape %s, expected %s", what,
         shape_string(t.shape).c_str(), shape_string(shape).c_str());
  }
}

std::vector<int64_t> offset_table(const std::vector<int64_t>& shape,
                                  const std::vector<int64_t>& strides) {
  const int64_t n = product(shape, 0, shape.size());
  std::vector<int64_t> table(static_cast<size_t>(n));
  if (n == 0) return table;
  const int64_t* s[1] = {strides.data()};
  walk_rows<1>(shape.size(), shape.data(), s, 0, n,
               [&](int64_t row, const int64_t* off) { table[static_cast<size_t>(row)] = off[0]; });
  return table;
}

std::vector<int64_t> byte_strides(const HostTensor& t) {
  std::vector<int64_t> s(t.strides.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = t.strides[i] * static_cast<int64_t>(t.itemsize);
  return s;
}

std::vector<int64_t> contiguous_byte_strides(const std::vector<int64_t>& shape, size_t item) {
  std::vector<int64_t> s(shape.size());
  int64_t stride = static_cast<int64_t>(item);
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = stride;
    stride *= shape[i];
  }
  return s;
}

// --- copying -----------------------------------------------------------------------

namespace {

template <class U>
void copy_row_typed(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n) {
  if (ss == 0) {
    U v;
    std::memcpy(&v, src, sizeof(U));
    for (int64_t i = 0; i < n; ++i, dst += ds) std::memcpy(dst, &v, sizeof(U));
    return;
  }
  if (ds == static_cast<int64_t>(sizeof(U))) {
    U* d = reinterpret_cast<U*>(dst);  // contiguous output: a vectorizable gather
    for (int64_t i = 0; i < n; ++i) {
      U v;
      std::memcpy(&v, src + i * ss, sizeof(U));
      d[i] = v;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i, dst += ds, src += ss) std::memcpy(dst, src, sizeof(U));
}

void copy_row(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n, size_t item) {
  const int64_t w = static_cast<int64_t>(item);
  if (ds == w && ss == w) {
    std::memcpy(dst, src, static_cast<size_t>(n) * item);
    return;
  }
  switch (item) {
    case 1: return copy_row_typed<uint8_t>(dst, ds, src, ss, n);
    case 2: return copy_row_typed<uint16_t>(dst, ds, src, ss, n);
    case 4: return copy_row_typed<uint32_t>(dst, ds, src, ss, n);
    default: return copy_row_typed<uint64_t>(dst, ds, src, ss, n);
  }
}

}  // namespace

void gather_row(char* dst, const char* src, int64_t src_stride_bytes, int64_t n, size_t item) {
  copy_row(dst, static_cast<int64_t>(item), src, src_stride_bytes, n, item);
}

void fill_bytes(char* dst, const void* value, int64_t n, size_t item) {
  switch (item) {
    case 1: {
      uint8_t v;
      std::memcpy(&v, value, 1);
      std::memset(dst, v, static_cast<size_t>(n));
      return;
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, value, 2);
      std::fill_n(reinterpret_cast<uint16_t*>(dst), n, v);
      return;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, value, 4);
      std::fill_n(reinterpret_cast<uint32_t*>(dst), n, v);
      return;
    }
    default: {
      uint64_t v;
      std::memcpy(&v, value, 8);
      std::fill_n(reinterpret_cast<uint64_t*>(dst), n, v);
      return;
    }
  }
}

void copy_strided(char* dst, const int64_t* dst_strides, const char* src,
                  const int64_t* src_strides, const int64_t* shape, size_t nd, size_t item,
                  bool parallel) {
  // Drop size-1 dims; merge a dim into its outer neighbour when the outer
  // one steps exactly over it on both sides.
  int64_t sh[kMaxDims], ds[kMaxDims], ss[kMaxDims];
  size_t m = 0;
  int64_t total = 1;
  for (size_t i = 0; i < nd; ++i) {
    if (shape[i] == 0) return;
    total *= shape[i];
    if (shape[i] == 1) continue;
    if (m > 0 && ds[m - 1] == dst_strides[i] * shape[i] &&
        ss[m - 1] == src_strides[i] * shape[i]) {
      sh[m - 1] *= shape[i];
      ds[m - 1] = dst_strides[i];
      ss[m - 1] = src_strides[i];
      continue;
    }
    sh[m] = shape[i];
    ds[m] = dst_strides[i];
    ss[m] = src_strides[i];
    ++m;
  }
  if (m == 0) {
    std::memcpy(dst, src, item);
    return;
  }
  const int64_t n = sh[m - 1], dsn = ds[m - 1], ssn = ss[m - 1];
  const int64_t rows = total / n;
  const int64_t* strides[2] = {ds, ss};
  const size_t outer = m - 1;
  if (!parallel || total * static_cast<int64_t>(item) <= kParallelBytes) {
    walk_rows<2>(outer, sh, strides, 0, rows, [&](int64_t, const int64_t* off) {
      copy_row(dst + off[0], dsn, src + off[1], ssn, n, item);
    });
    return;
  }
  if (rows >= 64) {
    parallel_for(rows, 0, [&](int64_t r0, int64_t r1) {
      walk_rows<2>(outer, sh, strides, r0, r1, [&](int64_t, const int64_t* off) {
        copy_row(dst + off[0], dsn, src + off[1], ssn, n, item);
      });
    });
    return;
  }
  // Few long rows: split each row into pieces.
  const int64_t pieces = std::min<int64_t>(n, (64 + rows - 1) / rows);
  parallel_for(rows * pieces, 0, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t row = u / pieces, p = u % pieces;
      const int64_t b = p * n / pieces, e = (p + 1) * n / pieces;
      walk_rows<2>(outer, sh, strides, row, row + 1, [&](int64_t, const int64_t* off) {
        copy_row(dst + off[0] + b * dsn, dsn, src + off[1] + b * ssn, ssn, e - b, item);
      });
    }
  });
}

// --- indices and values ----------------------------------------------------------

void index_error(int64_t index, int64_t size, int64_t axis) {
  fail(CD_STATUS_OUT_OF_RANGE, "indices: index %lld is out of range for axis %lld of size %lld",
       static_cast<long long>(index), static_cast<long long>(axis),
       static_cast<long long>(size));
}

float round_to_odd_float(double v) {
  float f = static_cast<float>(v);
  if (std::isfinite(v) && std::isfinite(f) && static_cast<double>(f) != v) {
    // Make the float's last bit sticky, so that a second rounding sees that
    // v was not exactly on f.
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 1u) == 0) {
      const double towards = static_cast<double>(f) < v ? HUGE_VAL : -HUGE_VAL;
      f = std::nextafter(f, static_cast<float>(towards));
    }
  }
  return f;
}

bool fits_dtype(double v, cd_dtype_t dtype) { return chipdock::support::dtype_holds(dtype, v); }

}  // namespace movement
}  // namespace chipdock_cpu
