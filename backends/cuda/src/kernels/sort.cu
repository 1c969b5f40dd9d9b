// Ordering kernels: sort, argsort and topk along an axis, on CUB's radix
// sorts (the toolkit's bundled CUB).
//
// As in the CPU reference (backends/cpu/src/kernels/movement_sort.cpp) every
// element becomes an unsigned key whose integer order is the value order
// (NaN greatest, so last ascending and first descending; -0 equal to +0),
// bit-inverted for descending order, paired with its position along the
// axis. A radix sort is stable, so equal keys keep their index order: the
// CPU reference's (key, index) order exactly. topk takes the first k of the
// sorted row. Values are copied from the input by index, so their bits (-0,
// NaN payloads) survive.
//
// Rows are sorted in chunks of at most kChunk elements: many short rows at
// once with DeviceSegmentedRadixSort (a block per row), a long row alone
// with DeviceRadixSort (the whole device on one row).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <climits>

#include "movement.cuh"

namespace chipdock_cuda {
namespace mv {
namespace {

template <class T> using key_t = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

template <class T> __device__ __forceinline__ key_t<T> sort_key(T v) {
  if constexpr (std::is_same_v<T, double>) {
    const double z = v + 0.0;  // -0 -> +0
    const uint64_t u = static_cast<uint64_t>(__double_as_longlong(z));
    const uint64_t mask = static_cast<uint64_t>(static_cast<int64_t>(u) >> 63) | (uint64_t{1} << 63);
    return v != v ? ~uint64_t{0} : u ^ mask;
  } else if constexpr (ew::kIsFloat<T>) {
    const float f = static_cast<float>(ew::load(v));
    const float z = f + 0.0f;
    const uint32_t u = __float_as_uint(z);
    const uint32_t mask = static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) | 0x80000000u;
    return f != f ? ~uint32_t{0} : u ^ mask;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<uint64_t>(v) ^ (uint64_t{1} << 63);
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    return v;
  } else {
    return static_cast<uint32_t>(static_cast<int32_t>(v)) ^ 0x80000000u;
  }
}

// Elements sorted together at most (bounds the scratch: 24 bytes each).
constexpr int64_t kChunk = int64_t{1} << 26;
// Rows at least this long are sorted one at a time by DeviceRadixSort.
constexpr int64_t kLongRow = 16384;

enum SortOp { kSort, kArgsort, kTopk };

struct SortArgs {
  Walk<1> rows;  // the input's shape without the axis; stride: input (elements)
  int64_t n, k, inner, s_axis;
  int64_t row0, num_rows;  // the chunk
  int32_t descending;
};

// keys/vals of the chunk's rows, row-major; vals = position along the axis.
template <class T>
__global__ void keys_kernel(key_t<T>* keys, int32_t* vals, const T* x, SortArgs a) {
  using K = key_t<T>;
  const K flip = a.descending ? ~K{0} : K{0};
  const int64_t total = a.num_rows * a.n;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total; t += step) {
    const int64_t r = t / a.n, i = t - r * a.n;
    int64_t off;
    walk_offsets(a.rows, a.row0 + r, &off);
    keys[t] = static_cast<K>(sort_key<T>(x[off + i * a.s_axis]) ^ flip);
    vals[t] = static_cast<int32_t>(i);
  }
}

// The first k of each sorted row into the outputs' (outer, k, inner) layout.
template <class T>
__global__ void emit_kernel(T* values, int64_t* indices, const int32_t* sorted, const T* x, SortArgs a) {
  const int64_t total = a.num_rows * a.k;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total; t += step) {
    const int64_t r = t / a.k, j = t - r * a.k;
    const int64_t row = a.row0 + r;
    const int64_t at = sorted[r * a.n + j];
    const int64_t o = row / a.inner, i = row - o * a.inner;
    const int64_t pos = (o * a.k + j) * a.inner + i;
    if (values != nullptr) {
      int64_t off;
      walk_offsets(a.rows, row, &off);
      values[pos] = x[off + at * a.s_axis];
    }
    if (indices != nullptr) indices[pos] = at;
  }
}

__global__ void offsets_kernel(int32_t* offsets, int64_t count, int64_t n) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t <= count; t += step) {
    offsets[t] = static_cast<int32_t>(t * n);
  }
}

