// softmax, log_softmax (float dtypes) and cumsum (numeric dtypes) along one
// normalized `axis` (shape rule `same_axis`); cumsum also takes `exclusive`
// and `reverse`. The input is viewed as [outer, n (the axis), inner] over
// any strides; the output is contiguous in that order.
//
// softmax/log_softmax, inner == 1 (rows): one block per row, the row held in
// registers (vector loads where the row is dense and aligned), max and sum
// as block reductions, one read and one write of memory; a row too long for
// the registers streams through three passes instead. inner > 1: one thread
// per (outer, inner) lane walks the axis (adjacent threads, adjacent
// memory). Numerically stable (exp of x - max), float32 compute for the
// 16-bit floats.
//
// cumsum: long rows run a block-wide scan (cub::BlockScan) chunk by chunk
// with a running carry; short rows and inner > 1 a sequential scan per lane.
// As in the CPU reference the running sum is float64 for the float types
// and wraps in the unsigned type of the width for the integers; it starts
// from the first element itself, an exclusive scan from +0.
#include <cub/block/block_scan.cuh>

#include <cuda/std/limits>
#include <type_traits>

#include "reduce.cuh"

namespace chipdock_cuda {
namespace red {
namespace {

enum class AxisOp { softmax, log_softmax, cumsum };

struct AxisPlan {
  Dims outer{}, inner{};  // input offsets of the outer / inner index
  int64_t outer_count = 1, n = 1, s = 0, inner_count = 1;
  bool inner_dense = true;  // inner walks offsets 0, 1, 2, ...
  bool exclusive = false, reverse = false;
};

template <class T, int V> struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

__device__ __forceinline__ float exp_c(float x) { return expf(x); }
__device__ __forceinline__ double exp_c(double x) { return exp(x); }
__device__ __forceinline__ float log_c(float x) { return logf(x); }
__device__ __forceinline__ double log_c(double x) { return log(x); }

// --- softmax, rows in registers ----------------------------------------------------------

constexpr int kMaxThreads = kRowThreads;

// Row r: thread t holds vectors t, t + blockDim, ... (`items` of them, V
// elements each) of the row.
template <class T, int V, bool kLog>
__global__ __launch_bounds__(kMaxThreads) void softmax_rows(const T* x, T* y, AxisPlan p, int items) {
  using C = compute_t<T>;
  constexpr int kItems = kRowItems<C, V>;
  __shared__ C scratch[kWarp];
  const int64_t n = p.n;
  for (int64_t row = blockIdx.x; row < p.outer_count; row += gridDim.x) {
    const T* xr = x + offset_of(row, p.outer);
    T* yr = y + row * n;
    C v[kItems][V];
    C m = -cuda::std::numeric_limits<C>::infinity();
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const int64_t j = (static_cast<int64_t>(it) * blockDim.x + threadIdx.x) * V;
      if (it < items && j < n) {
        if constexpr (V > 1) {
          const Vec<T, V> w = *reinterpret_cast<const Vec<T, V>*>(xr + j);
#pragma unroll
          for (int k = 0; k < V; ++k) v[it][k] = load(w.v[k]);
        } else {
          v[it][0] = load(xr[j * p.s]);
        }
#pragma unroll
        for (int k = 0; k < V; ++k) m = Max()(m, v[it][k]);
      }
    }
    m = block_reduce(m, Max(), scratch);
    C sum = 0;
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const int64_t j = (static_cast<int64_t>(it) * blockDim.x + threadIdx.x) * V;
      if (it < items && j < n) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const C e = exp_c(v[it][k] - m);
          if (!kLog) v[it][k] = e;
          sum += e;
        }
      }
    }
    sum = block_reduce(sum, Plus(), scratch);
    const C f = kLog ? log_c(sum) : C(1) / sum;
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const int64_t j = (static_cast<int64_t>(it) * blockDim.x + threadIdx.x) * V;
      if (it < items && j < n) {
        Vec<T, V> w;
#pragma unroll
        for (int k = 0; k < V; ++k) w.v[k] = store<T>(kLog ? (v[it][k] - m) - f : v[it][k] * f);
        *reinterpret_cast<Vec<T, V>*>(yr + j) = w;
      }
    }
  }
}

