// Ordering kernels: sort, argsort and topk along an axis.
//
// Every element becomes an unsigned key whose integer order is the value
// order (NaN greatest, so last ascending and first descending; -0 equal to +0),
// bit-inverted for descending order, and packed with its position along the
// axis: (key << 32) | index. Sorting the packed words ascending is then a
// stable sort (equal values keep their index order), and every word is
// distinct, so partial selection (topk) is deterministic too. Values are
// copied from the input by index, so their bits (-0, NaN payloads) survive.
#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "movement_common.h"

namespace chipdock_cpu {
namespace movement {
namespace {

template <class T>
using key_t = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

template <class T>
key_t<T> sort_key(T v) {
  // Floats, branch-free: x + 0 turns -0 into +0; a negative value has all
  // bits inverted, a positive one its sign bit set; NaN becomes the maximum.
  if constexpr (std::is_same_v<T, double>) {
    const double z = v + 0.0;
    uint64_t u;
    std::memcpy(&u, &z, 8);
    const uint64_t mask =
        static_cast<uint64_t>(static_cast<int64_t>(u) >> 63) | (uint64_t{1} << 63);
    return v != v ? ~uint64_t{0} : u ^ mask;
  } else if constexpr (is_floating_v<T>) {
    const float f = static_cast<float>(fast_load(v));
    const float z = f + 0.0f;
    uint32_t u;
    std::memcpy(&u, &z, 4);
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

// LSD radix sort of packed words by their key bytes (bits 32 and up), one
// byte per pass, stable: words that enter in index order leave sorted by
// (key, index). Passes whose byte is the same in every word are skipped.
template <class P, int KeyBytes>
void radix_sort(std::vector<P>& a, std::vector<P>& tmp) {
  const size_t n = a.size();
  tmp.resize(n);
  std::vector<size_t> counts(static_cast<size_t>(KeyBytes) * 256, 0);
  for (size_t i = 0; i < n; ++i) {
    const P w = a[i];
    for (int b = 0; b < KeyBytes; ++b) {
      ++counts[static_cast<size_t>(b) * 256 + static_cast<size_t>((w >> (32 + 8 * b)) & 0xff)];
    }
  }
  P* src = a.data();
  P* dst = tmp.data();
  for (int b = 0; b < KeyBytes; ++b) {
    size_t* c = counts.data() + static_cast<size_t>(b) * 256;
    bool trivial = false;
    size_t sum = 0;
    for (int v = 0; v < 256; ++v) {
      if (c[v] == n) trivial = true;
      const size_t t = c[v];
      c[v] = sum;
      sum += t;
    }
    if (trivial) continue;
    const int shift = 32 + 8 * b;
    for (size_t i = 0; i < n; ++i) {
      const P w = src[i];
      dst[c[static_cast<size_t>((w >> shift) & 0xff)]++] = w;
    }
    std::swap(src, dst);
  }
  if (src != a.data()) a.swap(tmp);
}

enum class SortOp { kSort, kArgsort, kTopk };

struct SortPlan {
  HostTensor in;
  HostTensor values;   // sort, topk
  HostTensor indices;  // argsort, topk
  SortOp op = SortOp::kSort;
  int64_t axis = 0;
  int64_t k = 0;          // topk: how many; else the axis length
  bool descending = false;  // topk: largest
};

template <class T>
void sort_rows(const SortPlan& p, int64_t r0, int64_t r1) {
  using K = key_t<T>;
  using P = std::conditional_t<sizeof(K) == 8, unsigned __int128, uint64_t>;
  const HostTensor& in = p.in;
  const size_t nd = in.shape.size();
  const size_t axis = static_cast<size_t>(p.axis);
  const int64_t n = nd == 0 ? 1 : in.shape[axis];
  const int64_t s_axis = nd == 0 ? 0 : in.strides[axis];
  // The rows: every position of the shape without the axis.
  std::vector<int64_t> shape, strides;
  for (size_t d = 0; d < nd; ++d) {
    if (d == axis) continue;
    shape.push_back(in.shape[d]);
    strides.push_back(in.strides[d]);
  }
  const int64_t inner = product(in.shape, axis + 1, nd);
  const int64_t k = p.k;
  const K flip = p.descending ? ~K{0} : K{0};
  const T* x = reinterpret_cast<const T*>(in.origin);
  T* values = reinterpret_cast<T*>(p.values.origin);
  int64_t* indices = reinterpret_cast<int64_t*>(p.indices.origin);
  std::vector<P> buf, tmp;
  buf.reserve(static_cast<size_t>(n));
  const int64_t* st[1] = {strides.data()};
  // Small k: one pass with a max-heap of the k best words so far; an element
  // enters only if its key is strictly below the worst kept key (an equal key
  // comes with a larger index, so it is worse).
  const bool use_heap = k < n && k <= 1024 && k * 16 <= n;
  walk_rows<1>(shape.size(), shape.data(), st, r0, r1, [&](int64_t row, const int64_t* off) {
    const T* src = x + off[0];
    if (use_heap) {
      buf.clear();
      for (int64_t i = 0; i < k; ++i) {
        const K key = static_cast<K>(sort_key<T>(src[i * s_axis]) ^ flip);
        buf.push_back((static_cast<P>(key) << 32) | static_cast<P>(i));
      }
      std::make_heap(buf.begin(), buf.end());
      K worst = static_cast<K>(buf.front() >> 32);
      for (int64_t i = k; i < n; ++i) {
        const K key = static_cast<K>(sort_key<T>(src[i * s_axis]) ^ flip);
        if (key < worst) {
          std::pop_heap(buf.begin(), buf.end());
          buf.back() = (static_cast<P>(key) << 32) | static_cast<P>(i);
          std::push_heap(buf.begin(), buf.end());
          worst = static_cast<K>(buf.front() >> 32);
        }
      }
      std::sort_heap(buf.begin(), buf.end());
    } else {
      buf.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const K key = static_cast<K>(sort_key<T>(src[i * s_axis]) ^ flip);
        buf[static_cast<size_t>(i)] = (static_cast<P>(key) << 32) | static_cast<P>(i);
      }
      if (k < n) {
        std::nth_element(buf.begin(), buf.begin() + k, buf.end());
        std::sort(buf.begin(), buf.begin() + k);
      } else if (n >= 2048) {
        radix_sort<P, static_cast<int>(sizeof(K))>(buf, tmp);
      } else {
        std::sort(buf.begin(), buf.end());
      }
    }
    // Output row: (o, :, i) of a contiguous (outer, k, inner) block.
    const int64_t o = row / inner, i = row % inner;
    const int64_t base = o * k * inner + i;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t at = static_cast<int64_t>(buf[static_cast<size_t>(j)] & 0xffffffffu);
      if (values != nullptr) values[base + j * inner] = src[at * s_axis];
      if (indices != nullptr) indices[base + j * inner] = at;
    }
  });
}

void run_sort(const SortPlan& p) {
  check_live(p.in, "input 0");
  check_live(p.values, "values output");
  check_live(p.indices, "indices output");
  const size_t nd = p.in.shape.size();
  const int64_t n = nd == 0 ? 1 : p.in.shape[static_cast<size_t>(p.axis)];
  const int64_t rows = p.in.numel / n;
  const int64_t grain = p.in.numel > 32768 ? 0 : rows;
  dispatch_dtype(p.in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      parallel_guarded(rows, grain, [&](int64_t r0, int64_t r1) { sort_rows<T>(p, r0, r1); });
    }
  });
}

// The axis of sort/argsort/topk; a 0-d input sorts as one element (axis 0 or -1).
int64_t order_axis(const cd_kernel_context* ctx, const HostTensor& in) {
  if (in.shape.empty()) {
    const int64_t axis = int_attr(ctx, "axis");
    if (axis != 0 && axis != -1) {
      fail(CD_STATUS_INVALID_ARGUMENT, "axis %lld of a 0-d input (0 or -1 expected)",
           static_cast<long long>(axis));
    }
    return 0;
  }
  return axis_attr(ctx, "axis", in.shape.size());
}

void check_sortable(const HostTensor& in, int64_t axis) {
  if (in.dtype == CD_DTYPE_BOOL) fail(CD_STATUS_INVALID_ARGUMENT, "bool inputs are not sortable");
  const int64_t n = in.shape.empty() ? 1 : in.shape[static_cast<size_t>(axis)];
  if (n > int64_t{0xffffffff}) {
    fail(CD_STATUS_INVALID_ARGUMENT, "axis %lld has %lld elements; at most 2^32 - 1 are "
         "supported", static_cast<long long>(axis), static_cast<long long>(n));
  }
}

void enqueue_sort(const cd_kernel_context* ctx, SortOp op) {
  check_context(ctx, 1, 1, op == SortOp::kTopk ? 2 : 1, op == SortOp::kTopk ? 2 : 1);
  std::shared_ptr<Stream> stream = kernel_stream(ctx);
  SortPlan p;
  p.op = op;
  p.in = input_tensor(ctx, 0);
  p.axis = order_axis(ctx, p.in);
  check_sortable(p.in, p.axis);
  const size_t axis = static_cast<size_t>(p.axis);
  const int64_t n = p.in.shape.empty() ? 1 : p.in.shape[axis];
  std::vector<int64_t> expected = p.in.shape;
  if (op == SortOp::kTopk) {
    p.k = int_attr(ctx, "k");
    if (p.k < 0 || p.k > n) {
      fail(CD_STATUS_INVALID_ARGUMENT, "k = %lld is not in [0, %lld]",
           static_cast<long long>(p.k), static_cast<long long>(n));
    }
    p.descending = int_attr(ctx, "largest") != 0;
    (void)int_attr(ctx, "sorted");  // the output is always sorted
    if (!expected.empty()) expected[axis] = p.k;
    p.values = output_tensor(ctx, 0);
    p.indices = output_tensor(ctx, 1);
    require_dtype(p.values, p.in.dtype, "output 0 (values)");
    require_shape(p.values, expected, "output 0 (values)");
    require_dtype(p.indices, CD_DTYPE_INT64, "output 1 (indices)");
    require_shape(p.indices, expected, "output 1 (indices)");
  } else {
    p.k = n;
    p.descending = int_attr(ctx, "descending") != 0;
    HostTensor out = output_tensor(ctx, 0);
    require_shape(out, expected, "output 0");
    if (op == SortOp::kSort) {
      require_dtype(out, p.in.dtype, "output 0");
      p.values = std::move(out);
    } else {
      require_dtype(out, CD_DTYPE_INT64, "output 0");
      p.indices = std::move(out);
    }
  }
  if (p.in.numel == 0 || p.k == 0) return;
  const char* label = op == SortOp::kSort ? "sort" : op == SortOp::kArgsort ? "argsort" : "topk";
  stream->enqueue(label, [p = std::move(p)] { run_sort(p); });
}

cd_error* sort_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("sort", [ctx] { enqueue_sort(ctx, SortOp::kSort); });
}
cd_error* argsort_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("argsort", [ctx] { enqueue_sort(ctx, SortOp::kArgsort); });
}
cd_error* topk_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("topk", [ctx] { enqueue_sort(ctx, SortOp::kTopk); });
}

}  // namespace

void register_sort(cd_kernel_registry* registry) {
  for (cd_dtype_t t : kNumericDtypes) {
    const cd_dtype_t same[2] = {t, t};
    register_kernel(registry, "sort", same, 2, sort_kernel);
    const cd_dtype_t arg[2] = {t, CD_DTYPE_INT64};
    register_kernel(registry, "argsort", arg, 2, argsort_kernel);
    const cd_dtype_t top[3] = {t, t, CD_DTYPE_INT64};
    register_kernel(registry, "topk", top, 3, topk_kernel);
  }
}

}  // namespace movement
}  // namespace chipdock_cpu
