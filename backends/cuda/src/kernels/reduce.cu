// The reductions sum, mean, prod, max, min (shape rule `reduce`: `axes`
// sorted, unique, non-negative, all axes when empty; `keepdims`) and argmax,
// argmin (`reduce_axis`: one normalized `axis`, int64 output), over any
// strided view.
//
// One kernel covers every layout: each output's input offset comes from the
// kept dims, each reduced index's from the reduced dims. A block is a
// (bx, by) grid of threads; in the row layout (the reduction is innermost)
// x runs along the reduction, so a warp reads adjacent elements, and y over
// outputs; in the column layout (the innermost kept dim has stride 1) x runs
// over adjacent outputs and y along the reduction. The members of a group
// combine their partial results through shared memory in a fixed tree. When
// there are few outputs and long reductions, blockIdx.y cuts the reduction
// into chunks whose partials a second kernel combines in chunk order. No
// atomics: the result depends only on the shapes, so it repeats run to run.
//
// Semantics (the CPU reference's, reduce_ops.h): floating sums and products
// accumulate in float32 (float64 for float64), integer ones wrap in their
// own width; mean divides in float64; max/min compare an order-preserving
// integer image of the bits (-0 < +0; NaN, any payload, wins and comes out
// as the canonical quiet NaN); argmax/argmin treat -0 == +0, let the first
// NaN win and break ties by the first index. An empty extent gives the
// identity (mean: NaN); max/min/argmax/argmin refuse it.
#include <cuda/std/limits>
#include <type_traits>

#include "reduce.cuh"