// Sorts chunk rows [0, rows) of length n: keys/vals in -> out.
template <class K> struct Sorter {
  const Call& call;
  int64_t n, chunk_rows;
  bool segmented;
  void* temp = nullptr;
  size_t temp_bytes = 0;
  int32_t* offsets = nullptr;

  Sorter(const Call& c, int64_t n_, int64_t chunk_rows_) : call(c), n(n_), chunk_rows(chunk_rows_) {
    segmented = chunk_rows > 1;
    const int bits = static_cast<int>(sizeof(K) * 8);
    if (segmented) {
      offsets = static_cast<int32_t*>(workspace(call, static_cast<size_t>(chunk_rows + 1) * sizeof(int32_t)));
      check(cub::DeviceSegmentedRadixSort::SortPairs(nullptr, temp_bytes, static_cast<const K*>(nullptr),
                                                     static_cast<K*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                     static_cast<int32_t*>(nullptr), static_cast<int>(n * chunk_rows),
                                                     static_cast<int>(chunk_rows), offsets, offsets + 1, 0, bits,
                                                     call.stream),
            "sizing the segmented radix sort");
    } else {
      check(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, static_cast<const K*>(nullptr),
                                            static_cast<K*>(nullptr), static_cast<const int32_t*>(nullptr),
                                            static_cast<int32_t*>(nullptr), static_cast<int>(n), 0, bits, call.stream),
            "sizing the radix sort");
    }
    temp = workspace(call, temp_bytes);
  }

  void sort(const K* keys_in, K* keys_out, const int32_t* vals_in, int32_t* vals_out, int64_t rows) {
    const int bits = static_cast<int>(sizeof(K) * 8);
    size_t bytes = temp_bytes;
    if (segmented) {
      offsets_kernel<<<grid_for(rows + 1), kThreads, 0, call.stream>>>(offsets, rows, n);
      check_launch("launching the sort offsets");
      check(cub::DeviceSegmentedRadixSort::SortPairs(temp, bytes, keys_in, keys_out, vals_in, vals_out,
                                                     static_cast<int>(n * rows), static_cast<int>(rows), offsets,
                                                     offsets + 1, 0, bits, call.stream),
            "cub::DeviceSegmentedRadixSort::SortPairs");
      return;
    }
    for (int64_t r = 0; r < rows; ++r) {
      check(cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in + r * n, keys_out + r * n, vals_in + r * n,
                                            vals_out + r * n, static_cast<int>(n), 0, bits, call.stream),
            "cub::DeviceRadixSort::SortPairs");
    }
  }
};

template <class T>
void run_sort(const Call& call, const Tensor& in, const Tensor* values, const Tensor* indices, SortArgs a) {
  using K = key_t<T>;
  const int64_t total_rows = a.num_rows;
  const bool long_rows = a.n >= kLongRow;
  const int64_t chunk_rows = long_rows ? 1 : std::max<int64_t>(1, std::min(total_rows, kChunk / a.n));
  const size_t elems = static_cast<size_t>(chunk_rows * a.n);
  auto* keys = static_cast<K*>(workspace(call, 2 * elems * sizeof(K)));
  auto* vals = static_cast<int32_t*>(workspace(call, 2 * elems * sizeof(int32_t)));
  Sorter<K> sorter(call, a.n, chunk_rows);
  const T* x = reinterpret_cast<const T*>(in.origin);
  T* vp = values ? reinterpret_cast<T*>(values->origin) : nullptr;
  int64_t* ip = indices ? reinterpret_cast<int64_t*>(indices->origin) : nullptr;
  for (int64_t row0 = 0; row0 < total_rows; row0 += chunk_rows) {
    a.row0 = row0;
    a.num_rows = std::min(chunk_rows, total_rows - row0);
    keys_kernel<T><<<grid_for(a.num_rows * a.n), kThreads, 0, call.stream>>>(keys, vals, x, a);
    check_launch("launching the sort keys");
    sorter.sort(keys, keys + elems, vals, vals + elems, a.num_rows);
    emit_kernel<T><<<grid_for(a.num_rows * a.k), kThreads, 0, call.stream>>>(vp, ip, vals + elems, x, a);
    check_launch("launching the sort output");
  }
}

