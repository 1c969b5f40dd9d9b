// max_pool2d, avg_pool2d and global_avg_pool over x (N, C, ...) with any
// strides; outputs are contiguous. Semantics: backends/cpu/src/kernels/pool.cpp.
//
// Window rule (PyTorch's): output row oh covers input rows
// oh*stride - pad_top + i*dilation, i < kernel; the output size comes from
// the dispatcher (ceil_mode included) and is checked here.
//
// max_pool2d: every numeric dtype; padding counts as -inf (the lowest value
// for integers), NaN propagates; the result is the winning input element's
// bits (exact). One thread per output element, taps in (row, column) order.
// avg_pool2d: sums in float32 (float64 for float64) in (row, column) order;
// the divisor is PyTorch's: with count_include_pad, the window clipped to
// the padded input [-pad_begin, size + pad_end); without, the number of
// input elements in it.
// global_avg_pool: the mean over all dims after the first two, summed in
// float64 (a block per (n, c) plane), rounded once.
#include <cmath>

#include "movement.cuh"

namespace chipdock_cuda {
namespace mv {
namespace {

struct PoolArgs : chipdock::support::Window2d {  // stride, dilation, padding
  int64_t N, C, H, W, OH, OW, kh, kw;
  int64_t sN, sC, sH, sW;  // input strides (elements)
  int32_t include_pad;
};

int64_t pool_out(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t kernel, int64_t stride, int64_t dilation,
                 bool ceil_mode) {
  const int64_t span = in + pad_begin + pad_end - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

PoolArgs read_pool(const Call& call, const Tensor& x, const Tensor& out, bool is_max) {
  if (x.ndim() != 4) fail(CD_STATUS_INVALID_ARGUMENT, "x must be 4-d, got %d dims", x.ndim());
  if (out.ndim() != 4) fail(CD_STATUS_INVALID_ARGUMENT, "the output must be 4-d, got %d dims", out.ndim());
  const std::vector<int64_t> kernel = ints_attribute(call.ctx, "kernel", {}, 2);
  if (kernel[0] < 1 || kernel[1] < 1) fail(CD_STATUS_INVALID_ARGUMENT, "kernel must be >= 1");
  PoolArgs s{};
  // The stride defaults to the kernel size; only max pooling has a dilation.
  static_cast<chipdock::support::Window2d&>(s) = chipdock::support::window2d_attributes(call.ctx, kernel, is_max);
  s.kh = kernel[0];
  s.kw = kernel[1];
  const bool ceil_mode = int_attribute(call.ctx, "ceil_mode", 0) != 0;
  s.include_pad = !is_max && int_attribute(call.ctx, "count_include_pad", 0) != 0;
  s.N = x.shape[0];
  s.C = x.shape[1];
  s.H = x.shape[2];
  s.W = x.shape[3];
  s.OH = out.shape[2];
  s.OW = out.shape[3];
  s.sN = x.strides[0];
  s.sC = x.strides[1];
  s.sH = x.strides[2];
  s.sW = x.strides[3];
  const int64_t oh = pool_out(s.H, s.pt, s.pb, s.kh, s.sh, s.dh, ceil_mode);
  const int64_t ow = pool_out(s.W, s.pl, s.pr, s.kw, s.sw, s.dw, ceil_mode);
  if (out.shape[0] != s.N || out.shape[1] != s.C || s.OH != oh || s.OW != ow) {
    fail(CD_STATUS_INVALID_ARGUMENT, "output is %s; expected (%lld, %lld, %lld, %lld)",
         shape_string(out.shape).c_str(), static_cast<long long>(s.N), static_cast<long long>(s.C),
         static_cast<long long>(oh), static_cast<long long>(ow));
  }
  return s;
}

template <class T> using acc_t = std::conditional_t<ew::kIsFloat<T>, ew::compute_t<T>, T>;

template <class T> __global__ void max_pool_kernel(T* out, const T* x, PoolArgs s, int64_t numel) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < numel; i += step) {
    const int64_t ow = i % s.OW, oh = (i / s.OW) % s.OH, nc = i / (s.OW * s.OH);
    const T* plane = x + (nc / s.C) * s.sN + (nc % s.C) * s.sC;
    A acc;
    T best;
    if constexpr (ew::kIsFloat<T>) {
      acc = -INFINITY;
      best = ew::store<T>(acc);
    } else {
      constexpr T kLowest = cuda::std::numeric_limits<T>::lowest();
      acc = kLowest;
      best = kLowest;
    }
    for (int64_t r = 0; r < s.kh; ++r) {
      const int64_t ih = oh * s.sh - s.pt + r * s.dh;
      if (ih < 0 || ih >= s.H) continue;
      for (int64_t q = 0; q < s.kw; ++q) {
        const int64_t iw = ow * s.sw - s.pl + q * s.dw;
        if (iw < 0 || iw >= s.W) continue;
        const T v = plane[ih * s.sH + iw * s.sW];
        const A a = ew::load(v);
        bool take;
        if constexpr (ew::kIsFloat<T>) {
          take = a > acc || a != a;
        } else {
          take = a > acc;
        }
        if (take) {
          acc = a;
          best = v;
        }
      }
    }
    out[i] = best;
  }
}

template <class T> __global__ void avg_pool_kernel(T* out, const T* x, PoolArgs s, int64_t numel) {
  using A = ew::compute_t<T>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < numel; i += step) {
    const int64_t ow = i % s.OW, oh = (i / s.OW) % s.OH, nc = i / (s.OW * s.OH);
    const T* plane = x + (nc / s.C) * s.sN + (nc % s.C) * s.sC;
    A acc = 0;
    for (int64_t r = 0; r < s.kh; ++r) {
      const int64_t ih = oh * s.sh - s.pt + r;
      if (ih < 0 || ih >= s.H) continue;
      for (int64_t q = 0; q < s.kw; ++q) {
        const int64_t iw = ow * s.sw - s.pl + q;
        if (iw < 0 || iw >= s.W) continue;
        acc = acc + ew::load(plane[ih * s.sH + iw * s.sW]);
      }
    }
    const int64_t hs = oh * s.sh - s.pt, ws = ow * s.sw - s.pl;
    const int64_t he = min(hs + s.kh, s.H + s.pb), we = min(ws + s.kw, s.W + s.pr);
    const int64_t hc = s.include_pad ? he - hs : min(he, s.H) - max(hs, int64_t{0});
    const int64_t wc = s.include_pad ? we - ws : min(we, s.W) - max(ws, int64_t{0});
    out[i] = ew::store<T>(acc / (static_cast<A>(hc) * static_cast<A>(wc)));
  }
}

void enqueue_pool(const cd_kernel_context* ctx, bool is_max) {
  const Call call = begin_call(ctx, 1, 1, 1, 1);
  const Tensor in = input(call, 0);
  const Tensor out = output(call, 0);
  if (in.dtype != out.dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "input 0 is %s but the output is %s", dtype_name(in.dtype), dtype_name(out.dtype));
  }
  const bool is_float = in.dtype == CD_DTYPE_FLOAT32 || in.dtype == CD_DTYPE_FLOAT16 ||
                        in.dtype == CD_DTYPE_BFLOAT16 || in.dtype == CD_DTYPE_FLOAT64;
  if (in.dtype == CD_DTYPE_BOOL || (!is_max && !is_float)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "%s does not take %s", is_max ? "max_pool2d" : "avg_pool2d",
         dtype_name(in.dtype));
  }
  const PoolArgs s = read_pool(call, in, out, is_max);
  if (out.numel == 0) return;
  if (is_max) {
    ew::dispatch<ew::kNumericMask>(in.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      max_pool_kernel<T><<<grid_for(out.numel), kThreads, 0, call.stream>>>(
          reinterpret_cast<T*>(out.origin), reinterpret_cast<const T*>(in.origin), s, out.numel);
    });
    check_launch("launching max_pool2d");
    return;
  }
  ew::dispatch<ew::kFloatMask>(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_pool_kernel<T><<<grid_for(out.numel), kThreads, 0, call.stream>>>(
        reinterpret_cast<T*>(out.origin), reinterpret_cast<const T*>(in.origin), s, out.numel);
  });
  check_launch("launching avg_pool2d");
}