namespace chipdock_cuda {
namespace red {
namespace {

enum class Op { sum, mean, prod, max, min, argmax, argmin };

// --- keys of the ordering reductions ---------------------------------------------------

template <class T> struct FloatBits;
template <> struct FloatBits<float> {
  using B = uint32_t;
  using K = int32_t;
  static constexpr B kMag = 0x7fffffffu, kExp = 0x7f800000u, kQnan = 0x7fc00000u;
};
template <> struct FloatBits<double> {
  using B = uint64_t;
  using K = int64_t;
  static constexpr B kMag = 0x7fffffffffffffffull, kExp = 0x7ff0000000000000ull, kQnan = 0x7ff8000000000000ull;
};
template <> struct FloatBits<half> {
  using B = uint16_t;
  using K = int16_t;
  static constexpr B kMag = 0x7fff, kExp = 0x7c00, kQnan = 0x7e00;
};
template <> struct FloatBits<bf16> {
  using B = uint16_t;
  using K = int16_t;
  static constexpr B kMag = 0x7fff, kExp = 0x7f80, kQnan = 0x7fc0;
};

// Every ordering reduction is a maximum over keys: kMin reverses the order
// (bitwise not); kArg makes -0 and +0 one key.
template <class T, bool kMin, bool kArg, bool = ew::kIsFloat<T>> struct Keys {  // integers
  using Raw = T;
  using K = T;
  __device__ static K key(Raw v) { return kMin ? static_cast<K>(~v) : v; }
  __device__ static T value(K k) { return kMin ? static_cast<T>(~k) : k; }
};

template <class T, bool kMin, bool kArg> struct Keys<T, kMin, kArg, true> {  // floats
  using FB = FloatBits<T>;
  using Raw = typename FB::B;
  using B = typename FB::B;
  using K = typename FB::K;
  static constexpr int kShift = 8 * sizeof(K) - 1;
  // Monotone in the float order with -0 < +0; an involution on the bits.
  __device__ static K order(B b) {
    const K k = static_cast<K>(b);
    return static_cast<K>(k ^ static_cast<K>((k >> kShift) & static_cast<K>(FB::kMag)));
  }
  __device__ static K key(B b) {
    const B mag = static_cast<B>(b & FB::kMag);
    K k;
    if constexpr (kArg) {
      k = (b >> kShift) ? static_cast<K>(-static_cast<K>(mag)) : static_cast<K>(mag);
    } else {
      k = order(b);
    }
    if (kMin) k = static_cast<K>(~k);
    return mag > FB::kExp ? cuda::std::numeric_limits<K>::max() : k;
  }
  __device__ static T value(K k) {
    const B b = k == cuda::std::numeric_limits<K>::max()
                    ? FB::kQnan
                    : static_cast<B>(order(static_cast<B>(kMin ? static_cast<K>(~k) : k)));
    T v;
    memcpy(&v, &b, sizeof(v));
    return v;
  }
};

// --- policies -----------------------------------------------------------------------------
// A policy gives A (the accumulator), identity(), get(x, off, r) (the
// element at x[off], the r-th of the reduction), combine(a, b) (a first)
// and finish(a, count).

template <class T, bool kMean> struct SumP {
  using A = acc_t<T>;
  using Out = T;
  __device__ static A identity() { return A(0); }
  __device__ static A get(const T* x, int64_t off, int64_t) { return static_cast<A>(load(x[off])); }
  __device__ static A combine(A a, A b) { return static_cast<A>(a + b); }
  __device__ static Out finish(A a, int64_t count) {
    if constexpr (kMean) {
      // As the CPU reference: the quotient in float64, rounded to the
      // compute type, then to T (float16 directly).
      const double m = static_cast<double>(a) / static_cast<double>(count);
      if constexpr (std::is_same_v<T, half>) return __double2half(m);
      else return store<T>(static_cast<compute_t<T>>(m));
    } else if constexpr (ew::kIsFloat<T>) {
      return store<T>(a);
    } else {
      return static_cast<T>(a);
    }
  }
};

template <class T> struct ProdP {
  using A = acc_t<T>;
  using Out = T;
  // Products of narrow unsigned types must not promote to a signed int.
  using W = std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned, A>;
  __device__ static A identity() { return A(1); }
  __device__ static A get(const T* x, int64_t off, int64_t) { return static_cast<A>(load(x[off])); }
  __device__ static A combine(A a, A b) {
    if constexpr (ew::kIsFloat<T>) return a * b;
    else return static_cast<A>(static_cast<W>(a) * static_cast<W>(b));
  }
  __device__ static Out finish(A a, int64_t) {
    if constexpr (ew::kIsFloat<T>) return store<T>(a);
    else return static_cast<T>(a);
  }
};

template <class T, bool kMin> struct ExtremeP {
  using KS = Keys<T, kMin, false>;
  using A = typename KS::K;
  using Out = T;
  __device__ static A identity() { return cuda::std::numeric_limits<A>::lowest(); }
  __device__ static A get(const T* x, int64_t off, int64_t) {
    return KS::key(reinterpret_cast<const typename KS::Raw*>(x)[off]);
  }
  __device__ static A combine(A a, A b) { return b > a ? b : a; }
  __device__ static Out finish(A a, int64_t) { return KS::value(a); }
};

template <class T, bool kMin> struct ArgP {
  using KS = Keys<T, kMin, true>;
  using K = typename KS::K;
  struct A {
    K key;
    int64_t index;
  };
  using Out = int64_t;
  // The identity loses every tie (its index is past any real one).
  __device__ static A identity() {
    return {cuda::std::numeric_limits<K>::lowest(), cuda::std::numeric_limits<int64_t>::max()};
  }
  __device__ static A get(const T* x, int64_t off, int64_t r) {
    return {KS::key(reinterpret_cast<const typename KS::Raw*>(x)[off]), r};
  }
  __device__ static A combine(A a, A b) {
    return (b.key > a.key || (b.key == a.key && b.index < a.index)) ? b : a;
  }
  __device__ static Out finish(A a, int64_t) { return a.index; }
};

// --- kernels ------------------------------------------------------------------------------

struct Plan {
  Dims kept;     // output o (row-major) -> input offset
  Dims reduced;  // reduced index r -> input offset
  int64_t outputs = 0, count = 0;
  int64_t chunk = 0;  // reduced indices per blockIdx.y
  int32_t split = 1;  // chunks; > 1: partials, combined by finish_kernel
};

__device__ __forceinline__ int64_t reduced_offset(int64_t r, const Dims& d) {
  return d.n <= 1 ? r * d.stride[0] : offset_of(r, d);
}

template <class P, class T, bool kColumns>
__global__ void reduce_kernel(const T* x, typename P::Out* out, typename P::A* partial, Plan p) {
  using A = typename P::A;
  extern __shared__ __align__(16) unsigned char smem[];
  A* tile = reinterpret_cast<A*>(smem);
  const int bx = blockDim.x;
  const int lane = kColumns ? threadIdx.y : threadIdx.x;  // place in the group that shares an output
  const int width = kColumns ? blockDim.y : blockDim.x;   // a power of two
  const int slot = kColumns ? threadIdx.x : threadIdx.y;  // which output of the block
  const int per_block = kColumns ? blockDim.x : blockDim.y;
  auto at = [&](int l) { return kColumns ? l * bx + threadIdx.x : threadIdx.y * bx + l; };
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * p.chunk;
  const int64_t r1 = r0 + p.chunk < p.count ? r0 + p.chunk : p.count;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * per_block; base < p.outputs;
       base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t o = base + slot;
    A acc = P::identity();
    if (o < p.outputs) {
      const T* xo = x + offset_of(o, p.kept);
      for (int64_t r = r0 + lane; r < r1; r += width) {
        acc = P::combine(acc, P::get(xo, reduced_offset(r, p.reduced), r));
      }
    }
    tile[at(lane)] = acc;
    __syncthreads();
    for (int s = width / 2; s > 0; s /= 2) {
      if (lane < s) tile[at(lane)] = P::combine(tile[at(lane)], tile[at(lane + s)]);
      __syncthreads();
    }
    if (lane == 0 && o < p.outputs) {
      if (p.split > 1) {
        partial[o * p.split + blockIdx.y] = tile[at(0)];
      } else {
        out[o] = P::finish(tile[at(0)], p.count);
      }
    }
    __syncthreads();
  }
}

// Combines each output's chunk partials in chunk order.
template <class P> __global__ void finish_kernel(const typename P::A* partial, typename P::Out* out, Plan p) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < p.outputs; o += step) {
    typename P::A v = partial[o * p.split];
    for (int c = 1; c < p.split; ++c) v = P::combine(v, partial[o * p.split + c]);
    out[o] = P::finish(v, p.count);
  }
}