// Rows too long for the registers: max, sum and write as three passes.
template <class T, bool kLog>
__global__ __launch_bounds__(kMaxThreads) void softmax_rows_long(const T* x, T* y, AxisPlan p) {
  using C = compute_t<T>;
  __shared__ C scratch[kWarp];
  const int64_t n = p.n;
  for (int64_t row = blockIdx.x; row < p.outer_count; row += gridDim.x) {
    const T* xr = x + offset_of(row, p.outer);
    T* yr = y + row * n;
    C m = -cuda::std::numeric_limits<C>::infinity();
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = Max()(m, load(xr[j * p.s]));
    m = block_reduce(m, Max(), scratch);
    C sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += exp_c(load(xr[j * p.s]) - m);
    sum = block_reduce(sum, Plus(), scratch);
    const C f = kLog ? log_c(sum) : C(1) / sum;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const C v = load(xr[j * p.s]);
      yr[j] = store<T>(kLog ? (v - m) - f : exp_c(v - m) * f);
    }
  }
}

// inner > 1: one thread per (outer, inner) lane, three passes along the axis.
template <class T, bool kLog> __global__ void softmax_lanes(const T* x, T* y, AxisPlan p) {
  using C = compute_t<T>;
  const int64_t lanes = p.outer_count * p.inner_count, I = p.inner_count, n = p.n;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < lanes; l += step) {
    const int64_t o = l / I, j = l - o * I;
    const T* xl = x + offset_of(o, p.outer) + (p.inner_dense ? j : offset_of(j, p.inner));
    T* yl = y + o * n * I + j;
    C m = -cuda::std::numeric_limits<C>::infinity();
    for (int64_t i = 0; i < n; ++i) m = Max()(m, load(xl[i * p.s]));
    C sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += exp_c(load(xl[i * p.s]) - m);
    const C f = kLog ? log_c(sum) : C(1) / sum;
    for (int64_t i = 0; i < n; ++i) {
      const C v = load(xl[i * p.s]);
      yl[i * I] = store<T>(kLog ? (v - m) - f : exp_c(v - m) * f);
    }
  }
}

int pow2_ceil(int64_t n) {
  int p = 1;
  while (p < n && p < (1 << 30)) p *= 2;
  return p;
}

// True when every row start of x and y is aligned for V-element vectors and
// the row is dense.
template <class T> bool vector_rows(const Tensor& in, const Tensor& out, const std::vector<Dim>& outer,
                                    const AxisPlan& p, int V) {
  if (V <= 1 || p.s != 1 || p.n % V != 0) return false;
  const uintptr_t bytes = sizeof(T) * V;
  if (reinterpret_cast<uintptr_t>(in.origin) % bytes != 0 || reinterpret_cast<uintptr_t>(out.origin) % bytes != 0) {
    return false;
  }
  for (const Dim& d : outer) {
    if (d.stride % V != 0) return false;
  }
  return true;
}

template <class T, bool kLog>
void launch_softmax(const Tensor& in, const Tensor& out, const AxisPlan& p, const std::vector<Dim>& outer,
                    cudaStream_t stream) {
  const T* x = in.as<const T>();
  T* y = out.as<T>();
  if (p.inner_count > 1) {
    constexpr int kThreads = 256;
    softmax_lanes<T, kLog><<<grid_for(p.outer_count * p.inner_count, kThreads), kThreads, 0, stream>>>(x, y, p);
    check_launch("launching softmax_lanes");
    return;
  }
  constexpr int kV = 16 / sizeof(T) < 8 ? 16 / sizeof(T) : 8;
  const bool vec = vector_rows<T>(in, out, outer, p, kV);
  const int V = vec ? kV : 1;
  const int64_t vectors = (p.n + V - 1) / V;
  using C = compute_t<T>;
  const int64_t capacity = static_cast<int64_t>(kMaxThreads) * (vec ? kRowItems<C, kV> : kRowItems<C, 1>);
  const unsigned grid = grid_for(p.outer_count, 1);
  if (vectors > capacity) {
    softmax_rows_long<T, kLog><<<grid, kMaxThreads, 0, stream>>>(x, y, p);
    check_launch("launching softmax_rows_long");
    return;
  }
  // The fewest values per thread that fit in a block of at most 1024
  // threads, and at most 4 while the row would fit 4 per thread anyway.
  int items = 1;
  while (vectors > static_cast<int64_t>(kMaxThreads) * items) items *= 2;
  if (items == 1 && vectors > 512) items = 2;  // 512 threads, 2 values each: fewer, busier threads
  const int threads = std::max(kWarp, std::min(kMaxThreads, pow2_ceil((vectors + items - 1) / items)));
  if (vec) {
    softmax_rows<T, kV, kLog><<<grid, threads, 0, stream>>>(x, y, p, items);
  } else {
    softmax_rows<T, 1, kLog><<<grid, threads, 0, stream>>>(x, y, p, items);
  }
  check_launch("launching softmax_rows");
}