// -------------------------------------------------------- global average --

struct GlobalArgs {
  Walk<1> spatial;  // dims 2..; stride: input (elements)
  int64_t C, sN, sC, count;
};

// The mean of nothing: the CPU reference's NaN bits (the default quiet NaN
// of each format; a converted NaN would be the GPU's canonical one).
template <class T> __device__ __forceinline__ T quiet_nan() {
  if constexpr (std::is_same_v<T, half>) return __ushort_as_half(0x7e00);
  else if constexpr (std::is_same_v<T, bf16>) return __ushort_as_bfloat16(0x7fc0);
  else if constexpr (std::is_same_v<T, float>) return __int_as_float(0x7fc00000);
  else return __longlong_as_double(0x7ff8000000000000LL);
}

template <class T> __global__ void global_avg_kernel(T* out, const T* x, GlobalArgs a, int64_t planes) {
  __shared__ double partial[kThreads];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const T* base = x + (p / a.C) * a.sN + (p % a.C) * a.sC;
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < a.count; i += blockDim.x) {
      int64_t off;
      walk_offsets(a.spatial, i, &off);
      acc += static_cast<double>(ew::load(base[off]));
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int width = kThreads / 2; width > 0; width /= 2) {
      if (static_cast<int>(threadIdx.x) < width) partial[threadIdx.x] += partial[threadIdx.x + width];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[p] = a.count == 0 ? quiet_nan<T>() : from_double<T>(partial[0] / static_cast<double>(a.count));
    __syncthreads();
  }
}