int pow2_ceil(int64_t n) {
  int p = 1;
  while (p < n && p < (1 << 30)) p *= 2;
  return p;
}

// Blocks that keep every SM of a large GPU busy (an H100 has 132).
constexpr int64_t kTargetBlocks = 512;
// Reduced elements a chunk gets at least when the reduction is split.
constexpr int64_t kMinChunk = 4096;
constexpr int kThreads = 256;

template <class P, class T>
void launch(const cd_kernel_context* ctx, const Tensor& in, const Tensor& out, Plan p, bool columns,
            cudaStream_t stream) {
  using A = typename P::A;
  using Out = typename P::Out;
  dim3 block;
  if (columns) {
    block = dim3(32, 8);
  } else {
    const int bx = std::min(pow2_ceil(std::max<int64_t>(p.count, 1)), 512);
    block = dim3(bx, std::max(1, kThreads / bx));
  }
  const int64_t per_block = columns ? block.x : block.y;
  const int64_t blocks = (p.outputs + per_block - 1) / per_block;
  int64_t split = 1;
  if (blocks < kTargetBlocks && p.count >= 2 * kMinChunk) {
    split = std::min(std::min((kTargetBlocks + blocks - 1) / blocks, p.count / kMinChunk), int64_t{65535});
  }
  p.chunk = (std::max<int64_t>(p.count, 1) + split - 1) / split;
  p.split = static_cast<int32_t>((std::max<int64_t>(p.count, 1) + p.chunk - 1) / p.chunk);
  if (!columns && p.split > 1) {
    const int bx = std::min(pow2_ceil(p.chunk), 512);
    block = dim3(bx, std::max(1, kThreads / bx));
  }
  const dim3 grid(grid_for(p.outputs, columns ? block.x : block.y), static_cast<unsigned>(p.split));
  const size_t shared = sizeof(A) * block.x * block.y;
  const T* x = in.as<const T>();
  Out* y = out.as<Out>();
  A* partial = nullptr;
  if (p.split > 1) partial = static_cast<A*>(workspace(ctx, sizeof(A) * p.outputs * p.split));
  if (columns) {
    reduce_kernel<P, T, true><<<grid, block, shared, stream>>>(x, y, partial, p);
  } else {
    reduce_kernel<P, T, false><<<grid, block, shared, stream>>>(x, y, partial, p);
  }
  check_launch("launching reduce_kernel");
  if (p.split > 1) {
    finish_kernel<P><<<grid_for(p.outputs, kThreads), kThreads, 0, stream>>>(partial, y, p);
    check_launch("launching finish_kernel");
  }
}

template <class T> void run_typed(const cd_kernel_context* ctx, Op op, const Tensor& in, const Tensor& out,
                                  const Plan& p, bool columns, cudaStream_t s) {
  switch (op) {
    case Op::sum: return launch<SumP<T, false>, T>(ctx, in, out, p, columns, s);
    case Op::prod: return launch<ProdP<T>, T>(ctx, in, out, p, columns, s);
    case Op::max: return launch<ExtremeP<T, false>, T>(ctx, in, out, p, columns, s);
    case Op::min: return launch<ExtremeP<T, true>, T>(ctx, in, out, p, columns, s);
    case Op::argmax: return launch<ArgP<T, false>, T>(ctx, in, out, p, columns, s);
    case Op::argmin: return launch<ArgP<T, true>, T>(ctx, in, out, p, columns, s);
    case Op::mean:
      if constexpr (ew::kIsFloat<T>) return launch<SumP<T, true>, T>(ctx, in, out, p, columns, s);
      break;
  }
  fail(CD_STATUS_INTERNAL, "reduction %d is not defined for dtype %d", static_cast<int>(op), in.dtype);
}