// --- cumsum --------------------------------------------------------------------------------

template <class T> __device__ __forceinline__ T scan_out(scan_t<T> v) {
  if constexpr (ew::kIsFloat<T>) return store<T>(static_cast<compute_t<T>>(v));  // via the compute type, as the CPU
  else return static_cast<T>(v);
}

template <class T> __device__ __forceinline__ scan_t<T> scan_in(T v) {
  return static_cast<scan_t<T>>(load(v));
}

// One thread per (outer, inner) lane, walking the axis in order.
template <class T> __global__ void cumsum_lanes(const T* x, T* y, AxisPlan p) {
  using S = scan_t<T>;
  const int64_t lanes = p.outer_count * p.inner_count, I = p.inner_count, n = p.n;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < lanes; l += step) {
    const int64_t o = l / I, j = l - o * I;
    const T* xl = x + offset_of(o, p.outer) + (p.inner_dense ? j : offset_of(j, p.inner));
    T* yl = y + o * n * I + j;
    int64_t i = p.reverse ? n - 1 : 0;
    const int64_t di = p.reverse ? -1 : 1;
    S acc = scan_in(xl[i * p.s]);
    yl[i * I] = p.exclusive ? scan_out<T>(S(0)) : xl[i * p.s];
    i += di;
    for (int64_t k = 1; k < n; ++k, i += di) {
      const S next = static_cast<S>(acc + scan_in(xl[i * p.s]));
      yl[i * I] = scan_out<T>(p.exclusive ? acc : next);
      acc = next;
    }
  }
}

constexpr int kScanThreads = 256;
constexpr int kScanItems = 4;

// Keeps the running total across chunks (cub's block-prefix protocol: the
// first warp calls it with the chunk's total and the chunk gets the old one).
template <class S> struct Carry {
  S total;
  __device__ S operator()(S chunk) {
    const S old = total;
    total = static_cast<S>(total + chunk);
    return old;
  }
};

struct ScanPlus {
  template <class S> __device__ __forceinline__ S operator()(S a, S b) const { return static_cast<S>(a + b); }
};

// inner == 1, long rows: one block per row, chunks of 1024 in scan order.
template <class T> __global__ __launch_bounds__(kScanThreads) void cumsum_rows(const T* x, T* y, AxisPlan p) {
  using S = scan_t<T>;
  using Scan = cub::BlockScan<S, kScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  const int64_t n = p.n;
  constexpr int64_t kChunk = kScanThreads * kScanItems;
  for (int64_t row = blockIdx.x; row < p.outer_count; row += gridDim.x) {
    const T* xr = x + offset_of(row, p.outer);
    T* yr = y + row * n;
    Carry<S> carry{S(0)};
    for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
      S v[kScanItems];
      int64_t at[kScanItems];  // element index of each item (-1: past the end)
#pragma unroll
      for (int k = 0; k < kScanItems; ++k) {
        const int64_t q = c0 + threadIdx.x * kScanItems + k;  // position in scan order
        at[k] = q < n ? (p.reverse ? n - 1 - q : q) : -1;
        v[k] = at[k] >= 0 ? scan_in(xr[at[k] * p.s]) : S(0);
      }
      S out[kScanItems];
      if (p.exclusive) {
        if (c0 == 0) {
          S total;
          Scan(temp).ExclusiveScan(v, out, S(0), ScanPlus(), total);
          carry.total = total;
        } else {
          Scan(temp).ExclusiveScan(v, out, ScanPlus(), carry);
        }
      } else if (c0 == 0) {  // no carry yet: the first sum is the first element itself
        S total;
        Scan(temp).InclusiveScan(v, out, ScanPlus(), total);
        carry.total = total;
      } else {
        Scan(temp).InclusiveScan(v, out, ScanPlus(), carry);
      }
      __syncthreads();  // temp is reused by the next chunk
#pragma unroll
      for (int k = 0; k < kScanItems; ++k) {
        if (at[k] >= 0) yr[at[k]] = scan_out<T>(out[k]);
      }
    }
  }
}