void enqueue_global(const cd_kernel_context* ctx) {
  const Call call = begin_call(ctx, 1, 1, 1, 1);
  const Tensor in = input(call, 0);
  const Tensor out = output(call, 0);
  if (in.dtype != out.dtype) {
    fail(CD_STATUS_INVALID_ARGUMENT, "input 0 is %s but the output is %s", dtype_name(in.dtype), dtype_name(out.dtype));
  }
  if (!(in.dtype == CD_DTYPE_FLOAT32 || in.dtype == CD_DTYPE_FLOAT16 || in.dtype == CD_DTYPE_BFLOAT16 ||
        in.dtype == CD_DTYPE_FLOAT64)) {
    fail(CD_STATUS_INVALID_ARGUMENT, "global_avg_pool does not take %s", dtype_name(in.dtype));
  }
  const int32_t nd = in.ndim();
  if (nd < 2) fail(CD_STATUS_INVALID_ARGUMENT, "x must be (N, C, ...), got %d dims", nd);
  bool ok = out.ndim() == nd;
  for (int32_t i = 0; ok && i < nd; ++i) ok = out.shape[i] == (i < 2 ? in.shape[i] : 1);
  if (!ok) fail(CD_STATUS_INVALID_ARGUMENT, "output must be x's shape with spatial dims of size 1");
  if (out.numel == 0) return;
  require_dims(nd, "input 0");
  GlobalArgs a{};
  a.C = in.shape[1];
  a.sN = in.strides[0];
  a.sC = in.strides[1];
  a.count = 1;
  for (int32_t d = 2; d < nd; ++d) {
    a.spatial.shape[a.spatial.ndim] = in.shape[d];
    a.spatial.stride[0][a.spatial.ndim] = in.strides[d];
    ++a.spatial.ndim;
    a.count *= in.shape[d];
  }
  const int64_t planes = in.shape[0] * in.shape[1];
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(planes, 65535 * 16));
  ew::dispatch<ew::kFloatMask>(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    global_avg_kernel<T><<<grid, kThreads, 0, call.stream>>>(reinterpret_cast<T*>(out.origin),
                                                             reinterpret_cast<const T*>(in.origin), a, planes);
  });
  check_launch("launching global_avg_pool");
}

cd_error* max_pool2d_fn(const cd_kernel_context* ctx) noexcept {
  return guard("max_pool2d", [ctx] { enqueue_pool(ctx, true); });
}
cd_error* avg_pool2d_fn(const cd_kernel_context* ctx) noexcept {
  return guard("avg_pool2d", [ctx] { enqueue_pool(ctx, false); });
}
cd_error* global_avg_pool_fn(const cd_kernel_context* ctx) noexcept {
  return guard("global_avg_pool", [ctx] { enqueue_global(ctx); });
}

}  // namespace
}  // namespace mv

void register_pool(cd_kernel_registry* registry) {
  for (cd_dtype_t t : mv::kNumericDtypes) {
    const cd_dtype_t sig[2] = {t, t};
    register_kernel(registry, "max_pool2d", sig, 2, mv::max_pool2d_fn);
  }
  for (cd_dtype_t t : mv::kFloatDtypes) {
    const cd_dtype_t sig[2] = {t, t};
    register_kernel(registry, "avg_pool2d", sig, 2, mv::avg_pool2d_fn);
    register_kernel(registry, "global_avg_pool", sig, 2, mv::global_avg_pool_fn);
  }
}

}  // namespace chipdock_cuda