// The axis of sort/argsort/topk; a 0-d input sorts as one element (axis 0 or -1).
int64_t order_axis(const Call& call, const Tensor& in) {
  if (in.shape.empty()) {
    const int64_t axis = int_attribute(call.ctx, "axis");
    if (axis != 0 && axis != -1) {
      fail(CD_STATUS_INVALID_ARGUMENT, "axis %lld of a 0-d input (0 or -1 expected)", static_cast<long long>(axis));
    }
    return 0;
  }
  return axis_attr(call, "axis", in.ndim());
}

void enqueue_sort(const cd_kernel_context* ctx, SortOp op) {
  const Call call = begin_call(ctx, 1, 1, op == kTopk ? 2 : 1, op == kTopk ? 2 : 1);
  const Tensor in = input(call, 0);
  if (in.dtype == CD_DTYPE_BOOL) fail(CD_STATUS_INVALID_ARGUMENT, "bool inputs are not sortable");
  const int64_t axis = order_axis(call, in);
  const size_t ax = static_cast<size_t>(axis);
  const int64_t n = in.shape.empty() ? 1 : in.shape[ax];
  if (n > INT_MAX) {
    fail(CD_STATUS_INVALID_ARGUMENT, "axis %lld has %lld elements; at most %d are supported",
         static_cast<long long>(axis), static_cast<long long>(n), INT_MAX);
  }
  std::vector<int64_t> expected = in.shape;
  SortArgs a{};
  Tensor values, indices;
  bool has_values = true, has_indices = true;
  if (op == kTopk) {
    a.k = int_attribute(call.ctx, "k");
    if (a.k < 0 || a.k > n) {
      fail(CD_STATUS_INVALID_ARGUMENT, "k = %lld is not in [0, %lld]", static_cast<long long>(a.k),
           static_cast<long long>(n));
    }
    a.descending = int_attribute(call.ctx, "largest") != 0;
    (void)int_attribute(call.ctx, "sorted");  // the output is always sorted
    if (!expected.empty()) expected[ax] = a.k;
    values = output(call, 0);
    indices = output(call, 1);
    require_dtype(values, in.dtype, "output 0 (values)");
    require_shape(values, expected, "output 0 (values)");
    require_dtype(indices, CD_DTYPE_INT64, "output 1 (indices)");
    require_shape(indices, expected, "output 1 (indices)");
  } else {
    a.k = n;
    a.descending = int_attribute(call.ctx, "descending") != 0;
    Tensor out = output(call, 0);
    require_shape(out, expected, "output 0");
    if (op == kSort) {
      require_dtype(out, in.dtype, "output 0");
      values = std::move(out);
      has_indices = false;
    } else {
      require_dtype(out, CD_DTYPE_INT64, "output 0");
      indices = std::move(out);
      has_values = false;
    }
  }
  if (in.numel == 0 || a.k == 0) return;
  require_dims(in.ndim(), "input 0");
  a.n = n;
  a.s_axis = in.shape.empty() ? 0 : in.strides[ax];
  a.inner = product(in.shape, ax + 1, in.shape.size());
  a.num_rows = in.numel / n;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (d == ax) continue;
    a.rows.shape[a.rows.ndim] = in.shape[d];
    a.rows.stride[0][a.rows.ndim] = in.strides[d];
    ++a.rows.ndim;
  }
  ew::dispatch<ew::kNumericMask>(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_sort<T>(call, in, has_values ? &values : nullptr, has_indices ? &indices : nullptr, a);
  });
}

cd_error* sort_fn(const cd_kernel_context* ctx) noexcept {
  return guard("sort", [ctx] { enqueue_sort(ctx, kSort); });
}
cd_error* argsort_fn(const cd_kernel_context* ctx) noexcept {
  return guard("argsort", [ctx] { enqueue_sort(ctx, kArgsort); });
}
cd_error* topk_fn(const cd_kernel_context* ctx) noexcept {
  return guard("topk", [ctx] { enqueue_sort(ctx, kTopk); });
}

}  // namespace

void register_sort(cd_kernel_registry* registry) {
  for (cd_dtype_t t : kNumericDtypes) {
    const cd_dtype_t same[2] = {t, t};
    register_kernel(registry, "sort", same, 2, sort_fn);
    const cd_dtype_t arg[2] = {t, CD_DTYPE_INT64};
    register_kernel(registry, "argsort", arg, 2, argsort_fn);
    const cd_dtype_t top[3] = {t, t, CD_DTYPE_INT64};
    register_kernel(registry, "topk", top, 3, topk_fn);
  }
}

}  // namespace mv
}  // namespace chipdock_cuda