template <class T> void launch_cumsum(const Tensor& in, const Tensor& out, const AxisPlan& p, cudaStream_t stream) {
  const T* x = in.as<const T>();
  T* y = out.as<T>();
  // A block per row pays off once the row outgrows a few chunks' worth of
  // lanes; shorter rows (and inner > 1) scan one lane per thread.
  if (p.inner_count == 1 && p.n >= 512) {
    cumsum_rows<T><<<grid_for(p.outer_count, 1), kScanThreads, 0, stream>>>(x, y, p);
    check_launch("launching cumsum_rows");
    return;
  }
  constexpr int kThreads = 256;
  cumsum_lanes<T><<<grid_for(p.outer_count * p.inner_count, kThreads), kThreads, 0, stream>>>(x, y, p);
  check_launch("launching cumsum_lanes");
}

void enqueue(const cd_kernel_context* ctx, AxisOp op) {
  cudaStream_t stream = begin(ctx, 1, 1);
  const Tensor in = input(ctx, 0);
  const Tensor out = output(ctx);
  const uint32_t allowed = op == AxisOp::cumsum ? ew::kNumericMask : ew::kFloatMask;
  if ((allowed & ew::bit(in.dtype)) == 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "input 0: dtype %d is not supported", in.dtype);
  }
  require_dtype(out, in.dtype, "output 0");
  require_shape(out, in.shape, "output 0");
  require_contiguous(out, "output 0");
  AxisPlan p;
  if (op == AxisOp::cumsum) {
    p.exclusive = bool_attribute(ctx, "exclusive");
    p.reverse = bool_attribute(ctx, "reverse");
  }
  const size_t ndim = in.shape.size();
  const int64_t axis = check_axis(int_attribute(ctx, "axis"), ndim, "axis");
  if (out.numel == 0) return;
  std::vector<Dim> outer;
  if (ndim > 0) {
    const size_t a = static_cast<size_t>(axis);
    outer = coalesce(in.dims(0, a));
    const std::vector<Dim> inner = coalesce(in.dims(a + 1, ndim));
    p.n = in.shape[a];
    p.s = in.strides[a];
    p.outer_count = numel_of(outer);
    p.inner_count = numel_of(inner);
    p.inner = to_dims(inner);
    p.inner_dense = is_dense(inner);
  }
  p.outer = to_dims(outer);
  if (op == AxisOp::cumsum) {
    ew::dispatch<ew::kNumericMask>(in.dtype, [&](auto tag) {
      launch_cumsum<typename decltype(tag)::type>(in, out, p, stream);
    });
    return;
  }
  ew::dispatch<ew::kFloatMask>(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (op == AxisOp::log_softmax) {
      launch_softmax<T, true>(in, out, p, outer, stream);
    } else {
      launch_softmax<T, false>(in, out, p, outer, stream);
    }
  });
}

cd_error* softmax_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("softmax", [ctx] { enqueue(ctx, AxisOp::softmax); });
}
cd_error* log_softmax_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("log_softmax", [ctx] { enqueue(ctx, AxisOp::log_softmax); });
}
cd_error* cumsum_kernel(const cd_kernel_context* ctx) noexcept {
  return guard("cumsum", [ctx] { enqueue(ctx, AxisOp::cumsum); });
}

}  // namespace

void register_softmax_ops(cd_kernel_registry* registry) {
  register_same(registry, "softmax", softmax_kernel, ew::kFloatMask, 2);
  register_same(registry, "log_softmax", log_softmax_kernel, ew::kFloatMask, 2);
  register_same(registry, "cumsum", cumsum_kernel, ew::kNumericMask, 2);
}

}  // namespace red
}  // namespace chipdock_cuda