bool is_arg(Op op) { return op == Op::argmax || op == Op::argmin; }

void enqueue(const cd_kernel_context* ctx, Op op) {
  cudaStream_t stream = begin(ctx, 1, 1);
  const Tensor in = input(ctx, 0);
  const Tensor out = output(ctx);
  const uint32_t allowed = op == Op::mean ? ew::kFloatMask : ew::kNumericMask;
  if ((allowed & ew::bit(in.dtype)) == 0) {
    fail(CD_STATUS_INVALID_ARGUMENT, "input 0: dtype %d is not supported", in.dtype);
  }
  require_dtype(out, is_arg(op) ? CD_DTYPE_INT64 : in.dtype, "output 0");
  const size_t ndim = in.shape.size();
  std::vector<bool> reduced(ndim, false);
  if (is_arg(op)) {
    const int64_t axis = check_axis(int_attribute(ctx, "axis"), ndim, "axis");
    if (ndim > 0) reduced[static_cast<size_t>(axis)] = true;
  } else {
    const std::vector<int64_t> axes = ints_attribute(ctx, "axes");
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(ndim) || (i > 0 && axes[i] <= axes[i - 1])) {
        fail(CD_STATUS_INVALID_ARGUMENT, "attribute 'axes' must be sorted, unique and in [0, %zu) (normalized)", ndim);
      }
      reduced[static_cast<size_t>(axes[i])] = true;
    }
    if (axes.empty()) reduced.assign(ndim, true);  // the op's meaning of "no axes"
  }
  const bool keepdims = bool_attribute(ctx, "keepdims");
  std::vector<int64_t> out_shape;
  std::vector<Dim> kept, reduced_dims;
  Plan p;
  p.count = 1;
  for (size_t d = 0; d < ndim; ++d) {
    const Dim dim{in.shape[d], in.strides[d]};
    if (reduced[d]) {
      if (keepdims) out_shape.push_back(1);
      reduced_dims.push_back(dim);
      p.count *= dim.size;
    } else {
      out_shape.push_back(dim.size);
      kept.push_back(dim);
    }
  }
  require_shape(out, out_shape, "output 0");
  require_contiguous(out, "output 0");
  p.outputs = out.numel;
  if (p.outputs == 0) return;
  if (p.count == 0 && op != Op::sum && op != Op::mean && op != Op::prod) {
    fail(CD_STATUS_INVALID_ARGUMENT, "cannot reduce an empty extent (it has no %s)",
         op == Op::max || op == Op::argmax ? "maximum" : "minimum");
  }
  const std::vector<Dim> k = coalesce(kept), r = coalesce(reduced_dims);
  p.kept = to_dims(k);
  p.reduced = to_dims(r);
  const bool columns = !k.empty() && k.back().stride == 1 && k.back().size >= 16 && p.count > 1;
  ew::dispatch<ew::kNumericMask>(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_typed<T>(ctx, op, in, out, p, columns, stream);
  });
}

#define CD_RED_KERNEL(name, op)                                     \
  cd_error* name##_kernel(const cd_kernel_context* ctx) noexcept {  \
    return guard(#name, [ctx] { enqueue(ctx, op); });               \
  }
CD_RED_KERNEL(sum, Op::sum)
CD_RED_KERNEL(mean, Op::mean)
CD_RED_KERNEL(prod, Op::prod)
CD_RED_KERNEL(max, Op::max)
CD_RED_KERNEL(min, Op::min)
CD_RED_KERNEL(argmax, Op::argmax)
CD_RED_KERNEL(argmin, Op::argmin)
#undef CD_RED_KERNEL

}  // namespace

void register_reduce_ops(cd_kernel_registry* registry) {
  register_same(registry, "sum", sum_kernel, ew::kNumericMask, 2);
  register_same(registry, "mean", mean_kernel, ew::kFloatMask, 2);
  register_same(registry, "prod", prod_kernel, ew::kNumericMask, 2);
  register_same(registry, "max", max_kernel, ew::kNumericMask, 2);
  register_same(registry, "min", min_kernel, ew::kNumericMask, 2);
  register_same(registry, "argmax", argmax_kernel, ew::kNumericMask, 2, CD_DTYPE_INT64);
  register_same(registry, "argmin", argmin_kernel, ew::kNumericMask, 2, CD_DTYPE_INT64);
}

}  // namespace red
}  // namespace chipdock_cuda
